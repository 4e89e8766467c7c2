// The GPU's fused_elementwise and fused_reduction (src/core/fusion_ops.cpp): one kernel
// for the chain (a load per input, the steps' functors in registers, one store; its
// source from fused_elementwise_source), compiled at run time
// (include/pyflame/backend/rocm/compiler.h). The functors are those of
// kernels/functors.h, the eager kernels' own, made on the host from the steps'
// parameters as the eager kernels make them and passed by value. A kernel is kept
// per chain shape (ops and arguments; the parameters are arguments of the launch),
// dtype, which inputs are Python numbers (by value) and layout: flat when every
// tensor input has the output's shape and is contiguous (in 16-byte packs, one load
// per input, where every pointer is 16-byte aligned), else strided over the output's
// dims coalesced (broadcast inputs at stride 0), by rows where the innermost is long
// enough to fill a block (the outer dims' offsets then once a row, not per element).
// Indices are 64-bit. A fused_reduction's kernel
// accumulates the chain's values (rounded to the dtype, as the eager chain stores them)
// in the compute type, as the eager reductions do; its result never goes to memory.

#include <algorithm>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_map>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/compiler.h"
#include "pyflame/error.h"
#include "pyflame/ir/fusion.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

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

// Each chain's compiled kernel, by `key`: the source is made and compiled on the first call.
std::shared_ptr<const CompiledKernel> cached_kernel(const std::string& key, const std::function<std::string()>& source,
                                                    const std::string& name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> kernels;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = kernels.find(key); it != kernels.end()) return it->second;
  }
  auto k = KernelCompiler::global().compile(source(), name);
  std::lock_guard<std::mutex> lock(mutex);
  return kernels.emplace(key, std::move(k)).first->second;
}

// A kernel's key: its name, then numbers that make its source.
struct KernelKey {
  std::string key;
  explicit KernelKey(const char* name) : key(name) { key += '/'; }
  KernelKey& put(int64_t v) {
    key.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  KernelKey& put(const std::vector<FusedStep>& steps, const std::vector<bool>& number) {
    for (bool b : number) put(b);
    for (const FusedStep& s : steps) {
      put(static_cast<int64_t>(s.op)).put(static_cast<int64_t>(s.args.size()));
      for (int64_t x : s.args) put(x);
    }
    return *this;
  }
};

// Appends the inputs' launch arguments: a tensor's pointer, a Python number by value in A.
template <class T> void add_inputs(KernelArgs& args, const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (t.device().is_cpu()) args.add(static_cast<acc_t<T>>(*t.data<T>()));  // converted as the eager ops convert it
    else args.add(static_cast<const void*>(t.data_ptr()));
  }
}

// A strided fused_elementwise's walk: the output's dims coalesced, each tensor input's strides.
struct ElementwiseLayout {
  std::vector<int64_t> size;
  std::vector<std::vector<int64_t>> stride;
  // Rows of the innermost dim (blockIdx.y the row) where it is long enough to fill blocks.
  bool rows = false;
};

template <class T>
void launch_fused(OpCall& call, const CompiledKernel& kernel, const ElementwiseLayout& layout, int64_t vec) {
  using A = acc_t<T>;
  Tensor& out = call.out();
  const int64_t n = out.numel();
  KernelArgs args;
  args.add(out.data_ptr());
  add_inputs<T>(args, call.inputs);
  for (const FusedStep& s : call.attr<FusedElementwiseAttrs>().steps) add_functor<A>(args, s);
  std::vector<int64_t> sizes_strides = layout.size;
  for (const auto& s : layout.stride) sizes_strides.insert(sizes_strides.end(), s.begin(), s.end());
  if (!layout.size.empty()) args.add_bytes(sizes_strides.data(), sizes_strides.size() * sizeof(int64_t));
  args.add(static_cast<long long>(n));
  constexpr unsigned kThreads = 256;
  if (layout.rows) {
    const int64_t inner = layout.size.back();
    const int64_t per_block = 4 * kThreads;  // the kernel's four elements a thread
    const auto x = static_cast<unsigned>(std::min<int64_t>((inner + per_block - 1) / per_block, int64_t{1} << 16));
    const auto y = static_cast<unsigned>(std::min<int64_t>(n / inner, 65535));
    return kernel.launch({x, y, 1}, {kThreads, 1, 1}, 0, args.pointers());
  }
  const int64_t work = n / vec + n % vec;  // packs, then the tail one by one
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, int64_t{1} << 20));
  kernel.launch({blocks, 1, 1}, {kThreads, 1, 1}, 0, args.pointers());
}

void fused_elementwise_entry(OpCall& call) {
  constexpr int64_t kRowMin = 64;  // an innermost dim this long is walked by rows
  Tensor& out = call.out();
  const int device = out.device().index;
  DeviceGuard guard(device);
  std::vector<bool> number;
  std::vector<const Tensor*> tensors;
  bool flat = true, aligned = reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
  for (const Tensor& t : call.inputs) {
    number.push_back(t.device().is_cpu());
    if (number.back()) continue;
    tensors.push_back(&t);
    flat = flat && t.is_contiguous() && t.shape() == out.shape();
    aligned = aligned && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  }
  ElementwiseLayout layout;
  if (!flat) {
    std::vector<int64_t> dims(out.dim());
    std::iota(dims.begin(), dims.end(), 0);
    layout.stride.resize(tensors.size());
    if (coalesce_dims(out.shape(), dims, tensors, layout.size, layout.stride) == 0) {  // one element
      layout.size.push_back(1);
      for (auto& s : layout.stride) s.push_back(0);
    }
    layout.rows = layout.size.back() >= kRowMin;
  }
  const int64_t ndim = static_cast<int64_t>(layout.size.size());
  const int64_t vec = flat && aligned ? 16 / static_cast<int64_t>(itemsize(out.dtype())) : 1;
  const auto& attrs = call.attr<FusedElementwiseAttrs>();
  KernelKey key("fused_elementwise");
  key.put(static_cast<int64_t>(out.dtype())).put(device).put(ndim).put(vec).put(layout.rows).put(attrs.steps, number);
  const auto kernel = cached_kernel(
      key.key, [&] { return fused_elementwise_source(attrs, out.dtype(), number, ndim, vec, layout.rows); },
      "fused_elementwise");
  switch (out.dtype()) {
    case DType::Float16: return launch_fused<Half>(call, *kernel, layout, vec);
    case DType::BFloat16: return launch_fused<BFloat16>(call, *kernel, layout, vec);
    case DType::Float64: return launch_fused<double>(call, *kernel, layout, vec);
    default: return launch_fused<float>(call, *kernel, layout, vec);
  }
}

// fused_reduction's dims as its kernel walks them: the output's (kept) dims, then the reduced
// ones, each group in the chain's order and coalesced.
struct ReductionLayout {
  std::vector<int64_t> size;
  std::vector<std::vector<int64_t>> stride;  // per tensor input, per dim
  int64_t kept = 0, reduced = 0;
  int64_t length = 1;  // reduced elements per output

  ReductionLayout(const Shape& shape, const std::vector<int64_t>& dims, const std::vector<const Tensor*>& tensors)
      : stride(tensors.size()) {
    std::vector<int64_t> others;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) others.push_back(d);
    kept = coalesce_dims(shape, others, tensors, size, stride);
    reduced = coalesce_dims(shape, dims, tensors, size, stride);
    if (reduced == 0) {  // a 0-d chain, or only dims of size 1 reduced
      size.push_back(1), reduced = 1;
      for (auto& s : stride) s.push_back(0);
    }
    for (int64_t d : dims) length *= shape[d];
  }

  // Whether every tensor input reads dim d's neighbours next to each other (or one value).
  bool dense(int64_t d) const {
    return std::all_of(stride.begin(), stride.end(), [&](const auto& s) { return s[d] == 0 || s[d] == 1; });
  }
};

template <class A> void add_reduce_functor(KernelArgs& args, ir::OpType reduce) {
  switch (reduce) {
    case ir::OpType::sum: return args.add(kernels::SumReduce<A>{});
    case ir::OpType::mean: return args.add(kernels::MeanReduce<A>{});
    case ir::OpType::max: return args.add(kernels::MaxReduce<A>{});
    case ir::OpType::min: return args.add(kernels::MinReduce<A>{});
    default: throw ValueError(detail::cat("fused_reduction: ", op_name(reduce), " is not a fusable reduction"));
  }
}

template <class T> void launch_reduction(OpCall& call, int device) {
  using A = acc_t<T>;
  constexpr int kThreads = 256;  // the generated kernel's shared buffer
  const auto& a = call.attr<FusedReductionAttrs>();
  Tensor& out = call.out();
  std::vector<bool> number;
  std::vector<const Tensor*> tensors;
  for (const Tensor& t : call.inputs) {
    number.push_back(t.device().is_cpu());
    if (!number.back()) tensors.push_back(&t);
  }
  // Every tensor input has the chain's shape (a broadcast view where it had fewer elements).
  const ReductionLayout l(tensors.front()->shape(), a.dims, tensors);
  const int64_t outputs = out.numel();
  // A group of lanes per output reads neighbouring elements where the reduced elements are
  // neighbours in memory; where the outputs are instead (a sum over rows), a thread per
  // output, neighbouring threads reading neighbouring elements.
  int group = 1;
  if (l.dense(l.kept + l.reduced - 1) || l.kept == 0 || !l.dense(l.kept - 1))
    for (group = 32; group < kThreads && group * 8 < l.length;) group *= 2;
  const int64_t blocks = (outputs + kThreads / group - 1) / (kThreads / group);
  PF_CHECK(blocks < (int64_t{1} << 31), ValueError, "fused_reduction: ", outputs, " outputs is more than one launch takes");
  // Parts of each output's reduction, where the outputs alone would leave compute units idle:
  // at least 8 elements a lane each, combined by a second kernel.
  const int64_t wanted = 4 * int64_t{compute_units(device)};
  int64_t parts = std::clamp<int64_t>((wanted + blocks - 1) / blocks, 1,
                                      std::clamp<int64_t>(l.length / (group * 8), 1, 65535));
  const int64_t chunk = (l.length + parts - 1) / parts;
  parts = (l.length + chunk - 1) / chunk;
  const bool partial = parts > 1;

  KernelKey key("fused_reduction");
  key.put(static_cast<int64_t>(out.dtype())).put(device).put(static_cast<int64_t>(a.reduce)).put(l.kept);
  key.put(l.reduced).put(partial).put(a.steps, number);
  const auto kernel = cached_kernel(
      key.key, [&] { return fused_reduction_source(a, out.dtype(), number, l.kept, l.reduced, partial); },
      "fused_reduction");
  Tensor parts_buffer = partial ? Tensor::empty({outputs * parts}, dtype_of<A>(), out.device()) : Tensor();
  KernelArgs args;
  args.add(partial ? parts_buffer.data_ptr() : out.data_ptr());
  add_inputs<T>(args, call.inputs);
  for (const FusedStep& s : a.steps) add_functor<A>(args, s);
  add_reduce_functor<A>(args, a.reduce);
  std::vector<int64_t> layout = l.size;
  for (const auto& s : l.stride) layout.insert(layout.end(), s.begin(), s.end());
  args.add_bytes(layout.data(), layout.size() * sizeof(int64_t));
  args.add(static_cast<long long>(outputs)), args.add(static_cast<long long>(l.length));
  args.add(static_cast<long long>(chunk)), args.add(group);
  kernel->launch({static_cast<unsigned>(blocks), static_cast<unsigned>(parts), 1}, {kThreads, 1, 1}, 0,
                 args.pointers());
  if (!partial) return;
  KernelKey finish_key("fused_reduction_finish");
  finish_key.put(static_cast<int64_t>(out.dtype())).put(device).put(static_cast<int64_t>(a.reduce));
  const auto finish = cached_kernel(
      finish_key.key, [&] { return fused_reduction_finish_source(a.reduce, out.dtype()); }, "fused_reduction_finish");
  KernelArgs finish_args;
  finish_args.add(out.data_ptr()), finish_args.add(static_cast<const void*>(parts_buffer.data_ptr()));
  add_reduce_functor<A>(finish_args, a.reduce);
  finish_args.add(static_cast<long long>(outputs)), finish_args.add(static_cast<long long>(parts));
  finish_args.add(static_cast<long long>(l.length));
  finish->launch({static_cast<unsigned>((outputs + kThreads - 1) / kThreads), 1, 1}, {kThreads, 1, 1}, 0,
                 finish_args.pointers());
}

void fused_reduction_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  switch (call.out().dtype()) {
    case DType::Float16: return launch_reduction<Half>(call, device);
    case DType::BFloat16: return launch_reduction<BFloat16>(call, device);
    case DType::Float64: return launch_reduction<double>(call, device);
    default: return launch_reduction<float>(call, device);
  }
}

}  // namespace

PF_REGISTER_KERNEL(fused_elementwise, ROCm, &fused_elementwise_entry);
PF_REGISTER_KERNEL(fused_reduction, ROCm, &fused_reduction_entry);

}  // namespace pyflame::backend::rocm
