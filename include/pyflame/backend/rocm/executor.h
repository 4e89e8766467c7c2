#pragma once
// Seed 000's ROCmExecutor: runs an ir::Graph (a pf.compile trace, or one traced in
// C++ with ir::begin_trace / end_trace) on one GPU and returns the outputs of the
// nodes asked for. Each node runs through the op layer's apply(), as pf.compile's
// replay does (include/pyflame/ir/graph.h): the same kernels, fused calls included.
// The inputs are copied to the executor's device where they live elsewhere; the
// ops the graph runs put their results there. enable_profiling times every call on
// the device (the op profiler's timing events, read once the graph has run);
// sync_after_launch waits for the device after each node, so a failing kernel is
// reported at its node; workspace_size_mb is reserved in the device's caching
// allocator when the executor is made, so the first runs allocate from it.

#include <cstdint>
#include <string>
#include <vector>

#include "pyflame/backend/rocm/device.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/ir/graph.h"

namespace pyflame::backend::rocm {

namespace ir = pyflame::ir;

// A node of an ir::Graph: its index in Graph::nodes.
using NodeId = int64_t;

struct NodeTiming {
  std::string op;          // the node's op
  double device_ms = 0;    // its calls' time on the device
};

struct ExecutionResult {
  std::vector<Tensor> outputs;      // output 0 of each node asked for, in that order
  double wall_ms = 0;               // the host's time in execute()
  std::vector<NodeTiming> profile;  // with enable_profiling: one per node, in order
};

class PF_API ROCmExecutor {
 public:
  struct Config {
    int device_id = 0;
    bool enable_profiling = false;
    bool sync_after_launch = false;
    size_t workspace_size_mb = 256;
  };

  // ROCmNotAvailableError without a usable GPU; DeviceError for a device that does not exist.
  // (Two constructors where the seed has `Config config = {}`: a nested struct's default
  // member initializers cannot serve a default argument inside its own class.)
  ROCmExecutor();
  explicit ROCmExecutor(Config config);
  ~ROCmExecutor();

  // Runs `graph` on `inputs` (as many as graph.num_inputs) and returns the outputs of
  // `output_ids`. IndexError for an id that names no node (or a node without outputs).
  ExecutionResult execute(const ir::Graph& graph, const std::vector<NodeId>& output_ids,
                          const std::vector<Tensor>& inputs = {});

  DeviceInfo get_device_info() const;
  MemoryStats get_memory_stats() const;
  const Config& config() const { return config_; }

 private:
  Config config_;
};

}  // namespace pyflame::backend::rocm
