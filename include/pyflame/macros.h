#pragma once

// Code that is compiled for both the CPU and the GPU (functors, dtype helpers)
// is marked PF_HOST_DEVICE. In a GPU compile the vendor runtime comes first,
// through the one header that knows the vendor (nvcc would include CUDA's
// itself; clang's HIP mode does not); the run-time compilers (PF_RTC) have
// their runtime built in.
#include "pyflame/device_std.h"

#if defined(__HIPCC__) || defined(__CUDACC__)
#if !PF_RTC
#include "pyflame/backend/rocm/hip_compat.h"
#endif
#define PF_HOST_DEVICE __host__ __device__ __forceinline__
#else
// Forced: the CPU loops only vectorise when the functor's math is inlined.
#define PF_HOST_DEVICE inline __attribute__((always_inline))
#endif

// True inside the device pass of a HIP/CUDA compile: lets shared math pick the
// GPU's intrinsics there and the vectorisable host versions elsewhere.
#if defined(__HIP_DEVICE_COMPILE__) || defined(__CUDA_ARCH__)
#define PF_DEVICE_PASS 1
#else
#define PF_DEVICE_PASS 0
#endif

#if defined(_WIN32)
#define PF_API __declspec(dllexport)
#else
#define PF_API __attribute__((visibility("default")))
#endif
