// CPU kernels of lstm_sequence and its backward (modules_ops.h has the op).
// A step is one OpenBLAS GEMM (the recurrent product, written into the
// step's slice of `gates`) and one pass of the cell (kernels/lstm.h) over its
// N x H elements, which turns that slice into the activated gates. The
// backward walks the steps the other way: the cell's gradient, then one GEMM
// giving the gradient that reaches the previous h. float16 and bfloat16 run
// in float32 (converted once per sequence, not per step), as matmul does.

#include <climits>

#include "core/dispatch.h"
#include "cpu/blas.h"
#include "cpu/loops.h"
#include "kernels/lstm.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

using kernels::LstmCell;
using kernels::LstmCellGrad;
using kernels::LstmDims;

template <class T>
void lstm_forward(const LstmDims& d, const T* input_gates, const T* h0, const T* c0, const T* weight_hh,
                  const T* bias_hh, T* output, T* cell_states, T* gates) {
  const int64_t n = d.batch, h = d.hidden, plane = n * h;
  for (int64_t s = 0; s < d.steps; ++s) {
    const int64_t t = d.time(s), prev = d.before(s);
    const T* h_prev = prev < 0 ? h0 : output + prev * plane;
    const T* c_prev = prev < 0 ? c0 : cell_states + prev * plane;
    T* z = gates + t * 4 * plane;
    gemm<T>(false, true, n, 4 * h, h, h_prev, h, weight_hh, h, z, 4 * h);
    const T* x = input_gates + t * 4 * plane;
    parallel_for(n, std::max<int64_t>(1, kParallelGrain / (4 * h)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* zr = z + r * 4 * h;
        const T* xr = x + r * 4 * h;
        for (int64_t j = 0; j < h; ++j) {
          T pre[4];
          for (int k = 0; k < 4; ++k) pre[k] = zr[k * h + j] + xr[k * h + j] + (bias_hh ? bias_hh[k * h + j] : T(0));
          const LstmCell<T> cell(pre[0], pre[1], pre[2], pre[3], c_prev[r * h + j]);
          zr[j] = cell.i, zr[h + j] = cell.f, zr[2 * h + j] = cell.g, zr[3 * h + j] = cell.o;
          cell_states[t * plane + r * h + j] = cell.c;
          output[t * plane + r * h + j] = cell.h;
        }
      }
    });
  }
}

// grad_h0 and grad_c0 carry the recurrent gradients between steps and end as
// the initial state's.
template <class T>
void lstm_backward(const LstmDims& d, const T* grad_output, const T* grad_cell_states, const T* gates,
                   const T* cell_states, const T* c0, const T* weight_hh, T* grad_gates, T* grad_h0, T* grad_c0) {
  const int64_t n = d.batch, h = d.hidden, plane = n * h;
  std::fill(grad_h0, grad_h0 + plane, T(0));
  std::fill(grad_c0, grad_c0 + plane, T(0));
  for (int64_t s = d.steps - 1; s >= 0; --s) {
    const int64_t t = d.time(s), prev = d.before(s);
    const T* c_prev = prev < 0 ? c0 : cell_states + prev * plane;
    const T* a = gates + t * 4 * plane;
    T* gz = grad_gates + t * 4 * plane;
    parallel_for(n, std::max<int64_t>(1, kParallelGrain / (4 * h)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* ar = a + r * 4 * h;
        T* gr = gz + r * 4 * h;
        for (int64_t j = 0; j < h; ++j) {
          const int64_t e = r * h + j;
          const LstmCellGrad<T> g(grad_output[t * plane + e] + grad_h0[e], grad_cell_states[t * plane + e] + grad_c0[e],
                                  ar[j], ar[h + j], ar[2 * h + j], ar[3 * h + j], cell_states[t * plane + e],
                                  c_prev[e]);
          gr[j] = g.zi, gr[h + j] = g.zf, gr[2 * h + j] = g.zg, gr[3 * h + j] = g.zo;
          grad_c0[e] = g.c_prev;
        }
      }
    });
    gemm<T>(false, false, n, h, 4 * h, gz, 4 * h, weight_hh, h, grad_h0, h);
  }
}

LstmDims lstm_dims(const Tensor& gates, bool reverse) {
  const LstmDims d{gates.size(0), gates.size(1), gates.size(2) / 4, reverse};
  PF_CHECK(d.batch <= INT_MAX && 4 * d.hidden <= INT_MAX, ValueError, "lstm_sequence: batch ", d.batch,
           " or 4 * hidden_size ", 4 * d.hidden, " exceeds the CPU BLAS limit of 2^31-1");
  return d;
}

// Runs f<float or double>(inputs, outputs) on the call's tensors; float16 and
// bfloat16 through float32 copies.
template <class F> void in_blas_dtype(OpCall& call, const F& f) {
  const DType dtype = call.out().dtype();
  if (dtype == DType::Float64) return f.template operator()<double>(call.inputs, call.outputs);
  if (dtype == DType::Float32) return f.template operator()<float>(call.inputs, call.outputs);
  std::vector<Tensor> inputs, outputs;
  for (const Tensor& t : call.inputs) inputs.push_back(t.defined() ? t.to(DType::Float32) : t);
  for (const Tensor& t : call.outputs) outputs.push_back(Tensor::empty(t.shape(), DType::Float32, t.device()));
  f.template operator()<float>(inputs, outputs);
  for (size_t i = 0; i < outputs.size(); ++i) call.outputs[i].copy_(outputs[i]);
}

template <class T> const T* data_or_null(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

void lstm_sequence_kernel(OpCall& call) {
  const LstmDims d = lstm_dims(call.inputs[0], call.attr<RnnAttrs>().reverse);
  in_blas_dtype(call, [&]<class T>(std::vector<Tensor>& in, std::vector<Tensor>& out) {
    lstm_forward<T>(d, in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), data_or_null<T>(in[4]),
                    out[0].data<T>(), out[1].data<T>(), out[2].data<T>());
  });
}

void lstm_sequence_backward_kernel(OpCall& call) {
  const LstmDims d = lstm_dims(call.inputs[2], call.attr<RnnAttrs>().reverse);
  in_blas_dtype(call, [&]<class T>(std::vector<Tensor>& in, std::vector<Tensor>& out) {
    lstm_backward<T>(d, in[0].data<T>(), in[1].data<T>(), in[2].data<T>(), in[3].data<T>(), in[4].data<T>(),
                     in[5].data<T>(), out[0].data<T>(), out[1].data<T>(), out[2].data<T>());
  });
}

PF_REGISTER_KERNEL(lstm_sequence, CPU, &lstm_sequence_kernel);
PF_REGISTER_KERNEL(lstm_sequence_backward, CPU, &lstm_sequence_backward_kernel);

}  // namespace
}  // namespace pyflame::cpu
