#pragma once
// pyflame.distributed's CPU backend: a process group over gloo (as PyTorch's "gloo"),
// connected through the rendezvous store of pyflame.distributed (its set/get are handed
// in as functions), with gloo's TCP transport. Collectives run to completion on the
// calling thread; gloo raises after the group's timeout when a peer does not take part.
// Buffers are host memory, as (address, element count, dtype).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "pyflame/distributed.h"
#include "pyflame/dtype.h"

namespace gloo::rendezvous {
class Context;
}

namespace pyflame::distributed {

class GlooGroup {
 public:
  using StoreSet = std::function<void(const std::string& key, const std::string& value)>;
  using StoreGet = std::function<std::string(const std::string& key)>;  // blocks until the key is set

  // Connects to every other rank; `address` is the interface the others reach this rank on.
  GlooGroup(int rank, int size, const StoreSet& set, const StoreGet& get, double timeout_s, const std::string& address);
  ~GlooGroup();

  void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op);
  void broadcast(void* data, int64_t count, DType dtype, int root);
  // `out` holds size blocks of `count` elements, in rank order.
  void all_gather(void* out, const void* in, int64_t count, DType dtype);
  // `in` holds size blocks of `count` elements; `out` gets the reduction of block rank.
  void reduce_scatter(void* out, const void* in, int64_t count, DType dtype, ReduceOp op);
  void send(const void* data, int64_t count, DType dtype, int peer, uint32_t tag);
  void recv(void* data, int64_t count, DType dtype, int peer, uint32_t tag);
  void barrier();

 private:
  template <class Run> void guarded(const std::string& what, Run&& run);
  uint32_t next_tag();
  // Raises DistBackendError naming `what` unless every rank passes the same `count`.
  void check_same_count(const std::string& what, int64_t count);

  int rank_, size_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  uint32_t collectives_ = 0;  // every rank issues the same sequence: the count tags each one
};

}  // namespace pyflame::distributed
