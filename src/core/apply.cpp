// apply(): the one entry point of every public op (see pyflame/ir/op_call.h
// and core/dispatch.h for the design). This file is the eager executor: it
// runs the op's infer function, then moves and converts the inputs as the
// plan says, allocates the outputs (or checks and uses the ones given for an
// in-place op) and calls the device's kernel, or the op's composite where the
// device has no kernel.

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/op_utils.h"
#include "core/thread_state.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

// ---------------------------------------------------------------- attributes as values

void hash_combine(size_t& seed, size_t h) { seed ^= h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

struct AttrHasher {
  size_t h = 0;
  void add(int64_t v) { hash_combine(h, std::hash<int64_t>()(v)); }
  void add(uint64_t v) { hash_combine(h, std::hash<uint64_t>()(v)); }
  void add(bool v) { add(static_cast<int64_t>(v)); }
  void add(double v) { hash_combine(h, std::isnan(v) ? 0x7ff8ULL : std::hash<double>()(v == 0 ? 0.0 : v)); }
  void add(DType v) { add(static_cast<int64_t>(v)); }
  void add(Reduction v) { add(static_cast<int64_t>(v)); }
  void add(const Scalar& s) {
    add(static_cast<int64_t>(s.kind));
    if (s.kind == Scalar::Kind::Float) add(s.f);
    else add(s.i);
  }
  template <class T> void add(const std::vector<T>& v) {
    add(static_cast<int64_t>(v.size()));
    for (const T& x : v) add(x);
  }
  template <class T> void add(const std::optional<T>& v) {
    add(v.has_value());
    if (v) add(*v);
  }
  void add(ir::OpType v) { add(static_cast<int64_t>(v)); }
  void add(const FusedStep& s) { s.fields(*this); }
  template <class T> void operator()(const char*, const T& v) { add(v); }
};

std::string piece(int64_t v) { return std::to_string(v); }
std::string piece(uint64_t v) { return std::to_string(v); }
std::string piece(bool v) { return v ? "true" : "false"; }
std::string piece(double v) {
  std::string s = std::to_string(v);  // fixed 6 decimals; trim zeros so 0.5 prints as 0.5
  if (s.find('.') != std::string::npos && s.find_first_of("en") == std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}
std::string piece(DType v) { return dtype_name(v); }
std::string piece(Reduction v) { return reduction_name(v); }
std::string piece(ir::OpType v) { return op_name(v); }
std::string piece(const Scalar& s) {
  switch (s.kind) {
    case Scalar::Kind::Bool: return s.i ? "true" : "false";
    case Scalar::Kind::Int: return std::to_string(s.i);
    case Scalar::Kind::Float: break;
  }
  return piece(s.f);
}
template <class T> std::string piece(const std::vector<T>& v);
// "mul(in0, in1)", "leaky_relu(%0; [0.1])": a fused step over the call's inputs and earlier steps.
std::string piece(const FusedStep& s) {
  std::string r = op_name(s.op);
  r += '(';
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (i) r += ", ";
    r += s.args[i] >= 0 ? "in" : "%";
    r += std::to_string(s.args[i] >= 0 ? s.args[i] : -1 - s.args[i]);
  }
  if (!s.params.empty()) r += "; " + piece(s.params);
  return r + ')';
}
template <class T> std::string piece(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + piece(v[i]);
  return s + "]";
}
template <class T> std::string piece(const std::optional<T>& v) { return v ? piece(*v) : "None"; }

struct AttrPrinter {
  std::string s;
  template <class T> void operator()(const char* name, const T& v) {
    if (!s.empty()) s += ", ";
    s += std::string(name) + "=" + piece(v);
  }
};

#define PF_ATTRS_NAME(A) , #A
constexpr const char* kAttrsNames[] = {"NoAttrs" PF_FOR_EACH_ATTRS(PF_ATTRS_NAME)};
#undef PF_ATTRS_NAME
static_assert(std::size(kAttrsNames) == std::variant_size_v<OpAttrs>);

std::string describe_input(const Tensor& t) {
  if (!t.defined()) return "-";
  std::string s = std::string(dtype_name(t.dtype())) + detail::to_piece(t.shape());
  if (t.is_wrapped_number()) return s + " number";
  return s + " " + pyflame::to_string(t.device());
}

// ---------------------------------------------------------------- execution

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

// Whether the kernel may write `out` while reading `in`: no shared memory, or
// exactly the same elements in the same order (x.add_(y) reading x).
bool safe_alias(const Tensor& out, const Tensor& in) {
  if (!in.defined() || !out.same_storage(in)) return true;
  return in.offset() == out.offset() && in.shape() == out.shape() && in.strides() == out.strides() &&
         in.dtype() == out.dtype();
}

// Whether the kernel may write every output while reading every input. A
// multi-tensor step has hundreds of each: there the inputs are sorted by
// storage, so each output meets only those that share its memory.
bool safe_to_write(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  if (outputs.size() * inputs.size() <= 64) {
    for (const Tensor& out : outputs)
      for (const Tensor& in : inputs)
        if (!safe_alias(out, in)) return false;
    return true;
  }
  std::vector<const Tensor*> by_storage;
  for (const Tensor& in : inputs)
    if (in.defined()) by_storage.push_back(&in);
  auto storage_less = [](const Tensor* a, const Tensor* b) { return a->storage() < b->storage(); };
  std::sort(by_storage.begin(), by_storage.end(), storage_less);
  for (const Tensor& out : outputs)
    for (auto it = std::lower_bound(by_storage.begin(), by_storage.end(), &out, storage_less);
         it != by_storage.end() && (*it)->same_storage(out); ++it)
      if (!safe_alias(out, **it)) return false;
  return true;
}

// An in-place result must land in distinct memory: writing a tensor whose
// elements share memory (an expanded view) would depend on the order of the writes.
void check_writable(const Tensor& out, ir::OpType op) {
  for (int64_t d = 0; d < out.dim(); ++d)
    PF_CHECK(out.strides()[d] != 0 || out.shape()[d] <= 1, ValueError, op_name(op),
             "_: the tensor has elements that share memory (an expanded view, shape ", out.shape(), ", strides ",
             out.strides(), "); clone() it first");
}

// In place, so an input the plan leaves alone is not copied (Tensor copies are
// a measurable part of a small op's cost).
void prepare(Tensor& r, const InputPlan& p, Device dev, ir::OpType op) {
  if (!p.host_scalar && !p.transfer && r.device() != dev) {
    note_implicit_copy(r, dev, op_name(op));
    r = r.to(dev);
  }
  if (p.dtype && r.dtype() != *p.dtype) r = r.to(*p.dtype);
  if (p.reshape && r.shape() != *p.reshape) r = r.reshape(*p.reshape);
  if (p.expand && r.shape() != *p.expand) r = r.expand(*p.expand);
  if (p.contiguous && !r.is_contiguous()) r = r.contiguous();
}

const Shape& result_shape(const OutputPlan& p) { return p.result ? *p.result : p.shape; }

// Elementwise and copy kernels write through the output's strides; the
// others write their results contiguously.
bool writes_through_strides(ir::OpType op) {
  const OpFamily f = op_family(op);
  return f <= OpFamily::CLAMP || f == OpFamily::COPY;
}

// Checks the outputs given to an in-place call against the plan; true when
// the kernel can write into them directly (else it writes fresh outputs that
// are then copied in).
bool check_given_outputs(const OpCall& call, const std::vector<Tensor>& given, const Inferred& inf) {
  PF_CHECK(given.size() == inf.outputs.size(), ValueError, op_name(call.op), "_: expected ", inf.outputs.size(),
           " output tensor(s), got ", given.size());
  bool direct = true;
  for (size_t i = 0; i < given.size(); ++i) {
    const Tensor& out = given[i];
    const OutputPlan& p = inf.outputs[i];
    PF_CHECK(out.shape() == result_shape(p), ValueError, op_name(call.op), "_: the result's shape ", result_shape(p),
             " does not match the in-place tensor's shape ", out.shape());
    PF_CHECK(can_cast(p.dtype, out.dtype()), TypeError, op_name(call.op), "_: the result type ", p.dtype,
             " cannot be stored in a tensor of type ", out.dtype());
    check_writable(out, call.op);
    direct = direct && out.dtype() == p.dtype && out.device() == inf.device && !p.result &&
             (out.is_contiguous() || writes_through_strides(call.op));
  }
  return direct && safe_to_write(given, call.inputs);
}

std::vector<Tensor> run_composite(OpCall& call, std::vector<Tensor> given) {
  CompositeFn composite = find_composite(call.op);
  PF_CHECK(composite, NotSupportedError, op_name(call.op), ": no kernel for device '", to_string(current_device()),
           "' (see docs/ops.md for what each device supports)");
  std::vector<Tensor> results = composite(call);
  if (given.empty()) return results;
  // An in-place call writes its results with the copy op, which autograd records
  // where it recorded the decomposition: the written tensor's history goes through it.
  for (size_t i = 0; i < given.size(); ++i) apply({ir::OpType::copy, {results[i]}, CopyAttrs{}, {given[i]}});
  return given;
}

// decompose: run the op's composite even where the device has a kernel.
std::vector<Tensor> execute(OpCall& call, const Inferred& inf, bool decompose) {
  const Device dev = inf.device;
  std::vector<Tensor> given = std::move(call.outputs);
  call.outputs.clear();
  const bool is_view = op_family(call.op) == OpFamily::VIEW;
  KernelFn kernel = decompose ? nullptr : find_kernel(call.op, dev.type);
  if (!kernel && !is_view) {
    if (!given.empty()) check_given_outputs(call, given, inf);  // shapes and dtypes, as for a kernel
    return run_composite(call, std::move(given));
  }

  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (call.inputs[i].defined()) prepare(call.inputs[i], inf.inputs[i], dev, call.op);
  const bool direct = !given.empty() && check_given_outputs(call, given, inf);
  call.outputs.resize(inf.outputs.size());
  for (size_t i = 0; i < inf.outputs.size(); ++i) {
    const OutputPlan& p = inf.outputs[i];
    if (direct) call.outputs[i] = given[i];
    else if (!p.view) call.outputs[i] = Tensor::empty(p.shape, p.dtype, dev);
  }
  if (inf.constant) {
    for (Tensor& o : call.outputs) o.fill_(*inf.constant);
  } else if (is_view) {
    kernel(call);
    // A view that is its input unchanged (squeezing no dim) is still a new
    // tensor: it must not share the input's autograd state.
    for (Tensor& o : call.outputs)
      if (o.autograd_meta()) o = o.detach();
  } else {
    run_kernel(call, dev);
  }
  if (direct) return given;
  for (size_t i = 0; i < call.outputs.size(); ++i)
    if (inf.outputs[i].result) call.outputs[i] = call.outputs[i].view(*inf.outputs[i].result);
  if (given.empty()) return std::move(call.outputs);
  for (size_t i = 0; i < given.size(); ++i) given[i].copy_(call.outputs[i]);
  return given;
}

}  // namespace

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

namespace autograd {
bool is_grad_enabled() { return thread_state().grad_enabled; }
void set_grad_enabled(bool enabled) { thread_state().grad_enabled = enabled; }
}  // namespace autograd

PlacementScope::PlacementScope(const char* op, const Tensor* inputs, size_t count, std::optional<Device> written)
    : previous_(thread_state().device) {
  bool movable = false;  // the deciding tensor is a 0-d CPU tensor
  if (written) device_ = written, placed_ = true;
  for (size_t i = 0; i < count; ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.is_placed() || t.is_wrapped_number()) continue;
    const bool zero_dim_cpu = t.dim() == 0 && t.device().is_cpu();
    if (!device_) {
      device_ = t.device(), placed_ = true, movable = zero_dim_cpu;
    } else if (t.device() != *device_ && !zero_dim_cpu) {
      PF_CHECK(movable, DeviceError, op, ": expected all tensors on one device, but found '", to_string(*device_),
               "' and '", to_string(t.device()), "'; move them with .to(device) (tensors put on a device with "
               "device= or .to() stay there)");
      device_ = t.device(), movable = false;
    }
  }
  if (device_) thread_state().device = device_;
}

PlacementScope::~PlacementScope() { thread_state().device = previous_; }

Device PlacementScope::device() const { return device_ ? *device_ : current_device(); }

Tensor PlacementScope::result(Tensor r) const {
  if (placed_ && r.defined()) r.set_placed(true);
  return r;
}

void PlacementScope::place(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) const {
  if (!placed_) return;
  for (Tensor& o : outputs) {
    if (!o.defined() || o.is_placed()) continue;
    // A view, or an input a composite hands back, is placed as the input it shows.
    const Tensor* source = nullptr;
    for (const Tensor& t : inputs)
      if (!source && t.defined() && t.same_storage(o)) source = &t;
    o.set_placed(source ? source->is_placed() : true);
  }
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None: return "none";
    case Reduction::Sum: return "sum";
    case Reduction::Mean: break;
  }
  return "mean";
}

size_t hash_attrs(const OpAttrs& attrs) {
  AttrHasher hasher;
  hasher.add(static_cast<int64_t>(attrs.index()));
  std::visit([&](const auto& a) { a.fields(hasher); }, attrs);
  return hasher.h;
}

std::string attrs_to_string(const OpAttrs& attrs) {
  AttrPrinter printer;
  std::visit([&](const auto& a) { a.fields(printer); }, attrs);
  return printer.s;
}

const char* attrs_name(const OpAttrs& attrs) {
  return kAttrsNames[attrs.index()];
}

bool OpCall::operator==(const OpCall& o) const {
  if (op != o.op || attrs != o.attrs || inputs.size() != o.inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &a = inputs[i], &b = o.inputs[i];
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) continue;
    if (a.shape() != b.shape() || a.strides() != b.strides() || a.dtype() != b.dtype() || a.device() != b.device() ||
        a.is_wrapped_number() != b.is_wrapped_number() || a.is_placed() != b.is_placed())
      return false;
  }
  return true;
}

size_t OpCall::hash() const {
  size_t h = hash_attrs(attrs);
  hash_combine(h, static_cast<size_t>(op));
  for (const Tensor& t : inputs) {
    AttrHasher meta;
    meta.add(t.defined());
    if (t.defined()) {
      meta.add(t.shape()), meta.add(t.strides()), meta.add(t.dtype()), meta.add(t.is_wrapped_number());
      meta.add(t.is_placed());
      meta.add(static_cast<int64_t>(t.device().type) * 65536 + t.device().index);
    }
    hash_combine(h, meta.h);
  }
  return h;
}

std::string OpCall::to_string() const {
  std::string s = std::string(op_name(op)) + "(";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + describe_input(inputs[i]);
  std::string a = attrs_to_string(attrs);
  if (!a.empty()) s += (inputs.empty() ? "" : "; ") + a;
  return s + ")";
}

std::atomic<int> tracing_threads{0};
std::atomic<bool> profiler_active{false};

ApplyHooks& apply_hooks() {
  static ApplyHooks hooks;
  return hooks;
}

namespace {

// In a backward pass that records its own graph (create_graph), a derivative's op without a
// derivative of its own (a fused backward pass) would make a floating result that autograd treats as
// a constant: the gradient of the gradient would silently lack its part. Refused instead.
void check_no_second_order(const OpCall& call, const Inferred& inf) {
  bool floating = false, carries = false;
  for (const OutputPlan& p : inf.outputs) floating = floating || is_floating(p.dtype);
  for (const Tensor& t : call.inputs) carries = carries || (t.defined() && t.requires_grad());
  PF_CHECK(!(floating && carries), NotSupportedError, op_name(call.op),
           ": a gradient of a gradient (create_graph=True) would go through this op, which has no derivative of "
           "its own (docs/autograd.md lists the ops whose derivatives are differentiable)");
}

// The call itself: infer, autocast and autograd's hooks, execution.
std::vector<Tensor> run_call(OpCall call, ThreadState& state) {
  InferFn infer = find_infer(call.op);
  PF_CHECK(infer, NotSupportedError, op_name(call.op), ": the op has no infer function (a library bug)");
  PF_CHECK(call.attrs.index() == table_attrs_index(call.op), TypeError, op_name(call.op), ": called with ",
           attrs_name(call.attrs), " but the op table gives it other attributes (a caller's bug)");
  const ThreadState& mode = state;
  const bool copy = op_family(call.op) == OpFamily::COPY;  // reads its source wherever it lives
  const PlacementScope placement(op_name(call.op), call.inputs.data(), copy ? 0 : call.inputs.size(),
                                 call.outputs.empty() ? std::nullopt : std::optional<Device>(call.outputs[0].device()));
  const ApplyHooks& hooks = apply_hooks();
  if (mode.autocast_active) hooks.autocast_inputs(call);
  Inferred inf = infer(call);
  if (mode.create_graph && mode.grad_enabled && op_grad(call.op) == OpGrad::nograd) check_no_second_order(call, inf);
  const bool in_place = !call.outputs.empty();
  // A composite op that autograd must see through runs its decomposition in grad mode.
  const bool decompose =
      mode.grad_enabled && op_grad(call.op) == OpGrad::composite && hooks.should_record(call);
  auto run = [&]() {
    std::vector<Tensor> outputs = execute(call, inf, decompose);
    if (in_place)
      for (Tensor& o : outputs) o.storage()->bump_version();
    else
      placement.place(outputs, call.inputs);
    return outputs;
  };
  if (!mode.grad_enabled || decompose) return run();
  if (hooks.should_record(call)) {
    // Inputs the kernel reads as contiguous copies are copied before the call is
    // recorded (the copy recorded too), so a derivative's saved inputs are the
    // copies, not views it would copy again.
    if (!in_place)
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        Tensor& t = call.inputs[i];
        const InputPlan& p = inf.inputs[i];
        if (p.contiguous && t.defined() && !t.is_contiguous() && t.device() == inf.device && !p.dtype)
          t = contiguous(t);
      }
    return hooks.record(call, [](void* ctx) { return (*static_cast<decltype(run)*>(ctx))(); }, &run);
  }
  if (in_place || call.inputs.empty() || !call.inputs[0].autograd_meta() || op_family(call.op) != OpFamily::VIEW)
    return run();
  const Tensor input = call.inputs[0];
  std::vector<Tensor> outputs = run();
  for (Tensor& o : outputs) hooks.link_view(input, o);
  return outputs;
}

}  // namespace

std::vector<Tensor> apply(OpCall call) {
  ThreadState& state = thread_state();
  if (state.tracing && state.apply_depth == 0 && apply_hooks().trace) {
    // The calls this one makes (a composite's parts, autocast's casts) are not traced.
    const OpCall traced{call.op, call.inputs, call.attrs, call.outputs};
    ++state.apply_depth;
    struct DepthGuard {
      int& depth;
      ~DepthGuard() { --depth; }
    } guard{state.apply_depth};
    std::vector<Tensor> outputs = apply(std::move(call));
    apply_hooks().trace(traced, outputs);
    return outputs;
  }
  if (profiler_active.load(std::memory_order_relaxed) && apply_hooks().profile) {
    auto run = [&]() { return run_call(std::move(call), state); };
    return apply_hooks().profile(call, [](void* ctx) { return (*static_cast<decltype(run)*>(ctx))(); }, &run);
  }
  return run_call(std::move(call), state);
}

}  // namespace pyflame
