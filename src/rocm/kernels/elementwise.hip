// GPU elementwise kernels of the unary families, clamp and where, each
// instantiated for every such op of the op table with the same PF_HOST_DEVICE
// functor the CPU uses (binary.hip has the binary ones). Contiguous operands
// take a vectorised path (16-byte loads and stores when every pointer is
// 16-byte aligned); broadcast and strided operands walk their coalesced layout
// (where: V elements at a time when each operand is contiguous or repeated
// along the innermost dim, as an attention mask broadcast over the batch). A
// Python number operand stays on the host and is passed by value. Grid-stride
// loops make the launch independent of the warp size, so the same code is
// right for wave64 and wave32.

#include "rocm/kernels/elementwise.h"

namespace pyflame::backend::rocm {
namespace {

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
#define PF_FAMILY_UNARY_INT(name, F) PF_REGISTER_KERNEL(name, ROCm, (&unary_entry<kernels::F, DTypeSet::IntegerOrBool, false>));
#define PF_FAMILY_WHERE(name, F) PF_REGISTER_KERNEL(name, ROCm, &where_entry);
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::backend::rocm
