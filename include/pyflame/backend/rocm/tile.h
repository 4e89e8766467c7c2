#pragma once
// Warp-level products of small matrix blocks on the matrix units, for the GPU
// kernels that keep their blocks on chip (flash attention). A warp owns a
// strip of 16 rows and accumulates C (16 x N, float) += A (16 x K) B, with A
// and B float16, bfloat16 or float32. Each vendor's matrix instructions
// spread a strip over the lanes in a layout of their own, so a kernel sees it
// only through:
//   Acc<N>::v[kAccPerLane<N>]  this lane's elements of C
//   acc_row(i), acc_col(i)     where this lane's element i lies in the strip
//   acc_slot(i), slot_row(s)   the lane holds elements of kRowSlots rows;
//                              element i is on the lane's row acc_slot(i)
//   row_reduce(v, f)           f over the kRowLanes lanes that share a row
//   ARows<T, K>                A: 16 rows loaded from memory (load), or an
//                              accumulator strip rounded to T (from_acc)
//   mma_abt(c, a, bt, ldb)     C += A Bt^T, Bt (N x K) row-major
//   mma_ab(c, a, b, ldb)       C += A B,    B (K x N) row-major
// mma_abt and mma_ab also take arrays of M strips (16 M rows of a warp): each
// B fragment then feeds M products, which halves the shared-memory reads per
// product at M = 2.
//   copy16(shared, global, valid)  16 bytes into a shared tile (zeros if not
//                              valid), asynchronous where the GPU can;
//   commit_copies(), wait_copies<N>()  close a group of this thread's copies,
//                              wait until at most N groups are in flight
// B operands are in shared memory, rows 16-byte aligned; ARows::load reads
// pairs of elements as 32-bit words (even leading dimension, 4-byte aligned),
// zeros past `rows` and `cols`. from_acc may go through the warp's `scratch`
// (kScratchRows x K elements, leading dimension ld): call scratch_barrier()
// after it, and before a second from_acc into the same scratch.
//
// NVIDIA (sm_80 and later): mma.sync m16n8k16 with float accumulators, B
// through ldmatrix, in the register layouts of the PTX ISA ("Matrix
// Fragments for mma.m16n8k16"); an accumulator becomes an A operand in
// registers (FlashAttention-2's trick), so from_acc needs no scratch; copy16
// is cp.async.
// Elsewhere, and with PF_TILE_PORTABLE defined (how that path is run on
// NVIDIA): each lane computes its own elements of C with float FMAs, correct
// for wave64 (CDNA) and wave32 (RDNA) alike, and copy16 is a plain load and
// store. The AMD matrix cores (MFMA on CDNA, WMMA on RDNA3) take the same
// interface with their own layouts; they are not written yet, as no AMD GPU
// has been at hand to run them.

#include <cstdint>
#include <type_traits>

#include "pyflame/backend/rocm/hip_compat.h"
#include "pyflame/dtype.h"

#if defined(PYFLAME_HIP_NVIDIA) && !defined(PF_TILE_PORTABLE)
#define PF_TILE_MMA_SYNC 1
#else
#define PF_TILE_MMA_SYNC 0
#endif

namespace pyflame::backend::rocm::tile {

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) % PF_WARP_SIZE; }

#if PF_TILE_MMA_SYNC
// Lane l holds rows l/4 and l/4 + 8 of each 16 x 8 block, columns 2 (l%4) and 2 (l%4) + 1.
constexpr int kRowLanes = 4, kRowSlots = 2;
template <int N> constexpr int kAccPerLane = N / 2;
__device__ __forceinline__ int acc_row(int i) { return lane_id() / 4 + 8 * ((i & 3) >> 1); }
__device__ __forceinline__ int acc_col(int i) { return 8 * (i >> 2) + 2 * (lane_id() & 3) + (i & 1); }
__device__ __forceinline__ int acc_slot(int i) { return (i & 3) >> 1; }
__device__ __forceinline__ int slot_row(int s) { return lane_id() / 4 + 8 * s; }
#else
// Lane l holds row l / kRowLanes, every kRowLanes-th column from l % kRowLanes.
constexpr int kRowLanes = PF_WARP_SIZE / 16, kRowSlots = 1;
template <int N> constexpr int kAccPerLane = N / kRowLanes;
__device__ __forceinline__ int acc_row(int) { return lane_id() / kRowLanes; }
__device__ __forceinline__ int acc_col(int i) { return lane_id() % kRowLanes + kRowLanes * i; }
__device__ __forceinline__ int acc_slot(int) { return 0; }
__device__ __forceinline__ int slot_row(int) { return lane_id() / kRowLanes; }
#endif

template <int N> struct Acc {
  static_assert(N % 16 == 0, "a strip is a whole number of 16-column blocks");
  float v[kAccPerLane<N>] = {};
};

// 2^x by the hardware's approximation, as FlashAttention takes it for the
// probabilities (NVIDIA: ex2.approx, relative error about 2^-22; AMD: exp2f,
// which is v_exp_f32).
__device__ __forceinline__ float exp2_approx(float x) {
#if defined(PYFLAME_HIP_NVIDIA)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
#else
  return exp2f(x);
#endif
}

template <class F> __device__ __forceinline__ float row_reduce(float v, F f) {
  for (int mask = 1; mask < kRowLanes; mask <<= 1) v = f(v, PF_SHFL_XOR(v, mask));
  return v;
}

template <class T> __device__ __forceinline__ uint32_t load_pair(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

#if PF_TILE_MMA_SYNC

constexpr int kScratchRows = 0;
__device__ __forceinline__ void scratch_barrier() {}

// Two floats rounded to T (to nearest even) in one 32-bit word, `lo` in the low half.
template <class T> __device__ __forceinline__ uint32_t round_pair(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, BFloat16>) asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// c (4 floats of a 16 x 8 block) += a (16 x 16) b (16 x 8).
template <class T> __device__ __forceinline__ void mma_16x8x16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, "mma.sync takes float16 or bfloat16");
  if constexpr (std::is_same_v<T, BFloat16>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Four 8 x 8 blocks of 16-bit elements from shared memory; lane l gives the
// address of row l % 8 of block l / 8. Register i holds block i's elements
// (row l/4, columns 2 (l%4), +1), or with `trans` its transpose's.
template <bool kTrans> __device__ __forceinline__ void load_blocks(uint32_t* r, const void* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

template <class T, int K> struct ARows {
  uint32_t a[K / 16][4];  // per 16 columns: rows r and r + 8 at columns 2q and 2q + 8 (r = lane/4, q = lane%4)
  __device__ void load(const T* p, int64_t ld, int64_t rows, int cols) {
    const int r = lane_id() / 4, c = 2 * (lane_id() & 3);
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const int row = r + 8 * (h & 1), col = 16 * kk + c + 8 * (h >> 1);
        a[kk][h] = row < rows && col < cols ? load_pair(p + row * ld + col) : 0u;
      }
    }
  }
  // Columns 16kk .. 16kk + 15 of an accumulator are its blocks 2kk and 2kk + 1, in A's layout already.
  __device__ void from_acc(const Acc<K>& c, T*, int) {
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      const float* lo = c.v + 8 * kk;
      a[kk][0] = round_pair<T>(lo[0], lo[1]), a[kk][1] = round_pair<T>(lo[2], lo[3]);
      a[kk][2] = round_pair<T>(lo[4], lo[5]), a[kk][3] = round_pair<T>(lo[6], lo[7]);
    }
  }
};

template <int M, int N, class T, int K>
__device__ __forceinline__ void mma_abt(Acc<N> (&c)[M], const ARows<T, K> (&a)[M], const T* bt, int ldb) {
  const int l = lane_id(), block = l / 8;
  // Blocks: (n0, k0), (n0, k0 + 8), (n0 + 8, k0), (n0 + 8, k0 + 8): b0 and b1 of two 8-column tiles.
  const T* row = bt + (l % 8 + 8 * (block >> 1)) * ldb + 8 * (block & 1);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
    for (int j = 0; j < N / 16; ++j) {
      uint32_t b[4];
      load_blocks<false>(b, row + 16 * j * ldb + 16 * kk);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mma_16x8x16<T>(c[m].v + 8 * j, a[m].a[kk], b[0], b[1]);
        mma_16x8x16<T>(c[m].v + 8 * j + 4, a[m].a[kk], b[2], b[3]);
      }
    }
  }
}

template <int M, int N, class T, int K>
__device__ __forceinline__ void mma_ab(Acc<N> (&c)[M], const ARows<T, K> (&a)[M], const T* b, int ldb) {
  const int l = lane_id(), block = l / 8;
  // Blocks: (k0, n0), (k0 + 8, n0), (k0, n0 + 8), (k0 + 8, n0 + 8), transposed: b0 and b1 of two tiles.
  const T* row = b + (l % 8 + 8 * (block & 1)) * ldb + 8 * (block >> 1);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
    for (int j = 0; j < N / 16; ++j) {
      uint32_t f[4];
      load_blocks<true>(f, row + 16 * kk * ldb + 16 * j);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        mma_16x8x16<T>(c[m].v + 8 * j, a[m].a[kk], f[0], f[1]);
        mma_16x8x16<T>(c[m].v + 8 * j + 4, a[m].a[kk], f[2], f[3]);
      }
    }
  }
}

// float32 operands: three tf32 products per block (3xTF32, CUTLASS's "fast
// F32"): x = big + small with big = x rounded to tf32 and small = x - big
// rounded again; big*big + big*small + small*big is float32-accurate (the
// small*small term lies below float32's rounding). mma.m16n8k8 takes A's
// columns t and t+4 in lane t % 4; here they hold the elements 2t and 2t+1 of
// each 8, and B's rows the same, a reordering of the sum over k that leaves
// the product unchanged: an accumulator's pair (2t, 2t+1) is then an A operand
// as it stands, and a row's pair is one 8-byte load.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
  big = to_tf32(x);
  small = to_tf32(x - __uint_as_float(big));
}

__device__ __forceinline__ void mma_16x8x8(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int K> struct ARows<float, K> {
  // per 8 columns: rows r and r + 8 at columns 2q and 2q + 1 (r = lane/4, q = lane%4), split
  // once here (splitting at each product kept fewer registers but ran slower)
  uint32_t big[K / 8][4], small[K / 8][4];
  __device__ void set(int kk, int h, float x) { split_tf32(x, big[kk][h], small[kk][h]); }
  __device__ void load(const float* p, int64_t ld, int64_t rows, int cols) {
    const int r = lane_id() / 4, c = 2 * (lane_id() & 3);
#pragma unroll
    for (int kk = 0; kk < K / 8; ++kk) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = r + 8 * half, col = 8 * kk + c;
        float2 x{0.0f, 0.0f};
        if (row < rows && col < cols) x = *reinterpret_cast<const float2*>(p + row * ld + col);
        set(kk, half, x.x), set(kk, half + 2, x.y);
      }
    }
  }
  // Block kk of an accumulator (its columns 8kk .. 8kk + 7) is A's k-step kk.
  __device__ void from_acc(const Acc<K>& c, float*, int) {
#pragma unroll
    for (int kk = 0; kk < K / 8; ++kk) {
      const float* v = c.v + 4 * kk;
      set(kk, 0, v[0]), set(kk, 2, v[1]), set(kk, 1, v[2]), set(kk, 3, v[3]);
    }
  }
};

// Block j of each strip's c += a b at k-step kk, b given as this lane's pair of B's rows
// (2t, 2t + 1) in column r.
template <int M, int N, int K>
__device__ __forceinline__ void mma_3xtf32(Acc<N> (&c)[M], const ARows<float, K> (&a)[M], int kk, int j, float b0,
                                           float b1) {
  uint32_t bb[2], bs[2];
  split_tf32(b0, bb[0], bs[0]);
  split_tf32(b1, bb[1], bs[1]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float* cj = c[m].v + 4 * j;
    mma_16x8x8(cj, a[m].small[kk], bb[0], bb[1]);
    mma_16x8x8(cj, a[m].big[kk], bs[0], bs[1]);
    mma_16x8x8(cj, a[m].big[kk], bb[0], bb[1]);
  }
}

template <int M, int N, int K>
__device__ __forceinline__ void mma_abt(Acc<N> (&c)[M], const ARows<float, K> (&a)[M], const float* bt, int ldb) {
  const float* row = bt + (lane_id() / 4) * ldb + 2 * (lane_id() & 3);
#pragma unroll
  for (int kk = 0; kk < K / 8; ++kk) {
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const float2 b = *reinterpret_cast<const float2*>(row + 8 * j * ldb + 8 * kk);
      mma_3xtf32(c, a, kk, j, b.x, b.y);
    }
  }
}

template <int M, int N, int K>
__device__ __forceinline__ void mma_ab(Acc<N> (&c)[M], const ARows<float, K> (&a)[M], const float* b, int ldb) {
  const float* col = b + 2 * (lane_id() & 3) * ldb + lane_id() / 4;
#pragma unroll
  for (int kk = 0; kk < K / 8; ++kk) {
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const float* p = col + 8 * kk * ldb + 8 * j;
      mma_3xtf32(c, a, kk, j, p[0], p[ldb]);
    }
  }
}

// cp.async (sm_80 and later): the copy proceeds while the warps compute; 0 source bytes zero-fill.
__device__ __forceinline__ void copy16(void* shared, const void* global, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(global), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

#else  // portable: every lane computes its own elements

constexpr int kScratchRows = 16;
__device__ __forceinline__ void scratch_barrier() { __syncthreads(); }

template <class T, int K> struct ARows {
  const T* p;
  int64_t ld, rows;
  int cols;
  __device__ void load(const T* p_, int64_t ld_, int64_t rows_, int cols_) { p = p_, ld = ld_, rows = rows_, cols = cols_; }
  __device__ void from_acc(const Acc<K>& c, T* scratch, int ld_) {
    for (int i = 0; i < kAccPerLane<K>; ++i) scratch[acc_row(i) * ld_ + acc_col(i)] = T(c.v[i]);
    load(scratch, ld_, 16, K);
  }
  __device__ float at(int row, int k) const {
    return row < rows && k < cols ? static_cast<float>(p[row * ld + k]) : 0.0f;
  }
};

template <int N, class T, int K>
__device__ __forceinline__ void mma_abt_strip(Acc<N>& c, const ARows<T, K>& a, const T* bt, int ldb) {
  for (int i = 0; i < kAccPerLane<N>; ++i) {
    const int row = acc_row(i);
    const T* y = bt + acc_col(i) * ldb;
    float s = 0;
    for (int k = 0; k < K; ++k) s += a.at(row, k) * static_cast<float>(y[k]);
    c.v[i] += s;
  }
}

template <int N, class T, int K>
__device__ __forceinline__ void mma_ab_strip(Acc<N>& c, const ARows<T, K>& a, const T* b, int ldb) {
  for (int i = 0; i < kAccPerLane<N>; ++i) {
    const int row = acc_row(i);
    const T* y = b + acc_col(i);
    float s = 0;
    for (int k = 0; k < K; ++k) s += a.at(row, k) * static_cast<float>(y[k * ldb]);
    c.v[i] += s;
  }
}

template <int M, int N, class T, int K>
__device__ __forceinline__ void mma_abt(Acc<N> (&c)[M], const ARows<T, K> (&a)[M], const T* bt, int ldb) {
  for (int m = 0; m < M; ++m) mma_abt_strip(c[m], a[m], bt, ldb);
}

template <int M, int N, class T, int K>
__device__ __forceinline__ void mma_ab(Acc<N> (&c)[M], const ARows<T, K> (&a)[M], const T* b, int ldb) {
  for (int m = 0; m < M; ++m) mma_ab_strip(c[m], a[m], b, ldb);
}

// Plain 16-byte loads and stores: complete when the thread goes on.
__device__ __forceinline__ void copy16(void* shared, const void* global, bool valid) {
  *static_cast<uint4*>(shared) = valid ? *static_cast<const uint4*>(global) : uint4{};
}
__device__ __forceinline__ void commit_copies() {}
template <int N> __device__ __forceinline__ void wait_copies() {}

#endif

// One strip: the arrays' M = 1.
template <int N, class T, int K>
__device__ __forceinline__ void mma_abt(Acc<N>& c, const ARows<T, K>& a, const T* bt, int ldb) {
  mma_abt(*reinterpret_cast<Acc<N>(*)[1]>(&c), *reinterpret_cast<const ARows<T, K>(*)[1]>(&a), bt, ldb);
}

template <int N, class T, int K>
__device__ __forceinline__ void mma_ab(Acc<N>& c, const ARows<T, K>& a, const T* b, int ldb) {
  mma_ab(*reinterpret_cast<Acc<N>(*)[1]>(&c), *reinterpret_cast<const ARows<T, K>(*)[1]>(&a), b, ldb);
}

}  // namespace pyflame::backend::rocm::tile
