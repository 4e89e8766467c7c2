// Autocast (design in pyflame/amp.h): per-thread state; what each op does
// under it is the op table's autocast column (ops.def).

#include "pyflame/amp.h"

#include "core/dispatch.h"
#include "core/thread_state.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame::amp {

namespace {

// apply()'s autocast hook: the op table's autocast column says what happens to the inputs.
void autocast_inputs(OpCall& call) {
  if (!call.outputs.empty()) return;  // in-place ops keep their tensor's dtype
  const DeviceType device = current_device().type;
  const std::optional<DType> low = thread_state().autocast[static_cast<int>(device)];
  if (!low) return;
  OpAutocast p = op_autocast(call.op);
  if (p == OpAutocast::gpu_fp32) p = device == DeviceType::CPU ? OpAutocast::keep : OpAutocast::fp32;
  if (p == OpAutocast::keep) return;
  for (Tensor& t : call.inputs) {
    if (!t.defined() || t.is_wrapped_number() || !is_floating(t.dtype())) continue;
    if (p == OpAutocast::lower && t.dtype() != *low) t = to(t, *low);
    if (p == OpAutocast::fp32 && (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16))
      t = to(t, DType::Float32);
  }
}

const bool registered = [] {
  apply_hooks().autocast_inputs = &autocast_inputs;
  return true;
}();

}  // namespace

std::optional<DType> autocast_dtype(DeviceType device) { return thread_state().autocast[static_cast<int>(device)]; }

void set_autocast(DeviceType device, std::optional<DType> dtype) {
  PF_CHECK(!dtype || *dtype == DType::Float16 || *dtype == DType::BFloat16, TypeError,
           "autocast: dtype must be float16 or bfloat16, got ", dtype_name(*dtype));
  ThreadState& ts = thread_state();
  ts.autocast[static_cast<int>(device)] = dtype;
  ts.autocast_active = false;
  for (const auto& d : ts.autocast) ts.autocast_active = ts.autocast_active || d.has_value();
}

}  // namespace pyflame::amp
