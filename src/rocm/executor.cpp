// Seed 000's ROCmExecutor (include/pyflame/backend/rocm/executor.h).

#include "pyflame/backend/rocm/executor.h"

#include <chrono>

#include "pyflame/error.h"
#include "pyflame/ops.h"
#include "pyflame/profiler.h"

namespace pyflame::backend::rocm {

ROCmExecutor::ROCmExecutor(Config config) : config_(config) {
  PF_CHECK(is_available(), ROCmNotAvailableError, "ROCmExecutor: ", unavailable_reason());
  PF_CHECK(config.device_id >= 0 && config.device_id < get_device_count(), DeviceError, "ROCmExecutor: device ",
           config.device_id, " does not exist (", get_device_count(), " GPU(s))");
  if (config.workspace_size_mb) get_memory_manager(config.device_id).warmup(config.workspace_size_mb << 20);
}

ROCmExecutor::ROCmExecutor() : ROCmExecutor(Config{}) {}

ROCmExecutor::~ROCmExecutor() = default;

ExecutionResult ROCmExecutor::execute(const ir::Graph& graph, const std::vector<NodeId>& output_ids,
                                      const std::vector<Tensor>& inputs) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t nodes = static_cast<int64_t>(graph.nodes.size());
  PF_CHECK(static_cast<int64_t>(inputs.size()) == graph.num_inputs, ValueError, "ROCmExecutor::execute: the graph "
           "takes ", graph.num_inputs, " input(s), got ", inputs.size());
  ir::Graph g = graph;
  g.outputs.clear();
  for (NodeId id : output_ids) {
    PF_CHECK(id >= 0 && id < nodes && graph.nodes[id].num_outputs > 0, IndexError, "ROCmExecutor::execute: node ",
             id, " is not a node with an output of this graph (", nodes, " nodes)");
    g.outputs.push_back(ir::Value{ir::Value::Kind::Node, id, 0});
  }
  ir::plan_memory(g);  // the nodes asked for are kept
  const Device device = Device::rocm(config_.device_id);
  const DeviceScope scope(device);  // this thread's: the graph's factories run there too
  std::vector<Tensor> on_device;
  for (const Tensor& t : inputs) on_device.push_back(t.to(device).set_placed(true));

  if (config_.enable_profiling) profiler::start(false, true);
  ExecutionResult result;
  try {
    std::function<void(size_t)> after_node;
    if (config_.sync_after_launch) after_node = [](size_t) { pyflame::synchronize(); };
    result.outputs = ir::run_graph(g, on_device, after_node);
  } catch (...) {
    if (config_.enable_profiling) profiler::stop();
    throw;
  }
  if (config_.enable_profiling)
    for (const profiler::OpEvent& e : profiler::stop())
      if (e.depth == 0) result.profile.push_back({e.name, e.device_start_us < 0 ? 0.0 : e.device_duration_us / 1e3});
  result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

DeviceInfo ROCmExecutor::get_device_info() const { return rocm::get_device_info(config_.device_id); }

MemoryStats ROCmExecutor::get_memory_stats() const { return get_memory_manager(config_.device_id).get_stats(); }

}  // namespace pyflame::backend::rocm
