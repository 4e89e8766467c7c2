#include "pyflame/device.h"

#include <atomic>
#include <cctype>

#include "core/backend.h"
#include "core/thread_state.h"
#include "pyflame/backend/rocm/device.h"
#include "pyflame/error.h"

namespace pyflame {

std::string to_string(const Device& d) {
  return d.is_cpu() ? "cpu" : "rocm:" + std::to_string(d.index);
}

Device Device::parse(const std::string& spec) {
  if (spec == "cpu" || spec == "cpu:0") return cpu();
  if (spec == "rocm") return rocm(0);
  const std::string prefix = "rocm:";
  if (spec.compare(0, prefix.size(), prefix) == 0) {
    std::string idx = spec.substr(prefix.size());
    bool digits = !idx.empty() && idx.size() <= 4;
    for (char c : idx) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    PF_CHECK(digits, ValueError, "invalid device '", spec,
             "': the index after 'rocm:' must be a non-negative integer, as in 'rocm:0'");
    return rocm(std::stoi(idx));
  }
  if (spec == "cerebras" || spec.compare(0, 9, "cerebras:") == 0)
    throw NotSupportedError("device '" + spec +
                            "' is not part of this build of PyFlame; available: 'cpu', 'rocm', 'rocm:N'");
  throw ValueError("invalid device '" + spec + "': expected 'cpu', 'rocm' or 'rocm:N'" +
                   (spec.compare(0, 4, "cuda") == 0 ? " (NVIDIA GPUs are driven through 'rocm')" : ""));
}

namespace {
// Encoded as type * 65536 + index so reads on the hot path are one atomic load.
std::atomic<int32_t> g_current{0};
std::atomic<int64_t> g_implicit_copies{0};
std::atomic<int64_t> g_host_transfers{0};
std::atomic<bool> g_strict{false};
std::atomic<int64_t> g_synchronizations{0};

// Raises unless `d` exists and its backend is usable.
void check_usable(const Device& d) {
  if (d.is_cpu()) return;
  DeviceBackend* be = backend_for(d.type);
  if (!be) throw ROCmNotAvailableError("cannot use device '" + to_string(d) + "': " + rocm_unavailable_reason());
  int n = be->device_count();
  PF_CHECK(d.index < n, DeviceError, "device '", to_string(d), "' does not exist: ", n,
           " ROCm device(s) visible (valid indices 0..", n - 1, ")");
}
}  // namespace

Device current_device() {
  if (const std::optional<Device>& scoped = thread_state().device) return *scoped;
  int32_t v = g_current.load(std::memory_order_relaxed);
  return {static_cast<DeviceType>(v >> 16), v & 0xffff};
}

void set_current_device(const Device& d) {
  check_usable(d);
  if (!d.is_cpu()) backend_for(d.type)->set_current(d.index);
  g_current.store(static_cast<int32_t>(d.type) * 65536 + d.index, std::memory_order_relaxed);
}

DeviceScope::DeviceScope(std::optional<Device> device) : previous_(thread_state().device) {
  if (!device) return;
  check_usable(*device);
  thread_state().device = device;
  active_ = true;
}

DeviceScope::~DeviceScope() {
  if (active_) thread_state().device = previous_;
}

void synchronize() {
  Device d = current_device();
  if (!d.is_cpu()) return backend_for(d.type)->synchronize(d.index);
  // With the CPU current, placed tensors may still be at work on a GPU (DESIGN.md, execution
  // model): wait for the one rocm_set_device chose, as torch.cuda.synchronize() waits for its own.
  if (rocm_unavailable_reason().empty() && backend_for(DeviceType::ROCm)->device_count() > 0)
    backend::rocm::synchronize();
}

int64_t implicit_copy_count() { return g_implicit_copies.load(); }
void reset_implicit_copy_count() { g_implicit_copies.store(0); }
void set_strict_device_placement(bool strict) { g_strict.store(strict); }
bool strict_device_placement() { return g_strict.load(); }
void count_implicit_copy() { g_implicit_copies.fetch_add(1, std::memory_order_relaxed); }
int64_t host_transfer_count() { return g_host_transfers.load(); }
void reset_host_transfer_count() { g_host_transfers.store(0); }
void count_host_transfer() { g_host_transfers.fetch_add(1, std::memory_order_relaxed); }
int64_t synchronization_count() { return g_synchronizations.load(); }
void count_synchronization() { g_synchronizations.fetch_add(1, std::memory_order_relaxed); }

}  // namespace pyflame
