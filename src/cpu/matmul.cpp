// CPU matrix products through OpenBLAS (the scipy-openblas32 build from PyPI).
// Row-major operands map onto CBLAS directly; a transposed view becomes a
// transpose flag, so only layouts BLAS cannot address are copied. float16 and
// bfloat16 go through float32; integer products use a plain loop (no BLAS has them).
// linear writes its bias into the output and lets BLAS accumulate onto it
// (beta = 1), as PyTorch's addmm does, instead of a separate pass to add it;
// linear_relu then applies relu's functor to the output while it is in cache.

#include <omp.h>

#include <climits>

#include "core/dispatch.h"
#include "core/matrix_layout.h"
#include "cpu/blas.h"
#include "cpu/loops.h"
#include "kernels/functors.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

// A batch of products: threads take whole products where there are enough of them (or they
// are small), one fork for the batch; else each product is split across threads. Attention's
// 192 products of 197x197x64 forked twice a product and ran at 0.67x PyTorch's time.
template <class T> void blas_matmul(Tensor a, Tensor b, Tensor& out) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const MatrixLayout la = matrix_layout(a), lb = matrix_layout(b);
  const int64_t batches = out.numel() / std::max<int64_t>(m * n, 1);
  auto product = [&](int64_t i, auto multiply) {
    multiply(la.trans, lb.trans, m, n, k, a.data<T>() + batch_offset(a, i), la.ld, b.data<T>() + batch_offset(b, i),
             lb.ld, out.data<T>() + i * m * n, n, T(0));
  };
  const int64_t macs = std::max<int64_t>(1, m * n * k);
  if (batches >= 4 * omp_get_max_threads() || macs < 4 * kParallelMacs) {
    parallel_for(batches, std::max<int64_t>(1, kParallelMacs / macs), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) product(i, gemm_serial<T>);
    });
  } else {
    for (int64_t i = 0; i < batches; ++i) product(i, gemm<T>);
  }
}

// out (M, N) = x (M, K) w (N, K)^T + bias (N, one per column; or of the result's shape,
// one per output: infer_linear; null: none).
template <class T> void blas_linear(Tensor x, Tensor w, const Tensor* bias, Tensor& out) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  if (bias) out.copy_(bias->dim() == 1 ? bias->expand(out.shape()) : bias->reshape(out.shape()));
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: BLAS would want leading dimensions of at least 1
    if (!bias) out.fill_(Scalar(int64_t{0}));
    return;
  }
  MatrixLayout lx, lw;
  if (!blas_layout(m, k, x.strides()[0], x.strides()[1], lx)) x = x.contiguous(), lx = {false, k};
  if (!blas_layout(k, n, w.strides()[1], w.strides()[0], lw)) w = w.contiguous(), lw = {true, k};
  gemm<T>(lx.trans, lw.trans, m, n, k, x.data<T>(), lx.ld, w.data<T>(), lw.ld, out.data<T>(), n, T(bias ? 1 : 0));
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
    case DType::Float32: return blas_matmul<float>(a, b, call.out());
    case DType::Float64: return blas_matmul<double>(a, b, call.out());
    case DType::Float16:
    case DType::BFloat16: {
      Tensor out32 = Tensor::empty(call.out().shape(), DType::Float32, call.out().device());
      blas_matmul<float>(a.to(DType::Float32), b.to(DType::Float32), out32);
      call.out().copy_(out32);
      return;
    }
    default:
      visit_dtype(a.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) loop_matmul<T>(a, b, call.out());
      });
  }
}

// The output (M, N), contiguous, through relu's functor.
template <class T> void relu_in_place(Tensor& out) {
  T* p = out.data<T>();
  parallel_for(out.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] = kernels::Relu<T>{}(p[i]);
  });
}

void linear_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const Tensor* bias = call.inputs[2].defined() ? &call.inputs[2] : nullptr;
  const bool relu = call.op == ir::OpType::linear_relu;
  for (int64_t s : {x.size(0), x.size(1), w.size(0)})
    PF_CHECK(s <= INT_MAX, ValueError, op_name(call.op), ": matrix dimension ", s,
             " exceeds the CPU BLAS limit of 2^31-1 (shapes ", x.shape(), " and ", w.shape(), ")");
  switch (x.dtype()) {
    case DType::Float32:
      blas_linear<float>(x, w, bias, call.out());
      if (relu) relu_in_place<float>(call.out());
      return;
    case DType::Float64:
      blas_linear<double>(x, w, bias, call.out());
      if (relu) relu_in_place<double>(call.out());
      return;
    default: {  // float16, bfloat16: in float32, rounded once
      Tensor out32 = Tensor::empty(call.out().shape(), DType::Float32, call.out().device());
      Tensor bias32 = bias ? bias->to(DType::Float32) : Tensor();
      blas_linear<float>(x.to(DType::Float32), w.to(DType::Float32), bias ? &bias32 : nullptr, out32);
      if (relu) relu_in_place<float>(out32);
      call.out().copy_(out32);
    }
  }
}

PF_REGISTER_KERNEL(matmul, CPU, &matmul_kernel);
PF_REGISTER_KERNEL(batch_matmul, CPU, &matmul_kernel);
PF_REGISTER_KERNEL(linear, CPU, &linear_kernel);
PF_REGISTER_KERNEL(linear_relu, CPU, &linear_kernel);

}  // namespace
}  // namespace pyflame::cpu
