// GPU lstm_sequence and its backward (modules_ops.h has the op). The
// recurrence is sequential, so a step is two launches on the stream and no
// allocation: the recurrent GEMM (BLAS), written straight into the step's
// slice of `gates`, and one cell kernel (kernels/lstm.h) that adds the input
// gates and the bias, applies the cell and overwrites the slice with the
// activated gates the backward reads. The backward runs the steps the other
// way: the cell's gradient, then the GEMM of the gradient reaching the
// previous h, into grad_h0, which thus carries it from step to step (as
// grad_c0 carries the cell's) and ends as the initial state's gradient.
// cuDNN's RNN runs the same few kernels per step; a Python loop of the cell's
// ops ran a dozen, each with its host overhead.
//
// float32 GEMMs use TF32 where convolutions may (conv_allow_tf32, as
// PyTorch's cuDNN RNN follows torch.backends.cudnn.allow_tf32). Without the
// BLAS adapter (an AMD build without rocBLAS) the op has no GPU kernel.

#if PYFLAME_WITH_BLAS
#include <climits>

#include "core/dispatch.h"
#include "kernels/lstm.h"
#include "pyflame/backend/rocm/blas.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

using kernels::LstmCell;
using kernels::LstmCellGrad;
using kernels::LstmDims;

// One step: `gates` (N, 4H) holds h_prev W_hh^T on entry. Pointers are the step's slices.
template <class T>
static __global__ void lstm_cell_forward(T* gates, T* output, T* cell_states, const T* input_gates,
                                         const T* bias_hh, const T* c_prev, int64_t batch, int64_t hidden) {
  using A = acc_t<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * hidden;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / hidden, j = e % hidden;
    T* z = gates + r * 4 * hidden + j;
    const T* x = input_gates + r * 4 * hidden + j;
    A pre[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      pre[k] = static_cast<A>(z[k * hidden]) + static_cast<A>(x[k * hidden]) +
               (bias_hh ? static_cast<A>(bias_hh[k * hidden + j]) : A(0));
    const LstmCell<A> cell(pre[0], pre[1], pre[2], pre[3], static_cast<A>(c_prev[e]));
    z[0] = static_cast<T>(cell.i), z[hidden] = static_cast<T>(cell.f);
    z[2 * hidden] = static_cast<T>(cell.g), z[3 * hidden] = static_cast<T>(cell.o);
    cell_states[e] = static_cast<T>(cell.c);
    output[e] = static_cast<T>(cell.h);
  }
}

// One step backward: grad_h holds the recurrent gradient of h (the GEMM of the
// step after), grad_c the cell's; grad_c is updated in place for the step before.
template <class T>
static __global__ void lstm_cell_backward(T* grad_gates, T* grad_c, const T* grad_h, const T* grad_output,
                                          const T* grad_cell_states, const T* gates, const T* cell_states,
                                          const T* c_prev, int64_t batch, int64_t hidden) {
  using A = acc_t<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * hidden;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / hidden, j = e % hidden;
    const T* a = gates + r * 4 * hidden + j;
    const LstmCellGrad<A> g(static_cast<A>(grad_output[e]) + static_cast<A>(grad_h[e]),
                            static_cast<A>(grad_cell_states[e]) + static_cast<A>(grad_c[e]), static_cast<A>(a[0]),
                            static_cast<A>(a[hidden]), static_cast<A>(a[2 * hidden]), static_cast<A>(a[3 * hidden]),
                            static_cast<A>(cell_states[e]), static_cast<A>(c_prev[e]));
    T* gz = grad_gates + r * 4 * hidden + j;
    gz[0] = static_cast<T>(g.zi), gz[hidden] = static_cast<T>(g.zf);
    gz[2 * hidden] = static_cast<T>(g.zg), gz[3 * hidden] = static_cast<T>(g.zo);
    grad_c[e] = static_cast<T>(g.c_prev);
  }
}

LstmDims lstm_dims(const OpCall& call, const Tensor& gates) {
  const LstmDims d{gates.size(0), gates.size(1), gates.size(2) / 4, call.attr<RnnAttrs>().reverse};
  PF_CHECK(d.batch <= INT_MAX && 4 * d.hidden <= INT_MAX, NotSupportedError, op_name(call.op), ": batch ", d.batch,
           " or 4 * hidden_size ", 4 * d.hidden, " exceeds the GPU BLAS limit of 2^31-1");
  return d;
}

std::string describe(const OpCall& call, const LstmDims& d, const char* step) {
  return detail::cat("T=", d.steps, " N=", d.batch, " H=", d.hidden, " (", dtype_name(call.out().dtype()), "), ",
                     step);
}

template <class T> void lstm_forward(OpCall& call, const LstmDims& d, hipStream_t stream) {
  const int64_t plane = d.batch * d.hidden;
  const T* w = call.inputs[3].data<T>();
  const T* bias = call.inputs[4].defined() ? call.inputs[4].data<T>() : nullptr;
  T* output = call.outputs[0].data<T>();
  T* cells = call.outputs[1].data<T>();
  T* gates = call.outputs[2].data<T>();
  ROCmBLAS& blas = get_blas();
  const int b = static_cast<int>(d.batch), h = static_cast<int>(d.hidden);
  for (int64_t s = 0; s < d.steps; ++s) {
    const int64_t t = d.time(s), prev = d.before(s);
    const T* h_prev = prev < 0 ? call.inputs[1].data<T>() : output + prev * plane;
    const T* c_prev = prev < 0 ? call.inputs[2].data<T>() : cells + prev * plane;
    T* z = gates + t * 4 * plane;
    // Column-major z^T (4H x N) = W_hh (4H x H) h_prev^T (H x N).
    blas.gemm_ex(call.out().dtype(), rocblas_operation_transpose, rocblas_operation_none, 4 * h, b, h, 1.0, w, h, 0,
                 h_prev, h, 0, 0.0, z, 4 * h, 0, 1, conv_allow_tf32());
    lstm_cell_forward<T><<<grid_for(plane), kThreads, 0, stream>>>(z, output + t * plane, cells + t * plane,
                                                                    call.inputs[0].data<T>() + t * 4 * plane, bias,
                                                                    c_prev, d.batch, d.hidden);
    check_launch(op_name(call.op), [&] { return describe(call, d, "the cell kernel"); });
  }
}

template <class T> void lstm_backward(OpCall& call, const LstmDims& d, hipStream_t stream) {
  const int64_t plane = d.batch * d.hidden;
  const T *grad_output = call.inputs[0].data<T>(), *grad_cells = call.inputs[1].data<T>();
  const T *gates = call.inputs[2].data<T>(), *cells = call.inputs[3].data<T>(), *w = call.inputs[5].data<T>();
  T* grad_gates = call.outputs[0].data<T>();
  T *grad_h = call.outputs[1].data<T>(), *grad_c = call.outputs[2].data<T>();
  HIP_CHECK(hipMemsetAsync(grad_h, 0, plane * sizeof(T), stream));
  HIP_CHECK(hipMemsetAsync(grad_c, 0, plane * sizeof(T), stream));
  ROCmBLAS& blas = get_blas();
  const int b = static_cast<int>(d.batch), h = static_cast<int>(d.hidden);
  for (int64_t s = d.steps - 1; s >= 0; --s) {
    const int64_t t = d.time(s), prev = d.before(s);
    const T* c_prev = prev < 0 ? call.inputs[4].data<T>() : cells + prev * plane;
    T* gz = grad_gates + t * 4 * plane;
    lstm_cell_backward<T><<<grid_for(plane), kThreads, 0, stream>>>(gz, grad_c, grad_h, grad_output + t * plane,
                                                                     grad_cells + t * plane, gates + t * 4 * plane,
                                                                     cells + t * plane, c_prev, d.batch, d.hidden);
    check_launch(op_name(call.op), [&] { return describe(call, d, "the cell kernel"); });
    // Column-major grad_h^T (H x N) = W_hh^T (H x 4H) gz^T (4H x N).
    blas.gemm_ex(call.out().dtype(), rocblas_operation_none, rocblas_operation_none, h, b, 4 * h, 1.0, w, h, 0, gz,
                 4 * h, 0, 0.0, grad_h, h, 0, 1, conv_allow_tf32());
  }
}

template <bool kBackward> void lstm_entry(OpCall& call) {
  const Device device = call.out().device();
  DeviceGuard guard(device.index);
  const LstmDims d = lstm_dims(call, call.inputs[kBackward ? 2 : 0]);
  const hipStream_t stream = current_stream(device.index);
  visit_dtype(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      if constexpr (kBackward) lstm_backward<T>(call, d, stream);
      else lstm_forward<T>(call, d, stream);
    }
  });
}

PF_REGISTER_KERNEL(lstm_sequence, ROCm, &lstm_entry<false>);
PF_REGISTER_KERNEL(lstm_sequence_backward, ROCm, &lstm_entry<true>);

}  // namespace
}  // namespace pyflame::backend::rocm
#endif  // PYFLAME_WITH_BLAS
