#pragma once
// Element conversion between any two storage types, for the copy kernels of
// every backend: through float for the 16-bit floats, nonzero (NaN included)
// is true for bool, and floats become integers through int64 (as PyTorch
// does), so out-of-range values wrap the same way on the CPU and the GPU
// (a direct float -> uint8 cast is undefined: x86 wraps, GPUs saturate).

#include <type_traits>

#include "pyflame/dtype.h"
#include "pyflame/tensor.h"

namespace pyflame::kernels {

template <class O, class I> PF_HOST_DEVICE O convert(I v) {
  if constexpr (std::is_same_v<O, I>) return v;
  else if constexpr (std::is_same_v<O, bool>) return static_cast<double>(static_cast<acc_t<I>>(v)) != 0.0;
  else if constexpr (std::is_same_v<O, Half> || std::is_same_v<O, BFloat16>) return O(static_cast<float>(v));
  else if constexpr (std::is_integral_v<O> && is_float_v<I>) return static_cast<O>(static_cast<int64_t>(static_cast<acc_t<I>>(v)));
  else if constexpr (std::is_same_v<I, Half> || std::is_same_v<I, BFloat16>) return static_cast<O>(static_cast<float>(v));
  else return static_cast<O>(v);
}

// A Scalar as a value of storage type T (host side, for fills and kernel arguments).
template <class T> T scalar_as(const Scalar& v) {
  const bool is_float = v.kind == Scalar::Kind::Float;
  if constexpr (std::is_same_v<T, bool>) return is_float ? v.f != 0 : v.i != 0;
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(is_float ? static_cast<int64_t>(v.f) : v.i);
  else return static_cast<T>(is_float ? v.f : static_cast<double>(v.i));
}

}  // namespace pyflame::kernels
