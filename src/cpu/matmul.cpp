// CPU matrix products through OpenBLAS (the scipy-openblas32 build from PyPI).
// Row-major operands map onto CBLAS directly; a transposed view becomes a
// transpose flag, so only layouts BLAS cannot address are copied. float16 and
// bfloat16 go through float32; integer products use a plain loop (no BLAS has them).

#include <climits>

#include "core/dispatch.h"
#include "core/matrix_layout.h"
#include "cpu/blas.h"
#include "cpu/loops.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

template <class T> void blas_matmul(Tensor a, Tensor b, Tensor& out) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const MatrixLayout la = matrix_layout(a), lb = matrix_layout(b);
  const int64_t batches = out.numel() / std::max<int64_t>(m * n, 1);
  for (int64_t i = 0; i < batches; ++i)
    gemm<T>(la.trans, lb.trans, m, n, k, a.data<T>() + batch_offset(a, i), la.ld, b.data<T>() + batch_offset(b, i),
            lb.ld, out.data<T>() + i * m * n, n);
}

template <class T> void loop_matmul(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1), nd = a.dim();
  const int64_t batches = out.numel() / std::max<int64_t>(m * n, 1);
  const int64_t as0 = a.strides()[nd - 2], as1 = a.strides()[nd - 1];
  const int64_t bs0 = b.strides()[nd - 2], bs1 = b.strides()[nd - 1];
  parallel_for(batches * m, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * k, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t bi = r / m, i = r % m;
      const T* pa = a.data<T>() + batch_offset(a, bi) + i * as0;
      const T* pb = b.data<T>() + batch_offset(b, bi);
      T* pc = out.data<T>() + r * n;
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += pa[p * as1] * pb[p * bs0 + j * bs1];
        pc[j] = acc;
      }
    }
  });
}

void matmul_kernel(OpCall& call) {
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  for (int64_t s : {a.size(-2), a.size(-1), b.size(-1)})
    PF_CHECK(s <= INT_MAX, ValueError, op_name(call.op), ": matrix dimension ", s,
             " exceeds the CPU BLAS limit of 2^31-1 (shapes ", a.shape(), " and ", b.shape(), ")");
  switch (a.dtype()) {
    case DType::Float32: return blas_matmul<float>(a, b, call.out);
    case DType::Float64: return blas_matmul<double>(a, b, call.out);
    case DType::Float16:
    case DType::BFloat16: {
      Tensor out32 = Tensor::empty(call.out.shape(), DType::Float32, call.out.device());
      blas_matmul<float>(a.to(DType::Float32), b.to(DType::Float32), out32);
      call.out.copy_(out32);
      return;
    }
    default:
      visit_dtype(a.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) loop_matmul<T>(a, b, call.out);
      });
  }
}

PF_REGISTER_KERNEL(matmul, CPU, &matmul_kernel);
PF_REGISTER_KERNEL(batch_matmul, CPU, &matmul_kernel);

}  // namespace
}  // namespace pyflame::cpu
