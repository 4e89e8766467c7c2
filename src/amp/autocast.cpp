// Autocast (design in pyflame/amp.h): per-thread state and the op policy.

#include "pyflame/amp.h"

#include "core/thread_state.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame::amp {

namespace {


enum class Policy { Keep, Lower, Float32 };

// PyTorch's autocast lists, for the ops of the table.
Policy policy(ir::OpType op) {
  using ir::OpType;
  switch (op) {
    case OpType::matmul:
    case OpType::batch_matmul:
    case OpType::linear:
    case OpType::lstm_sequence:
    case OpType::flash_attention:
    case OpType::conv2d:
    case OpType::conv3d:
    case OpType::conv_transpose2d: return Policy::Lower;
    case OpType::exp:
    case OpType::log:
    case OpType::log1p:
    case OpType::log2:
    case OpType::log10:
    case OpType::expm1:
    case OpType::tan:
    case OpType::asin:
    case OpType::acos:
    case OpType::sinh:
    case OpType::cosh:
    case OpType::erfinv:
    case OpType::reciprocal:
    case OpType::rsqrt:
    case OpType::pow:
    case OpType::softplus:
    case OpType::sum:
    case OpType::prod:
    case OpType::cumsum:
    case OpType::cumprod:
    case OpType::var:
    case OpType::std:
    case OpType::softmax:
    case OpType::log_softmax:
    case OpType::layer_norm:
    case OpType::group_norm:
    case OpType::rms_norm:
    case OpType::nll_loss:
    case OpType::cross_entropy: return Policy::Float32;
    default: break;
  }
  return Policy::Keep;
}

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

void autocast_inputs(OpCall& call) {
  if (!call.outputs.empty()) return;  // in-place ops keep their tensor's dtype
  const std::optional<DType> low = thread_state().autocast[static_cast<int>(current_device().type)];
  if (!low) return;
  const Policy p = policy(call.op);
  if (p == Policy::Keep) return;
  for (Tensor& t : call.inputs) {
    if (!t.defined() || t.is_wrapped_number() || !is_floating(t.dtype())) continue;
    if (p == Policy::Lower && t.dtype() != *low) t = to(t, *low);
    if (p == Policy::Float32 && (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16))
      t = to(t, DType::Float32);
  }
}

}  // namespace pyflame::amp
