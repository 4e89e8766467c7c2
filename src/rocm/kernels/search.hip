// GPU searchsorted, with the CPU kernel's semantics (src/cpu/search.cpp):
// sorted_sequence (rows, n) and values (rows, m), both contiguous in one
// dtype; one thread per value runs the shared binary search
// (kernels/search.h). Threads side by side take consecutive values of a row,
// so their searches start on the same elements, which the cache serves.

#include "core/dispatch.h"
#include "kernels/search.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

template <class T, class I>
static __global__ void searchsorted_kernel(I* out, const T* seq, const T* values, int64_t total, int64_t n,
                                           int64_t m, bool right) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<I>(kernels::search_sorted_row(seq + (i / m) * n, n, values[i], right));
}

void searchsorted_entry(OpCall& call) {
  const Tensor &seq = call.inputs[0], &values = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  const int64_t n = seq.shape()[1], m = values.shape()[1], total = values.numel();
  if (total == 0) return;
  const bool right = call.attr<SearchAttrs>().right;
  const hipStream_t stream = current_stream(out.device().index);
  visit_dtype(seq.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {  // refused by the op layer
      if (out.dtype() == DType::Int32)
        searchsorted_kernel<T, int32_t><<<grid_for(total), kThreads, 0, stream>>>(
            out.data<int32_t>(), seq.data<T>(), values.data<T>(), total, n, m, right);
      else
        searchsorted_kernel<T, int64_t><<<grid_for(total), kThreads, 0, stream>>>(
            out.data<int64_t>(), seq.data<T>(), values.data<T>(), total, n, m, right);
    }
  });
  check_launch("searchsorted", "sorted_sequence " + detail::to_piece(seq.shape()) + ", values " +
                                   detail::to_piece(values.shape()) + " (" + dtype_name(seq.dtype()) + ")");
}

PF_REGISTER_KERNEL(searchsorted, ROCm, &searchsorted_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
