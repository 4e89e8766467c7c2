// Seed 000's ROCmExecutor on a real GPU: a graph traced on the CPU (ir::begin_trace),
// optimised (its elementwise chain fused) and executed on the GPU equals the CPU's
// eager results on fresh random inputs; the outputs asked for, profiling, the
// per-node waits and the errors. Skips (with the reason) when no GPU is usable.

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>

#include "pyflame/backend/rocm/executor.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace rocm = pyflame::backend::rocm;
using pyflame::Tensor;

namespace {

Tensor random_cpu(pyflame::Shape shape, unsigned seed) {
  Tensor t = Tensor::empty(shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

// relu(x * w + b) @ w2, and the chain's result: a fused chain, then a matmul.
std::vector<Tensor> model(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& w2) {
  Tensor h = pyflame::relu(pyflame::add(pyflame::mul(x, w), b));
  return {h, pyflame::matmul(h, w2)};
}

void check_close(const Tensor& got, const Tensor& want, const char* what) {
  Tensor g = got.to(pyflame::Device::cpu()).contiguous();
  REQUIRE(g.shape() == want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    REQUIRE_MESSAGE(std::abs(g.data<float>()[i] - want.data<float>()[i]) <=
                        1e-5f + 1e-5f * std::abs(want.data<float>()[i]),
                    what << " element " << i);
}

}  // namespace

TEST_CASE("ROCmExecutor runs a traced graph on the GPU as the CPU runs it eagerly") {
  if (!rocm::is_available()) {
    MESSAGE("skipped: no usable GPU: " << rocm::unavailable_reason());
    CHECK_THROWS_AS(rocm::ROCmExecutor{}, pyflame::ROCmNotAvailableError);
    return;
  }
  const Tensor x = random_cpu({32, 64}, 1), w = random_cpu({32, 64}, 2), b = random_cpu({64}, 3),
               w2 = random_cpu({64, 16}, 4);
  pyflame::ir::begin_trace({x, w});
  std::vector<Tensor> traced = model(x, w, b, w2);  // b and w2: constants of the graph
  std::string why_not;
  pyflame::ir::Graph graph = pyflame::ir::end_trace(traced, why_not);
  REQUIRE(why_not.empty());
  pyflame::ir::optimize(graph);
  REQUIRE(graph.nodes.size() == 2);  // fused_elementwise, matmul
  CHECK(graph.nodes[0].op == pyflame::ir::OpType::fused_elementwise);

  rocm::ROCmExecutor::Config config;
  config.enable_profiling = true;
  config.sync_after_launch = true;
  config.workspace_size_mb = 16;
  rocm::ROCmExecutor executor(config);
  CHECK(executor.get_device_info().name == rocm::get_device_info(0).name);
  for (unsigned seed = 10; seed < 12; ++seed) {  // fresh inputs each run
    const Tensor nx = random_cpu({32, 64}, seed), nw = random_cpu({32, 64}, seed + 100);
    rocm::ExecutionResult r = executor.execute(graph, {1, 0}, {nx, nw});
    const std::vector<Tensor> want = model(nx, nw, b, w2);
    REQUIRE(r.outputs.size() == 2);
    CHECK(r.outputs[0].device() == pyflame::Device::rocm(0));
    check_close(r.outputs[0], want[1], "matmul output");
    check_close(r.outputs[1], want[0], "fused chain output");
    REQUIRE(r.profile.size() == 2);
    CHECK(r.profile[0].op == "fused_elementwise");
    CHECK(r.profile[1].op == "matmul");
    CHECK(r.profile[1].device_ms > 0);
    CHECK(r.wall_ms > 0);
  }
  CHECK(executor.get_memory_stats().reserved_bytes >= (16u << 20));

  CHECK_THROWS_AS(executor.execute(graph, {2}, {x, w}), pyflame::IndexError);
  CHECK_THROWS_AS(executor.execute(graph, {0}, {x}), pyflame::ValueError);
  rocm::ROCmExecutor::Config bad;
  bad.device_id = rocm::get_device_count();
  CHECK_THROWS_AS(rocm::ROCmExecutor{bad}, pyflame::DeviceError);
}
