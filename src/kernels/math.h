#pragma once
// Math used by the shared functors. On the GPU these are the vendor's
// intrinsics; on the host, exp for float is our own branch-free version so
// that the compiler vectorises the loops that call it (libm's expf is an
// opaque call). It is within 1 ulp of the correctly rounded result.

#include "pyflame/dtype.h"
#include "pyflame/macros.h"

#if !PF_RTC
#include <cmath>
#endif

namespace pyflame::math {

PF_HOST_DEVICE float exp(float x) {
#if PF_DEVICE_PASS
  return ::expf(x);
#else
  // exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2 / 2 (Cephes' split of ln2).
  // Below -104 (masked scores' -inf among them) the result is 0: computed on 0 instead and then
  // replaced, since a lane whose product is subnormal costs x86 a microcode assist (a causal
  // softmax, half its row -inf, ran 4x slower than an unmasked one).
  const bool underflows = x < -104.0f;
  x = underflows ? 0.0f : x;
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
  const float e = y * bits_float(static_cast<uint32_t>(n1 + 127) << 23) * bits_float(static_cast<uint32_t>(n2 + 127) << 23);
  return underflows ? 0.0f : e;
#endif
}
PF_HOST_DEVICE double exp(double x) { return ::exp(x); }

// The C functions: the same names work in host and device code.
#define PF_MATH_FORWARD(name)                                   \
  PF_HOST_DEVICE float name(float x) { return ::name##f(x); }   \
  PF_HOST_DEVICE double name(double x) { return ::name(x); }
PF_MATH_FORWARD(sqrt)
PF_MATH_FORWARD(sin)
PF_MATH_FORWARD(cos)
PF_MATH_FORWARD(fabs)
PF_MATH_FORWARD(floor)
PF_MATH_FORWARD(ceil)
PF_MATH_FORWARD(rint)  // round half to even (the default rounding mode)
PF_MATH_FORWARD(trunc)
PF_MATH_FORWARD(log10)
PF_MATH_FORWARD(exp2)
PF_MATH_FORWARD(tan)
PF_MATH_FORWARD(asin)
PF_MATH_FORWARD(acos)
PF_MATH_FORWARD(atan)
PF_MATH_FORWARD(sinh)
PF_MATH_FORWARD(cosh)
PF_MATH_FORWARD(asinh)
PF_MATH_FORWARD(acosh)
PF_MATH_FORWARD(atanh)
PF_MATH_FORWARD(lgamma)
PF_MATH_FORWARD(erfc)  // (1 - erf(x) loses every digit where erf(x) is near 1)
#define PF_MATH_FORWARD2(name)                                                  \
  PF_HOST_DEVICE float name(float x, float y) { return ::name##f(x, y); }       \
  PF_HOST_DEVICE double name(double x, double y) { return ::name(x, y); }
PF_MATH_FORWARD2(atan2)
PF_MATH_FORWARD2(hypot)
PF_MATH_FORWARD2(fmod)
PF_MATH_FORWARD2(copysign)
PF_MATH_FORWARD2(fmax)  // NaN ignored: the other argument

PF_HOST_DEVICE float tanh(float x) {
#if PF_DEVICE_PASS
  return ::tanhf(x);
#else
  // Branch-free (Cephes' tanhf): an odd polynomial below 0.625, where
  // 1 - 2 / (e^2|x| + 1) would cancel, and that formula above.
  float z = x * x;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
                 3.33332819422e-1f) * z * x + x;
  float a = math::fabs(x);
  float large = 1.0f - 2.0f / (math::exp(2.0f * a) + 1.0f);
  large = x < 0.0f ? -large : large;
  return a < 0.625f ? small : large;
#endif
}
PF_HOST_DEVICE double tanh(double x) { return ::tanh(x); }

#if !PF_DEVICE_PASS
// Cephes' logf, branch-free so that the loops calling it vectorise (libm's logf is an opaque
// call: log ran at 0.12x PyTorch's on the CPU). For finite u > 0, u = m 2^e with m in
// [sqrt(1/2), sqrt(2)): f = m - 1, y = log(m) - f (a polynomial in f), and e; subnormal u
// scaled into the normal range first.
struct LogParts {
  float f, y, e;
  float ln() const { return (f + (y - 2.12194440e-4f * e)) + 0.693359375f * e; }  // ln 2 in Cephes' two parts
};
inline LogParts log_parts(float u) {
  const bool tiny = u < 1.17549435e-38f;
  const uint32_t bits = float_bits(tiny ? u * 8388608.0f : u);  // 2^23
  float e = static_cast<float>(static_cast<int32_t>((bits >> 23) & 0xffu) - (tiny ? 150 : 127));
  float m = bits_float((bits & 0x007fffffu) | 0x3f800000u);  // in [1, 2)
  const bool high = m > 1.41421356f;
  m = high ? 0.5f * m : m;
  e = high ? e + 1.0f : e;
  const float f = m - 1.0f, z = f * f;
  const float y = ((((((((7.0376836292e-2f * f - 1.1514610310e-1f) * f + 1.1676998740e-1f) * f - 1.2420140846e-1f) * f +
                       1.4249322787e-1f) * f - 1.6668057665e-1f) * f + 2.0000714765e-1f) * f - 2.4999993993e-1f) * f +
                   3.3333331174e-1f) * f * z - 0.5f * z;
  return {f, y, e};
}
// r where u is finite and > 0; else log's value there: -inf at 0, NaN below 0 and for NaN, inf at inf.
inline float log_special_cases(float u, float r) {
  r = u == 0.0f ? -stdx::numeric_limits<float>::infinity() : r;
  r = u < 0.0f ? stdx::numeric_limits<float>::quiet_NaN() : r;
  r = u == stdx::numeric_limits<float>::infinity() ? u : r;
  return u != u ? u : r;
}
#endif

// log and log2 for float, within 2 ulp of the correctly rounded result; log2 exact at powers of two.
PF_HOST_DEVICE float log(float x) {
#if PF_DEVICE_PASS
  return ::logf(x);
#else
  return log_special_cases(x, log_parts(x).ln());
#endif
}
PF_HOST_DEVICE double log(double x) { return ::log(x); }
PF_HOST_DEVICE float log2(float x) {
#if PF_DEVICE_PASS
  return ::log2f(x);
#else
  const LogParts p = log_parts(x);
  constexpr float kLog2eMinus1 = 0.44269504088896340736f;  // (f + y) log2(e) without losing f's bits
  return log_special_cases(x, (((p.y * kLog2eMinus1 + p.f * kLog2eMinus1) + p.y) + p.f) + p.e);
#endif
}
PF_HOST_DEVICE double log2(double x) { return ::log2(x); }

// log1p and expm1 for float, branch-free so that the softplus, elu and log1p
// loops vectorise (libm's are opaque calls); within 2 ulp of the correctly
// rounded result. The double versions are libm's.
PF_HOST_DEVICE float log1p(float x) {
#if PF_DEVICE_PASS
  return ::log1pf(x);
#else
  // u = 1 + x, rounded; log1p(x) = log(u) - ((u - 1) - x) / u undoes that rounding.
  const float u = 1.0f + x;
  const float r = log_parts(u).ln() - ((u - 1.0f) - x) / u;
  return x != x ? x : log_special_cases(u, r);  // x = -1 gives -inf, x < -1 NaN, x = inf inf
#endif
}
PF_HOST_DEVICE double log1p(double x) { return ::log1p(x); }

PF_HOST_DEVICE float expm1(float x) {
#if PF_DEVICE_PASS
  return ::expm1f(x);
#else
  // |x| < 0.5: Taylor series to x^9 (relative error < 1e-9); beyond, exp(x) - 1 loses under 2 bits.
  float series =
      x * (1.0f + x * (0.5f + x * (1.6666667e-1f + x * (4.1666668e-2f + x * (8.3333338e-3f + x * (1.3888889e-3f +
          x * (1.9841270e-4f + x * (2.4801587e-5f + x * 2.7557319e-6f))))))));
  float e = math::exp(x) - 1.0f;
  return math::fabs(x) < 0.5f ? series : e;
#endif
}
PF_HOST_DEVICE double expm1(double x) { return ::expm1(x); }

PF_HOST_DEVICE float erf(float x) {
#if PF_DEVICE_PASS
  return ::erff(x);
#else
  // Branch-free so gelu loops vectorise; within 1.5e-7 of erf everywhere.
  // |x| < 0.5: Taylor series (relative error < 3e-8).
  float x2 = x * x;
  float series = x * (1.1283791670955126f +
                      x2 * (-0.3761263890318375f +
                            x2 * (0.11283791670955126f +
                                  x2 * (-0.026866170645131252f + x2 * (0.005223977625442188f - x2 * 0.0008548327023450852f)))));
  // Otherwise 1 - erfc, erfc from Numerical Recipes' Chebyshev fit (fractional error < 1.2e-7).
  float z = math::fabs(x);
  float t = 2.0f / (2.0f + z);
  float poly = -1.26551223f +
               t * (1.00002368f +
                    t * (0.37409196f +
                         t * (0.09678418f +
                              t * (-0.18628806f +
                                   t * (0.27886807f +
                                        t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  float erfc = t * math::exp(-z * z + poly);
  float tail = x < 0.0f ? erfc - 1.0f : 1.0f - erfc;
  return z < 0.5f ? series : tail;
#endif
}
PF_HOST_DEVICE double erf(double x) { return ::erf(x); }
#undef PF_MATH_FORWARD

PF_HOST_DEVICE float pow(float a, float b) { return ::powf(a, b); }
PF_HOST_DEVICE double pow(double a, double b) { return ::pow(a, b); }

// digamma as PyTorch's calc_digamma (Cephes' psi): the reflection formula
// below 0.5, the recurrence psi(x) = psi(x + 1) - 1 / x up to 10 and the
// asymptotic series there; poles (0 and the negative integers) give -inf at
// +-0 and NaN elsewhere, as PyTorch.
template <class T> PF_HOST_DEVICE T digamma(T x) {
  const T pi = T(3.14159265358979323846);
  if (x == T(0)) return T(1) / x < T(0) ? stdx::numeric_limits<T>::infinity() : -stdx::numeric_limits<T>::infinity();
  T result = T(0);
  if (x < T(0)) {
    if (x == math::floor(x)) return stdx::numeric_limits<T>::quiet_NaN();
    // psi(1 - x) - psi(x) = pi / tan(pi x); tan of pi (x - trunc x) keeps the argument small.
    const T r = x - static_cast<T>(static_cast<long long>(x));
    result = -pi / static_cast<T>(::tan(static_cast<double>(pi * r)));
    x = T(1) - x;
  }
  while (x < T(10)) {
    result -= T(1) / x;
    x += T(1);
  }
  if (x == T(10)) return result + T(2.25175258906672110764);
  const T z = T(1) / (x * x);
  const T poly = z * (T(8.33333333333333333333E-2) +
                      z * (T(-8.33333333333333333333E-3) +
                           z * (T(3.96825396825396825397E-3) +
                                z * (T(-4.16666666666666666667E-3) +
                                     z * (T(7.57575757575757575758E-3) +
                                          z * (T(-2.10927960927960927961E-2) + z * T(8.33333333333333333333E-2)))))));
  return result + T(::log(static_cast<double>(x))) - T(0.5) / x - poly;
}

// The vendors' erfinv on the GPU. The host's C library has none: Giles'
// single-precision approximation ("Approximating the erfinv function", 2010),
// refined by two Newton steps in double, which makes it exact to double's
// rounding for both widths (what PyTorch's CPU gets from its own refinement).
PF_HOST_DEVICE double erfinv(double y) {
#if PF_DEVICE_PASS
  return ::erfinv(y);
#else
  if (!(y > -1.0 && y < 1.0)) return y == 1.0 || y == -1.0 ? std::copysign(HUGE_VAL, y) : std::nan("");
  double w = -::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = ::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 2; ++i) x -= (::erf(x) - y) / (1.1283791670955126 * ::exp(-x * x));  // 2/sqrt(pi)
  return x;
#endif
}
PF_HOST_DEVICE float erfinv(float y) {
#if PF_DEVICE_PASS
  return ::erfinvf(y);
#else
  return static_cast<float>(erfinv(static_cast<double>(y)));
#endif
}

template <class T> PF_HOST_DEVICE bool isnan(T x) {
  if constexpr (stdx::is_floating_point_v<T>) return x != x;
  else return false;
}

}  // namespace pyflame::math
