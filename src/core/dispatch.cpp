#include "core/dispatch.h"

#include "pyflame/error.h"

namespace pyflame {

namespace {
KernelFn& slot(ir::OpType op, DeviceType device) {
  static KernelFn table[kNumOps][kNumDeviceTypes] = {};
  return table[static_cast<int>(op)][static_cast<int>(device)];
}
}  // namespace

void register_kernel(ir::OpType op, DeviceType device, KernelFn fn) { slot(op, device) = fn; }
KernelFn find_kernel(ir::OpType op, DeviceType device) { return slot(op, device); }

void run_kernel(OpCall& call, Device device) {
  KernelFn fn = find_kernel(call.op, device.type);
  PF_CHECK(fn, NotSupportedError, "op '", op_name(call.op), "' has no kernel for device '",
           to_string(device), "' (see docs/ops.md for what each device supports)");
  if (call.out.defined() && call.out.numel() == 0) return;  // nothing to compute
  fn(call);
}

namespace {
struct OpEntry { const char* name; OpFamily family; };
constexpr OpEntry kOps[] = {
#define PF_OP(name, family, functor) {#name, OpFamily::family},
#include "pyflame/ops.def"
#undef PF_OP
    {"copy", OpFamily::COPY},
    {"fill", OpFamily::COPY},
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps, "op table and OpType disagree");
constexpr const char* kFamilyNames[] = {"UNARY", "UNARY_FLOAT", "UNARY_BOOL", "BINARY", "BINARY_FLOAT",
                                        "COMPARE", "WHERE", "CLAMP", "REDUCE", "ARG_REDUCE", "MATMUL",
                                        "SOFTMAX", "VIEW", "CUSTOM", "COPY"};
}  // namespace

const char* op_name(ir::OpType op) { return kOps[static_cast<int>(op)].name; }
OpFamily op_family(ir::OpType op) { return kOps[static_cast<int>(op)].family; }
const char* family_name(OpFamily f) { return kFamilyNames[static_cast<int>(f)]; }
ir::OpType op_from_name(const std::string& name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOps[i].name) return static_cast<ir::OpType>(i);
  throw ValueError("unknown op '" + name + "'");
}

}  // namespace pyflame
