#pragma once
// What the GPU elementwise kernel files share (elementwise.hip: unary ops,
// clamp and where; binary.h: binary ops and comparisons, whose Python-number
// operand makes them unary): the unary kernels and their launcher, the functor
// wrappers, the error description. Several files, so that the op table's many
// instantiations compile in parallel.

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernel_errors.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

using kernels::DTypeSet;

// ---- contiguous (no broadcasting): out[i] = f(in...[i])
// Unary functors can be long (erf, exp): each thread issues kUnaryUnroll loads
// before computing, so loads stay in flight while it computes.
constexpr int kUnaryUnroll = 2;

template <int V, class O, class T, class F>
static __global__ void unary_contiguous(O* out, const T* in, int64_t n, F f) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t nvec = n / V;
  for (int64_t base = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; base < nvec;
       base += stride * kUnaryUnroll) {
    Vec<T, V> x[kUnaryUnroll]{};
#pragma unroll
    for (int u = 0; u < kUnaryUnroll; ++u)
      if (base + u * stride < nvec) x[u] = reinterpret_cast<const Vec<T, V>*>(in)[base + u * stride];
#pragma unroll
    for (int u = 0; u < kUnaryUnroll; ++u) {
      if (base + u * stride >= nvec) break;
      Vec<O, V> r;
      for (int k = 0; k < V; ++k) r.v[k] = static_cast<O>(f(static_cast<A>(x[u].v[k])));
      reinterpret_cast<Vec<O, V>*>(out)[base + u * stride] = r;
    }
  }
  for (int64_t i = nvec * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<O>(f(static_cast<A>(in[i])));
}

// ---- strided / broadcast: operand 0 is the output
template <class O, class T, class F>
static __global__ void unary_strided(char* out, const char* in, Offsets<2> offsets, int64_t n, F f) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[2];
    offsets.at(i, off);
    *reinterpret_cast<O*>(out + off[0]) = static_cast<O>(f(static_cast<A>(*reinterpret_cast<const T*>(in + off[1]))));
  }
}

std::string describe(const OpCall& call) {
  std::string s = "shapes";
  for (const Tensor& t : call.inputs) s += " " + detail::to_piece(t.shape());
  return s + " -> " + detail::to_piece(call.out().shape()) + " (" + dtype_name(call.out().dtype()) + ")";
}

// ---- launchers

// A functor that records the inputs it cannot take (kernels::has_invalid) as
// the device's kernel error, raised at the host's next wait.
template <class F> struct Checked {
  F f;
  KernelErrorSlot slot;
  int32_t op;
  template <class... A> PF_HOST_DEVICE auto operator()(A... a) const {
#if PF_DEVICE_PASS
    if (f.invalid(a...)) record_kernel_error(slot, F::kInvalid, op, 0, 0, 0);
#endif
    return f(a...);
  }
};

// Passes `functor` to body, wrapped in Checked when it declares invalid inputs.
template <class F, class A, class Body>
void with_checks(const OpCall& call, int device, const F& functor, const Body& body) {
  if constexpr (kernels::has_invalid<F, A, A>)
    body(Checked<F>{functor, kernel_error_slot(device), static_cast<int32_t>(call.op)});
  else
    body(functor);
}

// out = f(in) elementwise; O is T, or bool for UNARY_BOOL and comparisons.
template <class O, class T, class F>
void launch_unary(Tensor& out, const Tensor& in, const F& f, hipStream_t stream, ir::OpType op) {
  const int64_t n = out.numel();
  constexpr int V = kVec<T>;
  if (in.is_contiguous() && out.is_contiguous() && aligned(out.data_ptr(), sizeof(O) * V) &&
      aligned(in.data_ptr(), sizeof(T) * V)) {
    unary_contiguous<V><<<grid_for((n + V * kUnaryUnroll - 1) / (V * kUnaryUnroll)), kThreads, 0, stream>>>(
        out.data<O>(), in.data<T>(), n, f);
  } else {  // (contiguous operands at odd offsets too: rare, and one kernel less per op to compile)
    unary_strided<O, T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<char*>(out.data_ptr()),
                                                              static_cast<const char*>(in.data_ptr()),
                                                              make_offsets<2>({&out, &in}, op_name(op)), n, f);
  }
}

}  // namespace
}  // namespace pyflame::backend::rocm
