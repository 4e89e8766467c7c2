#pragma once
// Seed 000's fusion patterns: a chain of ops, in the order they run, each reading
// the one before, that one kernel can compute. can_fuse names the pattern a chain
// forms; graph mode's fusion pass (src/ir/passes.cpp) asks it of the chains in a
// traced graph and rewrites those a table op executes (fused_op).

#include <optional>
#include <string>
#include <vector>

#include "pyflame/ir/attrs.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/macros.h"

namespace pyflame::ir {

enum class FusedOpType {
  MATMUL_BIAS,       // matmul, add (or linear with a bias)
  MATMUL_BIAS_RELU,  // matmul, add, relu (or linear, relu)
  MATMUL_BIAS_GELU,  // matmul, add, gelu (or linear, gelu)
  CONV_BIAS,         // conv2d, add
  CONV_BIAS_RELU,    // conv2d, add, relu (or conv2d, relu)
  CONV_BN_RELU,      // conv2d, batch_norm, relu
  ADD_RELU,          // add, relu
  MUL_ADD,           // mul, add
};

PF_API const char* fused_op_name(FusedOpType type);  // "MATMUL_BIAS_RELU"
PF_API std::optional<FusedOpType> can_fuse(const std::vector<OpType>& ops);
// The table op that computes the pattern in one call, where there is one
// (MATMUL_BIAS_RELU: linear_relu); the others are recognised, not yet fused. It takes
// the chain's first call's inputs and attributes (the later ops read only the one before).
PF_API std::optional<OpType> fused_op(FusedOpType type);

// Whether fused_elementwise takes `op` as a step: the elementwise families whose
// result has their (floating) input's dtype.
PF_API bool fusable_elementwise(OpType op);
// Whether fused_reduction takes `op` as its reduction: sum, mean, max, min.
PF_API bool fusable_reduction(OpType op);

}  // namespace pyflame::ir

namespace pyflame {

// The steps' chain over `inputs` (tensors of one floating dtype, broadcast together, and
// Python numbers) as one call: one kernel compiled at run time on the GPU, the steps one
// by one elsewhere. Results equal the steps run one by one, to float rounding.
PF_API Tensor fused_elementwise(const std::vector<Tensor>& inputs, FusedElementwiseAttrs attrs);

// The source of the kernel a GPU runs for a fused_elementwise call (compiled at run
// time: src/rocm/fused_elementwise.cpp) over tensors of `dtype`. number[i]: input i is a
// Python number, passed by value in the compute type. ndim > 0: a strided walk over
// ndim dims (a size per dim, then each tensor input's strides), by rows where `rows`
// (blockIdx.y the outer dims' index, x the innermost dim's), else element by element;
// ndim 0: flat, in 16-byte packs of `vec` elements (one load per input) where vec > 1,
// then the rest one by one. The kernel, `fused_elementwise`, takes the output, the
// inputs, the steps' functors by value, the layout (strided) and the element count.
PF_API std::string fused_elementwise_source(const FusedElementwiseAttrs& attrs, DType dtype,
                                            const std::vector<bool>& number, int64_t ndim, int64_t vec,
                                            bool rows);

// The steps' chain over `inputs` reduced by attrs.reduce over attrs.dims of its broadcast
// shape: one kernel on the GPU that never stores the chain's result (a reduction block
// per output, or per part of one where there are few outputs, then a kernel finishing
// the parts), the steps then the reduction elsewhere and under autograd.
PF_API Tensor fused_reduction(const std::vector<Tensor>& inputs, FusedReductionAttrs attrs);

// The GPU kernel of a fused_reduction call (src/rocm/fused_elementwise.cpp): the chain's dims
// as `kept` dims of the output, then `reduced` dims (sizes and each tensor input's strides in
// a Layout argument); blocks of 256 threads in groups of `group` (a launch argument, a power
// of two) per output, blockIdx.y a part of `chunk` reduced elements. partial: the kernel
// writes each part's accumulator (the compute type) at [output, part] for
// fused_reduction_finish_source's kernel; else the finished result.
PF_API std::string fused_reduction_source(const FusedReductionAttrs& attrs, DType dtype, const std::vector<bool>& number,
                                          int64_t kept, int64_t reduced, bool partial);
// `fused_reduction_finish`: one thread per output combines its parts and writes the result.
PF_API std::string fused_reduction_finish_source(ir::OpType reduce, DType dtype);

}  // namespace pyflame
