#pragma once
// Math used by the shared functors. On the GPU these are the vendor's
// intrinsics; on the host, exp for float is our own branch-free version so
// that the compiler vectorises the loops that call it (libm's expf is an
// opaque call). It is within 1 ulp of the correctly rounded result.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "pyflame/macros.h"

namespace pyflame::math {

PF_HOST_DEVICE float exp(float x) {
#if PF_DEVICE_PASS
  return ::expf(x);
#else
  // exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2 / 2 (Cephes' split of ln2).
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // 2^n in two halves so results in the subnormal range come out right.
  int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  int32_t b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  return y * s1 * s2;
#endif
}
PF_HOST_DEVICE double exp(double x) { return std::exp(x); }

#define PF_MATH_FORWARD(name)                                    \
  PF_HOST_DEVICE float name(float x) { return std::name(x); }    \
  PF_HOST_DEVICE double name(double x) { return std::name(x); }
PF_MATH_FORWARD(log)
PF_MATH_FORWARD(sqrt)
PF_MATH_FORWARD(sin)
PF_MATH_FORWARD(cos)
PF_MATH_FORWARD(tanh)
PF_MATH_FORWARD(erf)
PF_MATH_FORWARD(fabs)
#undef PF_MATH_FORWARD

PF_HOST_DEVICE float pow(float a, float b) { return std::pow(a, b); }
PF_HOST_DEVICE double pow(double a, double b) { return std::pow(a, b); }

template <class T> PF_HOST_DEVICE bool isnan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

}  // namespace pyflame::math
