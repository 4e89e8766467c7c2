// The GPU's fused_elementwise (src/core/fusion_ops.cpp): one kernel for the chain (a
// load per input, the steps' functors in registers, one store; its source from
// fused_elementwise_source), compiled at run time (include/pyflame/backend/rocm/compiler.h). The functors are those of
// kernels/functors.h, the eager kernels' own, made on the host from the steps'
// parameters as the eager kernels make them and passed by value. A kernel is kept
// per chain shape (ops and arguments; the parameters are arguments of the launch),
// dtype, which inputs are Python numbers (by value) and layout: flat when every
// tensor input has the output's shape and is contiguous (in 16-byte packs, one load
// per input, where every pointer is 16-byte aligned), else strided over the output's
// dims (broadcast inputs at stride 0). Indices are 64-bit.

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/compiler.h"
#include "pyflame/error.h"
#include "pyflame/ir/fusion.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {
namespace {

// Appends step `s`'s functor for compute type A, made from its parameters.
template <class A> void add_functor(KernelArgs& args, const FusedStep& s) {
  const OpAttrs attrs = ElementwiseAttrs{s.params};
  switch (s.op) {
#define PF_FUSED_STEP(name, functor) \
  case ir::OpType::name: return args.add(kernels::make_functor<kernels::functor<A>>(attrs));
#define PF_FAMILY_UNARY PF_FUSED_STEP
#define PF_FAMILY_UNARY_FLOAT PF_FUSED_STEP
#define PF_FAMILY_BINARY PF_FUSED_STEP
#define PF_FAMILY_BINARY_FLOAT PF_FUSED_STEP
#include "pyflame/for_each_op.inc"
#undef PF_FUSED_STEP
    default: break;
  }
  throw ValueError(detail::cat("fused_elementwise: ", op_name(s.op), " is not a fusable elementwise op"));
}

// The compiled kernel for this call's chain, dtype, numbers and layout.
std::shared_ptr<const CompiledKernel> kernel_for(const FusedElementwiseAttrs& a, DType dtype, int device,
                                                 const std::vector<bool>& number, int64_t ndim, int64_t vec) {
  std::string key;
  auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<int64_t>(dtype)), put(device), put(ndim), put(vec);
  for (bool b : number) put(b);
  for (const FusedStep& s : a.steps) {
    put(static_cast<int64_t>(s.op)), put(static_cast<int64_t>(s.args.size()));
    for (int64_t x : s.args) put(x);
  }
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> kernels;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = kernels.find(key); it != kernels.end()) return it->second;
  }
  auto k = KernelCompiler::global().compile(fused_elementwise_source(a, dtype, number, ndim, vec),
                                                 "fused_elementwise");
  std::lock_guard<std::mutex> lock(mutex);
  return kernels.emplace(key, std::move(k)).first->second;
}

template <class T> void launch_fused(OpCall& call, const CompiledKernel& kernel, int64_t ndim, int64_t vec) {
  using A = acc_t<T>;
  Tensor& out = call.out();
  const int64_t n = out.numel();
  KernelArgs args;
  args.add(out.data_ptr());
  std::vector<int64_t> layout(out.shape().begin(), out.shape().end());
  for (const Tensor& t : call.inputs) {
    if (t.device().is_cpu()) {  // a Python number, converted to the dtype as the eager ops convert it
      args.add(static_cast<A>(*t.data<T>()));
      continue;
    }
    args.add(static_cast<const void*>(t.data_ptr()));
    layout.insert(layout.end(), t.strides().begin(), t.strides().end());
  }
  for (const FusedStep& s : call.attr<FusedElementwiseAttrs>().steps) add_functor<A>(args, s);
  if (ndim) args.add_bytes(layout.data(), layout.size() * sizeof(int64_t));
  args.add(static_cast<long long>(n));
  constexpr unsigned kThreads = 256;
  const int64_t work = n / vec + n % vec;  // packs, then the tail one by one
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, int64_t{1} << 20));
  kernel.launch({blocks, 1, 1}, {kThreads, 1, 1}, 0, args.pointers());
}

void fused_elementwise_entry(OpCall& call) {
  Tensor& out = call.out();
  const int device = out.device().index;
  DeviceGuard guard(device);
  std::vector<bool> number;
  bool flat = true, aligned = reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
  for (const Tensor& t : call.inputs) {
    number.push_back(t.device().is_cpu());
    if (number.back()) continue;
    flat = flat && t.is_contiguous() && t.shape() == out.shape();
    aligned = aligned && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  }
  const int64_t ndim = flat ? 0 : out.dim();
  const int64_t vec = flat && aligned ? 16 / static_cast<int64_t>(itemsize(out.dtype())) : 1;
  const auto& attrs = call.attr<FusedElementwiseAttrs>();
  const auto kernel = kernel_for(attrs, out.dtype(), device, number, ndim, vec);
  switch (out.dtype()) {
    case DType::Float16: return launch_fused<Half>(call, *kernel, ndim, vec);
    case DType::BFloat16: return launch_fused<BFloat16>(call, *kernel, ndim, vec);
    case DType::Float64: return launch_fused<double>(call, *kernel, ndim, vec);
    default: return launch_fused<float>(call, *kernel, ndim, vec);
  }
}

}  // namespace

PF_REGISTER_KERNEL(fused_elementwise, ROCm, &fused_elementwise_entry);

}  // namespace pyflame::backend::rocm
