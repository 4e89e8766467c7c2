// NCCL/RCCL communicators (see pyflame/backend/rocm/nccl.h for the design). The vendor
// header gives the types and, through decltype, the signatures of the functions looked
// up in the library opened at run time, so a signature that changes fails to compile.

#include "pyflame/backend/rocm/nccl.h"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#if defined(__HIP_PLATFORM_AMD__)
#include <rccl/rccl.h>  // RCCL: NCCL's API under NCCL's names
#else
#include <nccl.h>
#endif

#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/error.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {
namespace {

using Clock = std::chrono::steady_clock;

struct NcclLibrary {
  std::string error;  // why it did not load; empty when it did
#define PF_NCCL_FUNCTIONS(X)                                                                                     \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)                \
  X(ncclGetErrorString) X(ncclGetLastError) X(ncclAllReduce) X(ncclBroadcast)                                  \
  X(ncclAllGather) X(ncclReduceScatter) X(ncclSend) X(ncclRecv)
#define PF_NCCL_POINTER(name) decltype(&::name) name = nullptr;
  PF_NCCL_FUNCTIONS(PF_NCCL_POINTER)
#undef PF_NCCL_POINTER
};

const NcclLibrary& library() {
  static const NcclLibrary lib = [] {
    NcclLibrary l;
    std::vector<std::string> names;
    if (const char* path = std::getenv("PYFLAME_NCCL_LIBRARY")) names.push_back(path);
#if defined(__HIP_PLATFORM_AMD__)
    names.insert(names.end(), {"librccl.so.1", "librccl.so"});
#else
    names.insert(names.end(), {"libnccl.so.2", "libnccl.so"});
#endif
    void* handle = nullptr;
    for (const std::string& name : names)
      if ((handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL))) break;
    if (!handle) {
      l.error = "cannot load " + names.back() + " (" + std::string(dlerror()) +
                "); install NVIDIA's nvidia-nccl wheel or the system's NCCL (RCCL on AMD), or set PYFLAME_NCCL_LIBRARY";
      return l;
    }
#define PF_NCCL_LOOKUP(name)                                                              \
  l.name = reinterpret_cast<decltype(l.name)>(dlsym(handle, #name));                      \
  if (!l.name && l.error.empty()) l.error = "the NCCL library has no " #name " (too old?)";
    PF_NCCL_FUNCTIONS(PF_NCCL_LOOKUP)
#undef PF_NCCL_LOOKUP
    return l;
  }();
  return lib;
}

const NcclLibrary& api() {
  const NcclLibrary& l = library();
  PF_CHECK(l.error.empty(), NotSupportedError, "NCCL: ", l.error);
  return l;
}

ncclDataType_t nccl_dtype(DType dtype, const std::string& what) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int16: break;
  }
  throw TypeError(what + ": NCCL has no " + dtype_name(dtype) + " type");
}

ncclRedOp_t nccl_op(ReduceOp op, DType dtype, const std::string& what) {
  if (dtype == DType::Bool) {  // as torch: logical or for Sum and Max, logical and for Product and Min
    PF_CHECK(op != ReduceOp::Avg, TypeError, what, ": AVG is not defined for bool tensors");
    return op == ReduceOp::Sum || op == ReduceOp::Max ? ncclMax : ncclMin;
  }
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Avg: break;
  }
  PF_CHECK(is_floating(dtype), TypeError, what, ": AVG needs a floating dtype, got ", dtype_name(dtype));
  return ncclAvg;
}

// The communicator's health, shared with its works and its watchdog.
struct CommStatus {
  std::mutex mutex;
  std::string failure;  // set once the communicator is aborted
  std::string check() {
    std::lock_guard<std::mutex> lock(mutex);
    return failure;
  }
};

}  // namespace

struct NcclWork::State {
  hipEvent_t done = nullptr;
  int device = 0;
  Clock::time_point started = Clock::now();
  std::string what;
  std::shared_ptr<CommStatus> status;
  ~State() {
    if (done) (void)hipEventDestroy(done);  // a destructor must not throw
  }
  void check() const {
    const std::string failure = status->check();
    PF_CHECK(failure.empty(), DistBackendError, what, ": ", failure);
  }
};

bool NcclWork::is_completed() const {
  state_->check();
  const hipError_t e = hipEventQuery(state_->done);
  if (e == hipErrorNotReady) return false;
  HIP_CHECK(e);
  return true;
}

void NcclWork::wait() const {
  state_->check();
  DeviceGuard guard(state_->device);
  HIP_CHECK(hipStreamWaitEvent(current_stream(state_->device), state_->done, 0));
}

void NcclWork::synchronize() const {
  // The watchdog aborts a collective past its timeout, which ends it: this wait ends too.
  HIP_CHECK(hipEventSynchronize(state_->done));
  state_->check();
}

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  int device = 0, rank = 0, size = 0;
  std::chrono::duration<double> timeout;
  std::unique_ptr<Stream> stream;
  hipEvent_t ready = nullptr;
  std::shared_ptr<CommStatus> status = std::make_shared<CommStatus>();
  std::mutex in_flight_mutex;
  std::deque<std::shared_ptr<NcclWork::State>> in_flight;
  std::condition_variable stop_watchdog;
  bool stopping = false;
  std::thread watchdog;

  std::string describe(const char* name, int64_t count, DType dtype) const {
    return std::string("NCCL ") + name + " of " + std::to_string(count) + " " + dtype_name(dtype) +
           " elements (rank " + std::to_string(rank) + " of " + std::to_string(size) + ", device " +
           std::to_string(device) + ")";
  }

  void check(ncclResult_t result, const std::string& what) {
    if (result != ncclSuccess) {
      std::string detail = api().ncclGetErrorString(result);
      if (const char* last = api().ncclGetLastError(comm); last && *last) detail += std::string(": ") + last;
      throw DistBackendError(what + " failed: " + detail);
    }
  }

  template <class Call> NcclWork run(const std::string& what, Call&& call) {
    const std::string failure = status->check();
    PF_CHECK(failure.empty(), DistBackendError, what, ": ", failure);
    DeviceGuard guard(device);
    HIP_CHECK(hipEventRecord(ready, current_stream(device)));
    HIP_CHECK(hipStreamWaitEvent(stream->handle(), ready, 0));
    check(call(stream->handle()), what);
    auto state = std::make_shared<NcclWork::State>();
    state->device = device;
    state->what = what;
    state->status = status;
    HIP_CHECK(hipEventCreateWithFlags(&state->done, hipEventDisableTiming));
    HIP_CHECK(hipEventRecord(state->done, stream->handle()));
    std::lock_guard<std::mutex> lock(in_flight_mutex);
    in_flight.push_back(state);
    return NcclWork(state);
  }

  // Drops finished collectives; aborts the communicator when the oldest one is overdue.
  void watch() {
    std::unique_lock<std::mutex> lock(in_flight_mutex);
    while (!stopping) {
      stop_watchdog.wait_for(lock, std::chrono::milliseconds(100));
      while (!in_flight.empty() && hipEventQuery(in_flight.front()->done) != hipErrorNotReady) in_flight.pop_front();
      if (in_flight.empty() || Clock::now() - in_flight.front()->started < timeout) continue;
      const std::string what = in_flight.front()->what;
      {
        std::lock_guard<std::mutex> status_lock(status->mutex);
        status->failure = "timed out after " + std::to_string(timeout.count()) + " s in " + what +
                          " (a rank that did not call it, or died); the communicator is aborted";
      }
      (void)api().ncclCommAbort(comm);  // ends the collectives in flight, so their waits end
      comm = nullptr;
      in_flight.clear();
      return;
    }
  }
};

namespace {

// Joins on a thread of its own, so that this one can give up after the timeout: a blocking
// communicator (non-blocking ones start a thread for every collective: 80 us more per call)
// cannot be abandoned while it joins. A join given up leaves that thread waiting for ranks
// that never come; what it owns is shared with it.
ncclComm_t join(int device, int rank, int size, const ncclUniqueId& id, std::chrono::duration<double> timeout,
                const std::string& what) {
  struct Joining {
    std::mutex mutex;
    std::condition_variable joined;
    bool done = false;
    ncclResult_t result = ncclSuccess;
    ncclComm_t comm = nullptr;
    std::string error;
  };
  auto state = std::make_shared<Joining>();
  std::thread([state, device, rank, size, id] {
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclSystemError;
    std::string error;
    if (const hipError_t e = hipSetDevice(device); e != hipSuccess) error = hipGetErrorString(e);
    else result = api().ncclCommInitRank(&comm, size, id, rank);
    std::lock_guard<std::mutex> lock(state->mutex);
    state->done = true, state->result = result, state->comm = comm, state->error = error;
    state->joined.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mutex);
  PF_CHECK(state->joined.wait_for(lock, timeout, [&] { return state->done; }), DistBackendError, what,
           ": timed out after ", timeout.count(), " s waiting for the other ranks to join");
  PF_CHECK(state->error.empty(), DistBackendError, what, ": ", state->error);
  PF_CHECK(state->result == ncclSuccess, DistBackendError, what, " failed: ", api().ncclGetErrorString(state->result));
  return state->comm;
}

}  // namespace

bool nccl_available() { return library().error.empty(); }
std::string nccl_unavailable_reason() { return library().error; }

std::string nccl_version() {
  int v = 0;
  PF_CHECK(api().ncclGetVersion(&v) == ncclSuccess, DistBackendError, "ncclGetVersion failed");
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = api().ncclGetUniqueId(&id);
  PF_CHECK(r == ncclSuccess, DistBackendError, "ncclGetUniqueId failed: ", api().ncclGetErrorString(r));
  return std::string(id.internal, sizeof(id.internal));
}

NcclCommunicator::NcclCommunicator(int device, int rank, int size, const std::string& unique_id, double timeout_s)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.device = device, m.rank = rank, m.size = size;
  m.timeout = std::chrono::duration<double>(timeout_s);
  ncclUniqueId id;
  PF_CHECK(unique_id.size() == sizeof(id.internal), ValueError, "NCCL: a unique id has ", sizeof(id.internal),
           " bytes, got ", unique_id.size());
  std::copy(unique_id.begin(), unique_id.end(), id.internal);
  DeviceGuard guard(device);
  m.stream = std::make_unique<Stream>(device);
  HIP_CHECK(hipEventCreateWithFlags(&m.ready, hipEventDisableTiming));
  const std::string what = "NCCL communicator init (rank " + std::to_string(rank) + " of " + std::to_string(size) +
                           ", device " + std::to_string(device) + ")";
  m.comm = join(device, rank, size, id, m.timeout, what);
  m.watchdog = std::thread([&m] { m.watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.in_flight_mutex);
    m.stopping = true;
  }
  m.stop_watchdog.notify_all();
  if (m.watchdog.joinable()) m.watchdog.join();
  if (m.comm) {
    // Collectives still queued must end before the communicator goes.
    (void)hipStreamSynchronize(m.stream->handle());
    (void)api().ncclCommDestroy(m.comm);
  }
  if (m.ready) (void)hipEventDestroy(m.ready);
}

int NcclCommunicator::device() const { return impl_->device; }

void NcclCommunicator::abort() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.in_flight_mutex);
  {
    std::lock_guard<std::mutex> status_lock(m.status->mutex);
    if (m.status->failure.empty()) m.status->failure = "the communicator was aborted";
  }
  if (m.comm) (void)api().ncclCommAbort(m.comm);
  m.comm = nullptr;
  m.in_flight.clear();
}

NcclWork NcclCommunicator::all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  Impl& m = *impl_;
  const std::string what = m.describe("all_reduce", count, dtype);
  const ncclDataType_t type = nccl_dtype(dtype, what);
  const ncclRedOp_t red = nccl_op(op, dtype, what);
  return m.run(what, [&](hipStream_t s) { return api().ncclAllReduce(data, data, count, type, red, m.comm, s); });
}

NcclWork NcclCommunicator::broadcast(void* data, int64_t count, DType dtype, int root) {
  Impl& m = *impl_;
  const std::string what = m.describe("broadcast", count, dtype);
  const ncclDataType_t type = nccl_dtype(dtype, what);
  return m.run(what, [&](hipStream_t s) { return api().ncclBroadcast(data, data, count, type, root, m.comm, s); });
}

NcclWork NcclCommunicator::all_gather(void* out, const void* in, int64_t count, DType dtype) {
  Impl& m = *impl_;
  const std::string what = m.describe("all_gather", count, dtype);
  const ncclDataType_t type = nccl_dtype(dtype, what);
  return m.run(what, [&](hipStream_t s) { return api().ncclAllGather(in, out, count, type, m.comm, s); });
}

NcclWork NcclCommunicator::reduce_scatter(void* out, const void* in, int64_t count, DType dtype, ReduceOp op) {
  Impl& m = *impl_;
  const std::string what = m.describe("reduce_scatter", count, dtype);
  const ncclDataType_t type = nccl_dtype(dtype, what);
  const ncclRedOp_t red = nccl_op(op, dtype, what);
  return m.run(what, [&](hipStream_t s) { return api().ncclReduceScatter(in, out, count, type, red, m.comm, s); });
}

NcclWork NcclCommunicator::send(const void* data, int64_t count, DType dtype, int peer) {
  Impl& m = *impl_;
  const std::string what = m.describe("send", count, dtype) + " to rank " + std::to_string(peer);
  const ncclDataType_t type = nccl_dtype(dtype, what);
  return m.run(what, [&](hipStream_t s) { return api().ncclSend(data, count, type, peer, m.comm, s); });
}

NcclWork NcclCommunicator::recv(void* data, int64_t count, DType dtype, int peer) {
  Impl& m = *impl_;
  const std::string what = m.describe("recv", count, dtype) + " from rank " + std::to_string(peer);
  const ncclDataType_t type = nccl_dtype(dtype, what);
  return m.run(what, [&](hipStream_t s) { return api().ncclRecv(data, count, type, peer, m.comm, s); });
}

}  // namespace pyflame::backend::rocm
