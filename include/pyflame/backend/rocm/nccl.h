#pragma once
// Collectives between the GPUs of several processes, through NCCL on NVIDIA and RCCL on
// AMD (the same API under the same names). pyflame.distributed's "nccl" backend is a thin
// layer over this.
//
// The library is opened at run time (dlopen), never linked: PyFlame imports on machines
// without it, and the one found decides (NVIDIA's nvidia-nccl wheel, which PyTorch also
// uses, or the system's). PYFLAME_NCCL_LIBRARY names a file to use instead.
//
// Each communicator owns a stream on its device. A collective waits for the work queued
// so far on the caller's current stream (an event), runs on the communicator's stream,
// and records an event when done; NcclWork::wait() makes the then-current stream wait for
// it. So the caller's stream goes on computing while a collective runs (DistributedDataParallel
// overlaps gradient all-reduces with the rest of the backward pass this way), and memory
// freed on the caller's stream after wait() is never reused before the collective ended.
// Buffers cross as pointers: the caller keeps the tensors alive until wait().
//
// A collective whose peers never arrive would block the device forever: a watchdog thread
// aborts a communicator whose oldest unfinished collective is older than the timeout; the
// next call on it then raises. Joining gives up after the timeout too.

#include <cstdint>
#include <memory>
#include <string>

#include "pyflame/distributed.h"
#include "pyflame/dtype.h"
#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

using distributed::ReduceOp;

// Whether the library loads (it is opened on the first call); the reason when it does not.
PF_API bool nccl_available();
PF_API std::string nccl_unavailable_reason();
PF_API std::string nccl_version();  // "2.28.9"
// A new communicator's identity (NCCL_UNIQUE_ID_BYTES bytes), made by one rank and
// handed to the others through the rendezvous store.
PF_API std::string nccl_unique_id();

class PF_API NcclWork {
 public:
  struct State;
  explicit NcclWork(std::shared_ptr<State> state) : state_(std::move(state)) {}
  bool is_completed() const;  // raises when the communicator was aborted
  void wait() const;  // the device's current stream waits for the collective
  void synchronize() const;  // the host waits (raises on an aborted communicator)

 private:
  std::shared_ptr<State> state_;
};

class PF_API NcclCommunicator {
 public:
  // Joins the communicator `unique_id` as `rank` of `size` on `device`; raises after
  // `timeout_s` when the other ranks do not join.
  NcclCommunicator(int device, int rank, int size, const std::string& unique_id, double timeout_s);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int device() const;
  // In place on `count` elements; Avg only for floating dtypes. Bool reduces as torch's
  // NCCL backend does (Sum as Max, Product as Min).
  NcclWork all_reduce(void* data, int64_t count, DType dtype, ReduceOp op);
  NcclWork broadcast(void* data, int64_t count, DType dtype, int root);
  // `out` holds size() blocks of `count` elements, in rank order.
  NcclWork all_gather(void* out, const void* in, int64_t count, DType dtype);
  // `in` holds size() blocks of `count` elements; `out` gets the reduction of block rank().
  NcclWork reduce_scatter(void* out, const void* in, int64_t count, DType dtype, ReduceOp op);
  NcclWork send(const void* data, int64_t count, DType dtype, int peer);
  NcclWork recv(void* data, int64_t count, DType dtype, int peer);
  // Ends every collective in flight and frees the communicator's resources; later calls raise.
  void abort();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pyflame::backend::rocm
