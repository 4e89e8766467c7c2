#pragma once
// The iteration space of N same-shaped strided operands, reduced to as few
// dims as possible: size-1 dims dropped, and neighbouring dims merged where
// every operand is contiguous across them. Dims are listed innermost first;
// strides are in bytes. Shared by the CPU loops and the GPU launchers.

#include <array>
#include <cstdint>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

template <int N> struct StridedLayout {
  std::vector<int64_t> sizes;                   // innermost first; never empty
  std::vector<std::array<int64_t, N>> strides;  // bytes, per dim and operand
};

template <int N> StridedLayout<N> coalesce(const std::array<const Tensor*, N>& ops) {
  const Shape& shape = ops[0]->shape();
  StridedLayout<N> l;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> st;
    for (int k = 0; k < N; ++k) st[k] = ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->itemsize());
    if (!l.sizes.empty()) {
      bool merge = true;
      for (int k = 0; k < N; ++k) merge = merge && st[k] == l.strides.back()[k] * l.sizes.back();
      if (merge) {
        l.sizes.back() *= shape[d];
        continue;
      }
    }
    l.sizes.push_back(shape[d]);
    l.strides.push_back(st);
  }
  if (l.sizes.empty()) {  // a single element
    l.sizes.push_back(1);
    l.strides.push_back({});
  }
  return l;
}

// The same over a run-time number of operands and the given `dims` of their shape (outer to
// inner, in that order), in elements, outermost first, appended to `sizes` and each operand's
// `strides` (what the kernels compiled at run time walk: src/rocm/fused_elementwise.cpp).
// Returns how many dims it appended (none for a single element).
inline int64_t coalesce_dims(const Shape& shape, const std::vector<int64_t>& dims, const std::vector<const Tensor*>& ops,
                             std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>>& strides) {
  int64_t count = 0;
  for (int64_t d : dims) {
    if (shape[d] == 1) continue;
    bool merge = count > 0;
    for (size_t k = 0; merge && k < ops.size(); ++k) merge = strides[k].back() == ops[k]->strides()[d] * shape[d];
    if (merge) sizes.back() *= shape[d];
    else sizes.push_back(shape[d]), ++count;
    for (size_t k = 0; k < ops.size(); ++k) {
      if (!merge) strides[k].push_back(0);
      strides[k].back() = ops[k]->strides()[d];
    }
  }
  return count;
}

}  // namespace pyflame
