#pragma once
// Element types. float16 and bfloat16 are storage types: arithmetic on them
// happens in float (acc_t), as PyTorch does on the CPU, so every backend and
// the reference agree on rounding: one rounding per op, at the store.

#include "pyflame/macros.h"

#if !PF_RTC
#include <cmath>
#include <cstring>
#include <string>
#endif

namespace pyflame {

// Order matters: it is the promotion lattice within each category.
enum class DType : int8_t {
  Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64,
};
constexpr int kNumDTypes = 10;

// Bit casts usable in host and device code (std::memcpy is host-only).
PF_HOST_DEVICE uint32_t float_bits(float f) {
#if PF_DEVICE_PASS
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
PF_HOST_DEVICE float bits_float(uint32_t u) {
#if PF_DEVICE_PASS
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

struct Half {
  uint16_t bits = 0;
  Half() = default;
  PF_HOST_DEVICE Half(float f) : bits(from_float(f)) {}
  PF_HOST_DEVICE operator float() const { return to_float(bits); }

  // IEEE binary16 conversions, round to nearest even; exact for every input.
  PF_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u)  // inf or nan (keep nan quiet)
      return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
    if (abs < 0x38800000u) {  // result is subnormal or zero
      // Adding 0.5f aligns the mantissa so float addition does the rounding.
      uint32_t r = float_bits(bits_float(abs) + 0.5f);
      return static_cast<uint16_t>(sign | (r - 0x3f000000u));
    }
    uint32_t odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round
    return static_cast<uint16_t>(sign | (abs >> 13));
  }
  PF_HOST_DEVICE static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t rest = static_cast<uint32_t>(h & 0x7fffu) << 13;
    float f;
    if (rest >= (0x7c00u << 13)) {  // inf or nan
      f = bits_float(rest | 0x7f800000u);
    } else if (rest < (0x0400u << 13)) {  // subnormal: scale by 2^-24 exactly
      f = static_cast<float>(h & 0x3ffu) * 5.9604644775390625e-8f;
    } else {
      f = bits_float(rest + 0x38000000u);
    }
    return sign ? -f : f;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  PF_HOST_DEVICE BFloat16(float f) : bits(from_float(f)) {}
  PF_HOST_DEVICE operator float() const { return to_float(bits); }

  PF_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>(x >> 16);
  }
  PF_HOST_DEVICE static float to_float(uint16_t b) {
    return bits_float(static_cast<uint32_t>(b) << 16);
  }
};

template <class T> struct TypeTag { using type = T; };

template <DType D> struct dtype_traits;
#define PF_DTYPE_TRAIT(D, T) \
  template <> struct dtype_traits<DType::D> { using type = T; };
PF_DTYPE_TRAIT(Bool, bool)
PF_DTYPE_TRAIT(UInt8, uint8_t)
PF_DTYPE_TRAIT(Int8, int8_t)
PF_DTYPE_TRAIT(Int16, int16_t)
PF_DTYPE_TRAIT(Int32, int32_t)
PF_DTYPE_TRAIT(Int64, int64_t)
PF_DTYPE_TRAIT(Float16, Half)
PF_DTYPE_TRAIT(BFloat16, BFloat16)
PF_DTYPE_TRAIT(Float32, float)
PF_DTYPE_TRAIT(Float64, double)
#undef PF_DTYPE_TRAIT

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::Int16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

// The type arithmetic is done in: float for the 16-bit floats, else itself.
template <class T> struct acc_type { using type = T; };
template <> struct acc_type<Half> { using type = float; };
template <> struct acc_type<BFloat16> { using type = float; };
template <class T> using acc_t = typename acc_type<T>::type;

template <class T> constexpr bool is_float_v =
    stdx::is_floating_point_v<T> || stdx::is_same_v<T, Half> || stdx::is_same_v<T, BFloat16>;

#if !PF_RTC  // the host's view of dtypes

PF_API const char* dtype_name(DType d);   // "float32"
PF_API size_t itemsize(DType d);
PF_API bool is_floating(DType d);
PF_API bool is_integral(DType d);         // bool excluded
PF_API std::string to_string(DType d);
PF_API DType parse_dtype(const std::string& name);  // ValueError on unknown names
// PyTorch's promote_types: bool < integers < floats; the 16-bit floats meet at float32.
PF_API DType promote_types(DType a, DType b);
PF_API constexpr DType default_float() { return DType::Float32; }

// Calls f(TypeTag<T>{}) for the C++ type of `d`.
template <class F> decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::Bool: return f(TypeTag<bool>{});
    case DType::UInt8: return f(TypeTag<uint8_t>{});
    case DType::Int8: return f(TypeTag<int8_t>{});
    case DType::Int16: return f(TypeTag<int16_t>{});
    case DType::Int32: return f(TypeTag<int32_t>{});
    case DType::Int64: return f(TypeTag<int64_t>{});
    case DType::Float16: return f(TypeTag<Half>{});
    case DType::BFloat16: return f(TypeTag<BFloat16>{});
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: break;
  }
  return f(TypeTag<double>{});
}
#endif

}  // namespace pyflame
