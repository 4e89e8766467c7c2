// HIP graph capture for pf.compile (rocm/graph_capture.h). The capture runs
// in thread-local mode, so other threads keep using their streams; the
// memory allocated meanwhile comes from a private pool of the caching
// allocator (caching_allocator.h says why) that the graph keeps until it is
// destroyed. A launch replays the kernels on the addresses of the capture:
// the caller copies new inputs into the captured ones first.

#include "rocm/graph_capture.h"

#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {
namespace {

struct CapturedGraph {
  int device;
  hipGraphExec_t exec;
  PoolId pool;
};

thread_local PoolId t_capture_pool = 0;

}  // namespace

void begin_capture(int device) {
  DeviceGuard guard(device);
  const hipStream_t stream = current_stream(device);
  t_capture_pool = get_memory_manager(device).begin_pool(stream);
  const hipError_t status = hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal);
  if (status != hipSuccess) {
    get_memory_manager(device).end_pool(stream);
    get_memory_manager(device).release_pool(t_capture_pool, stream);
    HIP_CHECK(status);
  }
}

void* end_capture(int device, bool ok) {
  DeviceGuard guard(device);
  const hipStream_t stream = current_stream(device);
  hipGraph_t graph = nullptr;
  const hipError_t ended = hipStreamEndCapture(stream, &graph);
  get_memory_manager(device).end_pool(stream);
  hipGraphExec_t exec = nullptr;
  if (ok && ended == hipSuccess && graph && hipGraphInstantiateWithFlags(&exec, graph, 0) != hipSuccess) exec = nullptr;
  if (graph) HIP_CHECK(hipGraphDestroy(graph));
  (void)hipGetLastError();  // a refused capture leaves its error behind; the caller falls back
  if (!exec) {
    get_memory_manager(device).release_pool(t_capture_pool, stream);
    return nullptr;
  }
  return new CapturedGraph{device, exec, t_capture_pool};
}

void launch_graph(void* graph) {
  auto* g = static_cast<CapturedGraph*>(graph);
  DeviceGuard guard(g->device);
  HIP_CHECK(hipGraphLaunch(g->exec, current_stream(g->device)));
}

void destroy_graph(void* graph) {
  auto* g = static_cast<CapturedGraph*>(graph);
  DeviceGuard guard(g->device);
  HIP_CHECK(hipGraphExecDestroy(g->exec));
  get_memory_manager(g->device).release_pool(g->pool, current_stream(g->device));
  delete g;
}

}  // namespace pyflame::backend::rocm
