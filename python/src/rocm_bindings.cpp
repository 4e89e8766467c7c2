// pyflame._rocm: the ROCm backend's own Python API (streams, events, memory
// manager, pinned pool), built only with PYFLAME_USE_ROCM. Importing it loads
// libpyflame_rocm; pyflame.backend.rocm wraps it and reports why it is
// missing when it cannot load. Handles (streams, pointers) cross as integers.

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "pyflame/backend/rocm/compiler.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/backend/rocm/tuning.h"
#if defined(PYFLAME_WITH_DNN)
#include "pyflame/backend/rocm/dnn.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;
namespace rocm = pyflame::backend::rocm;

namespace {

hipStream_t as_stream(uintptr_t h) { return reinterpret_cast<hipStream_t>(h); }
uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }

nb::dict stats_dict(const rocm::MemoryStats& s) {
  nb::dict d;
  d["total_allocated"] = s.total_allocated;
  d["peak_allocated"] = s.peak_allocated;
  d["total_allocations"] = s.total_allocations;
  d["total_deallocations"] = s.total_deallocations;
  d["cache_hits"] = s.cache_hits;
  d["cache_misses"] = s.cache_misses;
  d["reserved_bytes"] = s.reserved_bytes;
  d["peak_reserved_bytes"] = s.peak_reserved_bytes;
  d["cached_bytes"] = s.cached_bytes;
  d["pending_bytes"] = s.pending_bytes;
  d["segments"] = s.segments;
  d["oom_retries"] = s.oom_retries;
  d["pools"] = s.pools;
  d["pool_reserved_bytes"] = s.pool_reserved_bytes;
  return d;
}

// Median nanoseconds of a cached allocate+deallocate pair, timed in C++ so
// the figure is the allocator's, not Python's call overhead.
double median_alloc_free_ns(rocm::ROCmMemoryManager& mm, size_t bytes, int iters) {
  mm.deallocate(mm.allocate(bytes));  // warm the cache
  std::vector<double> ns;
  constexpr int kBatch = 100;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kBatch; ++k) mm.deallocate(mm.allocate(bytes));
    auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
  }
  std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
  return ns[ns.size() / 2];
}

// A launch's arguments, each given as its bytes (pyflame.backend.rocm packs them).
void launch_with_bytes(const rocm::CompiledKernel& k, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
                       unsigned shared_mem, const std::vector<nb::bytes>& args) {
  rocm::KernelArgs packed;
  for (const nb::bytes& a : args) packed.add_bytes(a.c_str(), a.size());
  nb::gil_scoped_release release;
  k.launch(grid, block, shared_mem, packed.pointers());
}

nb::dict compilation_stats_dict(const rocm::CompilationStats& s) {
  nb::dict d;
  const int64_t hits = s.memory_hits + s.disk_hits, lookups = hits + s.misses;
  d["compilations"] = s.compilations;
  d["cache_hits"] = hits;
  d["cache_misses"] = s.misses;
  d["memory_hits"] = s.memory_hits;
  d["disk_hits"] = s.disk_hits;
  d["cache_hit_rate_percent"] = lookups ? 100.0 * static_cast<double>(hits) / static_cast<double>(lookups) : 0.0;
  d["total_compile_time_ms"] = s.compile_ms;
  d["avg_compile_time_ms"] = s.compilations ? s.compile_ms / static_cast<double>(s.compilations) : 0.0;
  return d;
}

}  // namespace

#if defined(PYFLAME_WITH_NCCL)
namespace pyflame::python {
void bind_nccl(nb::module_& m);
}
#endif

NB_MODULE(_rocm, m) {
  m.doc() = "PyFlame's ROCm backend (streams, events, memory, NCCL communicators)";
#if defined(PYFLAME_WITH_NCCL)
  pyflame::python::bind_nccl(m);
#endif

  nb::class_<rocm::Stream>(m, "Stream")
      .def(nb::init<int, int>(), "device"_a = -1, "priority"_a = 0)
      .def_prop_ro("handle", [](const rocm::Stream& s) { return as_int(s.handle()); })
      .def_prop_ro("device", &rocm::Stream::device)
      .def_prop_ro("priority", &rocm::Stream::priority)
      .def("synchronize", &rocm::Stream::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("query", &rocm::Stream::query);

  nb::class_<rocm::Event>(m, "Event")
      .def(nb::init<bool>(), "enable_timing"_a = false)
      .def("record", [](rocm::Event& e, uintptr_t stream) { e.record(as_stream(stream)); }, "stream_handle"_a)
      .def("synchronize", &rocm::Event::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("query", &rocm::Event::query)
      .def("elapsed_time", &rocm::Event::elapsed_time, "end"_a);

  nb::class_<rocm::CompiledKernel>(m, "CompiledKernel")
      .def_prop_ro("name", &rocm::CompiledKernel::name)
      .def_prop_ro("architecture", &rocm::CompiledKernel::architecture)
      .def_prop_ro("device", &rocm::CompiledKernel::device)
      .def("launch", &launch_with_bytes, "grid"_a, "block"_a, "shared_mem"_a, "args"_a);
  nb::class_<rocm::KernelCompiler>(m, "KernelCompiler")
      .def(nb::init<std::string, size_t>(), "cache_dir"_a, "capacity"_a)
      .def("compile", &rocm::KernelCompiler::compile, "source"_a, "name"_a, "options"_a,
           nb::call_guard<nb::gil_scoped_release>())
      .def("stats", [](const rocm::KernelCompiler& c) { return compilation_stats_dict(c.stats()); })
      .def("clear", &rocm::KernelCompiler::clear)
      .def_prop_ro("cache_dir", &rocm::KernelCompiler::cache_dir);
  m.def("compiler_version", &rocm::compiler_version);

  m.def("current_stream", [](int device) { return as_int(rocm::current_stream(device)); }, "device"_a);
  m.def("default_stream", [](int device) { return as_int(rocm::default_stream(device)); }, "device"_a);
  m.def("set_current_stream", [](int device, uintptr_t stream) { rocm::set_current_stream(device, as_stream(stream)); },
        "device"_a, "stream_handle"_a);

  nb::class_<rocm::ROCmMemoryManager>(m, "ROCmMemoryManager")
      .def_prop_ro("device", &rocm::ROCmMemoryManager::device)
      .def("allocate", [](rocm::ROCmMemoryManager& mm, size_t n) { return as_int(mm.allocate(n)); }, "bytes"_a)
      .def("allocate_async", [](rocm::ROCmMemoryManager& mm, size_t n, uintptr_t s) {
        return as_int(mm.allocate_async(n, as_stream(s))); }, "bytes"_a, "stream_handle"_a)
      .def("deallocate", [](rocm::ROCmMemoryManager& mm, uintptr_t p) { mm.deallocate(reinterpret_cast<void*>(p)); }, "ptr"_a)
      .def("deallocate_async", [](rocm::ROCmMemoryManager& mm, uintptr_t p, uintptr_t s) {
        mm.deallocate_async(reinterpret_cast<void*>(p), as_stream(s)); }, "ptr"_a, "stream_handle"_a)
      .def("memset", [](rocm::ROCmMemoryManager& mm, uintptr_t p, int v, size_t n) {
        mm.memset(reinterpret_cast<void*>(p), v, n); }, "ptr"_a, "value"_a, "bytes"_a)
      .def("copy_device_to_device", [](rocm::ROCmMemoryManager& mm, uintptr_t d, uintptr_t s, size_t n) {
        mm.copy_device_to_device(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n); },
        "dst"_a, "src"_a, "bytes"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("copy_host_to_device_async", [](rocm::ROCmMemoryManager& mm, uintptr_t d, uintptr_t s, size_t n, uintptr_t st) {
        mm.copy_host_to_device_async(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n, as_stream(st)); },
        "dst"_a, "src"_a, "bytes"_a, "stream_handle"_a)
      .def("copy_device_to_device_async", [](rocm::ROCmMemoryManager& mm, uintptr_t d, uintptr_t s, size_t n, uintptr_t st) {
        mm.copy_device_to_device_async(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n, as_stream(st)); },
        "dst"_a, "src"_a, "bytes"_a, "stream_handle"_a)
      .def("get_stats", [](const rocm::ROCmMemoryManager& mm) { return stats_dict(mm.get_stats()); })
      .def("reset_stats", &rocm::ROCmMemoryManager::reset_stats)
      .def("clear_pool", &rocm::ROCmMemoryManager::clear_pool)
      .def("get_memory_info", [](const rocm::ROCmMemoryManager& mm) {
        size_t free = 0, total = 0;
        mm.get_memory_info(&free, &total);
        return std::make_pair(free, total); })
      .def("warmup", &rocm::ROCmMemoryManager::warmup, "bytes"_a)
      .def("_median_alloc_free_ns", &median_alloc_free_ns, "bytes"_a, "iters"_a = 200);

  m.def("get_memory_manager", [](int device) -> rocm::ROCmMemoryManager& {
    return device < 0 ? rocm::get_memory_manager() : rocm::get_memory_manager(device); },
    "device"_a = -1, nb::rv_policy::reference);

  nb::class_<rocm::PinnedMemoryPool>(m, "PinnedMemoryPool")
      .def("acquire", [](rocm::PinnedMemoryPool& p, size_t n) { return as_int(p.acquire(n)); }, "bytes"_a)
      .def("release", [](rocm::PinnedMemoryPool& p, uintptr_t ptr) { p.release(reinterpret_cast<void*>(ptr)); }, "ptr"_a)
      .def("warmup", &rocm::PinnedMemoryPool::warmup, "sizes"_a)
      .def("clear", &rocm::PinnedMemoryPool::clear)
      .def_prop_ro("cached_bytes", &rocm::PinnedMemoryPool::cached_bytes)
      .def_prop_ro("in_use_bytes", &rocm::PinnedMemoryPool::in_use_bytes);
  m.def("get_pinned_pool", &rocm::get_pinned_pool, nb::rv_policy::reference);
  m.def("warmup_memory_pool", &rocm::warmup_memory_pool, "batch_size"_a, "model_size"_a);
  m.def("platform", [] { return std::string(PF_GPU_PLATFORM); });

  m.def("set_allow_tf32", &rocm::set_allow_tf32, "allow"_a);
  m.def("allow_tf32", &rocm::allow_tf32);
  m.def("set_conv_allow_tf32", &rocm::set_conv_allow_tf32, "allow"_a);
  m.def("conv_allow_tf32", &rocm::conv_allow_tf32);
  m.def("set_dnn_enabled", &rocm::set_dnn_enabled, "enabled"_a);
  m.def("dnn_enabled", &rocm::dnn_enabled);

  nb::class_<rocm::MIOpenTuningCache>(m, "MIOpenTuningCache")
      .def("enable_exhaustive_search", &rocm::MIOpenTuningCache::enable_exhaustive_search, "enable"_a)
      .def("exhaustive_search", &rocm::MIOpenTuningCache::exhaustive_search)
      .def("set_cache_file", &rocm::MIOpenTuningCache::set_cache_file, "path"_a)
      .def("clear", &rocm::MIOpenTuningCache::clear)
      .def("get_stats", [](const rocm::MIOpenTuningCache& c) {
        rocm::MIOpenTuningCache::Stats s = c.get_stats();
        nb::dict d;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        d["entries"] = s.entries;
        return d; });
  m.def("get_tuning_cache", &rocm::get_tuning_cache, nb::rv_policy::reference);

#if defined(PYFLAME_WITH_DNN)
  // The DNN adapter's entry points (ROCmDNN) on the current device and stream:
  // ops and dtypes by name, packed device buffers as integers.
  // pyflame.backend.rocm wraps them for tensors (benchmarks/rocm_benchmark.py --dnn).
  using Shape = std::vector<int64_t>;
  auto ptr = [](uintptr_t p) { return reinterpret_cast<void*>(p); };
  m.def("dnn_library", [] { return std::string(PF_DNN_LIBRARY); });
  m.def("dnn_pooling2d_forward",
        [ptr](const std::string& pool_type, const std::string& dtype, const Shape& input_shape, uintptr_t input,
              const Shape& output_shape, uintptr_t output, std::vector<int> kernel_size, std::vector<int> padding,
              std::vector<int> stride, bool ceil_mode, bool count_include_pad) {
          const rocm::PoolParams p{std::move(kernel_size), std::move(padding), std::move(stride), ceil_mode,
                                   count_include_pad};
          rocm::get_dnn().pooling2d_forward(pyflame::op_from_name(pool_type), pyflame::parse_dtype(dtype),
                                            input_shape, ptr(input), output_shape, ptr(output), p);
        },
        "pool_type"_a, "dtype"_a, "input_shape"_a, "input"_a, "output_shape"_a, "output"_a, "kernel_size"_a,
        "padding"_a, "stride"_a, "ceil_mode"_a, "count_include_pad"_a);
  m.def("dnn_batchnorm_forward_training",
        [ptr](const std::string& dtype, const Shape& shape, uintptr_t x, uintptr_t y, uintptr_t scale, uintptr_t bias,
              double momentum, uintptr_t running_mean, uintptr_t running_var, double epsilon, uintptr_t saved_mean,
              uintptr_t saved_inv_var) {
          rocm::get_dnn().batchnorm_forward_training(pyflame::parse_dtype(dtype), shape, ptr(x), ptr(y), ptr(scale),
                                                     ptr(bias), momentum, ptr(running_mean), ptr(running_var),
                                                     epsilon, ptr(saved_mean), ptr(saved_inv_var));
        },
        "dtype"_a, "shape"_a, "x"_a, "y"_a, "scale"_a, "bias"_a, "momentum"_a, "running_mean"_a, "running_var"_a,
        "epsilon"_a, "saved_mean"_a, "saved_inv_var"_a);
  m.def("dnn_batchnorm_forward_inference",
        [ptr](const std::string& dtype, const Shape& shape, uintptr_t x, uintptr_t y, uintptr_t scale, uintptr_t bias,
              uintptr_t running_mean, uintptr_t running_var, double epsilon) {
          rocm::get_dnn().batchnorm_forward_inference(pyflame::parse_dtype(dtype), shape, ptr(x), ptr(y), ptr(scale),
                                                      ptr(bias), ptr(running_mean), ptr(running_var), epsilon);
        },
        "dtype"_a, "shape"_a, "x"_a, "y"_a, "scale"_a, "bias"_a, "running_mean"_a, "running_var"_a, "epsilon"_a);
  m.def("dnn_activation_forward",
        [ptr](const std::string& activation_type, const std::string& dtype, const Shape& shape, uintptr_t input,
              uintptr_t output, float alpha) {
          rocm::get_dnn().activation_forward(pyflame::op_from_name(activation_type), pyflame::parse_dtype(dtype),
                                             shape, ptr(input), ptr(output), alpha);
        },
        "activation_type"_a, "dtype"_a, "shape"_a, "input"_a, "output"_a, "alpha"_a);
  m.def("dnn_softmax_forward",
        [ptr](const std::string& dtype, const Shape& shape, uintptr_t input, uintptr_t output, int axis,
              bool log_softmax) {
          rocm::get_dnn().softmax_forward(pyflame::parse_dtype(dtype), shape, ptr(input), ptr(output), axis,
                                          log_softmax);
        },
        "dtype"_a, "shape"_a, "input"_a, "output"_a, "axis"_a, "log_softmax"_a);
  m.def("dnn_reduce",
        [ptr](const std::string& reduce_type, const std::string& dtype, const Shape& input_shape, uintptr_t input,
              const Shape& output_shape, uintptr_t output, const std::vector<int>& reduce_dims) {
          rocm::get_dnn().reduce(pyflame::op_from_name(reduce_type), pyflame::parse_dtype(dtype), input_shape,
                                 ptr(input), output_shape, ptr(output), reduce_dims);
        },
        "reduce_type"_a, "dtype"_a, "input_shape"_a, "input"_a, "output_shape"_a, "output"_a, "reduce_dims"_a);
#endif
}
