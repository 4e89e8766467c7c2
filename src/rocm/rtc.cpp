// The run-time compiler (include/pyflame/backend/rocm/compiler.h says how it
// caches). NVRTC and hiprtc have one C API under two prefixes (hiprtc mirrors
// NVRTC), so one table of functions, resolved with dlsym, serves both.

#include <dlfcn.h>

#include <chrono>

#include "pyflame/backend/rocm/compiler.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/error.h"
#include "rocm/device_guard.h"
#include "rocm/rtc_headers.h"

#ifndef PYFLAME_VERSION_STRING
#define PYFLAME_VERSION_STRING "dev"
#endif

namespace pyflame::backend::rocm {

namespace {

// nvrtcResult / hiprtcResult are C enums: 0 is success on both.
using Program = void*;
struct RtcApi {
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*);
  int (*compile)(Program, int, const char* const*);
  int (*log_size)(Program, size_t*);
  int (*log)(Program, char*);
  int (*code_size)(Program, size_t*);
  int (*code)(Program, char*);
  int (*add_name)(Program, const char*);
  int (*lowered_name)(Program, const char*, const char**);
  int (*destroy)(Program*);
  int (*version)(int*, int*);
  const char* (*error_string)(int);
  std::string label;  // "NVRTC 13.0"
};

template <class F> void resolve(void* lib, const char* suffix, F& fn, std::string& missing) {
  const std::string symbol = std::string(PF_RTC_PREFIX) + suffix;
  fn = reinterpret_cast<F>(dlsym(lib, symbol.c_str()));
  if (!fn) missing += " " + symbol;
}

// Loads the compiler library once; raises (every call) if none loads.
const RtcApi& rtc() {
  static const RtcApi* api = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const char* name : PF_RTC_LIBRARIES) {
      void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (!lib) {
        tried += std::string(tried.empty() ? "" : ", ") + name;
        continue;
      }
      auto* a = new RtcApi();  // lives as long as the process, as the library does
      std::string missing;
      resolve(lib, "CreateProgram", a->create, missing);
      resolve(lib, "CompileProgram", a->compile, missing);
      resolve(lib, "GetProgramLogSize", a->log_size, missing);
      resolve(lib, "GetProgramLog", a->log, missing);
      resolve(lib, "Get" PF_RTC_CODE "Size", a->code_size, missing);
      resolve(lib, "Get" PF_RTC_CODE, a->code, missing);
      resolve(lib, "AddNameExpression", a->add_name, missing);
      resolve(lib, "GetLoweredName", a->lowered_name, missing);
      resolve(lib, "DestroyProgram", a->destroy, missing);
      resolve(lib, "Version", a->version, missing);
      resolve(lib, "GetErrorString", a->error_string, missing);
      if (!missing.empty()) {
        failure = std::string(name) + " lacks" + missing;
        delete a;
        return;
      }
      int major = 0, minor = 0;
      a->version(&major, &minor);
      a->label = std::string(PF_RTC_NAME) + " " + std::to_string(major) + "." + std::to_string(minor);
      api = a;
      return;
    }
    failure = std::string("no ") + PF_RTC_NAME + " library could be loaded (tried " + tried +
              (std::string(PF_RTC_NAME) == "NVRTC" ? "; pip install nvidia-cuda-nvrtc, or add the CUDA toolkit's lib64 "
                                                     "to LD_LIBRARY_PATH)"
                                                   : "; install ROCm's hiprtc)");
  });
  PF_CHECK(api, HIPCompilationError, "run-time compilation: ", failure);
  return *api;
}

void check_rtc(int status, const char* call, const std::string& name) {
  PF_CHECK(status == 0, HIPCompilationError, "compiling kernel '", name, "': ", call, " failed: ",
           rtc().error_string(status));
}

struct Binary {
  std::string lowered_name;  // the kernel's symbol
  std::string code;          // cubin / code object
};

// The source with line numbers, for an error a user has to read against it.
std::string numbered(const std::string& source) {
  std::string out;
  int line = 1;
  size_t start = 0;
  while (start <= source.size()) {
    size_t end = source.find('\n', start);
    if (end == std::string::npos) end = source.size();
    out += std::to_string(line++) + ": " + source.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

Binary compile_source(const std::string& source, const std::string& name, const std::string& target,
                      const std::vector<std::string>& options) {
  const RtcApi& api = rtc();
  Program prog = nullptr;
  std::vector<const char*> header_names, header_sources;
  for (int i = 0; i < kNumRtcHeaders; ++i) {
    header_names.push_back(kRtcHeaders[i].name);
    header_sources.push_back(kRtcHeaders[i].source);
  }
  check_rtc(api.create(&prog, source.c_str(), (name + ".cu").c_str(), kNumRtcHeaders, header_sources.data(),
                       header_names.data()),
            "CreateProgram", name);
  struct Destroy {
    const RtcApi& api;
    Program& prog;
    ~Destroy() { api.destroy(&prog); }
  } destroy{api, prog};
  check_rtc(api.add_name(prog, name.c_str()), "AddNameExpression", name);

  std::vector<std::string> all = PF_RTC_OPTIONS;
  all.insert(all.begin(), PF_RTC_TARGET_OPTION + target);
  all.insert(all.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const auto& o : all) argv.push_back(o.c_str());
  const int status = api.compile(prog, static_cast<int>(argv.size()), argv.data());
  if (status != 0) {
    size_t size = 0;
    api.log_size(prog, &size);
    std::string log(size, '\0');
    if (size) api.log(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    std::string opts;
    for (const auto& o : all) opts += " " + o;
    throw HIPCompilationError(detail::cat("compiling kernel '", name, "' for ", target, " with ", api.label, " failed (",
                                          api.error_string(status), "), options:", opts, "\n", log,
                                          "\nsource:\n", numbered(source)));
  }
  const char* lowered = nullptr;
  check_rtc(api.lowered_name(prog, name.c_str(), &lowered), "GetLoweredName", name);
  Binary b{lowered, {}};
  size_t size = 0;
  check_rtc(api.code_size(prog, &size), "Get" PF_RTC_CODE "Size", name);
  b.code.resize(size);
  check_rtc(api.code(prog, b.code.data()), "Get" PF_RTC_CODE, name);
  return b;
}

// The disk cache's payload: the symbol, a NUL, the code.
std::string pack(const Binary& b) { return b.lowered_name + '\0' + b.code; }
Binary unpack(const std::string& payload) {
  const size_t nul = payload.find('\0');
  return {payload.substr(0, nul), payload.substr(nul + 1)};
}

}  // namespace

struct LoadedModule {
  hipModule_t handle = nullptr;
  ~LoadedModule() {
    if (handle) (void)hipModuleUnload(handle);  // at exit the runtime may be gone: nothing to report
  }
};

CompiledKernel::CompiledKernel(std::shared_ptr<LoadedModule> module, void* function, std::string name,
                               std::string architecture, int device)
    : module_(std::move(module)),
      function_(function),
      name_(std::move(name)),
      architecture_(std::move(architecture)),
      device_(device) {}

void CompiledKernel::launch(std::array<unsigned, 3> grid, std::array<unsigned, 3> block, unsigned shared_mem,
                            void** args) const {
  DeviceGuard guard(device_);
  HIP_CHECK(hipModuleLaunchKernel(static_cast<hipFunction_t>(function_), grid[0], grid[1], grid[2], block[0],
                                  block[1], block[2], shared_mem, current_stream(device_), args, nullptr));
  check_launch(name_.c_str(), [&] {
    return detail::cat("grid (", grid[0], ", ", grid[1], ", ", grid[2], "), block (", block[0], ", ", block[1], ", ",
                       block[2], "), ", shared_mem, " bytes of shared memory");
  });
}

KernelCompiler::KernelCompiler(std::string cache_dir, size_t capacity)
    : disk_(std::move(cache_dir)), capacity_(capacity) {}

KernelCompiler& KernelCompiler::global() {
  static auto* compiler = new KernelCompiler(KernelDiskCache::default_dir(), 256);  // never destroyed: see LoadedModule
  return *compiler;
}

std::shared_ptr<const CompiledKernel> KernelCompiler::remember(const std::string& key,
                                                               std::shared_ptr<const CompiledKernel> k) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) lru_.erase(it->second);
  lru_.emplace_front(key, k);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return k;
}

std::shared_ptr<const CompiledKernel> KernelCompiler::compile(const std::string& source, const std::string& name,
                                                              const std::vector<std::string>& options) {
  int device = 0;
  HIP_CHECK(hipGetDevice(&device));
  hipDeviceProp_t prop;
  HIP_CHECK(hipGetDeviceProperties(&prop, device));
  const std::string target = rtc_target(prop);

  std::string key = "name " + name + "\ntarget " + target + "\ncompiler " + rtc().label + "\nruntime " +
                    runtime_version() + "\npyflame " PYFLAME_VERSION_STRING "\noptions";
  for (const auto& o : options) key += " " + o;
  key += "\nsource\n" + source;
  const std::string memory_key = std::to_string(device) + "\n" + key;  // a module is loaded per device
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(memory_key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.memory_hits;
      return it->second->second;
    }
  }

  Binary binary;
  if (auto payload = disk_.load(key)) {
    binary = unpack(*payload);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.disk_hits;
  } else {
    const auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.misses;
    }
    binary = compile_source(source, name, target, options);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.compilations;
      stats_.compile_ms += ms;
    }
    disk_.store(key, pack(binary));
  }

  // A device graph being recorded may meet a kernel first: loading code is no stream
  // work, so this thread's capture mode is relaxed for it (as memory.cpp's allocations).
  auto module = std::make_shared<LoadedModule>();
  hipFunction_t function = nullptr;
  hipStreamCaptureMode mode = hipStreamCaptureModeRelaxed;
  HIP_CHECK(hipThreadExchangeStreamCaptureMode(&mode));
  hipError_t err = hipModuleLoadData(&module->handle, binary.code.data());
  if (err == hipSuccess) err = hipModuleGetFunction(&function, module->handle, binary.lowered_name.c_str());
  HIP_CHECK(hipThreadExchangeStreamCaptureMode(&mode));
  HIP_CHECK(err);
  return remember(memory_key, std::make_shared<const CompiledKernel>(std::move(module), static_cast<void*>(function),
                                                                     name, arch_name(prop), device));
}

CompilationStats KernelCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KernelCompiler::clear() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lru_.clear();
    index_.clear();
  }
  disk_.clear();
}

std::string compiler_version() { return rtc().label; }

}  // namespace pyflame::backend::rocm
