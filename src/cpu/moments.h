#pragma once
// Sums for the statistics kernels (variance.cpp, norm.cpp), in double with
// eight independent lanes so the loops vectorise. Variances take two passes,
// the mean and then squared deviations from it, which stays accurate where
// sum(x^2) - n mean^2 would cancel (data far from zero).

#include <cstdint>

namespace pyflame::cpu {

template <class T> double row_sum(const T* x, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(x[i + l]);
  for (; i < n; ++i) lanes[0] += static_cast<double>(x[i]);
  double total = 0;
  for (double l : lanes) total += l;
  return total;
}

// sum (x - center)^2
template <class T> double row_squared_deviation(const T* x, int64_t n, double center) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) {
      double d = static_cast<double>(x[i + l]) - center;
      lanes[l] += d * d;
    }
  for (; i < n; ++i) {
    double d = static_cast<double>(x[i]) - center;
    lanes[0] += d * d;
  }
  double total = 0;
  for (double l : lanes) total += l;
  return total;
}

}  // namespace pyflame::cpu
