// Integer matmul on the GPU: one thread per output element, accumulating in
// the element type (wrapping on overflow, as PyTorch's CPU loop does). Integer
// products are rare in networks; this kernel is for correctness, not speed.
// The layout trick: a row of A and a column of B are addressed by broadcasting
// them to the output's shape, so one Offsets walk serves any batch broadcast.
// And linear_relu's ReLU where the BLAS library has no epilogue for the problem:
// relu's functor over the packed output, in place.

#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"
#include "kernels/functors.h"
#include "rocm/kernels/matmul.h"

namespace pyflame::backend::rocm {
namespace {

template <class T>
static __global__ void integer_matmul_kernel(char* out, const char* a, const char* b, Offsets<3> offsets, int64_t n,
                                             int64_t k, int64_t a_step, int64_t b_step) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[3];
    offsets.at(i, off);
    const T* pa = reinterpret_cast<const T*>(a + off[1]);
    const T* pb = reinterpret_cast<const T*>(b + off[2]);
    T acc = 0;
    for (int64_t p = 0; p < k; ++p) acc += pa[p * a_step] * pb[p * b_step];
    *reinterpret_cast<T*>(out + off[0]) = acc;
  }
}

template <class T> static __global__ void relu_in_place_kernel(T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = kernels::Relu<T>{}(out[i]);
}

}  // namespace

void relu_in_place(Tensor& out, const char* op) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int device = out.device().index;
  DeviceGuard guard(device);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      relu_in_place_kernel<T><<<grid_for(n), kThreads, 0, current_stream(device)>>>(static_cast<T*>(out.data_ptr()), n);
    } else {
      throw TypeError(std::string(op) + ": no GPU ReLU epilogue for " + dtype_name(out.dtype()));
    }
  });
  check_launch(op, "ReLU epilogue of " + detail::to_piece(out.shape()));
}

void integer_matmul(OpCall& call) {
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  Tensor& out = call.out();
  const int64_t k = a.size(-1), n = out.numel();
  // A's row i and B's column j, viewed with the output's shape (batch..., m, n).
  Shape row_strides = a.strides(), col_strides = b.strides();
  row_strides.back() = 0;
  col_strides[col_strides.size() - 2] = 0;
  Tensor rows(a.storage(), out.shape(), row_strides, a.offset(), a.dtype());
  Tensor cols(b.storage(), out.shape(), col_strides, b.offset(), b.dtype());
  const int device = out.device().index;
  DeviceGuard guard(device);
  Offsets<3> offsets = make_offsets<3>({&out, &rows, &cols}, op_name(call.op));
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      integer_matmul_kernel<T><<<grid_for(n), kThreads, 0, current_stream(device)>>>(
          static_cast<char*>(out.data_ptr()), static_cast<const char*>(a.data_ptr()),
          static_cast<const char*>(b.data_ptr()), offsets, n, k, a.strides().back(), b.strides()[b.dim() - 2]);
    } else {
      throw TypeError(std::string(op_name(call.op)) + ": no GPU kernel for " + dtype_name(out.dtype()));
    }
  });
  check_launch(op_name(call.op), "shapes " + detail::to_piece(a.shape()) + " x " + detail::to_piece(b.shape()));
}

}  // namespace pyflame::backend::rocm
