#pragma once
// The draws of the random ops, one definition for the CPU and the GPU: element
// i of a random tensor (or dropout mask) is a function of the Philox key and
// counter offset + i only, so a seed gives the same numbers on every device.

#include <cmath>
#include <type_traits>

#include "kernels/math.h"
#include "kernels/philox.h"
#include "pyflame/dtype.h"
#include "pyflame/ir/attrs.h"

namespace pyflame::kernels {

enum class Distribution { Uniform, Normal, Integer };

// Draw i of a rand (U[low, high)), randn (N(low, high^2)) or randint
// ([low, high)) tensor of storage type T.
template <class T, Distribution kDist> struct RandomDraw {
  uint64_t seed, offset;
  double low, high;
  explicit RandomDraw(const RandomAttrs& a) : seed(a.seed), offset(a.offset), low(a.low), high(a.high) {}

  PF_HOST_DEVICE T operator()(int64_t i) const {
    const Philox4x32 r(seed, offset + static_cast<uint64_t>(i));
    if constexpr (kDist == Distribution::Integer) {
      // 64 random bits modulo the range; the bias is below 2^-32.
      const uint64_t bits = (static_cast<uint64_t>(r.out[0]) << 32) | r.out[1];
      const uint64_t range = static_cast<uint64_t>(high - low);
      return static_cast<T>(static_cast<int64_t>(low) + static_cast<int64_t>(bits % range));
    } else if constexpr (kDist == Distribution::Uniform) {
      // As many random bits as the type's mantissa holds, so rounding never reaches high.
      double v;
      if constexpr (std::is_same_v<T, float>) v = uniform_float(r.out[0]);
      else if constexpr (std::is_same_v<T, Half>) v = (r.out[0] >> 21) * (1.0 / 2048);
      else if constexpr (std::is_same_v<T, BFloat16>) v = (r.out[0] >> 24) * (1.0 / 256);
      else v = uniform_double(r.out[0], r.out[1]);
      return static_cast<T>(low + (high - low) * v);
    } else {
      // Box-Muller; 1 - u keeps the log argument in (0, 1].
      const double u1 = uniform_double(r.out[0], r.out[1]), u2 = uniform_double(r.out[2], r.out[3]);
      const double z = math::sqrt(-2.0 * math::log(1.0 - u1)) * math::cos(6.283185307179586 * u2);
      return static_cast<T>(low + high * z);
    }
  }
};

// Dropout: element i is kept when the float32 uniform from word i % 4 of
// Philox counter offset + i / 4 is at least p. One counter serves four
// elements (Philox is most of dropout's work); bit j of the result is element
// 4 * group + j's.
PF_HOST_DEVICE uint32_t dropout_keeps4(uint64_t seed, uint64_t offset, int64_t group, double p) {
  const Philox4x32 r(seed, offset + static_cast<uint64_t>(group));
  uint32_t bits = 0;
  for (int j = 0; j < 4; ++j) bits |= static_cast<uint32_t>(static_cast<double>(uniform_float(r.out[j])) >= p) << j;
  return bits;
}

}  // namespace pyflame::kernels
