// GPU copy (strided, converting between any two dtypes) and fill: the ROCm
// backend's kernels for the core's internal copy and fill ops, which every
// device transfer, .contiguous(), .to(dtype) and factory relies on.

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/convert.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"
#include "rocm/peer.h"

namespace pyflame::backend::rocm {
namespace {

template <class O, class I>
static __global__ void copy_kernel(char* out, const char* in, Offsets<2> offsets, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[2];
    offsets.at(i, off);
    *reinterpret_cast<O*>(out + off[0]) = kernels::convert<O>(*reinterpret_cast<const I*>(in + off[1]));
  }
}

// Contiguous operands of two dtypes (autocast's casts): V elements per access.
template <int V, class O, class I> static __global__ void convert_contiguous(O* out, const I* in, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t nvec = n / V;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < nvec; i += stride) {
    const Vec<I, V> x = reinterpret_cast<const Vec<I, V>*>(in)[i];
    Vec<O, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = kernels::convert<O>(x.v[k]);
    reinterpret_cast<Vec<O, V>*>(out)[i] = r;
  }
  for (int64_t i = nvec * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = kernels::convert<O>(in[i]);
}

template <int V, class T> static __global__ void fill_contiguous(T* out, T value, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t nvec = n / V;
  Vec<T, V> r;
  for (int k = 0; k < V; ++k) r.v[k] = value;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < nvec; i += stride)
    reinterpret_cast<Vec<T, V>*>(out)[i] = r;
  for (int64_t i = nvec * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = value;
}

template <class T> static __global__ void fill_kernel(char* out, T value, Offsets<1> offsets, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[1];
    offsets.at(i, off);
    *reinterpret_cast<T*>(out + off[0]) = value;
  }
}

void launch_copy(Tensor& out, const Tensor& src, hipStream_t stream) {
  const int64_t n = out.numel();
  if (out.dtype() == src.dtype() && out.is_contiguous() && src.is_contiguous()) {
    HIP_CHECK(hipMemcpyAsync(out.data_ptr(), src.data_ptr(), out.nbytes(), hipMemcpyDeviceToDevice, stream));
    return;
  }
  const bool contiguous = out.is_contiguous() && src.is_contiguous();
  Offsets<2> offsets = contiguous ? Offsets<2>{} : make_offsets<2>({&out, &src}, "copy");
  visit_dtype(out.dtype(), [&](auto otag) {
    using O = typename decltype(otag)::type;
    visit_dtype(src.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      // The wider of the two types sets the access width: 16 bytes a load or a store.
      constexpr int V = std::min(kVec<O>, kVec<I>);
      O* o = static_cast<O*>(out.data_ptr());
      const I* in = static_cast<const I*>(src.data_ptr());
      if (contiguous && aligned(o, sizeof(O) * V) && aligned(in, sizeof(I) * V))
        convert_contiguous<V><<<grid_for((n + V - 1) / V), kThreads, 0, stream>>>(o, in, n);
      else if (contiguous)
        convert_contiguous<1><<<grid_for(n), kThreads, 0, stream>>>(o, in, n);
      else
        copy_kernel<O, I><<<grid_for(n), kThreads, 0, stream>>>(static_cast<char*>(out.data_ptr()),
                                                                  static_cast<const char*>(src.data_ptr()), offsets, n);
    });
  });
  check_launch("copy", "shapes " + detail::to_piece(out.shape()) + " (" + dtype_name(src.dtype()) + " -> " +
                           dtype_name(out.dtype()) + ")");
}

void launch_fill(Tensor& out, const Scalar& value, hipStream_t stream) {
  const int64_t n = out.numel();
  const bool contiguous = out.is_contiguous();
  Offsets<1> offsets = contiguous ? Offsets<1>{} : make_offsets<1>({&out}, "fill");
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = kVec<T>;
    T* o = static_cast<T*>(out.data_ptr());
    if (contiguous && aligned(o, sizeof(T) * V))
      fill_contiguous<V><<<grid_for((n + V - 1) / V), kThreads, 0, stream>>>(o, kernels::scalar_as<T>(value), n);
    else if (contiguous)
      fill_contiguous<1><<<grid_for(n), kThreads, 0, stream>>>(o, kernels::scalar_as<T>(value), n);
    else
      fill_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<char*>(out.data_ptr()),
                                                            kernels::scalar_as<T>(value), offsets, n);
  });
  check_launch("fill", "shape " + detail::to_piece(out.shape()) + " (" + dtype_name(out.dtype()) + ")");
}

// A source on the host or another GPU comes over straight into the output when
// no conversion or layout change is needed (the memory manager, a peer copy), else
// into a device buffer that the copy kernel then converts.
void copy_entry(OpCall& call) {
  Tensor& out = call.out();
  const int device = out.device().index;
  DeviceGuard guard(device);
  Tensor src = call.inputs[0];
  if (src.device() != out.device()) {
    src = src.contiguous();
    if (out.is_contiguous() && out.dtype() == src.dtype()) {
      if (!src.device().is_cpu()) {
        copy_between_devices(out.data_ptr(), device, src.data_ptr(), src.device().index, src.nbytes());
        return;
      }
      ROCmMemoryManager& memory = get_memory_manager(device);
      hipStream_t stream = current_stream(device);
      // non_blocking from a pinned tensor: straight from its memory, without
      // waiting; the pool keeps the memory until the copy has run.
      if (call.attr<CopyAttrs>().non_blocking && get_pinned_pool().record_use(src.data_ptr(), device, stream))
        memory.copy_host_to_device_async(out.data_ptr(), src.data_ptr(), src.nbytes(), stream);
      else
        memory.copy_host_to_device(out.data_ptr(), src.data_ptr(), src.nbytes());
      return;
    }
    src = src.to(out.device());
  }
  launch_copy(out, src, current_stream(device));
}

void fill_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  launch_fill(call.out(), call.attr<FillAttrs>().value, current_stream(device));
}

PF_REGISTER_KERNEL(copy, ROCm, &copy_entry);
PF_REGISTER_KERNEL(fill, ROCm, &fill_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
