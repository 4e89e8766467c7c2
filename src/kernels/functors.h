#pragma once
// One definition of each elementwise function (DESIGN.md, principle 4): the
// CPU loops, the GPU kernels and the runtime-compiled fused kernels all
// instantiate these. T is the compute type (acc_t of the storage type: float
// for float16/bfloat16). A functor with parameters takes them from its op's
// attributes (ElementwiseAttrs::params, ClampAttrs) in its constructor; the
// others are empty. The run-time compilers (PF_RTC) see no attributes: a
// generated kernel gets its functors by value, made on the host, so there
// the constructors from attributes are left out.

#include "kernels/kernel_error.h"
#include "kernels/math.h"
#include "pyflame/dtype.h"

#if !PF_RTC
#include <cmath>

#include "core/dispatch.h"
#endif

namespace pyflame::kernels {

// ---- binary
template <class T> struct Add { PF_HOST_DEVICE T operator()(T a, T b) const { return a + b; } };
template <class T> struct Sub { PF_HOST_DEVICE T operator()(T a, T b) const { return a - b; } };
template <class T> struct Mul {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_same_v<T, bool>) return a && b;
    else return a * b;
  }
};
template <class T> struct Div { PF_HOST_DEVICE T operator()(T a, T b) const { return a / b; } };
template <class T> struct Pow {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_floating_point_v<T>) {
      // The exponents PyTorch computes without pow (x ** 2 in losses and variances, x ** 3 in
      // hand-written GELUs, x ** 0.5), as it does, so results match it; the exponent is usually
      // a Python number, the same for every element, so the branches do not diverge.
      if (b == T(2)) return a * a;
      if (b == T(3)) return a * a * a;
      if (b == T(0.5)) return math::sqrt(a);
      if (b == T(-0.5)) return T(1) / math::sqrt(a);
      if (b == T(-1)) return T(1) / a;
      if (b == T(-2)) return T(1) / (a * a);
      return math::pow(a, b);
    } else if constexpr (stdx::is_same_v<T, bool>) {
      return a || !b;
    } else {
      // Integer power by squaring; negative exponents truncate toward zero as in PyTorch.
      if constexpr (stdx::is_signed_v<T>)
        if (b < 0) return a == 1 ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
      T r = 1;
      for (; b; b >>= 1, a *= a)
        if (b & 1) r *= a;
      return r;
    }
  }
};
// NaN propagates through maximum/minimum, as in PyTorch and NumPy.
template <class T> struct Maximum {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if (math::isnan(a) || math::isnan(b)) return math::isnan(a) ? a : b;
    return a > b ? a : b;
  }
};
template <class T> struct Minimum {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if (math::isnan(a) || math::isnan(b)) return math::isnan(a) ? a : b;
    return a < b ? a : b;
  }
};

// ---- comparisons (result stored as bool)
template <class T> struct Eq { PF_HOST_DEVICE bool operator()(T a, T b) const { return a == b; } };
template <class T> struct Ne { PF_HOST_DEVICE bool operator()(T a, T b) const { return a != b; } };
template <class T> struct Lt { PF_HOST_DEVICE bool operator()(T a, T b) const { return a < b; } };
template <class T> struct Le { PF_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; } };
template <class T> struct Gt { PF_HOST_DEVICE bool operator()(T a, T b) const { return a > b; } };
template <class T> struct Ge { PF_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; } };

// ---- unary
template <class T> struct Neg { PF_HOST_DEVICE T operator()(T x) const { return -x; } };
template <class T> struct Abs {
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_unsigned_v<T>) return x;
    else if constexpr (stdx::is_floating_point_v<T>) return math::fabs(x);
    else return x < 0 ? T(-x) : x;
  }
};
template <class T> struct Relu {
  PF_HOST_DEVICE T operator()(T x) const { return math::isnan(x) ? x : x > T(0) ? x : T(0); }
};
template <class T> struct Sqrt { PF_HOST_DEVICE T operator()(T x) const { return math::sqrt(x); } };
template <class T> struct Rsqrt { PF_HOST_DEVICE T operator()(T x) const { return T(1) / math::sqrt(x); } };
template <class T> struct Exp { PF_HOST_DEVICE T operator()(T x) const { return math::exp(x); } };
template <class T> struct Log { PF_HOST_DEVICE T operator()(T x) const { return math::log(x); } };
template <class T> struct Sin { PF_HOST_DEVICE T operator()(T x) const { return math::sin(x); } };
template <class T> struct Cos { PF_HOST_DEVICE T operator()(T x) const { return math::cos(x); } };
template <class T> struct Sinc {  // sin(pi x) / (pi x), 1 at 0
  PF_HOST_DEVICE T operator()(T x) const {
    const T pi_x = T(3.14159265358979323846) * x;
    return x == T(0) ? T(1) : math::sin(pi_x) / pi_x;
  }
};
template <class T> struct Tanh { PF_HOST_DEVICE T operator()(T x) const { return math::tanh(x); } };
template <class T> struct Sigmoid {
  PF_HOST_DEVICE T operator()(T x) const { return T(1) / (T(1) + math::exp(-x)); }
};
template <class T> struct Silu {
  PF_HOST_DEVICE T operator()(T x) const { return x / (T(1) + math::exp(-x)); }
};
template <class T> struct Gelu {
  T tanh_approx = T(0);  // 1 for the tanh form; a T (not a bool) so the loop vectorises
  Gelu() = default;
#if !PF_RTC
  explicit Gelu(const ElementwiseAttrs& a) : tanh_approx(a.param<ParamName::gelu_approximate_tanh>().i ? T(1) : T(0)) {}
#endif
  PF_HOST_DEVICE T operator()(T x) const { return tanh_approx != T(0) ? tanh_form(x) : erf_form(x); }
  // The CPU runs each form as a loop of its own (cpu/elementwise.cpp): with the choice inside
  // the loop GCC computed both forms and blended them (the exact GELU at 0.3x PyTorch's).
  PF_HOST_DEVICE bool form() const { return tanh_approx != T(0); }
  template <bool kTanh> struct Form {
    PF_HOST_DEVICE T operator()(T x) const { return kTanh ? tanh_form(x) : erf_form(x); }
  };
  // 0.5 x (1 + tanh(u)) written as x * sigmoid(2u): the same function, one exp.
  PF_HOST_DEVICE static T tanh_form(T x) {
    const T k = T(1.5957691216057308);  // 2 sqrt(2 / pi)
    return x / (T(1) + math::exp(-k * (x + T(0.044715) * x * x * x)));
  }
  PF_HOST_DEVICE static T erf_form(T x) { return x * cdf(x); }
  // The normal distribution's 0.5 (1 + erf(x / sqrt 2)), also GeluBackward's.
  PF_HOST_DEVICE static T cdf(T x) {
#if !PF_DEVICE_PASS
    if constexpr (stdx::is_same_v<T, float>) {
      // On the CPU, float: erf as Abramowitz and Stegun's 7.1.26 (absolute error < 1.5e-7, as
      // PyTorch's vectorised GELU), a third of math::erf's work, whose relative accuracy near
      // 0 GELU does not need (the exact GELU ran at 0.3x PyTorch's).
      const T z = math::fabs(x) * T(0.7071067811865476);
      const T t = T(1) / (T(1) + T(0.3275911) * z);
      const T poly = t * (T(0.254829592) + t * (T(-0.284496736) + t * (T(1.421413741) +
                                                                       t * (T(-1.453152027) + t * T(1.061405429)))));
      const T erf_z = T(1) - poly * math::exp(-z * z);
      return T(0.5) * (T(1) + (x < T(0) ? -erf_z : erf_z));
    }
#endif
    return T(0.5) * (T(1) + math::erf(x * T(0.7071067811865476)));
  }
};

#if !PF_RTC
// A number argument (bound, parameter) as compute type T: integer types take
// it truncated toward zero, as PyTorch does.
template <class T> T scalar_param(const Scalar& s) {
  if constexpr (stdx::is_floating_point_v<T>) return static_cast<T>(s.f);
  else return static_cast<T>(s.i);
}
#endif

template <class T> struct Clamp {
  T lo, hi;
#if !PF_RTC
  explicit Clamp(const ClampAttrs& a)
      : lo(a.min ? scalar_param<T>(*a.min) : stdx::numeric_limits<T>::lowest()),
        hi(a.max ? scalar_param<T>(*a.max) : stdx::numeric_limits<T>::max()) {
    if constexpr (stdx::is_floating_point_v<T>) {
      if (!a.min) lo = -stdx::numeric_limits<T>::infinity();
      if (!a.max) hi = stdx::numeric_limits<T>::infinity();
    }
  }
  Clamp(T lo_, T hi_) : lo(lo_), hi(hi_) {}
#endif
  // As PyTorch: min(max(x, lo), hi), so hi wins when lo > hi; NaN stays NaN.
  PF_HOST_DEVICE T operator()(T x) const {
    if (math::isnan(x)) return x;
    T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};

// hardtanh(x, min_val, max_val): a clamp whose bounds are parameters (the op
// layer has checked min_val <= max_val).
template <class T> struct Hardtanh : Clamp<T> {
#if !PF_RTC
  explicit Hardtanh(const ElementwiseAttrs& a)
      : Clamp<T>(scalar_param<T>(a.param<ParamName::hardtanh_min_val>()),
                 scalar_param<T>(a.param<ParamName::hardtanh_max_val>())) {}
#endif
};

// Rounding. Integers are already whole (the op layer refuses decimals for them).
template <class T> struct Floor {
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) return math::floor(x);
    else return x;
  }
};
template <class T> struct Ceil {
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) return math::ceil(x);
    else return x;
  }
};
// Half to even; with decimals d, as PyTorch: rint(x * 10^d) / 10^d, or
// rint(x / 10^-d) * 10^-d for negative d (so 10^-d stays exact).
template <class T> struct Round {
  T ten_pow = T(1);
  T negative = T(0);  // a T (not a bool) so the CPU loop vectorises
#if !PF_RTC
  explicit Round(const ElementwiseAttrs& a) {
    int64_t d = a.param<ParamName::round_decimals>().i;
    negative = d < 0 ? T(1) : T(0);
    ten_pow = static_cast<T>(std::pow(10.0, static_cast<double>(d < 0 ? -d : d)));
  }
#endif
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) {
      T up = math::rint(x * ten_pow) / ten_pow, down = math::rint(x / ten_pow) * ten_pow;
      return negative != T(0) ? down : up;
    } else {
      return x;
    }
  }
};
// -1, 0 or 1; NaN gives 0 and -0.0 gives 0, as PyTorch.
template <class T> struct Sign {
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_unsigned_v<T>) return static_cast<T>(x != T(0));
    else return static_cast<T>(T(0) < x) - static_cast<T>(x < T(0));
  }
};

template <class T> struct Reciprocal { PF_HOST_DEVICE T operator()(T x) const { return T(1) / x; } };
template <class T> struct Log1p { PF_HOST_DEVICE T operator()(T x) const { return math::log1p(x); } };
template <class T> struct Erf { PF_HOST_DEVICE T operator()(T x) const { return math::erf(x); } };
template <class T> struct Erfc { PF_HOST_DEVICE T operator()(T x) const { return math::erfc(x); } };
template <class T> struct Expm1 { PF_HOST_DEVICE T operator()(T x) const { return math::expm1(x); } };
template <class T> struct Log2 { PF_HOST_DEVICE T operator()(T x) const { return math::log2(x); } };
template <class T> struct Log10 { PF_HOST_DEVICE T operator()(T x) const { return math::log10(x); } };
template <class T> struct Exp2 { PF_HOST_DEVICE T operator()(T x) const { return math::exp2(x); } };
template <class T> struct Square { PF_HOST_DEVICE T operator()(T x) const { return x * x; } };
// Rounding toward zero and what it drops; integers are whole already.
template <class T> struct Trunc {
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) return math::trunc(x);
    else return x;
  }
};
template <class T> struct Frac {
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) return x - math::trunc(x);
    else return T(0);
  }
};
// Float classes; integers are always finite.
template <class T> struct IsNan {
  PF_HOST_DEVICE bool operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) return x != x;
    else return false;
  }
};
template <class T> struct IsInf {
  PF_HOST_DEVICE bool operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) return x == stdx::numeric_limits<T>::infinity() || x == -stdx::numeric_limits<T>::infinity();
    else return false;
  }
};
template <class T> struct IsFinite {
  PF_HOST_DEVICE bool operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) return x - x == T(0);  // inf - inf and NaN - NaN are NaN
    else return true;
  }
};
template <class T> struct Tan { PF_HOST_DEVICE T operator()(T x) const { return math::tan(x); } };
template <class T> struct Asin { PF_HOST_DEVICE T operator()(T x) const { return math::asin(x); } };
template <class T> struct Acos { PF_HOST_DEVICE T operator()(T x) const { return math::acos(x); } };
template <class T> struct Atan { PF_HOST_DEVICE T operator()(T x) const { return math::atan(x); } };
template <class T> struct Sinh { PF_HOST_DEVICE T operator()(T x) const { return math::sinh(x); } };
template <class T> struct Cosh { PF_HOST_DEVICE T operator()(T x) const { return math::cosh(x); } };
template <class T> struct Asinh { PF_HOST_DEVICE T operator()(T x) const { return math::asinh(x); } };
template <class T> struct Acosh { PF_HOST_DEVICE T operator()(T x) const { return math::acosh(x); } };
template <class T> struct Atanh { PF_HOST_DEVICE T operator()(T x) const { return math::atanh(x); } };
template <class T> struct Lgamma { PF_HOST_DEVICE T operator()(T x) const { return math::lgamma(x); } };
template <class T> struct Digamma { PF_HOST_DEVICE T operator()(T x) const { return math::digamma(x); } };
// sgn is sign for real tensors (PyTorch's z / |z| only differs for complex ones).
template <class T> struct Sgn : Sign<T> {};
// fmax/fmin: NaN is ignored unless both are NaN (maximum/minimum propagate it).
template <class T> struct Fmax {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if (math::isnan(a) || math::isnan(b)) return math::isnan(a) ? b : a;
    return a > b ? a : b;
  }
};
template <class T> struct Fmin {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if (math::isnan(a) || math::isnan(b)) return math::isnan(a) ? b : a;
    return a < b ? a : b;
  }
};
template <class T> struct Atan2 { PF_HOST_DEVICE T operator()(T a, T b) const { return math::atan2(a, b); } };
template <class T> struct Hypot { PF_HOST_DEVICE T operator()(T a, T b) const { return math::hypot(a, b); } };

template <class T> struct Erfinv { PF_HOST_DEVICE T operator()(T x) const { return math::erfinv(x); } };
// log(exp(a) + exp(b)) without overflow; equal infinities are their own sum (as PyTorch).
template <class T> struct LogAddExp {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if (a == b && a - a != T(0)) return a;  // a - a: NaN for infinities (and NaN, which a == b excludes)
    T m = a < b ? b : a;
    return m + math::log1p(math::exp(-math::fabs(a - b)));
  }
};
template <class T> struct Copysign { PF_HOST_DEVICE T operator()(T a, T b) const { return math::copysign(a, b); } };
// x log(y), 0 where x is 0 (unless y is NaN), as PyTorch.
template <class T> struct Xlogy {
  PF_HOST_DEVICE T operator()(T x, T y) const {
    if (math::isnan(y)) return y;
    return x == T(0) ? T(0) : x * math::log(y);
  }
};

// ---- activations' gradients: g times the derivative at x in one pass (as compositions of
// elementwise ops they took five to ten passes over the tensor).
// relu's, from its output y (PyTorch's threshold_backward at 0): NaN outputs pass no gradient.
template <class T> struct ReluBackward {
  static constexpr bool kRefusesBool = true;
  PF_HOST_DEVICE T operator()(T g, T y) const { return y > T(0) ? g : T(0); }
};
// d/dx x Phi(x) = Phi(x) + x phi(x).
template <class T> struct GeluBackward {
  PF_HOST_DEVICE T operator()(T g, T x) const {
    const T pdf = T(0.3989422804014327) * math::exp(T(-0.5) * x * x);  // 1 / sqrt(2 pi)
    return g * (Gelu<T>::cdf(x) + x * pdf);
  }
};
// d/dx 0.5 x (1 + t), t = tanh(k (x + c x^3)): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2).
template <class T> struct GeluTanhBackward {
  PF_HOST_DEVICE T operator()(T g, T x) const {
    const T k = T(0.7978845608028654), c = T(0.044715);  // sqrt(2 / pi)
    const T t = math::tanh(k * (x + c * x * x * x));
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * c * x * x));
  }
};
// d/dx x s(x) = s (1 + x (1 - s)), s the sigmoid.
template <class T> struct SiluBackward {
  PF_HOST_DEVICE T operator()(T g, T x) const {
    const T s = T(1) / (T(1) + math::exp(-x));
    return g * s * (T(1) + x * (T(1) - s));
  }
};

// ---- rounded division and remainders (PyTorch's CPU formulas). Integer
// division by zero cannot be computed: such functors name the inputs they
// cannot take with invalid(), the backends report them as a kernel error
// (DivisionByZero) and the functor itself returns 0 there instead of trapping.
// The most negative integer divided by -1 wraps around, as in PyTorch.
// x < 0, also for unsigned types (where compilers warn about the comparison).
template <class T> PF_HOST_DEVICE constexpr bool is_negative(T x) {
  if constexpr (stdx::is_signed_v<T>) return x < T(0);
  else return false;
}
template <class T> struct IntegerDivision {
  static constexpr bool kRefusesBool = true;
  static constexpr KernelErrorCode kInvalid = KernelErrorCode::DivisionByZero;
  PF_HOST_DEVICE bool invalid(T, T b) const {
    if constexpr (stdx::is_integral_v<T>) return b == T(0);
    else return false;
  }
  // -a, wrapping around for the most negative value.
  PF_HOST_DEVICE static T negate(T a) {
    if constexpr (stdx::is_same_v<T, bool>) return a;
    else return static_cast<T>(stdx::make_unsigned_t<T>(0) - static_cast<stdx::make_unsigned_t<T>>(a));
  }
  // Whether a / b is computed by the functor's own formula; otherwise its result is special.
  PF_HOST_DEVICE static bool plain(T b) {
    if constexpr (stdx::is_signed_v<T>) return b != T(0) && b != T(-1);
    else return b != T(0);
  }
};
template <class T> struct FloorDivide : IntegerDivision<T> {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_floating_point_v<T>) {
      if (b == T(0)) return a / b;
      T mod = math::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
      if (div == T(0)) return math::copysign(T(0), a / b);
      T floor_div = math::floor(div);
      return div - floor_div > T(0.5) ? floor_div + T(1) : floor_div;
    } else {
      if (!this->plain(b)) return b == T(0) ? T(0) : this->negate(a);
      T q = static_cast<T>(a / b), r = static_cast<T>(a % b);
      return r != T(0) && is_negative(r) != is_negative(b) ? static_cast<T>(q - T(1)) : q;
    }
  }
};
template <class T> struct TruncDivide : IntegerDivision<T> {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_floating_point_v<T>) return math::trunc(a / b);
    else return this->plain(b) ? static_cast<T>(a / b) : b == T(0) ? T(0) : this->negate(a);
  }
};
// Python's %: the sign of the divisor.
template <class T> struct Remainder : IntegerDivision<T> {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_floating_point_v<T>) {
      T mod = math::fmod(a, b);
      return mod != T(0) && (b < T(0)) != (mod < T(0)) ? mod + b : mod;
    } else {
      if (!this->plain(b)) return T(0);
      T r = static_cast<T>(a % b);
      return r != T(0) && is_negative(r) != is_negative(b) ? static_cast<T>(r + b) : r;
    }
  }
};
// C's fmod: the sign of the dividend.
template <class T> struct Fmod : IntegerDivision<T> {
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_floating_point_v<T>) return math::fmod(a, b);
    else return this->plain(b) ? static_cast<T>(a % b) : T(0);
  }
};

// ---- bitwise (integer and bool operands; the op layer refuses bool for the shifts)
template <class T> struct BitwiseAnd { PF_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a & b); } };
template <class T> struct BitwiseOr { PF_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a | b); } };
template <class T> struct BitwiseXor { PF_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a ^ b); } };
// ~ of a bool is logical not.
template <class T> struct BitwiseNot {
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_same_v<T, bool>) return !x;
    else return static_cast<T>(~x);
  }
};
// Shifts by the width of the type or more, or by a negative count, give 0
// (left) and the sign (right), as PyTorch; a left shift drops the bits it pushes out.
template <class T> struct LeftShift {
  static constexpr bool kRefusesBool = true;
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_same_v<T, bool>) {
      return a;
    } else {
      if constexpr (stdx::is_signed_v<T>)
        if (b < T(0)) return T(0);
      if (b >= T(sizeof(T) * 8)) return T(0);
      return static_cast<T>(static_cast<stdx::make_unsigned_t<T>>(a) << b);
    }
  }
};
template <class T> struct RightShift {
  static constexpr bool kRefusesBool = true;
  PF_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (stdx::is_same_v<T, bool>) {
      return a;
    } else {
      const T fill = is_negative(a) ? T(-1) : T(0);  // what shifting out every bit leaves
      if constexpr (stdx::is_signed_v<T>)
        if (b < T(0)) return fill;
      return b >= T(sizeof(T) * 8) ? fill : static_cast<T>(a >> b);
    }
  }
};

// NaN, inf and -inf replaced by the parameters (the op layer has made None the
// dtype's largest finite values); integers pass unchanged.
template <class T> struct NanToNum {
  T nan, posinf, neginf;
#if !PF_RTC
  explicit NanToNum(const ElementwiseAttrs& a)
      : nan(scalar_param<T>(a.param<ParamName::nan_to_num_nan>())),
        posinf(scalar_param<T>(a.param<ParamName::nan_to_num_posinf>())),
        neginf(scalar_param<T>(a.param<ParamName::nan_to_num_neginf>())) {}
#endif
  PF_HOST_DEVICE T operator()(T x) const {
    if constexpr (stdx::is_floating_point_v<T>) {
      if (math::isnan(x)) return nan;
      if (x - x != T(0)) return x > T(0) ? posinf : neginf;
      return x;
    } else {
      return x;
    }
  }
};

// Activations with parameters (op_params.def).
template <class T> struct LeakyRelu {
  T negative_slope;
#if !PF_RTC
  explicit LeakyRelu(const ElementwiseAttrs& a)
      : negative_slope(scalar_param<T>(a.param<ParamName::leaky_relu_negative_slope>())) {}
#endif
  PF_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : x * negative_slope; }
};
template <class T> struct Elu {
  T alpha;
#if !PF_RTC
  explicit Elu(const ElementwiseAttrs& a) : alpha(scalar_param<T>(a.param<ParamName::elu_alpha>())) {}
#endif
  PF_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : alpha * math::expm1(x); }
};
// log(1 + exp(beta x)) / beta, linear where beta x > threshold (as PyTorch).
template <class T> struct Softplus {
  T beta, threshold;
#if !PF_RTC
  explicit Softplus(const ElementwiseAttrs& a)
      : beta(scalar_param<T>(a.param<ParamName::softplus_beta>())),
        threshold(scalar_param<T>(a.param<ParamName::softplus_threshold>())) {}
#endif
  PF_HOST_DEVICE T operator()(T x) const {
    T bx = x * beta;
    return bx > threshold ? x : math::log1p(math::exp(bx)) / beta;
  }
};

// Logical ops: nonzero (NaN included) is true; the result is bool.
template <class T> struct LogicalAnd {
  PF_HOST_DEVICE bool operator()(T a, T b) const { return a != T(0) && b != T(0); }
};
template <class T> struct LogicalOr {
  PF_HOST_DEVICE bool operator()(T a, T b) const { return a != T(0) || b != T(0); }
};
template <class T> struct LogicalXor {
  PF_HOST_DEVICE bool operator()(T a, T b) const { return (a != T(0)) != (b != T(0)); }
};
template <class T> struct LogicalNot { PF_HOST_DEVICE bool operator()(T x) const { return x == T(0); } };

// Which storage types a family's kernels are built for, in every backend; the
// op layer never sends others (ints go to float for UNARY_FLOAT, bool is
// refused for UNARY).
enum class DTypeSet { All, NoBool, FloatOnly, IntegerOrBool };
template <DTypeSet kSet, class T> constexpr bool accepts() {
  if constexpr (kSet == DTypeSet::FloatOnly) return is_float_v<T>;
  else if constexpr (kSet == DTypeSet::IntegerOrBool) return !is_float_v<T>;
  else if constexpr (kSet == DTypeSet::NoBool) return !stdx::is_same_v<T, bool>;
  else return true;
}

// Whether functor F declares inputs it cannot take (invalid(args...), with the
// kernel error kInvalid to report them; see IntegerDivision).
template <class F, class... A> constexpr bool has_invalid = requires(const F& f, A... a) { f.invalid(a...); };
// A functor whose op PyTorch leaves undefined for bool tensors, although its
// family takes them, declares kRefusesBool (the op layer refuses the call).
template <class F> constexpr bool refuses_bool() {
  if constexpr (requires { F::kRefusesBool; }) return F::kRefusesBool;
  else return false;
}

#if !PF_RTC
// Builds a functor, passing the op's attributes to those that take them.
template <class F> F make_functor(const OpAttrs& attrs) {
  if constexpr (std::is_constructible_v<F, const ElementwiseAttrs&>) return F(std::get<ElementwiseAttrs>(attrs));
  else if constexpr (std::is_constructible_v<F, const ClampAttrs&>) return F(std::get<ClampAttrs>(attrs));
  else return F{};
}
#endif

}  // namespace pyflame::kernels

namespace pyflame::kernels {

// ---- reductions: identity, combine, finish. A is the accumulator type.
template <class A> struct SumReduce {
  static constexpr A identity() { return A(0); }
  PF_HOST_DEVICE A operator()(A a, A b) const { return a + b; }
  PF_HOST_DEVICE A finish(A a, int64_t) const { return a; }
};
template <class A> struct MeanReduce {
  static constexpr A identity() { return A(0); }
  PF_HOST_DEVICE A operator()(A a, A b) const { return a + b; }
  PF_HOST_DEVICE A finish(A a, int64_t n) const { return a / static_cast<A>(n); }
};
template <class A> struct ProdReduce {
  static constexpr A identity() { return A(1); }
  PF_HOST_DEVICE A operator()(A a, A b) const { return a * b; }
  PF_HOST_DEVICE A finish(A a, int64_t) const { return a; }
};
template <class A> struct MaxReduce {
  static constexpr A identity() {
    if constexpr (stdx::is_floating_point_v<A>) return -stdx::numeric_limits<A>::infinity();
    else return stdx::numeric_limits<A>::lowest();
  }
  PF_HOST_DEVICE A operator()(A a, A b) const { return Maximum<A>()(a, b); }
  PF_HOST_DEVICE A finish(A a, int64_t) const { return a; }
  // For argmax: whether b replaces the best so far (first NaN, else first maximum wins).
  PF_HOST_DEVICE bool better(A b, A best) const { return !math::isnan(best) && (b > best || math::isnan(b)); }
};
template <class A> struct MinReduce {
  static constexpr A identity() {
    if constexpr (stdx::is_floating_point_v<A>) return stdx::numeric_limits<A>::infinity();
    else return stdx::numeric_limits<A>::max();
  }
  PF_HOST_DEVICE A operator()(A a, A b) const { return Minimum<A>()(a, b); }
  PF_HOST_DEVICE A finish(A a, int64_t) const { return a; }
  PF_HOST_DEVICE bool better(A b, A best) const { return !math::isnan(best) && (b < best || math::isnan(b)); }
};

}  // namespace pyflame::kernels
