// Devices: the current device, synchronisation and its count, implicit
// copies and strict placement, CPU threads, and the spec's rocm_* functions.

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "pyflame/backend/rocm/device.h"
#include "pyflame/kernel_cache.h"

namespace {

nb::dict device_info_dict(const pyflame::backend::rocm::DeviceInfo& info) {
  nb::dict d;
  d["device_id"] = info.device_id;
  d["name"] = info.name;
  d["architecture"] = info.architecture;
  d["total_memory"] = info.total_memory;
  d["free_memory"] = info.free_memory;
  d["compute_units"] = info.compute_units;
  d["platform"] = info.platform;
  d["warp_size"] = info.warp_size;
  d["runtime_version"] = info.runtime_version;
  return d;
}

}  // namespace

namespace pyflame::python {

void bind_device(nb::module_& m) {
  m.def("_kernel_cache_default_dir", &pyflame::KernelDiskCache::default_dir,
        "The run-time compiler's disk cache: $PYFLAME_KERNEL_CACHE, else ~/.cache/pyflame/kernels.");
  m.def("set_device", [](const std::string& d) { pyflame::set_current_device(pyflame::Device::parse(d)); }, "device"_a);
  m.def("get_device", [] { return pyflame::to_string(pyflame::current_device()); });
  m.def("synchronize", &pyflame::synchronize);
  m.def("_parse_device", [](const std::string& d) { return pyflame::to_string(pyflame::Device::parse(d)); });
  m.def("implicit_copy_count", &pyflame::implicit_copy_count,
        "How many inputs ops have copied to the device they run on.");
  m.def("reset_implicit_copy_count", &pyflame::reset_implicit_copy_count);
  m.def("host_transfer_count", &pyflame::host_transfer_count,
        "How many copies between host and GPU memory (either way) the GPU backend has made.");
  m.def("reset_host_transfer_count", &pyflame::reset_host_transfer_count);
  m.def("set_strict_device_placement", &pyflame::set_strict_device_placement, "strict"_a,
        "When True, an op whose input lives on another device raises DeviceError instead of copying it.");
  m.def("strict_device_placement", &pyflame::strict_device_placement);
  m.def("synchronization_count", &pyflame::synchronization_count,
        "How many times the host has waited for a device (synchronize, .item(), .numpy(), ...).");
  m.def("cpu_threads", &pyflame::cpu_threads);
  m.def("set_cpu_threads", &pyflame::set_cpu_threads, "n"_a);

  namespace rocm = pyflame::backend::rocm;
  m.def("rocm_is_available", &rocm::is_available);
  m.def("rocm_device_count", &rocm::get_device_count);
  m.def("rocm_get_device", &rocm::get_current_device);
  m.def("rocm_set_device", &rocm::set_device, "device_id"_a);
  m.def("rocm_synchronize", &rocm::synchronize);
  m.def("rocm_can_device_access_peer", &rocm::can_device_access_peer, "device_id"_a, "peer_id"_a);
  m.def("rocm_get_device_info", [](int id) { return device_info_dict(rocm::get_device_info(id)); }, "device_id"_a = 0);
  m.def("rocm_unavailable_reason", [] {
    std::string r = rocm::unavailable_reason();
    return r.empty() ? nb::none() : nb::object(nb::str(r.c_str()));
  }, "None when ROCm is usable, else why not and what to do.");
}

}  // namespace pyflame::python
