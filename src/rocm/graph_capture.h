#pragma once
// Device graphs for the DeviceBackend interface (core/backend.h): the calls
// this thread queues on a device's current stream, captured as a HIP graph
// (a CUDA graph on NVIDIA) whose allocations come from a private pool.

namespace pyflame::backend::rocm {

void begin_capture(int device);
// The executable graph, or nullptr (the capture is ended and dropped) when !ok
// or the runtime refused it.
void* end_capture(int device, bool ok);
void launch_graph(void* graph);
void destroy_graph(void* graph);

}  // namespace pyflame::backend::rocm
