#pragma once
// The one place that knows which GPU vendor we build for (DESIGN.md,
// principle 1). Every other ROCm-backend file is written in HIP spelling.
//   AMD:    the HIP runtime itself (hipcc / clang, ROCm).
//   NVIDIA: PYFLAME_HIP_NVIDIA is defined by CMake; the HIP names the project
//           uses are mapped onto the CUDA runtime here, and nvcc compiles the
//           same .hip sources.
// Add a mapping here when a file needs a HIP name that is not yet listed.

#include <cstdlib>
#include <string>

#if defined(PYFLAME_HIP_NVIDIA)

#include <cuda_runtime.h>

#define PF_GPU_PLATFORM "nvidia"

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemcpyKind = cudaMemcpyKind;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipStreamCaptureMode = cudaStreamCaptureMode;
using hipStreamCaptureStatus = cudaStreamCaptureStatus;

#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyDefault cudaMemcpyDefault
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipHostMallocDefault cudaHostAllocDefault
#define hipStreamCaptureModeGlobal cudaStreamCaptureModeGlobal
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamCaptureStatusActive cudaStreamCaptureStatusActive
#define hipStreamCaptureStatusInvalidated cudaStreamCaptureStatusInvalidated

#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipDeviceGetStreamPriorityRange cudaDeviceGetStreamPriorityRange
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipDriverGetVersion cudaDriverGetVersion
#define hipMemGetInfo cudaMemGetInfo
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc cudaHostAlloc
#define hipHostFree cudaFreeHost
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
// Peer access and copies between two GPUs.
#define hipDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define hipDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
#define hipMemcpyPeerAsync cudaMemcpyPeerAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
// Mapped page-locked memory (kernels write the host's kernel-error records into it).
#define hipHostMallocMapped cudaHostAllocMapped
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipStreamCreateWithPriority cudaStreamCreateWithPriority
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamQuery cudaStreamQuery
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipStreamGetFlags cudaStreamGetFlags
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventQuery cudaEventQuery
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
// Graphs. hipGraphInstantiate is not mapped: HIP's takes an error node and a
// log buffer, CUDA 12's a flags word; hipGraphInstantiateWithFlags is the same on both.
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipThreadExchangeStreamCaptureMode cudaThreadExchangeStreamCaptureMode
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount

// NVIDIA: every warp is 32 lanes.
#define PF_WARP_SIZE 32
// Exchange within a warp: lane i gets `v` of lane i ^ mask (every lane takes part).
#define PF_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
// Lane i gets `v` of lane i - delta (lanes below delta keep their own).
#define PF_SHFL_UP(v, delta) __shfl_up_sync(0xffffffffu, (v), (delta))
// Bit i set when `pred` holds on lane i (every lane takes part), as 64 bits on every platform.
#define PF_BALLOT(pred) static_cast<unsigned long long>(__ballot_sync(0xffffffffu, (pred)))

// Code compiled at run time (src/rocm/rtc.cpp): HIP's modules are the CUDA
// runtime's libraries (CUDA 12+), whose kernels cudaLaunchKernel launches, so
// the backend needs no driver API.
using hipModule_t = cudaLibrary_t;
using hipFunction_t = cudaKernel_t;
inline cudaError_t hipModuleLoadData(hipModule_t* module, const void* image) {
  return cudaLibraryLoadData(module, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
}
inline cudaError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t module, const char* name) {
  return cudaLibraryGetKernel(f, module, name);
}
inline cudaError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                         unsigned by, unsigned bz, unsigned shared_mem, hipStream_t stream,
                                         void** args, void** extra) {
  return cudaLaunchKernel(reinterpret_cast<const void*>(f), dim3(gx, gy, gz), dim3(bx, by, bz), args, shared_mem,
                          stream);
}
#define hipModuleUnload cudaLibraryUnload
// The run-time compiler, NVRTC: its libraries (NVIDIA's nvidia-cuda-nvrtc wheel or
// the toolkit), its functions' prefix, the code it returns (a cubin) and its
// option naming the target.
#define PF_RTC_LIBRARIES {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"}
#define PF_RTC_NAME "NVRTC"
#define PF_RTC_PREFIX "nvrtc"
#define PF_RTC_CODE "CUBIN"
#define PF_RTC_TARGET_OPTION "--gpu-architecture="
// Functions without __device__ (constexpr helpers of the shared headers) compile for the device.
#define PF_RTC_OPTIONS {"-std=c++20", "-default-device"}

namespace pyflame::backend::rocm {
inline std::string arch_name(const hipDeviceProp_t& p) { return "sm_" + std::to_string(p.major) + std::to_string(p.minor); }
// What the run-time compiler targets: "sm_90" gives a cubin ("compute_90" would be PTX).
inline std::string rtc_target(const hipDeviceProp_t& p) { return arch_name(p); }
inline std::string runtime_version() {
  int rt = 0, drv = 0;
  (void)cudaRuntimeGetVersion(&rt);  // 0 stays 0 if the call fails: only a label
  (void)cudaDriverGetVersion(&drv);
  auto v = [](int x) { return std::to_string(x / 1000) + "." + std::to_string(x % 1000 / 10); };
  return "CUDA runtime " + v(rt) + ", driver " + v(drv);
}
// The spec honours HIP_VISIBLE_DEVICES; the CUDA runtime reads CUDA_VISIBLE_DEVICES,
// so forward it before the runtime's first call.
inline void platform_init() {
  const char* hip_visible = std::getenv("HIP_VISIBLE_DEVICES");
  if (hip_visible && !std::getenv("CUDA_VISIBLE_DEVICES")) setenv("CUDA_VISIBLE_DEVICES", hip_visible, 1);
}
}  // namespace pyflame::backend::rocm

#else  // AMD

#include <hip/hip_runtime.h>

#define PF_GPU_PLATFORM "amd"

// gfx9 / CDNA (MI100, MI200, MI300): wave64. RDNA (gfx10, gfx11): wave32.
// The compiler defines the wavefront size for each target in the device pass;
// host code must read hipDeviceProp_t::warpSize instead.
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define PF_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define PF_WARP_SIZE 64
#endif
// Exchange within a wavefront: lane i gets `v` of lane i ^ mask (every lane takes part).
#define PF_SHFL_XOR(v, mask) __shfl_xor((v), (mask))
// Lane i gets `v` of lane i - delta (lanes below delta keep their own).
#define PF_SHFL_UP(v, delta) __shfl_up((v), (delta))
// Bit i set when `pred` holds on lane i (every lane takes part), as 64 bits on every platform.
#define PF_BALLOT(pred) static_cast<unsigned long long>(__ballot(pred))

// hiprtc: its own library since ROCm 6, inside libamdhip64 before.
#define PF_RTC_LIBRARIES {"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so", "libamdhip64.so.5", "libamdhip64.so"}
#define PF_RTC_NAME "hiprtc"
#define PF_RTC_PREFIX "hiprtc"
#define PF_RTC_CODE "Code"
#define PF_RTC_TARGET_OPTION "--offload-arch="
#define PF_RTC_OPTIONS {"-std=c++20"}

namespace pyflame::backend::rocm {
// gcnArchName is e.g. "gfx90a:sramecc+:xnack-"; the architecture is the part before ':'.
inline std::string arch_name(const hipDeviceProp_t& p) {
  std::string a = p.gcnArchName;
  return a.substr(0, a.find(':'));
}
// What the run-time compiler targets: the whole name, as the code object must match the device's features.
inline std::string rtc_target(const hipDeviceProp_t& p) { return p.gcnArchName; }
inline std::string runtime_version() {
  int rt = 0;
  (void)hipRuntimeGetVersion(&rt);  // 0 if it fails: only a label. major * 10^7 + minor * 10^5 + patch
  return "HIP " + std::to_string(rt / 10000000) + "." + std::to_string(rt / 100000 % 100) + "." +
         std::to_string(rt % 100000);
}
inline void platform_init() {}  // the HIP runtime reads HIP_VISIBLE_DEVICES itself
}  // namespace pyflame::backend::rocm

#endif
