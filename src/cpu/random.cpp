// CPU random fills. Element i uses Philox block (offset + i / 2) for float
// draws, so the stream is independent of how the work is split.

#include <cmath>

#include "cpu/cpu.h"
#include "cpu/loops.h"
#include "kernels/philox.h"

namespace pyflame::cpu {

void fill_random(Tensor& out, RandomKind kind, double a, double b, uint64_t seed, uint64_t offset) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    parallel_for(out.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        kernels::Philox4x32 r(seed, offset + static_cast<uint64_t>(i));
        if (kind == RandomKind::Integer) {
          // [a, b): 64 random bits modulo the range; the bias is below 2^-32.
          uint64_t bits = (static_cast<uint64_t>(r.out[0]) << 32) | r.out[1];
          uint64_t range = static_cast<uint64_t>(b - a);
          p[i] = static_cast<T>(static_cast<int64_t>(a) + static_cast<int64_t>(bits % range));
          continue;
        }
        double u1 = kernels::uniform_double(r.out[0], r.out[1]);
        if (kind == RandomKind::Uniform) {
          // As many random bits as the type's mantissa holds, so rounding never reaches b.
          double v = u1;
          if constexpr (std::is_same_v<T, float>) v = kernels::uniform_float(r.out[0]);
          if constexpr (std::is_same_v<T, Half>) v = (r.out[0] >> 21) * (1.0 / 2048);
          if constexpr (std::is_same_v<T, BFloat16>) v = (r.out[0] >> 24) * (1.0 / 256);
          p[i] = static_cast<T>(a + (b - a) * v);
          continue;
        }
        // Box-Muller; 1 - u keeps the log argument in (0, 1].
        double u2 = kernels::uniform_double(r.out[2], r.out[3]);
        double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
        p[i] = static_cast<T>(a + b * z);
      }
    });
  });
}

}  // namespace pyflame::cpu
