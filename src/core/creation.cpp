// Creation ops. Random tensors are ops of the table (rand, randn, randint),
// drawn by the kernel of the device they are made on; bernoulli and normal,
// whose probabilities or moments may be tensors, are composites of rand/randn
// and elementwise ops, drawing the range reserved when they were called (so a
// seed gives the same numbers whichever way they run); filled tensors are a
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

// a with the next shape_numel(a.shape) draws of the generator reserved for it.
RandomAttrs reserved(RandomAttrs a, Generator* generator) {
  PhiloxRange r = generator_or_default(generator).reserve(static_cast<uint64_t>(shape_numel(a.shape)));
  a.seed = r.seed, a.offset = r.offset;
  return a;
}

Tensor random(ir::OpType op, const Shape& shape, DType dtype, double low, double high, Generator* generator) {
  check_sizes(shape, op_name(op));
  RandomAttrs a;
  a.shape = shape, a.dtype = dtype, a.low = low, a.high = high;
  return apply_one(op, {}, reserved(std::move(a), generator));
}

// rand/randn of `shape` and `dtype` over the draws `range` reserved.
Tensor draw(ir::OpType op, const Shape& shape, DType dtype, double low, double high, const RandomAttrs& range) {
  RandomAttrs a = range;
  a.shape = shape, a.dtype = dtype, a.low = low, a.high = high;
  return apply_one(op, {}, std::move(a));
}

// ---- bernoulli: inputs (like, probs); the result has like's shape and dtype,
// 1 where a uniform draw is below the probability (probs broadcast, else attrs.p).

Inferred infer_bernoulli(OpCall& call) {
  const Tensor &like = call.inputs[0], &probs = call.inputs[1];
  if (probs.defined()) {
    PF_CHECK(is_floating(probs.dtype()), TypeError,
             "bernoulli: the probabilities must be a floating-point tensor, got ", probs.dtype());
    PF_CHECK(broadcast_shapes(probs.shape(), like.shape(), "bernoulli") == like.shape(), ValueError,
             "bernoulli: probabilities of shape ", probs.shape(), " do not broadcast to the result's shape ",
             like.shape());
  } else {
    const double p = call.attr<RandomAttrs>().p;
    PF_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli: p must be in [0, 1], got ", p);
  }
  return {current_device(), {InputPlan{}, InputPlan{}}, {{like.shape(), like.dtype()}}, {}};
}

// Uniforms in float64 for a float64 result, else float32 (as the draws of rand).
std::vector<Tensor> bernoulli_composite(const OpCall& call) {
  const Tensor &like = call.inputs[0], &probs = call.inputs[1];
  const auto& a = call.attr<RandomAttrs>();
  const DType uniform = like.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor u = draw(ir::OpType::rand, like.shape(), uniform, 0.0, 1.0, a);
  return {to(probs.defined() ? lt(u, probs) : lt(u, Scalar(a.p)), like.dtype())};
}

PF_REGISTER_COMPOSITE(bernoulli, &infer_bernoulli, &bernoulli_composite);

// ---- normal: inputs (mean, std), either undefined for the number attrs.low,
// attrs.high; infer writes the result's shape and dtype into the attributes.

// The tensors' broadcast shape, else `given` (normal of two numbers).
Shape normal_shape(const Tensor& mean, const Tensor& stddev, const Shape& given) {
  if (mean.defined() && stddev.defined()) return broadcast_shapes(mean.shape(), stddev.shape(), "normal");
  return mean.defined() ? mean.shape() : stddev.defined() ? stddev.shape() : given;
}

Inferred infer_normal(OpCall& call) {
  const Tensor &mean = call.inputs[0], &stddev = call.inputs[1];
  auto& a = std::get<RandomAttrs>(call.attrs);
  for (const Tensor* t : {&mean, &stddev})
    PF_CHECK(!t->defined() || is_floating(t->dtype()), TypeError,
             "normal expects floating-point mean and std tensors, got ", t->dtype());
  if (!stddev.defined()) PF_CHECK(a.high >= 0, ValueError, "normal expects std >= 0.0, but found std ", a.high);
  a.shape = normal_shape(mean, stddev, a.shape);
  if (mean.defined() || stddev.defined()) a.dtype = (mean.defined() ? mean : stddev).dtype();  // torch: mean's dtype
  else PF_CHECK(is_floating(a.dtype), TypeError, "normal: dtype must be floating point, got ", a.dtype);
  check_sizes(a.shape, "normal");
  return {current_device(), {InputPlan{}, InputPlan{}}, {{a.shape, a.dtype}}, {}};
}

// mean + std * N(0, 1), numbers among them in randn's own low/high; with a
// tensor among them, drawn and combined in float32 (float64 for float64) and
// rounded to the result's dtype once.
std::vector<Tensor> normal_composite(const OpCall& call) {
  const Tensor &mean = call.inputs[0], &stddev = call.inputs[1];
  const auto& a = call.attr<RandomAttrs>();
  const DType compute = a.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  if (!mean.defined() && !stddev.defined()) return {draw(ir::OpType::randn, a.shape, a.dtype, a.low, a.high, a)};
  Tensor r;
  if (stddev.defined()) {
    r = mul(draw(ir::OpType::randn, a.shape, compute, 0.0, 1.0, a), stddev);
    r = mean.defined() ? add(r, mean) : add(r, Scalar(a.low));
  } else {
    r = add(draw(ir::OpType::randn, a.shape, compute, 0.0, a.high, a), mean);
  }
  return {to(r, a.dtype)};
}

PF_REGISTER_COMPOSITE(normal, &infer_normal, &normal_composite);

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

Tensor bernoulli(const Tensor& like, const Tensor& probs, double p, Generator* generator) {
  RandomAttrs a;
  a.shape = like.shape(), a.p = p;
  return apply_one(ir::OpType::bernoulli, {like, probs}, reserved(std::move(a), generator));
}

Tensor normal(const Tensor& mean, const Tensor& stddev, double mean_value, double std_value, const Shape& shape,
              DType dtype, Generator* generator) {
  RandomAttrs a;
  a.shape = normal_shape(mean, stddev, shape), a.dtype = dtype, a.low = mean_value, a.high = std_value;
  check_sizes(a.shape, "normal");  // before the draws are reserved
  return apply_one(ir::OpType::normal, {mean, stddev}, reserved(std::move(a), generator));
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
