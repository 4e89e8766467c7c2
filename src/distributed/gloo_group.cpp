#include "distributed/gloo_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <cstring>
#include <vector>

#include "pyflame/error.h"

namespace pyflame::distributed {
namespace {

// Point-to-point messages' slots, apart from those of gloo's collectives (prefixes 0x01-0x08).
constexpr uint8_t kPointToPointSlotPrefix = 0x20;

class FunctionStore : public gloo::rendezvous::Store {
 public:
  FunctionStore(const GlooGroup::StoreSet& set, const GlooGroup::StoreGet& get) : set_(set), get_(get) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    set_(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = get_(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) get_(k);
  }

 private:
  const GlooGroup::StoreSet& set_;
  const GlooGroup::StoreGet& get_;
};

// out = a (op) b elementwise; 16-bit floats through float, as the GPU's reductions.
template <class T> void reduce_elements(ReduceOp op, T* out, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      out[i] = op == ReduceOp::Product || op == ReduceOp::Min ? (a[i] && b[i]) : (a[i] || b[i]);
    } else {
      using A = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
      const A x = static_cast<A>(a[i]), y = static_cast<A>(b[i]);
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg: out[i] = static_cast<T>(x + y); break;
        case ReduceOp::Product: out[i] = static_cast<T>(x * y); break;
        case ReduceOp::Min: out[i] = static_cast<T>(y < x || y != y ? y : x); break;  // NaN wins, as torch's
        case ReduceOp::Max: out[i] = static_cast<T>(y > x || y != y ? y : x); break;
      }
    }
  }
}

template <class T> void divide_elements(T* data, size_t n, int divisor) {
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(static_cast<A>(data[i]) / divisor);
  }
}

std::string describe(const char* name, int64_t count, DType dtype) {
  return std::string("gloo ") + name + " of " + std::to_string(count) + " " + dtype_name(dtype) + " elements";
}

void check_avg(ReduceOp op, DType dtype, const std::string& what) {
  PF_CHECK(op != ReduceOp::Avg || is_floating(dtype), TypeError, what, ": AVG needs a floating dtype, got ",
           dtype_name(dtype));
}

}  // namespace

GlooGroup::GlooGroup(int rank, int size, const StoreSet& set, const StoreGet& get, double timeout_s,
                     const std::string& address)
    : rank_(rank), size_(size) {
  gloo::transport::tcp::attr attr;
  attr.hostname = address;
  guarded("gloo connection of rank " + std::to_string(rank) + " of " + std::to_string(size), [&] {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    context_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context_->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    FunctionStore store(set, get);
    context_->connectFullMesh(store, device);
  });
}

GlooGroup::~GlooGroup() = default;

// gloo reports a peer that left or a timeout with its own exceptions (gloo::IoException,
// gloo::EnforceNotMet, all std::exceptions): they become DistBackendError naming the call.
template <class Run> void GlooGroup::guarded(const std::string& what, Run&& run) {
  try {
    run();
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw DistBackendError(what + " failed (rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                           "): " + e.what());
  }
}

uint32_t GlooGroup::next_tag() { return collectives_++; }

// gloo finds a size that differs between ranks only where a message lands in a smaller buffer,
// and there in its receiving thread, which aborts the process (its enforce is not caught there).
// So the ranks first agree on the count, in a collective of 16 bytes: the largest of (count,
// -count) over the ranks gives the largest and the smallest count.
void GlooGroup::check_same_count(const std::string& what, int64_t count) {
  int64_t extremes[2] = {count, -count};
  guarded(what, [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(extremes, 2);
    opts.setReduceFunction([](void* out, const void* a, const void* b, size_t n) {
      reduce_elements(ReduceOp::Max, static_cast<int64_t*>(out), static_cast<const int64_t*>(a),
                      static_cast<const int64_t*>(b), n);
    });
    opts.setTag(next_tag());
    gloo::allreduce(opts);
  });
  if (extremes[0] != count || -extremes[1] != count)
    throw DistBackendError(what + " failed (rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                           "): the ranks passed tensors of different sizes (" + std::to_string(count) +
                           " elements here, " + std::to_string(-extremes[1]) + " to " + std::to_string(extremes[0]) +
                           " across the ranks)");
}

void GlooGroup::all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  const std::string what = describe("all_reduce", count, dtype);
  check_avg(op, dtype, what);
  check_same_count(what, count);
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    guarded(what, [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(static_cast<T*>(data), static_cast<size_t>(count));
      opts.setReduceFunction([op](void* out, const void* a, const void* b, size_t n) {
        reduce_elements(op, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n);
      });
      opts.setTag(next_tag());
      gloo::allreduce(opts);
    });
    if (op == ReduceOp::Avg) divide_elements(static_cast<T*>(data), static_cast<size_t>(count), size_);
  });
}

void GlooGroup::broadcast(void* data, int64_t count, DType dtype, int root) {
  check_same_count(describe("broadcast", count, dtype), count);
  guarded(describe("broadcast", count, dtype), [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<char*>(data), static_cast<size_t>(count) * itemsize(dtype));
    opts.setRoot(root);
    opts.setTag(next_tag());
    gloo::broadcast(opts);
  });
}

void GlooGroup::all_gather(void* out, const void* in, int64_t count, DType dtype) {
  const size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
  check_same_count(describe("all_gather", count, dtype), count);
  guarded(describe("all_gather", count, dtype), [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
    opts.setOutput(static_cast<char*>(out), bytes * size_);
    opts.setTag(next_tag());
    gloo::allgather(opts);
  });
}

// gloo has no reduce-scatter in its option-style API: an all-reduce of a copy, of which
// this rank keeps its block (as PyTorch's gloo backend does for reduce_scatter_tensor).
void GlooGroup::reduce_scatter(void* out, const void* in, int64_t count, DType dtype, ReduceOp op) {
  const size_t block = static_cast<size_t>(count) * itemsize(dtype);
  std::vector<char> all(static_cast<const char*>(in), static_cast<const char*>(in) + block * size_);
  all_reduce(all.data(), count * size_, dtype, op);
  std::memcpy(out, all.data() + block * rank_, block);
}

void GlooGroup::send(const void* data, int64_t count, DType dtype, int peer, uint32_t tag) {
  guarded(describe("send", count, dtype) + " to rank " + std::to_string(peer), [&] {
    auto buffer = context_->createUnboundBuffer(const_cast<void*>(data), static_cast<size_t>(count) * itemsize(dtype));
    buffer->send(peer, gloo::Slot::build(kPointToPointSlotPrefix, tag));
    buffer->waitSend(context_->getTimeout());
  });
}

void GlooGroup::recv(void* data, int64_t count, DType dtype, int peer, uint32_t tag) {
  guarded(describe("recv", count, dtype) + " from rank " + std::to_string(peer), [&] {
    auto buffer = context_->createUnboundBuffer(data, static_cast<size_t>(count) * itemsize(dtype));
    buffer->recv(peer, gloo::Slot::build(kPointToPointSlotPrefix, tag));
    buffer->waitRecv(context_->getTimeout());
  });
}

void GlooGroup::barrier() {
  guarded("gloo barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(next_tag());
    gloo::barrier(opts);
  });
}

}  // namespace pyflame::distributed
