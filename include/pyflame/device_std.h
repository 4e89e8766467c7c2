#pragma once
// The few standard-library pieces that code shared by the CPU loops, the GPU
// kernels and the run-time compiled kernels uses (dtype.h, kernels/math.h,
// kernels/functors.h), in namespace pyflame::stdx. A normal compile takes them
// from the standard library. NVRTC and hiprtc (PF_RTC) have no standard library
// (hiprtc declares a few std traits of its own, which must not be redefined), so
// there they are defined here: fixed-width integers, type traits, numeric_limits.

#if defined(__CUDACC_RTC__) || defined(__HIPCC_RTC__)
#define PF_RTC 1
#else
#define PF_RTC 0
#endif

#if !PF_RTC

#include <cstdint>
#include <limits>
#include <type_traits>

namespace pyflame::stdx {
using std::is_floating_point_v;
using std::is_integral_v;
using std::is_same_v;
using std::is_signed_v;
using std::is_unsigned_v;
using std::make_unsigned_t;
using std::numeric_limits;
}  // namespace pyflame::stdx

#else

// No <cstdint>: hiprtc declares the 64-bit types (as long long) and NVRTC none;
// declaring one again as the same type is allowed.
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

namespace pyflame::stdx {

template <class A, class B> inline constexpr bool is_same_v = false;
template <class A> inline constexpr bool is_same_v<A, A> = true;

template <class T> inline constexpr bool is_floating_point_v =
    is_same_v<T, float> || is_same_v<T, double> || is_same_v<T, long double>;
template <class T> inline constexpr bool is_integral_v =
    is_same_v<T, bool> || is_same_v<T, char> || is_same_v<T, signed char> || is_same_v<T, unsigned char> ||
    is_same_v<T, short> || is_same_v<T, unsigned short> || is_same_v<T, int> || is_same_v<T, unsigned int> ||
    is_same_v<T, long> || is_same_v<T, unsigned long> || is_same_v<T, long long> || is_same_v<T, unsigned long long>;
template <class T> inline constexpr bool is_signed_v = (is_integral_v<T> || is_floating_point_v<T>) && T(-1) < T(0);
template <class T> inline constexpr bool is_unsigned_v = is_integral_v<T> && T(0) < T(-1);

template <class T> struct make_unsigned { using type = T; };
template <> struct make_unsigned<signed char> { using type = unsigned char; };
template <> struct make_unsigned<char> { using type = unsigned char; };
template <> struct make_unsigned<short> { using type = unsigned short; };
template <> struct make_unsigned<int> { using type = unsigned int; };
template <> struct make_unsigned<long> { using type = unsigned long; };
template <> struct make_unsigned<long long> { using type = unsigned long long; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;

template <class T> struct numeric_limits {  // integers: two's complement
  static constexpr T max() {
    if constexpr (is_same_v<T, bool>) return true;
    else if constexpr (is_signed_v<T>) return T(~make_unsigned_t<T>(0) >> 1);
    else return T(~T(0));
  }
  static constexpr T lowest() {
    if constexpr (is_signed_v<T>) return T(-max() - 1);
    else return T(0);
  }
};
template <> struct numeric_limits<float> {
  static constexpr float max() { return 3.40282346638528859812e+38f; }
  static constexpr float lowest() { return -3.40282346638528859812e+38f; }
  static constexpr float infinity() { return __builtin_bit_cast(float, 0x7f800000u); }
  static constexpr float quiet_NaN() { return __builtin_bit_cast(float, 0x7fc00000u); }
};
template <> struct numeric_limits<double> {
  static constexpr double max() { return 1.79769313486231570815e+308; }
  static constexpr double lowest() { return -1.79769313486231570815e+308; }
  static constexpr double infinity() { return __builtin_bit_cast(double, 0x7ff0000000000000ull); }
  static constexpr double quiet_NaN() { return __builtin_bit_cast(double, 0x7ff8000000000000ull); }
};

}  // namespace pyflame::stdx

#endif
