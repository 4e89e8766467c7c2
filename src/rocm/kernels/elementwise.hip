// GPU elementwise kernels: unary, binary, comparison, where and clamp, each
// instantiated for every elementwise op of the op table with the same
// PF_HOST_DEVICE functor the CPU uses. Contiguous operands take a vectorised
// path (16-byte loads and stores when every pointer is 16-byte aligned);
// broadcast and strided operands walk their coalesced layout (V elements at
// a time where each operand is contiguous or repeated along the innermost dim:
// a mask or a bias broadcast over the outer dims). A Python number operand stays on the host and is passed by value. Grid-stride loops make the launch independent of the warp size,
// so the same code is right for wave64 and wave32.

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
    Vec<T, V> x[kUnaryUnroll];
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
static __global__ void unary_strided(char* out, const char* in, Offsets<2> offsets, int64_t n, F f) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[2];
    offsets.at(i, off);
    *reinterpret_cast<O*>(out + off[0]) = static_cast<O>(f(static_cast<A>(*reinterpret_cast<const T*>(in + off[1]))));
  }
}

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

// A branch taken from the host (a Python number) is passed by value: its pointer is never read.
template <class T> struct WhereBranch {
  const char* data;
  T value;
  bool on_host;
  PF_HOST_DEVICE T at(int64_t off) const { return on_host ? value : *reinterpret_cast<const T*>(data + off); }
  template <int V> PF_HOST_DEVICE Vec<T, V> group(int64_t off, bool repeats) const {
    return load_group<T, V>(on_host ? reinterpret_cast<const char*>(&value) : data, on_host ? 0 : off,
                            on_host || repeats);
  }
};

template <class T>
static __global__ void where_strided(char* out, const char* cond, WhereBranch<T> a, WhereBranch<T> b,
                                     Offsets<4> offsets, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[4];
    offsets.at(i, off);
    *reinterpret_cast<T*>(out + off[0]) = *reinterpret_cast<const bool*>(cond + off[1]) ? a.at(off[2]) : b.at(off[3]);
  }
}

template <class T, int V>
static __global__ void where_grouped(char* out, const char* cond, WhereBranch<T> a, WhereBranch<T> b,
                                     Offsets<4> offsets, int64_t groups) {
  const bool cond_repeats = offsets.strides[0][1] == 0;
  const bool a_repeats = offsets.strides[0][2] == 0, b_repeats = offsets.strides[0][3] == 0;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[4];
    offsets.at(g * V, off);
    const Vec<bool, V> c = load_group<bool, V>(cond, off[1], cond_repeats);
    const Vec<T, V> x = a.template group<V>(off[2], a_repeats), y = b.template group<V>(off[3], b_repeats);
    Vec<T, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = c.v[k] ? x.v[k] : y.v[k];
    *reinterpret_cast<Vec<T, V>*>(out + off[0]) = r;
  }
}

std::string describe(const OpCall& call) {
  std::string s = "shapes";
  for (const Tensor& t : call.inputs) s += " " + detail::to_piece(t.shape());
  return s + " -> " + detail::to_piece(call.out().shape()) + " (" + dtype_name(call.out().dtype()) + ")";
}

// ---- launchers

// A binary functor with one operand fixed: a Python number, read on the host
// and passed by value (no transfer, no wait for the device).
template <class F, class A, bool kLeft> struct BindScalar {
  F f;
  A value;
  PF_HOST_DEVICE auto operator()(A x) const { return kLeft ? f(value, x) : f(x, value); }
};

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
  if (in.is_contiguous() && out.is_contiguous()) {
    O* o = out.data<O>();
    const T* x = in.data<T>();
    if (aligned(o, sizeof(O) * V) && aligned(x, sizeof(T) * V))
      unary_contiguous<V><<<grid_for((n + V * kUnaryUnroll - 1) / (V * kUnaryUnroll)), kThreads, 0, stream>>>(o, x, n, f);
    else
      unary_contiguous<1><<<grid_for((n + kUnaryUnroll - 1) / kUnaryUnroll), kThreads, 0, stream>>>(o, x, n, f);
  } else {
    unary_strided<O, T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<char*>(out.data_ptr()),
                                                              static_cast<const char*>(in.data_ptr()),
                                                              make_offsets<2>({&out, &in}, op_name(op)), n, f);
  }
}

template <template <class> class F, DTypeSet kSet, bool kToBool> void unary_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor& in = call.inputs[0];
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::accepts<kSet, T>()) {
      using O = std::conditional_t<kToBool, bool, T>;
      launch_unary<O, T>(call.out(), in, kernels::make_functor<F<acc_t<T>>>(call.attrs), current_stream(device),
                         call.op);
    } else {
      throw TypeError(std::string(op_name(call.op)) + ": no GPU kernel for " + dtype_name(in.dtype()));
    }
  });
  check_launch(op_name(call.op), describe(call));
}

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
        if (a.device().is_cpu()) {
          launch_unary<O, T>(out, b, BindScalar<Fn, A, true>{f, static_cast<A>(*a.data<T>())}, stream, call.op);
        } else if (b.device().is_cpu()) {
          launch_unary<O, T>(out, a, BindScalar<Fn, A, false>{f, static_cast<A>(*b.data<T>())}, stream, call.op);
        } else if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) {
          O* o = out.data<O>();
          const T* x = a.data<T>();
          const T* y = b.data<T>();
          if (aligned(o, sizeof(O) * V) && aligned(x, sizeof(T) * V) && aligned(y, sizeof(T) * V))
            binary_contiguous<V><<<grid_for((n + V - 1) / V), kThreads, 0, stream>>>(o, x, y, n, f);
          else
            binary_contiguous<1><<<grid_for(n), kThreads, 0, stream>>>(o, x, y, n, f);
        } else {
          const Offsets<3> offsets = make_offsets<3>({&out, &a, &b}, op_name(call.op));
          char* o = static_cast<char*>(out.data_ptr());
          const char *x = static_cast<const char*>(a.data_ptr()), *y = static_cast<const char*>(b.data_ptr());
          if (V > 1 && walks_in_groups<3>(offsets, V, {o, x, y}, {sizeof(O), sizeof(T), sizeof(T)}))
            binary_grouped<V, O, T><<<grid_for(n / V), kThreads, 0, stream>>>(o, x, y, offsets, n / V, f);
          else
            binary_strided<O, T><<<grid_for(n), kThreads, 0, stream>>>(o, x, y, offsets, n, f);
        }
      });
    } else {
      throw TypeError(std::string(op_name(call.op)) + ": no GPU kernel for " + dtype_name(a.dtype()));
    }
  });
  check_launch(op_name(call.op), describe(call));
}

void where_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  const int64_t n = call.out().numel();
  Offsets<4> offsets = make_offsets<4>({&call.out(), &call.inputs[0], &call.inputs[1], &call.inputs[2]}, "where");
  visit_dtype(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto branch = [](const Tensor& t) {
      const bool on_host = t.device().is_cpu();
      return WhereBranch<T>{static_cast<const char*>(t.data_ptr()), on_host ? *t.data<T>() : T(), on_host};
    };
    constexpr int V = kVec<T>;
    char* out = static_cast<char*>(call.out().data_ptr());
    const char* cond = static_cast<const char*>(call.inputs[0].data_ptr());
    const WhereBranch<T> a = branch(call.inputs[1]), b = branch(call.inputs[2]);
    const hipStream_t stream = current_stream(device);
    if (V > 1 && walks_in_groups<4>(offsets, V, {out, cond, a.on_host ? nullptr : a.data, b.on_host ? nullptr : b.data},
                                    {sizeof(T), 1, sizeof(T), sizeof(T)}))
      where_grouped<T, V><<<grid_for(n / V), kThreads, 0, stream>>>(out, cond, a, b, offsets, n / V);
    else
      where_strided<T><<<grid_for(n), kThreads, 0, stream>>>(out, cond, a, b, offsets, n);
  });
  check_launch("where", describe(call));
}

#define PF_FAMILY_UNARY(name, F) PF_REGISTER_KERNEL(name, ROCm, (&unary_entry<kernels::F, DTypeSet::NoBool, false>));
#define PF_FAMILY_CLAMP(name, F) PF_REGISTER_KERNEL(name, ROCm, (&unary_entry<kernels::F, DTypeSet::NoBool, false>));
#define PF_FAMILY_UNARY_FLOAT(name, F) PF_REGISTER_KERNEL(name, ROCm, (&unary_entry<kernels::F, DTypeSet::FloatOnly, false>));
#define PF_FAMILY_UNARY_BOOL(name, F) PF_REGISTER_KERNEL(name, ROCm, (&unary_entry<kernels::F, DTypeSet::All, true>));
#define PF_FAMILY_BINARY(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::All, false>));
#define PF_FAMILY_BINARY_FLOAT(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::FloatOnly, false>));
#define PF_FAMILY_UNARY_INT(name, F) PF_REGISTER_KERNEL(name, ROCm, (&unary_entry<kernels::F, DTypeSet::IntegerOrBool, false>));
#define PF_FAMILY_BINARY_INT(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::IntegerOrBool, false>));
#define PF_FAMILY_COMPARE(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::All, true>));
#define PF_FAMILY_WHERE(name, F) PF_REGISTER_KERNEL(name, ROCm, &where_entry);
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::backend::rocm
