// Creation ops. Random tensors are ops of the table (rand, randn, randint),
// drawn by the kernel of the device they are made on; filled tensors are a
// fill op into a new tensor; ranges are computed on the host and copied to
// the current device.

#include <cmath>

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/generator.h"
#include "pyflame/nn_ops.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

void check_sizes(const Shape& shape, const char* op) {
  for (int64_t s : shape) PF_CHECK(s >= 0, ValueError, op, ": negative dimension in shape ", shape);
}

Inferred infer_random(OpCall& call) {
  const char* op = op_name(call.op);
  const auto& a = call.attr<RandomAttrs>();
  check_sizes(a.shape, op);
  if (call.op == ir::OpType::randint) {
    PF_CHECK(a.low < a.high, ValueError, "randint: low (", a.low, ") must be less than high (", a.high, ")");
    PF_CHECK(a.dtype != DType::Bool || (a.low >= 0 && a.high <= 2), ValueError,
             "randint: bool values need 0 <= low < high <= 2");
  } else {
    PF_CHECK(is_floating(a.dtype), TypeError, op, ": dtype must be floating point, got ", a.dtype);
  }
  return {current_device(), {}, {{a.shape, a.dtype}}, {}};
}

PF_REGISTER_INFER(rand, &infer_random);
PF_REGISTER_INFER(randn, &infer_random);
PF_REGISTER_INFER(randint, &infer_random);

Tensor random(ir::OpType op, const Shape& shape, DType dtype, double low, double high, Generator* generator) {
  check_sizes(shape, op_name(op));
  RandomAttrs a;
  a.shape = shape, a.dtype = dtype, a.low = low, a.high = high;
  PhiloxRange r = generator_or_default(generator).reserve(static_cast<uint64_t>(shape_numel(shape)));
  a.seed = r.seed, a.offset = r.offset;
  return apply_one(op, {}, std::move(a));
}

Tensor filled(const Shape& shape, DType dtype, Scalar value) {
  Tensor t = Tensor::empty(shape, dtype);
  return fill_(t, value);
}

}  // namespace

void Generator::manual_seed(uint64_t seed) { set_state(seed, 0); }

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

void Generator::set_state(uint64_t seed, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = offset;
}

PhiloxRange Generator::reserve(uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  PhiloxRange r{seed_, offset_};
  offset_ += count;
  return r;
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

Tensor rand(const Shape& shape, DType dtype, Generator* generator) {
  return random(ir::OpType::rand, shape, dtype, 0.0, 1.0, generator);
}

Tensor randn(const Shape& shape, DType dtype, Generator* generator) {
  return random(ir::OpType::randn, shape, dtype, 0.0, 1.0, generator);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* generator) {
  return random(ir::OpType::randint, shape, dtype, static_cast<double>(low), static_cast<double>(high), generator);
}

Tensor zeros(const Shape& shape, DType dtype) { return filled(shape, dtype, Scalar(int64_t{0})); }
Tensor ones(const Shape& shape, DType dtype) { return filled(shape, dtype, Scalar(int64_t{1})); }
Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype) {
  return filled(shape, dtype.value_or(value.dtype()), value);
}
// On x's device and placed as x, as PyTorch makes them on the tensor's device.
Tensor full_like(const Tensor& x, Scalar value, std::optional<DType> dtype) {
  Tensor t = Tensor::empty(x.shape(), dtype.value_or(x.dtype()), x.device()).set_placed(x.is_placed());
  return fill_(t, value);
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
  // Integer ranges on a GPU are counted there (a cumulative sum of the steps: exact), not filled on
  // the host and copied: ops that number positions (cummax, unfold's gradient) make no host copy.
  if (!any_float && !current_device().is_cpu() && n > 0)
    return to(add(cumsum(filled({n}, DType::Int64, step), 0), Scalar(start.i - step.i)), dt);
  Tensor t = Tensor::empty({n}, dt, Device::cpu());
  visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      if (any_float) p[i] = static_cast<T>(start.f + static_cast<double>(i) * step.f);
      else p[i] = static_cast<T>(start.i + i * step.i);
    }
  });
  return to(t, current_device());
}

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  PF_CHECK(steps >= 0, ValueError, "linspace: number of steps must be non-negative, got ", steps);
  Tensor t = Tensor::empty({steps}, dtype, Device::cpu());
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    // Symmetric in the two halves, as PyTorch: the last value is exactly `end`
    // (one step gives `start`).
    for (int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(i < steps / 2 || steps == 1 ? start + step * static_cast<double>(i)
                                                        : end - step * static_cast<double>(steps - 1 - i));
  });
  return to(t, current_device());
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, DType dtype) {
  int64_t m = m_opt.value_or(n);
  PF_CHECK(n >= 0 && m >= 0, ValueError, "eye: sizes must be non-negative, got ", n, " x ", m);
  Tensor t = Tensor::empty({n, m}, dtype, Device::cpu());
  t.fill_(Scalar(int64_t{0}));
  int64_t k = std::min(n, m);
  if (k > 0) t.as_strided({k}, {m + 1}, 0).fill_(Scalar(int64_t{1}));
  return to(t, current_device());
}

}  // namespace pyflame
