// Creation ops. Values are produced on the CPU (random draws, ranges) or by
// the device's fill kernel, then placed on the current device.

#include <cmath>
#include <mutex>

#include "core/dispatch.h"
#include "core/random_state.h"
#include "cpu/cpu.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {
struct Generator {
  std::mutex mutex;
  uint64_t seed = 67280421310721ULL;  // PyTorch's default seed: runs are reproducible by default
  uint64_t offset = 0;
} g_generator;

Tensor random_tensor(const Shape& shape, DType dtype, cpu::RandomKind kind, double a, double b) {
  Tensor t = Tensor::empty(shape, dtype, Device::cpu());
  PhiloxRange r = reserve_random(static_cast<uint64_t>(t.numel()));
  cpu::fill_random(t, kind, a, b, r.seed, r.offset);
  return t.to(current_device());
}

Tensor filled(const Shape& shape, DType dtype, Scalar value) {
  Tensor t = Tensor::empty(shape, dtype);
  t.fill_(value);
  return t;
}
}  // namespace

PhiloxRange reserve_random(uint64_t count) {
  std::lock_guard<std::mutex> lock(g_generator.mutex);
  PhiloxRange r{g_generator.seed, g_generator.offset};
  g_generator.offset += count;
  return r;
}

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_generator.mutex);
  g_generator.seed = seed;
  g_generator.offset = 0;
}

Tensor rand(const Shape& shape, DType dtype) {
  PF_CHECK(is_floating(dtype), TypeError, "rand: dtype must be floating point, got ", dtype);
  return random_tensor(shape, dtype, cpu::RandomKind::Uniform, 0.0, 1.0);
}

Tensor randn(const Shape& shape, DType dtype) {
  PF_CHECK(is_floating(dtype), TypeError, "randn: dtype must be floating point, got ", dtype);
  return random_tensor(shape, dtype, cpu::RandomKind::Normal, 0.0, 1.0);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  PF_CHECK(low < high, ValueError, "randint: low (", low, ") must be less than high (", high, ")");
  PF_CHECK(dtype != DType::Bool || (low >= 0 && high <= 2), ValueError, "randint: bool values need 0 <= low < high <= 2");
  return random_tensor(shape, dtype, cpu::RandomKind::Integer, static_cast<double>(low), static_cast<double>(high));
}

Tensor zeros(const Shape& shape, DType dtype) { return filled(shape, dtype, Scalar(int64_t{0})); }
Tensor ones(const Shape& shape, DType dtype) { return filled(shape, dtype, Scalar(int64_t{1})); }
Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype) {
  return filled(shape, dtype.value_or(value.dtype()), value);
}
Tensor full_like(const Tensor& x, Scalar value, std::optional<DType> dtype) {
  return filled(x.shape(), dtype.value_or(x.dtype()), value);
}
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype) { return full_like(x, Scalar(int64_t{0}), dtype); }
Tensor ones_like(const Tensor& x, std::optional<DType> dtype) { return full_like(x, Scalar(int64_t{1}), dtype); }

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype) {
  bool any_float = start.kind == Scalar::Kind::Float || end.kind == Scalar::Kind::Float || step.kind == Scalar::Kind::Float;
  DType dt = dtype.value_or(any_float ? default_float() : DType::Int64);
  PF_CHECK(step.f != 0, ValueError, "arange: step must be nonzero");
  PF_CHECK(std::isfinite(start.f) && std::isfinite(end.f), ValueError, "arange: start and end must be finite");
  PF_CHECK((end.f - start.f) * step.f >= 0, ValueError, "arange: the range from ", start.f, " to ", end.f,
           " is inconsistent with the sign of step ", step.f);
  int64_t n = static_cast<int64_t>(std::ceil((end.f - start.f) / step.f));
  Tensor t = Tensor::empty({n}, dt, Device::cpu());
  visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      if (any_float) p[i] = static_cast<T>(start.f + static_cast<double>(i) * step.f);
      else p[i] = static_cast<T>(start.i + i * step.i);
    }
  });
  return t.to(current_device());
}

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  PF_CHECK(steps >= 0, ValueError, "linspace: number of steps must be non-negative, got ", steps);
  Tensor t = Tensor::empty({steps}, dtype, Device::cpu());
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    // Symmetric in the two halves, as PyTorch: the last value is exactly `end`.
    for (int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(i < steps / 2 ? start + step * static_cast<double>(i)
                                          : end - step * static_cast<double>(steps - 1 - i));
  });
  return t.to(current_device());
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, DType dtype) {
  int64_t m = m_opt.value_or(n);
  PF_CHECK(n >= 0 && m >= 0, ValueError, "eye: sizes must be non-negative, got ", n, " x ", m);
  Tensor t = Tensor::empty({n, m}, dtype, Device::cpu());
  t.fill_(Scalar(int64_t{0}));
  int64_t k = std::min(n, m);
  if (k > 0) t.as_strided({k}, {m + 1}, 0).fill_(Scalar(int64_t{1}));
  return t.to(current_device());
}

}  // namespace pyflame
