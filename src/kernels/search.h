#pragma once
// The binary search of searchsorted, shared by the CPU and GPU kernels.

#include <cstdint>

#include "pyflame/dtype.h"
#include "pyflame/macros.h"

namespace pyflame::kernels {

// The first index of row[0, n) whose element is >= value (right: > value).
// The tests are written as PyTorch's (a failed comparison moves right), so a
// NaN value lands at n and NaNs sorted last in the row are never passed.
template <class T> PF_HOST_DEVICE int64_t search_sorted_row(const T* row, int64_t n, T value, bool right) {
  using C = acc_t<T>;
  const C v = static_cast<C>(value);
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const C x = static_cast<C>(row[mid]);
    if (right ? !(x > v) : !(x >= v)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace pyflame::kernels
