#pragma once
// Launch helpers shared by the GPU kernel files: the coalesced strided layout
// as a kernel argument, and grid sizing for grid-stride loops.

#include "core/strided_layout.h"
#include "pyflame/error.h"

namespace pyflame::backend::rocm {

constexpr int kMaxDims = 16;
constexpr int kThreads = 256;

// A coalesced layout passed to the kernel by value.
template <int N> struct Offsets {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];  // bytes

  PF_HOST_DEVICE void at(int64_t linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      int64_t idx = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += idx * strides[d][k];
    }
  }
};

template <int N> inline Offsets<N> make_offsets(const std::array<const Tensor*, N>& ops, const char* op) {
  StridedLayout<N> l = coalesce<N>(ops);
  PF_CHECK(static_cast<int>(l.sizes.size()) <= kMaxDims, NotSupportedError, op, ": tensors with more than ", kMaxDims,
           " non-mergeable dimensions are not supported on the GPU (shape ", ops[0]->shape(), ")");
  Offsets<N> o{};
  o.ndim = static_cast<int>(l.sizes.size());
  for (int d = 0; d < o.ndim; ++d) {
    o.sizes[d] = l.sizes[d];
    for (int k = 0; k < N; ++k) o.strides[d][k] = l.strides[d][k];
  }
  return o;
}

inline unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20));  // grid-stride beyond
}

}  // namespace pyflame::backend::rocm
