// GPU flash_attention and its backward (nn_ops.h has the op): attention
// without the (L, S) scores in memory, as FlashAttention-2 (Dao, 2023). A
// block of 4 warps takes 64 query rows (128 in the forward for head dims up to
// 64: two 16-row strips per warp, so each key fragment read from shared
// memory feeds two products); the keys and values pass through shared memory
// a tile at a time, and each warp keeps its rows' running maximum, sum and
// output in registers (online softmax), multiplying on the matrix units
// through tile.h. Each kernel's two shared tiles are used one after the
// other, so the copy of the next one into the first overlaps the products
// with the second (tile::copy16 is asynchronous where the GPU allows). The
// backward runs two kernels that recompute the probabilities from the
// forward's logsumexp: one per query block for grad_query (it also writes
// delta = rowsum(grad_output * output)), one per key block for grad_key and
// grad_value, looping over the query heads that share the keys (GQA), so no
// gradient needs atomics.
//
// float16, bfloat16 and float32 (tile.h multiplies float32 as three tf32
// products, float32-accurate). Head dims up to 256 in three instantiations
// (64, 128, 256; smaller dims read zeros past their end); the tiles shrink
// with the element size and head dim so that shared memory stays within
// 48 KiB on every vendor (kTile).

#include <climits>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/backend/rocm/tile.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kWarps = 4;
constexpr int kBlockRows = 16 * kWarps;  // query rows (dq) or keys (dk, dv) per block of the backward
// 16-row strips per warp in the forward: two where the registers allow (H100:
// 248 of 255 for 16-bit operands at D = 64; float's split operands take twice).
template <class T, int D> constexpr int kForwardStrips = sizeof(T) == 2 && D <= 64 ? 2 : 1;
template <class T, int D> constexpr int kForwardRows = 16 * kForwardStrips<T, D> * kWarps;
// Shared memory of a kernel with two tiles of kRows x D and the portable tile
// path's scratch for kStrips strips per warp, in 32-bit words.
template <class T, int D, int kRows, int kStrips>
constexpr int kSharedWords =
    (2 * kRows * (D + 8) + kWarps * kStrips * tile::kScratchRows * (kRows + 8)) * static_cast<int>(sizeof(T)) / 4;
// Keys (forward, dq) or queries (dk, dv) per shared tile: the most of 64, 32 and
// 16 that keeps shared memory within 48 KiB, the static limit on every vendor.
template <class T, int D, int kStrips = 1>
constexpr int kTile = kSharedWords<T, D, 64, kStrips> <= 12288   ? 64
                      : kSharedWords<T, D, 32, kStrips> <= 12288 ? 32
                                                                 : 16;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
// Shared tiles are declared as 32-bit words and used as T: clang's HIP allows no
// __shared__ variable of a type with a constructor (Half, BFloat16).

// Element strides of a (batch, head, row, column) tensor; columns are contiguous.
struct HeadStrides {
  int64_t batch, head, row;
};

struct AttentionDims {
  int64_t batch, heads, kv_heads, q_len, kv_len;
  int head_dim;      // the kernels' D is head_dim rounded up; the rest reads as zeros
  float scale;       // of the scores
  bool causal;       // query i sees keys 0 .. i
};

// rows x D of src into a tile of leading dimension ld, 16 bytes at a time,
// as one group of copies that may still be in flight on return
// (tile::wait_copies); zeros past `valid` rows and `cols` columns. The op's
// plan makes strides and offsets multiples of 8.
template <class T, int D>
__device__ void load_tile(T* tile, int ld, int rows, const T* src, int64_t stride, int64_t valid, int cols) {
  constexpr int kChunk = 16 / sizeof(T);  // elements per copy
  for (int e = threadIdx.x; e < rows * D / kChunk; e += blockDim.x) {
    const int r = e / (D / kChunk), c = kChunk * (e % (D / kChunk));
    const bool in = r < valid && c < cols;
    tile::copy16(tile + r * ld + c, in ? src + r * stride + c : src, in);
  }
  tile::commit_copies();
}

// Whether keys kb .. kb + keys - 1 need masking for the queries from row0 on:
// past the last key, or right of the causal diagonal.
__device__ __forceinline__ bool tile_masked(const AttentionDims& d, int64_t row0, int64_t kb, int keys) {
  return kb + keys > d.kv_len || (d.causal && kb + keys - 1 > row0);
}

// Key `col` of a tile masked for query `row` of the strip, relative to the tile:
// `keys` valid keys, the diagonal at col - row = diag.
__device__ __forceinline__ bool is_masked(int col, int row, int keys, int diag, bool causal) {
  return col >= keys || (causal && col - row > diag);
}

// Block b of a launch over (batch, head, tile) with the tiles of most work first
// (causal attention: the last query blocks see the most keys).
struct BlockCoord {
  int64_t batch, head, tile;
  __device__ BlockCoord(int64_t tiles, int64_t heads, bool last_first) {
    const int64_t b = blockIdx.x, planes = gridDim.x / tiles, t = b / planes, plane = b % planes;
    tile = last_first ? tiles - 1 - t : t;
    batch = plane / heads, head = plane % heads;
  }
};

template <class T, int D>
static __global__ void flash_attention_forward(const T* q, const T* k, const T* v, T* out, float* lse,
                                               AttentionDims d, HeadStrides sq, HeadStrides sk, HeadStrides sv) {
  constexpr int M = kForwardStrips<T, D>, kRows = kForwardRows<T, D>, kKeys = kTile<T, D, M>, ldk = D + 8;
  constexpr int ldp = kKeys + 8;
  __shared__ uint32_t tiles[kSharedWords<T, D, kKeys, M>] __attribute__((aligned(16)));
  T *ks = reinterpret_cast<T*>(tiles), *vs = ks + kKeys * ldk, *scratch = vs + kKeys * ldk;
  const int warp = threadIdx.x / PF_WARP_SIZE;
  const BlockCoord at((d.q_len + kRows - 1) / kRows, d.heads, d.causal);
  const int64_t kv_head = at.head / (d.heads / d.kv_heads);
  const int64_t block_row = at.tile * kRows, row0 = block_row + 16 * M * warp;
  const T* kp = k + at.batch * sk.batch + kv_head * sk.head;
  const T* vp = v + at.batch * sv.batch + kv_head * sv.head;
  tile::ARows<T, D> qa[M];
#pragma unroll
  for (int t = 0; t < M; ++t)
    qa[t].load(q + at.batch * sq.batch + at.head * sq.head + (row0 + 16 * t) * sq.row, sq.row,
               d.q_len - row0 - 16 * t, d.head_dim);
  const float scale_log2 = d.scale * kLog2e;
  float m[M][tile::kRowSlots], l[M][tile::kRowSlots];
#pragma unroll
  for (int t = 0; t < M; ++t)
#pragma unroll
    for (int r = 0; r < tile::kRowSlots; ++r) m[t][r] = -INFINITY, l[t][r] = 0;
  tile::Acc<D> o[M];
  const int64_t kv_end = d.causal ? min(d.kv_len, block_row + kRows) : d.kv_len;
  // K of tile j + 1 and V of tile j are copied while the warps multiply by the other one.
  if (kv_end > 0) load_tile<T, D>(ks, ldk, kKeys, kp, sk.row, d.kv_len, d.head_dim);
  for (int64_t kb = 0; kb < kv_end; kb += kKeys) {
    load_tile<T, D>(vs, ldk, kKeys, vp + kb * sv.row, sv.row, d.kv_len - kb, d.head_dim);
    tile::wait_copies<1>();  // K has landed, V may be in flight
    __syncthreads();
    // A warp whose rows all precede the tile's first key has nothing to add (causal).
    const bool sees = !d.causal || kb <= row0 + 16 * M - 1;
    tile::Acc<kKeys> s[M];
    if (sees) tile::mma_abt(s, qa, ks, ldk);
    __syncthreads();  // every warp has read K
    const bool more = kb + kKeys < kv_end;
    if (more) load_tile<T, D>(ks, ldk, kKeys, kp + (kb + kKeys) * sk.row, sk.row, d.kv_len - kb - kKeys, d.head_dim);
    tile::ARows<T, kKeys> pa[M];
    if (sees) {
      const bool masked = tile_masked(d, block_row, kb, kKeys);
      const int keys = static_cast<int>(min(static_cast<int64_t>(kKeys), d.kv_len - kb));
#pragma unroll
      for (int t = 0; t < M; ++t) {
        const int diag = static_cast<int>(row0 + 16 * t - kb);
        float top[tile::kRowSlots];
#pragma unroll
        for (int r = 0; r < tile::kRowSlots; ++r) top[r] = m[t][r];
#pragma unroll
        for (int i = 0; i < tile::kAccPerLane<kKeys>; ++i) {
          float x = s[t].v[i] * scale_log2;
          if (masked && is_masked(tile::acc_col(i), tile::acc_row(i), keys, diag, d.causal)) x = -INFINITY;
          s[t].v[i] = x;
          top[tile::acc_slot(i)] = fmaxf(top[tile::acc_slot(i)], x);
        }
        float alpha[tile::kRowSlots], sum[tile::kRowSlots];
#pragma unroll
        for (int r = 0; r < tile::kRowSlots; ++r) {
          top[r] = tile::row_reduce(top[r], [](float a, float b) { return fmaxf(a, b); });
          // A row with no key yet keeps m = -inf and its (zero) sums.
          alpha[r] = top[r] == -INFINITY ? 1.0f : tile::exp2_approx(m[t][r] - top[r]);
          m[t][r] = top[r], sum[r] = 0;
        }
#pragma unroll
        for (int i = 0; i < tile::kAccPerLane<kKeys>; ++i) {
          const int r = tile::acc_slot(i);
          const float p = s[t].v[i] == -INFINITY ? 0.0f : tile::exp2_approx(s[t].v[i] - m[t][r]);
          s[t].v[i] = p;
          sum[r] += p;
        }
#pragma unroll
        for (int r = 0; r < tile::kRowSlots; ++r)
          l[t][r] = l[t][r] * alpha[r] + tile::row_reduce(sum[r], [](float a, float b) { return a + b; });
#pragma unroll
        for (int i = 0; i < tile::kAccPerLane<D>; ++i) o[t].v[i] *= alpha[tile::acc_slot(i)];
        pa[t].from_acc(s[t], scratch + (warp * M + t) * tile::kScratchRows * ldp, ldp);
      }
    }
    tile::scratch_barrier();
    if (more) tile::wait_copies<1>();  // V has landed, the next K may be in flight
    else tile::wait_copies<0>();
    __syncthreads();
    if (sees) tile::mma_ab(o, pa, vs, ldk);
    __syncthreads();  // every warp has read V
  }
  const int64_t plane = at.batch * d.heads + at.head;
#pragma unroll
  for (int t = 0; t < M; ++t) {
    const int64_t strip = row0 + 16 * t;
#pragma unroll
    for (int i = 0; i < tile::kAccPerLane<D>; ++i) {
      const int64_t row = strip + tile::acc_row(i);
      const int col = tile::acc_col(i);
      if (row < d.q_len && col < d.head_dim)
        out[(plane * d.q_len + row) * d.head_dim + col] = T(o[t].v[i] / l[t][tile::acc_slot(i)]);
    }
    if (tile::lane_id() % tile::kRowLanes == 0) {
#pragma unroll
      for (int r = 0; r < tile::kRowSlots; ++r) {
        const int64_t row = strip + tile::slot_row(r);
        if (row < d.q_len) lse[plane * d.q_len + row] = (m[t][r] + log2f(l[t][r])) * kLn2;
      }
    }
  }
}

// grad_query, and delta = rowsum(grad_output * output) for the dk/dv kernel.
template <class T, int D>
static __global__ void flash_attention_backward_dq(const T* q, const T* k, const T* v, const T* out,
                                                   const T* grad_out, const float* lse, float* delta, T* grad_q,
                                                   AttentionDims d, HeadStrides sq, HeadStrides sk, HeadStrides sv,
                                                   HeadStrides so, HeadStrides sg) {
  constexpr int kKeys = kTile<T, D>, ldk = D + 8, ldp = kKeys + 8;
  __shared__ uint32_t tiles[kSharedWords<T, D, kKeys, 1>] __attribute__((aligned(16)));
  T *ks = reinterpret_cast<T*>(tiles), *vs = ks + kKeys * ldk, *scratch = vs + kKeys * ldk;
  __shared__ float delta_s[kBlockRows];
  const int warp = threadIdx.x / PF_WARP_SIZE;
  const BlockCoord at((d.q_len + kBlockRows - 1) / kBlockRows, d.heads, d.causal);
  const int64_t kv_head = at.head / (d.heads / d.kv_heads), plane = at.batch * d.heads + at.head;
  const int64_t block_row = at.tile * kBlockRows, row0 = block_row + 16 * warp;
  const T* op = out + at.batch * so.batch + at.head * so.head;
  const T* gp = grad_out + at.batch * sg.batch + at.head * sg.head;
  // delta of the block's rows: every thread's loads first (one memory latency,
  // not one per row), then the D / 8 lanes of a row sum by shuffles.
  constexpr int kChunks = D / 8, kPerThread = kBlockRows * kChunks / (kWarps * PF_WARP_SIZE);
  static_assert(kChunks <= PF_WARP_SIZE && kPerThread * kWarps * PF_WARP_SIZE == kBlockRows * kChunks);
  Vec<T, 8> gv[kPerThread], ov[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int e = threadIdx.x + i * kWarps * PF_WARP_SIZE, c = 8 * (e % kChunks);
    const int64_t row = block_row + e / kChunks;
    gv[i] = ov[i] = {};
    if (row < d.q_len && c < d.head_dim) {
      gv[i] = *reinterpret_cast<const Vec<T, 8>*>(gp + row * sg.row + c);
      ov[i] = *reinterpret_cast<const Vec<T, 8>*>(op + row * so.row + c);
    }
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int e = threadIdx.x + i * kWarps * PF_WARP_SIZE, r = e / kChunks;
    float acc = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc += static_cast<float>(gv[i].v[j]) * static_cast<float>(ov[i].v[j]);
    for (int mask = 1; mask < kChunks; mask <<= 1) acc += PF_SHFL_XOR(acc, mask);
    if (e % kChunks == 0) {
      delta_s[r] = acc;
      if (block_row + r < d.q_len) delta[plane * d.q_len + block_row + r] = acc;
    }
  }
  __syncthreads();
  const float scale_log2 = d.scale * kLog2e;
  float lse2[tile::kRowSlots], dl[tile::kRowSlots];
#pragma unroll
  for (int r = 0; r < tile::kRowSlots; ++r) {
    const int64_t row = row0 + tile::slot_row(r);
    lse2[r] = row < d.q_len ? lse[plane * d.q_len + row] * kLog2e : 0.0f;
    dl[r] = delta_s[16 * warp + tile::slot_row(r)];
  }
  const T* kp = k + at.batch * sk.batch + kv_head * sk.head;
  const T* vp = v + at.batch * sv.batch + kv_head * sv.head;
  tile::ARows<T, D> qa, ga;
  qa.load(q + at.batch * sq.batch + at.head * sq.head + row0 * sq.row, sq.row, d.q_len - row0, d.head_dim);
  ga.load(gp + row0 * sg.row, sg.row, d.q_len - row0, d.head_dim);
  T* pw = scratch + warp * tile::kScratchRows * ldp;
  tile::Acc<D> dq;
  const int64_t kv_end = d.causal ? min(d.kv_len, block_row + kBlockRows) : d.kv_len;
  // V is needed first and K last: each is copied while the warps multiply by the other.
  if (kv_end > 0) {
    load_tile<T, D>(vs, ldk, kKeys, vp, sv.row, d.kv_len, d.head_dim);
    load_tile<T, D>(ks, ldk, kKeys, kp, sk.row, d.kv_len, d.head_dim);
  }
  for (int64_t kb = 0; kb < kv_end; kb += kKeys) {
    const bool more = kb + kKeys < kv_end;
    tile::wait_copies<1>();  // V has landed
    __syncthreads();
    tile::Acc<kKeys> s, dp;
    tile::mma_abt(dp, ga, vs, ldk);
    tile::wait_copies<0>();  // K has landed
    __syncthreads();         // and every warp has read V
    if (more) load_tile<T, D>(vs, ldk, kKeys, vp + (kb + kKeys) * sv.row, sv.row, d.kv_len - kb - kKeys, d.head_dim);
    tile::mma_abt(s, qa, ks, ldk);
    const bool masked = tile_masked(d, block_row, kb, kKeys);
    const int keys = static_cast<int>(min(static_cast<int64_t>(kKeys), d.kv_len - kb)), diag = static_cast<int>(row0 - kb);
#pragma unroll
    for (int i = 0; i < tile::kAccPerLane<kKeys>; ++i) {
      const int r = tile::acc_slot(i);
      const bool off = masked && is_masked(tile::acc_col(i), tile::acc_row(i), keys, diag, d.causal);
      const float p = off ? 0.0f : tile::exp2_approx(s.v[i] * scale_log2 - lse2[r]);
      s.v[i] = p * (dp.v[i] - dl[r]);
    }
    tile::ARows<T, kKeys> dsa;
    dsa.from_acc(s, pw, ldp);
    tile::scratch_barrier();
    tile::mma_ab(dq, dsa, ks, ldk);
    __syncthreads();  // every warp has read K
    if (more) load_tile<T, D>(ks, ldk, kKeys, kp + (kb + kKeys) * sk.row, sk.row, d.kv_len - kb - kKeys, d.head_dim);
  }
#pragma unroll
  for (int i = 0; i < tile::kAccPerLane<D>; ++i) {
    const int64_t row = row0 + tile::acc_row(i);
    const int col = tile::acc_col(i);
    if (row < d.q_len && col < d.head_dim)
      grad_q[(plane * d.q_len + row) * d.head_dim + col] = T(dq.v[i] * d.scale);
  }
}

// grad_key and grad_value of a block of keys, summed over the query heads that share them (GQA).
template <class T, int D>
static __global__ void flash_attention_backward_dkdv(const T* q, const T* k, const T* v, const T* grad_out,
                                                     const float* lse, const float* delta, T* grad_k, T* grad_v,
                                                     AttentionDims d, HeadStrides sq, HeadStrides sk,
                                                     HeadStrides sv, HeadStrides sg) {
  constexpr int kQueries = kTile<T, D>, ldq = D + 8, ldp = kQueries + 8;
  __shared__ uint32_t tiles[kSharedWords<T, D, kQueries, 1>] __attribute__((aligned(16)));
  T *qs = reinterpret_cast<T*>(tiles), *gs = qs + kQueries * ldq, *scratch = gs + kQueries * ldq;
  __shared__ float lse_s[kQueries], delta_s[kQueries];
  const int warp = threadIdx.x / PF_WARP_SIZE;
  const BlockCoord at((d.kv_len + kBlockRows - 1) / kBlockRows, d.kv_heads, false);
  const int64_t group = d.heads / d.kv_heads, block_key = at.tile * kBlockRows, key0 = block_key + 16 * warp;
  tile::ARows<T, D> ka, va;
  ka.load(k + at.batch * sk.batch + at.head * sk.head + key0 * sk.row, sk.row, d.kv_len - key0, d.head_dim);
  va.load(v + at.batch * sv.batch + at.head * sv.head + key0 * sv.row, sv.row, d.kv_len - key0, d.head_dim);
  T* pw = scratch + warp * tile::kScratchRows * ldp;
  const float scale_log2 = d.scale * kLog2e;
  tile::Acc<D> dk, dv;
  // The query tiles of every head that shares these keys, one after another.
  // dO is needed first and Q last: each is copied while the warps multiply by
  // the other; the tile's logsumexp and delta are stored once its dS is made.
  const int64_t first = d.causal ? block_key : 0, head_end = (at.head + 1) * group;
  auto load_rows = [&](float* dst, const float* src, int64_t plane, int64_t qb, float past_end) {
    for (int r = threadIdx.x; r < kQueries; r += blockDim.x)
      dst[r] = qb + r < d.q_len ? src[plane * d.q_len + qb + r] : past_end;
  };
  auto load_g = [&](int64_t head, int64_t qb) {
    load_tile<T, D>(gs, ldq, kQueries, grad_out + at.batch * sg.batch + head * sg.head + qb * sg.row, sg.row,
                    d.q_len - qb, d.head_dim);
  };
  auto load_q = [&](int64_t head, int64_t qb) {
    load_tile<T, D>(qs, ldq, kQueries, q + at.batch * sq.batch + head * sq.head + qb * sq.row, sq.row,
                    d.q_len - qb, d.head_dim);
  };
  if (first < d.q_len) {
    load_g(at.head * group, first), load_q(at.head * group, first);
    load_rows(lse_s, lse, at.batch * d.heads + at.head * group, first, INFINITY);  // p = 0 past the queries
    load_rows(delta_s, delta, at.batch * d.heads + at.head * group, first, 0.0f);
  }
  for (int64_t head = at.head * group; head < head_end; ++head) {
    for (int64_t qb = first; qb < d.q_len; qb += kQueries) {
      int64_t next_head = head, next_qb = qb + kQueries;
      if (next_qb >= d.q_len) ++next_head, next_qb = first;
      const bool more = next_head < head_end;
      tile::wait_copies<1>();  // dO has landed
      __syncthreads();
      tile::Acc<kQueries> st, dpt;  // S^T and dP^T: keys x queries
      tile::mma_abt(dpt, va, gs, ldq);
      tile::wait_copies<0>();  // Q has landed
      __syncthreads();
      tile::mma_abt(st, ka, qs, ldq);
      // Key k is masked for query j where k > j: the diagonal of the transposed strip.
      const bool masked = d.causal && block_key + kBlockRows - 1 > qb;
      const int diag = static_cast<int>(qb - key0);
#pragma unroll
      for (int i = 0; i < tile::kAccPerLane<kQueries>; ++i) {
        const bool off = masked && tile::acc_row(i) - tile::acc_col(i) > diag;
        st.v[i] = off ? 0.0f : tile::exp2_approx(st.v[i] * scale_log2 - lse_s[tile::acc_col(i)] * kLog2e);
      }
      tile::ARows<T, kQueries> pa;
      pa.from_acc(st, pw, ldp);
      tile::scratch_barrier();
      tile::mma_ab(dv, pa, gs, ldq);
#pragma unroll
      for (int i = 0; i < tile::kAccPerLane<kQueries>; ++i) st.v[i] *= dpt.v[i] - delta_s[tile::acc_col(i)];
      tile::scratch_barrier();  // every lane has read P before dS replaces it
      pa.from_acc(st, pw, ldp);
      __syncthreads();  // every warp has read dO, the logsumexp and delta
      if (more) {
        load_g(next_head, next_qb);
        load_rows(lse_s, lse, at.batch * d.heads + next_head, next_qb, INFINITY);
        load_rows(delta_s, delta, at.batch * d.heads + next_head, next_qb, 0.0f);
      }
      tile::mma_ab(dk, pa, qs, ldq);
      __syncthreads();  // every warp has read Q
      if (more) load_q(next_head, next_qb);
    }
  }
  const int64_t plane = at.batch * d.kv_heads + at.head;
#pragma unroll
  for (int i = 0; i < tile::kAccPerLane<D>; ++i) {
    const int64_t key = key0 + tile::acc_row(i);
    const int col = tile::acc_col(i);
    if (key < d.kv_len && col < d.head_dim) {
      const int64_t e = (plane * d.kv_len + key) * d.head_dim + col;
      grad_k[e] = T(dk.v[i] * d.scale);
      grad_v[e] = T(dv.v[i]);
    }
  }
}

HeadStrides head_strides(const Tensor& t) { return {t.strides()[0], t.strides()[1], t.strides()[2]}; }

AttentionDims attention_dims(const OpCall& call, const Tensor& q, const Tensor& k) {
  const AttentionAttrs& a = call.attr<AttentionAttrs>();
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), static_cast<int>(q.size(3)),
          static_cast<float>(a.scale), a.is_causal};
}

std::string describe(const OpCall& call, const AttentionDims& d, const char* kernel) {
  return detail::cat("query ", call.inputs[call.op == ir::OpType::flash_attention ? 0 : 1].shape(), ", key ",
                     call.inputs[call.op == ir::OpType::flash_attention ? 1 : 2].shape(), " (",
                     dtype_name(call.out().dtype()), d.causal ? ", causal), " : "), ", kernel);
}

// Blocks over (batch, heads, row blocks) in one grid dimension.
unsigned blocks(const AttentionDims& d, int64_t heads, int64_t rows, int block_rows, const OpCall& call) {
  const int64_t n = d.batch * heads * ((rows + block_rows - 1) / block_rows);
  PF_CHECK(n <= INT_MAX, NotSupportedError, op_name(call.op), ": ", n, " blocks exceed the grid limit of 2^31-1");
  return static_cast<unsigned>(n);
}

template <class T, int D> void attention_forward(OpCall& call, const AttentionDims& d, int threads, hipStream_t s) {
  const Tensor &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2];
  flash_attention_forward<T, D><<<blocks(d, d.heads, d.q_len, kForwardRows<T, D>, call), threads, 0, s>>>(
      q.data<T>(), k.data<T>(), v.data<T>(), call.outputs[0].data<T>(), call.outputs[1].data<float>(), d,
      head_strides(q), head_strides(k), head_strides(v));
  check_launch(op_name(call.op), [&] { return describe(call, d, "flash_attention_forward"); });
}

template <class T, int D> void attention_backward(OpCall& call, const AttentionDims& d, int threads, hipStream_t s) {
  const Tensor &g = call.inputs[0], &q = call.inputs[1], &k = call.inputs[2], &v = call.inputs[3];
  const Tensor &o = call.inputs[4], &lse = call.inputs[5];
  Tensor delta = Tensor::empty(lse.shape(), DType::Float32, lse.device());
  // No queries (L = 0): nothing reaches the keys, whose gradients the second kernel writes as zeros.
  if (d.q_len > 0) {
    flash_attention_backward_dq<T, D><<<blocks(d, d.heads, d.q_len, kBlockRows, call), threads, 0, s>>>(
        q.data<T>(), k.data<T>(), v.data<T>(), o.data<T>(), g.data<T>(), lse.data<float>(), delta.data<float>(),
        call.outputs[0].data<T>(), d, head_strides(q), head_strides(k), head_strides(v), head_strides(o),
        head_strides(g));
    check_launch(op_name(call.op), [&] { return describe(call, d, "flash_attention_backward_dq"); });
  }
  flash_attention_backward_dkdv<T, D><<<blocks(d, d.kv_heads, d.kv_len, kBlockRows, call), threads, 0, s>>>(
      q.data<T>(), k.data<T>(), v.data<T>(), g.data<T>(), lse.data<float>(), delta.data<float>(),
      call.outputs[1].data<T>(), call.outputs[2].data<T>(), d, head_strides(q), head_strides(k), head_strides(v),
      head_strides(g));
  check_launch(op_name(call.op), [&] { return describe(call, d, "flash_attention_backward_dkdv"); });
}

template <bool kBackward> void attention_entry(OpCall& call) {
  const Device device = call.out().device();
  DeviceGuard guard(device.index);
  const AttentionDims d = attention_dims(call, call.inputs[kBackward ? 1 : 0], call.inputs[kBackward ? 2 : 1]);
  const int threads = kWarps * warp_size(device.index);
  const hipStream_t stream = current_stream(device.index);
  auto run = [&]<class T, int D>() {
    if constexpr (kBackward) attention_backward<T, D>(call, d, threads, stream);
    else attention_forward<T, D>(call, d, threads, stream);
  };
  auto for_dim = [&]<class T>() {
    if (d.head_dim <= 64) run.template operator()<T, 64>();
    else if (d.head_dim <= 128) run.template operator()<T, 128>();
    else run.template operator()<T, 256>();
  };
  switch (call.out().dtype()) {
    case DType::BFloat16: for_dim.template operator()<BFloat16>(); break;
    case DType::Float16: for_dim.template operator()<Half>(); break;
    default: for_dim.template operator()<float>(); break;
  }
}

PF_REGISTER_KERNEL(flash_attention, ROCm, &attention_entry<false>);
PF_REGISTER_KERNEL(flash_attention_backward, ROCm, &attention_entry<true>);

}  // namespace
}  // namespace pyflame::backend::rocm
