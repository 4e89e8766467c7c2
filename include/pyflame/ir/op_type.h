#pragma once
// ir::OpType and op names, generated from the op table.

#include <cstdint>
#include <string>

#include "pyflame/macros.h"

namespace pyflame {

enum class OpFamily : int8_t {
  UNARY, UNARY_FLOAT, UNARY_BOOL, UNARY_INT, BINARY, BINARY_FLOAT, BINARY_INT, COMPARE, WHERE, CLAMP,
  REDUCE, ARG_REDUCE, MATMUL, SOFTMAX, VIEW, RANDOM, COPY, CUSTOM,
};

// The op table's grad column: autograd records the op (grad: its derivative),
// records the ops of its decomposition (composite), or neither (nograd).
enum class OpGrad : int8_t { grad, composite, nograd };
// The op table's autocast column: what autocast does with floating inputs.
// gpu_fp32: fp32 under a GPU autocast, kept under the CPU one (on PyTorch's CUDA list only).
enum class OpAutocast : int8_t { keep, lower, fp32, gpu_fp32 };

namespace ir {
enum class OpType : int16_t {
#define PF_OP(name, family, functor, attrs, grad, autocast) name,
#include "pyflame/ops.def"
#undef PF_OP
  kCount
};
}  // namespace ir

constexpr int kNumOps = static_cast<int>(ir::OpType::kCount);

PF_API const char* op_name(ir::OpType op);
PF_API OpFamily op_family(ir::OpType op);
PF_API OpGrad op_grad(ir::OpType op);
PF_API OpAutocast op_autocast(ir::OpType op);
PF_API const char* family_name(OpFamily f);
// ValueError for unknown names.
PF_API ir::OpType op_from_name(const std::string& name);

}  // namespace pyflame
