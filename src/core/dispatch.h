#pragma once
// The op registry: per op, its infer function (validation and output meta),
// its kernel per device type, and optionally a composite. A backend supports
// an op by registering a kernel for it; "is supported" is never a hand-kept
// list.
//
// An infer function reads the call (shapes, dtypes, devices, attributes; never
// values), raises ValueError/TypeError/IndexError for bad calls, may make the
// attributes canonical, and returns an Inferred: the device the op runs on,
// how each input is handed to the kernel (dtype, a view or broadcast of it,
// contiguous) and each output's kernel shape, dtype and result view. It
// allocates nothing and waits for nothing, so graph capture and autograd can
// run it on their own. apply() then moves and converts the inputs, allocates
// the outputs and calls the kernel with a call whose inputs are already on the
// kernel's device, in the planned dtypes and layouts.

#include <atomic>
#include <optional>
#include <vector>

#include "core/inline_vector.h"
#include "pyflame/ir/op_call.h"

namespace pyflame {

// How apply hands one input to the kernel, in this order: moved to the op's
// device, converted to `dtype`, reshaped to `reshape` (a view where the strides
// allow), broadcast to `expand`, made contiguous.
struct InputPlan {
  std::optional<DType> dtype{};
  std::optional<Shape> reshape{};
  std::optional<Shape> expand{};
  bool contiguous = false;
  // A Python number: handed over as the 0-d host tensor it is; kernels read
  // its value on the host (no transfer, no wait).
  bool host_scalar = false;
  // The kernel reads this input from the device it lives on (copy's source:
  // moving data between devices is that op's own work).
  bool transfer = false;
};

struct OutputPlan {
  Shape shape;                    // as the kernel writes it (contiguous)
  DType dtype;
  std::optional<Shape> result{};  // the caller's view of it, when it differs
  // The output is a view the kernel makes of its input (VIEW family): nothing is allocated.
  bool view = false;
};

struct Inferred {
  static constexpr size_t kMaxInputs = 6, kMaxOutputs = 4;
  Device device;
  InlineVector<InputPlan, kMaxInputs> inputs;  // one per call input (undefined inputs: ignored)
  InlineVector<OutputPlan, kMaxOutputs> outputs;
  // Set when the result is this value whatever the inputs hold (an empty sum,
  // a product over k = 0): outputs are filled with it and no kernel runs.
  std::optional<Scalar> constant{};
};

using InferFn = Inferred (*)(OpCall& call);
using KernelFn = void (*)(OpCall& call);

PF_API void register_infer(ir::OpType op, InferFn fn);
PF_API void register_kernel(ir::OpType op, DeviceType device, KernelFn fn);
PF_API KernelFn find_kernel(ir::OpType op, DeviceType device);  // nullptr if none
InferFn find_infer(ir::OpType op);
CompositeFn find_composite(ir::OpType op);
// The attrs alternative the op table names for `op` (an index into OpAttrs).
size_t table_attrs_index(ir::OpType op);

// Kernel-level calls for kernels, adapters and raw Tensor methods: they run a
// registered kernel on a prepared call (inputs on `device`, outputs allocated)
// and never pass through apply, so they are never recorded or captured.
// NotSupportedError if the device type has no kernel for the op; nothing runs
// when every output is empty.
PF_API void run_kernel(OpCall& call, Device device);

// What other modules do to every call apply() makes: autocast converts its
// inputs, autograd records it. Each module registers its hooks at load time
// (src/amp/autocast.cpp, src/autograd/engine.cpp), so the core includes
// neither; a graph tracer or a profiler hooks in the same way.
struct ApplyHooks {
  using RunFn = std::vector<Tensor> (*)(void* ctx);
  // While autocast is on: converts the call's floating inputs.
  void (*autocast_inputs)(OpCall& call) = nullptr;
  // In grad mode: whether the call is recorded. If so, record makes the call's
  // node, runs run(ctx) with grad mode off and finishes the node with the outputs.
  bool (*should_record)(const OpCall& call) = nullptr;
  std::vector<Tensor> (*record)(OpCall& call, RunFn run, void* ctx) = nullptr;
  // In grad mode, for a view apply did not record: links it to the tensor it views.
  void (*link_view)(const Tensor& input, Tensor& view) = nullptr;
  // While a graph trace runs: a top-level call as it was made (before autocast) and its results;
  // and each access to a tensor's memory outside any op (Tensor::data_ptr at depth 0: nonzero's
  // count read on the host, a raw copy): the trace decides whether it can still be replayed.
  void (*trace)(const OpCall& call, const std::vector<Tensor>& outputs) = nullptr;
  void (*raw_access)(const Storage* storage) = nullptr;
  // While the op profiler runs (src/profiler): times run(ctx), which executes `call`
  // (the hook reads `call` before run consumes it).
  std::vector<Tensor> (*profile)(const OpCall& call, RunFn run, void* ctx) = nullptr;
};
PF_API ApplyHooks& apply_hooks();
// Threads tracing now: Tensor::data_ptr (a hot path) looks further only while it is not 0.
PF_API extern std::atomic<int> tracing_threads;
// Whether an op profiler session runs: apply() (a hot path) looks at the profile hook only then.
PF_API extern std::atomic<bool> profiler_active;

struct KernelRegistrar {
  KernelRegistrar(ir::OpType op, DeviceType device, KernelFn fn) { register_kernel(op, device, fn); }
};
#define PF_REGISTER_KERNEL(op, device, fn)                                                 \
  static ::pyflame::KernelRegistrar pf_kernel_##op##_##device(::pyflame::ir::OpType::op, \
                                                              ::pyflame::DeviceType::device, fn)

struct InferRegistrar {
  InferRegistrar(ir::OpType op, InferFn fn) { register_infer(op, fn); }
};
#define PF_REGISTER_INFER(op, fn) \
  static ::pyflame::InferRegistrar pf_infer_##op(::pyflame::ir::OpType::op, fn)

// An op with a decomposition registers it with its infer: both facts in one line.
struct CompositeRegistrar {
  CompositeRegistrar(ir::OpType op, InferFn infer, CompositeFn fn) {
    register_infer(op, infer);
    register_composite(op, fn);
  }
};
#define PF_REGISTER_COMPOSITE(op, infer, fn) \
  static ::pyflame::CompositeRegistrar pf_composite_##op(::pyflame::ir::OpType::op, infer, fn)
// A decomposition alone, for an op whose family registers its infer (an elementwise op).
struct DecompositionRegistrar {
  DecompositionRegistrar(ir::OpType op, CompositeFn fn) { register_composite(op, fn); }
};
#define PF_REGISTER_DECOMPOSITION(op, fn) \
  static ::pyflame::DecompositionRegistrar pf_decomposition_##op(::pyflame::ir::OpType::op, fn)

}  // namespace pyflame
