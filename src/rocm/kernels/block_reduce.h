#pragma once
// Device-side combining of values across a warp and a block, shared by the
// reduction, normalization, softmax and scan kernels. Warps combine through shuffles over
// PF_WARP_SIZE lanes (hip_compat.h: 64 on CDNA, 32 on RDNA and NVIDIA), so the
// same source is right for wave64 and wave32; warps then meet in shared memory.

#include "pyflame/backend/rocm/hip_compat.h"

namespace pyflame::backend::rocm {

// The shuffles exist for 32- and 64-bit types: narrower ones (bool, 8- and
// 16-bit integers) travel as int.
template <class A> __device__ __forceinline__ A shfl_xor(A v, int mask) {
  if constexpr (sizeof(A) < sizeof(int)) return static_cast<A>(PF_SHFL_XOR(static_cast<int>(v), mask));
  else return PF_SHFL_XOR(v, mask);
}

// Lane i gets `v` of lane i - delta (lanes below delta get their own back).
template <class A> __device__ __forceinline__ A shfl_up(A v, int delta) {
  if constexpr (sizeof(A) < sizeof(int)) return static_cast<A>(PF_SHFL_UP(static_cast<int>(v), delta));
  else return PF_SHFL_UP(v, delta);
}

// Every lane of the warp gets f over the warp's values.
template <class A, class F> __device__ __forceinline__ A warp_all_reduce(A v, F f) {
  for (int mask = PF_WARP_SIZE / 2; mask > 0; mask >>= 1) v = f(v, shfl_xor(v, mask));
  return v;
}

// Every thread of the block (kThreads threads, a multiple of the warp size)
// gets f over the block's values. Contains __syncthreads: all threads must call it.
template <int kThreads, class A, class F> __device__ __forceinline__ A block_all_reduce(A v, F f) {
  constexpr int kWarps = kThreads / PF_WARP_SIZE;
  __shared__ A warp_results[kWarps];
  __shared__ A result;
  v = warp_all_reduce(v, f);
  if (threadIdx.x % PF_WARP_SIZE == 0) warp_results[threadIdx.x / PF_WARP_SIZE] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    A r = warp_results[0];
    for (int w = 1; w < kWarps; ++w) r = f(r, warp_results[w]);
    result = r;
  }
  __syncthreads();
  A r = result;
  __syncthreads();  // the shared slots may be reused by the next call
  return r;
}

}  // namespace pyflame::backend::rocm
