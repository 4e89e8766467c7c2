#pragma once
// GPU kernels of the binary families and comparisons (elementwise.hip has the
// design), shared by binary.hip (BINARY), binary_float_int.hip (BINARY_FLOAT,
// BINARY_INT) and compare.hip (COMPARE): the op table's many binary ops times
// every dtype are the build's largest instantiation, so three files compile it
// in parallel. Contiguous operands in 16-byte accesses; broadcast ones V
// elements at a time where every operand is contiguous or repeated along the
// innermost dim (a bias or a mask broadcast over the outer dims), else element
// by element along their coalesced layout; a Python-number operand as a unary op.

#include "rocm/kernels/elementwise.h"

namespace pyflame::backend::rocm {
namespace {

// ---- contiguous (no broadcasting): out[i] = f(a[i], b[i])
template <int V, class O, class T, class F>
static __global__ void binary_contiguous(O* out, const T* a, const T* b, int64_t n, F f) {
  using A = acc_t<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t nvec = n / V;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < nvec; i += stride) {
    Vec<T, V> x = reinterpret_cast<const Vec<T, V>*>(a)[i];
    Vec<T, V> y = reinterpret_cast<const Vec<T, V>*>(b)[i];
    Vec<O, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = static_cast<O>(f(static_cast<A>(x.v[k]), static_cast<A>(y.v[k])));
    reinterpret_cast<Vec<O, V>*>(out)[i] = r;
  }
  for (int64_t i = nvec * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<O>(f(static_cast<A>(a[i]), static_cast<A>(b[i])));
}

// ---- strided / broadcast: operand 0 is the output
template <class O, class T, class F>
static __global__ void binary_strided(char* out, const char* a, const char* b, Offsets<3> offsets, int64_t n, F f) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[3];
    offsets.at(i, off);
    *reinterpret_cast<O*>(out + off[0]) = static_cast<O>(
        f(static_cast<A>(*reinterpret_cast<const T*>(a + off[1])), static_cast<A>(*reinterpret_cast<const T*>(b + off[2]))));
  }
}

// A broadcast walk V elements at a time (walks_in_groups holds): one offset
// computation and one vector access per operand and group.
template <int V, class O, class T, class F>
static __global__ void binary_grouped(char* out, const char* a, const char* b, Offsets<3> offsets, int64_t groups,
                                      F f) {
  using A = acc_t<T>;
  const bool a_repeats = offsets.strides[0][1] == 0, b_repeats = offsets.strides[0][2] == 0;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[3];
    offsets.at(g * V, off);
    const Vec<T, V> x = load_group<T, V>(a, off[1], a_repeats), y = load_group<T, V>(b, off[2], b_repeats);
    Vec<O, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = static_cast<O>(f(static_cast<A>(x.v[k]), static_cast<A>(y.v[k])));
    *reinterpret_cast<Vec<O, V>*>(out + off[0]) = r;
  }
}

// A binary functor with one operand a Python number, read on the host and
// passed by value (no transfer, no wait for the device). Which side it is on
// is a run-time flag, uniform across the grid: one kernel for both sides.
template <class F, class A> struct BindScalar {
  F f;
  A value;
  bool left;
  PF_HOST_DEVICE auto operator()(A x) const { return left ? f(value, x) : f(x, value); }
};

// An operand on the host is a Python number (see InputPlan::host_scalar).
template <template <class> class F, DTypeSet kSet, bool kCompare> void binary_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  hipStream_t stream = current_stream(device);
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  Tensor& out = call.out();
  const int64_t n = out.numel();
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    if constexpr (kernels::accepts<kSet, T>()) {
      using O = std::conditional_t<kCompare, bool, T>;
      with_checks<F<A>, A>(call, device, kernels::make_functor<F<A>>(call.attrs), [&](const auto& f) {
        using Fn = std::decay_t<decltype(f)>;
        constexpr int V = kVec<T>;
        if (a.device().is_cpu() || b.device().is_cpu()) {
          const bool left = a.device().is_cpu();
          const Tensor& scalar = left ? a : b;
          launch_unary<O, T>(out, left ? b : a, BindScalar<Fn, A>{f, static_cast<A>(*scalar.data<T>()), left}, stream,
                             call.op);
        } else if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous() &&
                   aligned(out.data_ptr(), sizeof(O) * V) && aligned(a.data_ptr(), sizeof(T) * V) &&
                   aligned(b.data_ptr(), sizeof(T) * V)) {
          binary_contiguous<V><<<grid_for((n + V - 1) / V), kThreads, 0, stream>>>(out.data<O>(), a.data<T>(),
                                                                                     b.data<T>(), n, f);
        } else {  // (contiguous operands at odd offsets too: rare, and one kernel less per op to compile)
          const Offsets<3> offsets = make_offsets<3>({&out, &a, &b}, op_name(call.op));
          char* o = static_cast<char*>(out.data_ptr());
          const char *x = static_cast<const char*>(a.data_ptr()), *y = static_cast<const char*>(b.data_ptr());
          // Grouped walks for floats only: their broadcasts are the hot ones (a bias, a
          // mask), and every dtype more is another kernel per op to compile.
          if constexpr (is_float_v<T>)
            if (walks_in_groups<3>(offsets, V, {o, x, y}, {sizeof(O), sizeof(T), sizeof(T)})) {
              binary_grouped<V, O, T><<<grid_for(n / V), kThreads, 0, stream>>>(o, x, y, offsets, n / V, f);
              return;
            }
          binary_strided<O, T><<<grid_for(n), kThreads, 0, stream>>>(o, x, y, offsets, n, f);
        }
      });
    } else {
      throw TypeError(std::string(op_name(call.op)) + ": no GPU kernel for " + dtype_name(a.dtype()));
    }
  });
  check_launch(op_name(call.op), describe(call));
}

}  // namespace
}  // namespace pyflame::backend::rocm
