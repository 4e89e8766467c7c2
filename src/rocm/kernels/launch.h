#pragma once
// Launch helpers shared by the GPU kernel files: the coalesced strided layout
// as a kernel argument, and grid sizing for grid-stride loops.

#include <atomic>

#include "core/strided_layout.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/error.h"

namespace pyflame::backend::rocm {

constexpr int kMaxDims = 16;
constexpr int kMaxDevices = 64;
constexpr int kThreads = 256;

// V elements loaded or stored as one 16-byte (or smaller) access.
template <class T, int V> struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Elements per 16-byte access.
template <class T> constexpr int kVec = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// A coalesced layout passed to the kernel by value.
// Dims run innermost first. The outermost takes no division (what is left of
// the index is its coordinate), and layouts of fewer than 2^32 elements divide in 32 bits: a 64-bit division
// is a long software sequence on GPUs and dominated broadcast kernels.
template <int N> struct Offsets {
  int ndim;
  bool narrow;  // fewer than 2^32 elements
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];  // bytes

  PF_HOST_DEVICE void at(int64_t linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    if (ndim == 0) return;
    if (narrow) {
      uint32_t rest = static_cast<uint32_t>(linear);
      for (int d = 0; d < ndim - 1; ++d) {
        const uint32_t size = static_cast<uint32_t>(sizes[d]), next = rest / size;
        for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(rest - next * size) * strides[d][k];
        rest = next;
      }
      linear = rest;
    } else {
      for (int d = 0; d < ndim - 1; ++d) {
        const int64_t next = linear / sizes[d];
        for (int k = 0; k < N; ++k) off[k] += (linear - next * sizes[d]) * strides[d][k];
        linear = next;
      }
    }
    for (int k = 0; k < N; ++k) off[k] += linear * strides[ndim - 1][k];
  }
};

template <int N> inline Offsets<N> make_offsets(const std::array<const Tensor*, N>& ops, const char* op) {
  StridedLayout<N> l = coalesce<N>(ops);
  PF_CHECK(static_cast<int>(l.sizes.size()) <= kMaxDims, NotSupportedError, op, ": tensors with more than ", kMaxDims,
           " non-mergeable dimensions are not supported on the GPU (shape ", ops[0]->shape(), ")");
  Offsets<N> o{};
  o.ndim = static_cast<int>(l.sizes.size());
  uint64_t numel = 1;
  for (int d = 0; d < o.ndim; ++d) {
    o.sizes[d] = l.sizes[d];
    numel *= static_cast<uint64_t>(l.sizes[d]);
    for (int k = 0; k < N; ++k) o.strides[d][k] = l.strides[d][k];
  }
  o.narrow = numel <= UINT32_MAX;
  return o;
}

// A device attribute, read once per device (launchers ask on every call).
template <auto kAttribute> int device_attribute(int device, int fallback) {
  static std::atomic<int> cache[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return fallback;
  int v = cache[device].load(std::memory_order_relaxed);
  if (!v) {
    HIP_CHECK(hipDeviceGetAttribute(&v, kAttribute, device));
    cache[device].store(v, std::memory_order_relaxed);
  }
  return v;
}

// Lanes per warp of `device` (host code: the compile-time PF_WARP_SIZE is the device pass's).
inline int warp_size(int device) { return device_attribute<hipDeviceAttributeWarpSize>(device, 64); }

// Compute units (multiprocessors) of `device`: persistent kernels size their grid by it.
inline int compute_units(int device) { return device_attribute<hipDeviceAttributeMultiprocessorCount>(device, 64); }

// A thread's walk over a grid of items `width` wide (in int range): its first
// item t, then n further (n: the threads sharing the walk) on each step, with
// no division per step.
struct Walk {
  int row, col, row_jump, col_jump, width;

  PF_HOST_DEVICE Walk(int t, int n, int w) : row(t / w), col(t % w), row_jump(n / w), col_jump(n % w), width(w) {}
  PF_HOST_DEVICE void step() {
    row += row_jump;
    col += col_jump;
    if (col >= width) col -= width, ++row;
  }
};

// Lanes per row for rows of `units` loads each: about two loads per lane, at most `warp` lanes (a power of two).
inline int team_width(int64_t units, int warp) {
  int w = 1;
  while (w < warp && 2 * w < units) w *= 2;
  return w;
}

inline unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20));  // grid-stride beyond
}

}  // namespace pyflame::backend::rocm
