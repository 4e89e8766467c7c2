// The op layer of the nn-modules area: linear, the op behind nn.Linear.
// A device that registers a `linear` kernel gets the fused form (bias written
// into the output, then the matrix product accumulated onto it: one pass over
// the output less than matmul + add); on any other device linear is matmul +
// add, so nn.Linear runs wherever those two do.

#include "pyflame/modules_ops.h"

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  constexpr auto op = ir::OpType::linear;
  PF_CHECK(input.dim() >= 1, ValueError, "linear: the input needs at least 1 dimension, got a 0-d tensor");
  PF_CHECK(weight.dim() == 1 || weight.dim() == 2, ValueError,
           "linear: the weight must be (out_features, in_features) or (in_features), got shape ", weight.shape());
  PF_CHECK(is_floating(input.dtype()), TypeError, "linear: needs floating-point tensors, got an input of ",
           input.dtype(), " (convert with .to(float32))");
  PF_CHECK(weight.dtype() == input.dtype() && (!bias || bias->dtype() == input.dtype()), TypeError,
           "linear: input, weight and bias must have one dtype, got ", input.dtype(), ", ", weight.dtype(),
           bias ? detail::cat(" and ", bias->dtype()) : std::string(" (no bias)"));
  const int64_t k = input.size(-1);
  PF_CHECK(weight.size(-1) == k, ValueError, "linear: the input's last dimension is ", k, " (input shape ",
           input.shape(), ") but the weight has in_features ", weight.size(-1), " (weight shape ", weight.shape(),
           ")");
  const int64_t n = weight.dim() == 2 ? weight.size(0) : 1;
  if (bias) {
    bool ok = bias->dim() == 0 || (weight.dim() == 2 && bias->dim() == 1 && bias->size(0) == n);
    PF_CHECK(ok, ValueError, "linear: the bias must have shape ",
             weight.dim() == 2 ? detail::cat("(", n, ") or ") : std::string(), "() (0-d), got shape ",
             bias->shape());
  }
  Device dev = current_device();
  if (weight.dim() == 1 || !find_kernel(op, dev.type)) {
    Tensor y = matmul(input, weight.dim() == 2 ? weight.transpose(0, 1) : weight);
    return bias ? add(y, *bias) : y;
  }
  Shape out_shape = input.shape();
  out_shape.back() = n;
  const int64_t m = shape_numel(Shape(input.shape().begin(), input.shape().end() - 1));
  // The kernel's call: x (M, K) and weight (N, K) in any strides, bias (N) (a 0-d bias
  // expanded), out (M, N) contiguous.
  OpCall call{op, {on_device(input, dev, op).reshape({m, k}), on_device(weight, dev, op)},
              Tensor::empty({m, n}, input.dtype(), dev), {}};
  if (bias) call.inputs.push_back(on_device(*bias, dev, op).expand({n}));
  run_kernel(call, dev);
  return call.out.view(out_shape);
}

}  // namespace pyflame
