#pragma once
// The order sort uses on every device (src/cpu/sort.cpp, src/rocm/kernels/sort.hip),
// PyTorch's: NaN above every number and equal to NaN; -0 equals +0. Ties
// are broken by the original index, so every sort is stable and the CPU and
// the GPU give the same indices.

#include <cstdint>

#include "pyflame/dtype.h"
#include "pyflame/macros.h"

namespace pyflame::kernels {

template <class T> PF_HOST_DEVICE bool key_less(T a, T b) {
  if constexpr (is_float_v<T>) {
    const acc_t<T> x = static_cast<acc_t<T>>(a), y = static_cast<acc_t<T>>(b);
    return x < y || (y != y && x == x);
  } else {
    return a < b;
  }
}

// Whether key a at index ia comes before key b at index ib in a sorted row.
template <class T> PF_HOST_DEVICE bool sorts_before(T a, int64_t ia, T b, int64_t ib, bool descending) {
  if (descending ? key_less(b, a) : key_less(a, b)) return true;
  if (descending ? key_less(a, b) : key_less(b, a)) return false;
  return ia < ib;
}

}  // namespace pyflame::kernels
