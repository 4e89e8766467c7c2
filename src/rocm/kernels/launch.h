#pragma once
// Launch helpers shared by the GPU kernel files: the coalesced strided layout
// as a kernel argument, and grid sizing for grid-stride loops.

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "core/strided_layout.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/error.h"

namespace pyflame::backend::rocm {

constexpr int kMaxDims = 16;
constexpr int kMaxDevices = 64;
constexpr int kThreads = 256;

// V elements loaded or stored as one 16-byte (or smaller) access.
// Vectors loaded under a condition start zeroed (`Vec<T, V> x{}`): left
// undefined, a skipped load's register may be given the value of the load
// before it, which chains the loads one after another (softmax over rows of 197
// floats: 7 loads a lane in series, 1.4x the time).
template <class T, int V> struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Elements per 16-byte access.
template <class T> constexpr int kVec = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Division by a divisor fixed at launch as a multiply-high, an add and a
// shift (Granlund and Montgomery, as PyTorch's IntDivider), for dividends
// below 2^31: a 32-bit division is a long instruction sequence on GPUs, a
// 64-bit one a longer software routine.
struct FastDivider {
  uint32_t divisor = 1, magic = 1, shift = 0;

  FastDivider() = default;
  explicit FastDivider(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d) / d + 1);
  }
  PF_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__HIP_DEVICE_COMPILE__) || defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, magic);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{n} * magic) >> 32);
#endif
    return (high + n) >> shift;
  }
};

// A coalesced layout passed to the kernel by value; dims run innermost first.
// The outermost takes no division (what is left of the index is its
// coordinate). A layout of fewer than 2^31 elements whose operands span less
// than 2 GiB each (nearly all) walks in 32-bit arithmetic with FastDividers:
// broadcast and permuted operands (an attention mask added over the batch, a
// transposed copy) ran at a third of the memory's speed in 64-bit divisions.
template <int N> struct Offsets {
  int ndim;
  bool narrow;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];  // bytes
  FastDivider dividers[kMaxDims];
  int32_t narrow_strides[kMaxDims][N];

  PF_HOST_DEVICE void at(int64_t linear, int64_t (&off)[N]) const {
    if (ndim == 0) {
      for (int k = 0; k < N; ++k) off[k] = 0;
      return;
    }
    if (narrow) {
      uint32_t rest = static_cast<uint32_t>(linear);
      int32_t o[N] = {};
      for (int d = 0; d < ndim - 1; ++d) {
        const uint32_t next = dividers[d].div(rest);
        const int32_t idx = static_cast<int32_t>(rest - next * dividers[d].divisor);
        for (int k = 0; k < N; ++k) o[k] += idx * narrow_strides[d][k];
        rest = next;
      }
      for (int k = 0; k < N; ++k) off[k] = o[k] + static_cast<int32_t>(rest) * narrow_strides[ndim - 1][k];
      return;
    }
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim - 1; ++d) {
      const int64_t next = linear / sizes[d];
      for (int k = 0; k < N; ++k) off[k] += (linear - next * sizes[d]) * strides[d][k];
      linear = next;
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
  constexpr uint64_t kNarrow = INT32_MAX;
  uint64_t numel = 1, span[N] = {};
  for (int d = 0; d < o.ndim; ++d) {
    o.sizes[d] = l.sizes[d];
    numel *= static_cast<uint64_t>(l.sizes[d]);
    for (int k = 0; k < N; ++k) {
      o.strides[d][k] = l.strides[d][k];
      span[k] += static_cast<uint64_t>(l.sizes[d] - 1) * static_cast<uint64_t>(std::abs(l.strides[d][k]));
    }
  }
  o.narrow = numel <= kNarrow;
  for (int k = 0; k < N; ++k) o.narrow = o.narrow && span[k] <= kNarrow;
  if (o.narrow) {
    for (int d = 0; d < o.ndim; ++d) {
      o.dividers[d] = FastDivider(static_cast<uint32_t>(l.sizes[d]));
      for (int k = 0; k < N; ++k) o.narrow_strides[d][k] = static_cast<int32_t>(l.strides[d][k]);
    }
  }
  return o;
}

// Whether a strided walk may go V elements at a time (the `*_grouped`
// kernels): V divides the innermost coalesced dim, along which every operand
// is contiguous or broadcast (stride 0), and a contiguous operand's groups all
// start V-aligned. Operands with a null pointer (a Python number) are skipped.
// A mask or a bias broadcast over the outer dims then moves in 16-byte
// accesses with one index computation per V elements.
template <int N>
bool walks_in_groups(const Offsets<N>& o, int v, const std::array<const void*, N>& data,
                     const std::array<int64_t, N>& itemsize) {
  if (o.ndim == 0 || o.sizes[0] % v != 0) return false;
  for (int k = 0; k < N; ++k) {
    const int64_t inner = o.strides[0][k], group = itemsize[k] * v;
    if (!data[k] || inner == 0) continue;
    if (inner != itemsize[k] || !aligned(data[k], group)) return false;
    for (int d = 1; d < o.ndim; ++d)
      if (o.strides[d][k] % group != 0) return false;
  }
  return true;
}

// V elements of an operand at byte offset `off` of `base`: one vector load
// where it is contiguous along the group, its one value repeated where broadcast.
template <class T, int V> PF_HOST_DEVICE Vec<T, V> load_group(const char* base, int64_t off, bool broadcast) {
  Vec<T, V> r;
  if (broadcast) {
    const T x = *reinterpret_cast<const T*>(base + off);
    for (int k = 0; k < V; ++k) r.v[k] = x;
  } else {
    r = *reinterpret_cast<const Vec<T, V>*>(base + off);
  }
  return r;
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
