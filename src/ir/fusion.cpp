// Seed 000's fusion patterns (include/pyflame/ir/fusion.h) as op chains.

#include "pyflame/ir/fusion.h"

namespace pyflame::ir {
namespace {

struct Pattern {
  FusedOpType type;
  std::vector<OpType> ops;
};

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> kPatterns = {
      {FusedOpType::MATMUL_BIAS, {OpType::matmul, OpType::add}},
      {FusedOpType::MATMUL_BIAS, {OpType::linear}},
      {FusedOpType::MATMUL_BIAS_RELU, {OpType::matmul, OpType::add, OpType::relu}},
      {FusedOpType::MATMUL_BIAS_RELU, {OpType::linear, OpType::relu}},
      {FusedOpType::MATMUL_BIAS_GELU, {OpType::matmul, OpType::add, OpType::gelu}},
      {FusedOpType::MATMUL_BIAS_GELU, {OpType::linear, OpType::gelu}},
      {FusedOpType::CONV_BIAS, {OpType::conv2d, OpType::add}},
      {FusedOpType::CONV_BIAS_RELU, {OpType::conv2d, OpType::add, OpType::relu}},
      {FusedOpType::CONV_BIAS_RELU, {OpType::conv2d, OpType::relu}},
      {FusedOpType::CONV_BN_RELU, {OpType::conv2d, OpType::batch_norm, OpType::relu}},
      {FusedOpType::ADD_RELU, {OpType::add, OpType::relu}},
      {FusedOpType::MUL_ADD, {OpType::mul, OpType::add}},
  };
  return kPatterns;
}

}  // namespace

const char* fused_op_name(FusedOpType type) {
  constexpr const char* kNames[] = {"MATMUL_BIAS", "MATMUL_BIAS_RELU", "MATMUL_BIAS_GELU", "CONV_BIAS",
                                    "CONV_BIAS_RELU", "CONV_BN_RELU", "ADD_RELU", "MUL_ADD"};
  return kNames[static_cast<int>(type)];
}

std::optional<FusedOpType> can_fuse(const std::vector<OpType>& ops) {
  for (const Pattern& p : patterns())
    if (p.ops == ops) return p.type;
  return std::nullopt;
}

std::optional<OpType> fused_op(FusedOpType type) {
  if (type == FusedOpType::MATMUL_BIAS_RELU) return OpType::linear_relu;
  return std::nullopt;
}

}  // namespace pyflame::ir
