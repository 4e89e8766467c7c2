#pragma once
// The kernel registry: (op, device type) -> kernel. A backend supports an op
// by registering a kernel for it; "is supported" is never a hand-kept list.
// Kernels get validated calls: inputs already on the kernel's device, in the
// compute dtype, outputs allocated with the right shape.

#include <optional>
#include <vector>

#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

// How a loss combines its per-element values.
enum class Reduction : int8_t { None, Mean, Sum };

// Arguments beyond the tensors. One struct for all ops keeps the kernel
// signature uniform, which the graph executor relies on.
struct OpAttrs {
  std::vector<int64_t> dims;  // reductions: dims to reduce, sorted, non-negative
  bool keepdim = false;
  int64_t dim = -1;           // softmax, arg reductions (non-negative once validated)
  bool approximate_tanh = false;  // gelu
  std::optional<Scalar> lo, hi;   // clamp bounds
  Scalar value;                   // fill
  // Convolution and pooling, one entry per spatial dim; padding is symmetric
  // (the op layer pads the input explicitly for asymmetric 'same' padding).
  std::vector<int64_t> kernel_size, stride, padding, dilation, output_padding;
  bool ceil_mode = false;          // pooling (already reflected in the output shape)
  bool count_include_pad = true;   // avg pooling: padded zeros count in the divisor
  int64_t divisor_override = 0;    // avg pooling: divide by this instead (0: no override)
  int64_t groups = 1;            // convolution; group_norm's num_groups
  // Parameters of elementwise ops (include/pyflame/op_params.def), in table
  // order with the defaults filled in; the functor's constructor reads them.
  std::vector<Scalar> params;
  // Statistics, normalization, losses, dropout (src/core/nn_ops.cpp).
  double correction = 1;          // var/std: the divisor is n - correction
  double eps = 0;                 // norms
  bool training = false;          // batch_norm: batch statistics, running ones updated
  double momentum = 0;            // batch_norm: weight of the batch in the running update
  double p = 0;                   // dropout probability
  uint64_t seed = 0, offset = 0;  // random ops: Philox key and first counter
  int64_t ignore_index = -100;    // nll_loss
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0;     // nll_loss on behalf of cross_entropy
};

struct OpCall {
  ir::OpType op;
  std::vector<Tensor> inputs;
  Tensor out;
  OpAttrs attrs;
};

using KernelFn = void (*)(OpCall& call);

PF_API void register_kernel(ir::OpType op, DeviceType device, KernelFn fn);
PF_API KernelFn find_kernel(ir::OpType op, DeviceType device);  // nullptr if none
// Runs `call` on `device` (inputs must already be there); NotSupportedError if
// that device type has no kernel for the op.
PF_API void run_kernel(OpCall& call, Device device);

struct KernelRegistrar {
  KernelRegistrar(ir::OpType op, DeviceType device, KernelFn fn) { register_kernel(op, device, fn); }
};
#define PF_REGISTER_KERNEL(op, device, fn)                                       \
  static ::pyflame::KernelRegistrar pf_kernel_##op##_##device(::pyflame::ir::OpType::op, \
                                                            ::pyflame::DeviceType::device, fn)

}  // namespace pyflame
