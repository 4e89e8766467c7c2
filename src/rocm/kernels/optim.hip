// GPU optimizer updates over a list of parameters (the multi-tensor step):
// one launch updates many parameters, with the functor the CPU loop uses
// (kernels/optim.h).
//
// The parameters' pointers travel in the kernel's arguments (StepBatch, by
// value, under the 4 KiB that every HIP and CUDA target accepts), so a step
// needs no table copied to the device, allocates nothing and can be captured
// into a graph. Each parameter is cut into chunks of kChunk elements; a block
// takes chunks in a grid-stride loop and finds its parameter by a binary
// search over the first chunk of each (the arguments are read uniformly by
// the whole block). A group with more parameters than fit one batch takes
// one launch per batch. 64-bit element indices.

#include "core/dispatch.h"
#include "kernels/optim.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int64_t kChunk = int64_t{kThreads} * 8;  // elements per block per chunk
constexpr size_t kArgBytes = 3840;               // kernel argument space used, below 4 KiB

template <class T, int S> struct StepBatch {
  static constexpr int kCapacity = static_cast<int>((kArgBytes - 16) / (sizeof(kernels::StepTensor<T, S>) + 8));
  int count;
  int64_t first_chunk[kCapacity + 1];  // [count]: the batch's number of chunks
  kernels::StepTensor<T, S> tensors[kCapacity];
};

template <class T, int S, class Update>
static __global__ void optimizer_step_chunks(const StepBatch<T, S> batch, Update update) {
  const int64_t chunks = batch.first_chunk[batch.count];
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    int lo = 0, hi = batch.count - 1;  // the last parameter whose chunks start at or before c
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (batch.first_chunk[mid] <= c) lo = mid;
      else hi = mid - 1;
    }
    const kernels::StepTensor<T, S>& t = batch.tensors[lo];
    const int64_t begin = (c - batch.first_chunk[lo]) * kChunk;
    const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
    const Update at_step = kernels::update_for(t, update);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) kernels::step_element(t, i, at_step);
  }
}

template <class T, int S, class Update> void launch_batch(const StepBatch<T, S>& batch, const Update& update, int device) {
  static_assert(sizeof(StepBatch<T, S>) + sizeof(Update) <= 4096, "kernel arguments over 4 KiB");
  const int64_t chunks = batch.first_chunk[batch.count];
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(chunks, int64_t{1} << 16));
  optimizer_step_chunks<T, S, Update><<<grid, kThreads, 0, current_stream(device)>>>(batch, update);
}

// inputs per parameter: param, grad, states[, step] (kernels/optim.h); contiguous, one dtype.
template <template <class> class Update> void optimizer_step_entry(OpCall& call) {
  constexpr int S = Update<float>::kStates;
  const int device = call.outputs[0].device().index;
  DeviceGuard guard(device);
  const auto& attrs = call.attr<typename Update<float>::Attrs>();
  const size_t params = call.inputs.size() / kernels::kInputsPerParam<Update<float>>;
  visit_dtype(call.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const Update<acc_t<T>> update(attrs);
      StepBatch<T, S> batch{};
      for (size_t j = 0; j < params; ++j) {
        const kernels::StepTensor<T, S> t = kernels::step_tensor<T, Update<float>>(call, j);
        if (t.n == 0) continue;
        batch.tensors[batch.count] = t;
        batch.first_chunk[batch.count + 1] = batch.first_chunk[batch.count] + (t.n + kChunk - 1) / kChunk;
        if (++batch.count == StepBatch<T, S>::kCapacity) {
          launch_batch(batch, update, device);
          batch.count = 0;
        }
      }
      if (batch.count) launch_batch(batch, update, device);
    }
  });
  check_launch(op_name(call.op), std::to_string(params) + " parameter(s) of " +
                                     dtype_name(call.inputs[0].dtype()) + ", the first of shape " +
                                     detail::to_piece(call.inputs[0].shape()));
}

PF_REGISTER_KERNEL(adam_step, ROCm, &optimizer_step_entry<kernels::AdamUpdate>);
PF_REGISTER_KERNEL(sgd_step, ROCm, &optimizer_step_entry<kernels::SgdUpdate>);
PF_REGISTER_KERNEL(rmsprop_step, ROCm, &optimizer_step_entry<kernels::RmspropUpdate>);

}  // namespace
}  // namespace pyflame::backend::rocm
