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

// The float sum that the GEMVs and decode attention reduce with.
struct Plus {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Every lane gets f over the values of its group of `width` lanes (a power of
// two up to the warp size; groups start at lanes that are multiples of it).
// Every lane of the warp must call it.
template <class A, class F> __device__ __forceinline__ A warp_all_reduce(A v, F f, int width = PF_WARP_SIZE) {
  for (int mask = width / 2; mask > 0; mask >>= 1) v = f(v, shfl_xor(v, mask));
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

// Every lane gets the warp's merged state (S: a state with merge(o) and
// shuffled(mask), the state of lane this ^ mask: welford.h's, exp_sums.h's).
template <class S> __device__ __forceinline__ S warp_all_merge(S s) {
  for (int mask = PF_WARP_SIZE / 2; mask > 0; mask >>= 1) s.merge(s.shuffled(mask));
  return s;
}

// Every thread of the block (kThreads threads) gets the block's merged state.
// Contains __syncthreads: all threads must call it.
template <int kThreads, class S> __device__ __forceinline__ S block_all_merge(S s) {
  constexpr int kWarps = kThreads / PF_WARP_SIZE;
  __shared__ S warp_states[kWarps];
  __shared__ S result;
  s = warp_all_merge(s);
  if (threadIdx.x % PF_WARP_SIZE == 0) warp_states[threadIdx.x / PF_WARP_SIZE] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    S r = warp_states[0];
    for (int w = 1; w < kWarps; ++w) r.merge(warp_states[w]);
    result = r;
  }
  __syncthreads();
  const S r = result;
  __syncthreads();  // the shared slots may be reused by the next call
  return r;
}

// Rows handed out to teams of threads, one row per team at a time. With
// kBlock a team is the whole block; otherwise it is `width` consecutive lanes
// (a power of two up to the warp size), so that short rows fill a warp with
// several rows. All lanes of a warp take the same steps: a team whose row lies
// past the last (row() >= rows) still runs the loop and joins the shuffles,
// with nothing to load or store. Use:
//   for (RowTeam<kBlock> t(width); t.first < rows; t.next()) { const int64_t row = t.row(); ... }
template <bool kBlock> struct RowTeam {
  int width;      // threads per row
  int rank;       // this thread's place in its team
  int64_t first;  // the row of the first team of this thread's warp (kBlock: of its block)
  int64_t offset, step;

  __device__ __forceinline__ explicit RowTeam(int team_width) {
    if constexpr (kBlock) {
      width = blockDim.x;
      rank = threadIdx.x;
      first = blockIdx.x;
      offset = 0;
      step = gridDim.x;
    } else {
      const int lane = threadIdx.x % PF_WARP_SIZE;
      const int64_t teams_per_block = blockDim.x / team_width;
      width = team_width;
      rank = threadIdx.x % team_width;
      first = blockIdx.x * teams_per_block + (threadIdx.x - lane) / team_width;
      offset = lane / team_width;
      step = gridDim.x * teams_per_block;
    }
  }
  __device__ __forceinline__ int64_t row() const { return first + offset; }
  __device__ __forceinline__ void next() { first += step; }

  // Every thread of the team gets f over the team's values (kThreads: the
  // block's size). Contains __syncthreads with kBlock: all threads must call it.
  template <int kThreads, class A, class F> __device__ __forceinline__ A all_reduce(A v, F f) const {
    if constexpr (kBlock) return block_all_reduce<kThreads>(v, f);
    else return warp_all_reduce(v, f, width);
  }
};

}  // namespace pyflame::backend::rocm
