#include "core/dispatch.h"

#include "core/derivative.h"
#include "pyflame/error.h"

namespace pyflame {

namespace {

struct OpEntry {
  const char* name;
  OpFamily family;
  size_t attrs_index;  // the table's attrs struct, as an index into OpAttrs
  OpGrad grad;
  OpAutocast autocast;
};

template <class A> constexpr size_t attrs_index_of() {
  size_t index = 0;
  bool found = false;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((!found && std::is_same_v<A, std::variant_alternative_t<I, OpAttrs>> ? (index = I, found = true) : false), ...);
  }(std::make_index_sequence<std::variant_size_v<OpAttrs>>());
  return index;
}

// The grad column: a derivative written in the table (dg/dx/dy/dxy) or a function of its own makes the op differentiable.
#define PF_OP_GRAD_grad OpGrad::grad
#define PF_OP_GRAD_composite OpGrad::composite
#define PF_OP_GRAD_nograd OpGrad::nograd
#define PF_OP_GRAD_dg(...) OpGrad::grad
#define PF_OP_GRAD_dx(...) OpGrad::grad
#define PF_OP_GRAD_dy(...) OpGrad::grad
#define PF_OP_GRAD_dxy(...) OpGrad::grad
constexpr OpEntry kOps[] = {
#define PF_OP(name, family, functor, attrs, grad, autocast) \
  {#name, OpFamily::family, attrs_index_of<attrs>(), PF_OP_GRAD_##grad, OpAutocast::autocast},
#include "pyflame/ops.def"
#undef PF_OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps, "op table and OpType disagree");
constexpr const char* kFamilyNames[] = {"UNARY",   "UNARY_FLOAT", "UNARY_BOOL", "UNARY_INT", "BINARY",
                                        "BINARY_FLOAT", "BINARY_INT", "COMPARE", "WHERE",   "CLAMP",
                                        "REDUCE",  "ARG_REDUCE",  "MATMUL",     "SOFTMAX",   "VIEW",
                                        "RANDOM",  "COPY",        "CUSTOM"};

struct Registry {
  InferFn infer[kNumOps] = {};
  KernelFn kernels[kNumOps][kNumDeviceTypes] = {};
  CompositeFn composites[kNumOps] = {};
  autograd::Derivative derivatives[kNumOps] = {};
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const char* op_name(ir::OpType op) { return kOps[static_cast<int>(op)].name; }
OpFamily op_family(ir::OpType op) { return kOps[static_cast<int>(op)].family; }
OpGrad op_grad(ir::OpType op) { return kOps[static_cast<int>(op)].grad; }
OpAutocast op_autocast(ir::OpType op) { return kOps[static_cast<int>(op)].autocast; }
const char* family_name(OpFamily f) { return kFamilyNames[static_cast<int>(f)]; }
size_t table_attrs_index(ir::OpType op) { return kOps[static_cast<int>(op)].attrs_index; }
ir::OpType op_from_name(const std::string& name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOps[i].name) return static_cast<ir::OpType>(i);
  throw ValueError("unknown op '" + name + "'");
}

void register_infer(ir::OpType op, InferFn fn) { registry().infer[static_cast<int>(op)] = fn; }
void register_kernel(ir::OpType op, DeviceType device, KernelFn fn) {
  registry().kernels[static_cast<int>(op)][static_cast<int>(device)] = fn;
}
void register_composite(ir::OpType op, CompositeFn fn) { registry().composites[static_cast<int>(op)] = fn; }
KernelFn find_kernel(ir::OpType op, DeviceType device) {
  return registry().kernels[static_cast<int>(op)][static_cast<int>(device)];
}
InferFn find_infer(ir::OpType op) { return registry().infer[static_cast<int>(op)]; }
CompositeFn find_composite(ir::OpType op) { return registry().composites[static_cast<int>(op)]; }

void autograd::register_derivative(ir::OpType op, DerivativeFn fn, uint8_t saves) {
  registry().derivatives[static_cast<int>(op)] = {fn, saves};
}
const autograd::Derivative* autograd::find_derivative(ir::OpType op) {
  const Derivative& d = registry().derivatives[static_cast<int>(op)];
  return d.fn ? &d : nullptr;
}

bool has_kernel(ir::OpType op, Device device) { return find_kernel(op, device.type) != nullptr; }
bool is_supported(ir::OpType op, Device device) {
  return has_kernel(op, device) || find_composite(op) || op_family(op) == OpFamily::VIEW;
}

void run_kernel(OpCall& call, Device device) {
  KernelFn fn = find_kernel(call.op, device.type);
  PF_CHECK(fn, NotSupportedError, "op '", op_name(call.op), "' has no kernel for device '", to_string(device),
           "' (see docs/ops.md for what each device supports)");
  bool nothing_to_compute = !call.outputs.empty();
  for (const Tensor& o : call.outputs) nothing_to_compute = nothing_to_compute && o.defined() && o.numel() == 0;
  if (!nothing_to_compute) fn(call);
}

}  // namespace pyflame
