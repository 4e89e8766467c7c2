// CPU kernel of quantized_linear (modules_ops.h has the op and pyflame.quant's layout).
// For a few rows of input (a decode step) a thread dequantizes a weight row into a float
// buffer and dots it with every input row: the codes are read once and no weight is
// written. For more rows the product is the GEMM's work, so the weight is dequantized to
// the input's dtype and linear's kernel (BLAS) runs on it.

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/lanes.h"
#include "cpu/loops.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::cpu {
namespace {

constexpr int64_t kMaxFusedRows = 16;  // input rows dotted with each dequantized weight row

// A weight row (k values) into `w`: (code - zero) * scale per group.
template <class A, class S>
void dequantize_row(const uint8_t* codes, const S* scales, const uint8_t* zeros, int64_t k, const QuantAttrs& a, A* w) {
  for (int64_t g = 0; g < k / a.group_size; ++g) {
    const A scale = static_cast<A>(scales[g]), zero = static_cast<A>(zeros[g]);
    const int64_t first = g * a.group_size;
    for (int64_t i = first; i < first + a.group_size; ++i) {
      const int code = a.bits == 8 ? codes[i] : (codes[i / 2] >> (i % 2 * 4)) & 15;
      w[i] = (static_cast<A>(code) - zero) * scale;
    }
  }
}

template <class T> void quantized_linear_rows(OpCall& call) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const auto& a = call.attr<QuantAttrs>();
  const Tensor &x = call.inputs[0], &codes = call.inputs[1], &scales = call.inputs[2], &zeros = call.inputs[3],
               &bias = call.inputs[4];
  const int64_t m = x.size(0), k = x.size(1), n = codes.size(0), groups = k / a.group_size;
  const int64_t code_row = codes.size(1);
  const uint8_t *pc = codes.data<uint8_t>(), *pz = zeros.data<uint8_t>();
  const T* ps = scales.data<T>();
  if (m > kMaxFusedRows) {
    Tensor w = Tensor::empty({n, k}, x.dtype(), x.device());
    T* pw = w.data<T>();
    parallel_for(n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
      std::vector<A> row(k);
      for (int64_t r = r0; r < r1; ++r) {
        dequantize_row(pc + r * code_row, ps + r * groups, pz + r * groups, k, a, row.data());
        std::transform(row.begin(), row.end(), pw + r * k, [](A v) { return static_cast<T>(v); });
      }
    });
    apply({ir::OpType::linear, {x, w, bias}, NoAttrs{}, {call.out()}});
    return;
  }
  std::vector<A> xa(m * k);
  std::transform(x.data<T>(), x.data<T>() + m * k, xa.begin(), [](T v) { return static_cast<A>(v); });
  const T* pb = bias.defined() ? bias.data<T>() : nullptr;
  T* out = call.out().data<T>();
  parallel_for(n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(k * m, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<A> w(k);
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(pc + r * code_row, ps + r * groups, pz + r * groups, k, a, w.data());
      for (int64_t i = 0; i < m; ++i) {
        const A* xi = xa.data() + i * k;
        const A dot = lanes_sum<A>(k, [&](int64_t j) { return xi[j] * w[j]; });
        out[i * n + r] = static_cast<T>(dot + (pb ? static_cast<A>(pb[r]) : A{0}));
      }
    }
  });
}

void quantized_linear_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: quantized_linear_rows<BFloat16>(call); break;
    case DType::Float16: quantized_linear_rows<Half>(call); break;
    case DType::Float64: quantized_linear_rows<double>(call); break;
    default: quantized_linear_rows<float>(call); break;
  }
}

PF_REGISTER_KERNEL(quantized_linear, CPU, &quantized_linear_entry);

}  // namespace
}  // namespace pyflame::cpu
