#pragma once
// The run-time compiler (seed 003's ROCmCompiler; issue 23): HIP/CUDA C++ source
// to a loaded kernel. hiprtc on AMD, NVRTC on NVIDIA, both loaded with dlopen
// when first needed, so neither is a link dependency and a machine without one
// fails only when it compiles, naming the libraries it tried.
//
// Design. compile() looks in three places in turn: an in-memory LRU of loaded
// kernels (per compiler, `capacity` entries), the disk cache of compiled code
// (include/pyflame/kernel_cache.h, shared by every process), and the compiler.
// The key is everything the binary depends on: the source, the kernel's name,
// the options, the architecture (with its target features on AMD), the
// compiler's version and the runtime's. Code is compiled for the current
// device's own architecture (a cubin on NVIDIA, never PTX, so loading does not
// JIT; an AMD code object), and its kernel is found by its C++ name (name
// expressions: `extern "C"` is not needed, templates work: "scale<float>").
// A CompiledKernel keeps its module loaded while anything holds it, so an
// evicted entry never unloads code that a caller or a captured graph still uses.

#include <array>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pyflame/kernel_cache.h"
#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

struct LoadedModule;

// A launch's arguments, each copied into its own 8-byte aligned slot: what a
// kernel's parameters point at (hipModuleLaunchKernel and cudaLaunchKernel read them).
class KernelArgs {
 public:
  void add_bytes(const void* data, size_t size) {
    slots_.emplace_back((size + 7) / 8 + 1);
    std::memcpy(slots_.back().data(), data, size);
  }
  template <class T> void add(const T& value) { add_bytes(&value, sizeof value); }
  void** pointers() {
    pointers_.clear();
    for (auto& s : slots_) pointers_.push_back(s.data());
    return pointers_.data();
  }

 private:
  std::vector<std::vector<uint64_t>> slots_;
  std::vector<void*> pointers_;
};

class PF_API CompiledKernel {
 public:
  CompiledKernel(std::shared_ptr<LoadedModule> module, void* function, std::string name, std::string architecture,
                 int device);

  const std::string& name() const { return name_; }
  const std::string& architecture() const { return architecture_; }
  int device() const { return device_; }

  // Launches on `device()`'s current stream. `args` points at each argument's
  // value, as hipModuleLaunchKernel and cudaLaunchKernel take them.
  void launch(std::array<unsigned, 3> grid, std::array<unsigned, 3> block, unsigned shared_mem, void** args) const;

 private:
  std::shared_ptr<LoadedModule> module_;
  void* function_;  // hipFunction_t / cudaKernel_t
  std::string name_, architecture_;
  int device_;
};

struct CompilationStats {
  int64_t compilations = 0;  // runs of the compiler
  int64_t memory_hits = 0;   // found loaded
  int64_t disk_hits = 0;     // loaded from the disk cache
  int64_t misses = 0;        // compiled (= compilations, but for failures)
  double compile_ms = 0;     // time in the compiler
};

class PF_API KernelCompiler {
 public:
  // `cache_dir` empty: no disk cache. `capacity`: loaded kernels kept in memory.
  KernelCompiler(std::string cache_dir, size_t capacity);

  // The process's compiler (the default cache directory, 256 kernels): graph mode's.
  static KernelCompiler& global();

  // Compiles `source` for the current device and returns its kernel `name`.
  // Raises HIPCompilationError with the compiler's log.
  std::shared_ptr<const CompiledKernel> compile(const std::string& source, const std::string& name,
                                                const std::vector<std::string>& options = {});

  CompilationStats stats() const;
  // Empties the in-memory cache and removes the disk cache's entries.
  void clear();
  const std::string& cache_dir() const { return disk_.dir(); }

 private:
  std::shared_ptr<const CompiledKernel> remember(const std::string& key, std::shared_ptr<const CompiledKernel> k);

  KernelDiskCache disk_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledKernel>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  CompilationStats stats_;
};

// "NVRTC 13.0" / "hiprtc 6.2"; raises HIPCompilationError if no compiler library loads.
PF_API std::string compiler_version();

}  // namespace pyflame::backend::rocm
