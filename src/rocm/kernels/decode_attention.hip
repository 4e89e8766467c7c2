// GPU decode_attention (nn_ops.h has the op): one query row per head against a
// key/value cache, a language model's decode step. Its cost is reading the keys
// and values once, so the keys are split into chunks across blocks (split-KV, as
// FlashDecoding): a block per (batch, key/value head, up to kHeads of the query
// heads that share it, chunk) computes the chunk's scores for those query heads
// (K and V are read once for the group: grouped-query attention), their maximum,
// their sum of exponentials and the weighted values; a second kernel merges each
// query head's chunks. Keys the mask leaves out are never read, so a step over a
// long, partly filled cache pays for the filled positions. Chunks shrink (down to
// kMinChunk keys) until the grid covers the GPU: a batch-1 step has few (batch,
// head) pairs. With one chunk the first kernel writes the output itself.
//
// Inside a block, a team of lanes (a power of two up to 32, within one warp on
// wave32 and wave64 alike) reads a key or value row as 16-byte vectors, one or
// two per lane, so a row is one coalesced access; the block's teams take
// kUnroll rows each before using any, so that many loads are in flight (a
// thread per row, looping over its columns, waited for each load in turn:
// 18 us for a 216-key step of TinyLlama). Scores meet across a team in
// shuffles; each head's maximum and sum is one warp's; the weighted values meet
// across teams in shuffles, then across warps in shared memory.

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kDecodeThreads = 256;
constexpr int kMaxChunk = 256;  // keys per block
constexpr int kMinChunk = 32;
constexpr int kHeads = 8;  // query heads per block at most; a larger group is split across blocks
constexpr int kMaxDim = 256;
constexpr int kMaxColumns = 1024;  // a block's heads x head dim: its weighted values meet in shared memory
constexpr int kUnroll = 4;         // rows a team loads before using them
constexpr int kMaxTeam = 32;
constexpr int kMergeThreads = 128;

struct DecodeDims {
  int64_t batch, heads, kv_heads, keys;
  int head_dim, group, heads_per_block, head_blocks, chunk, chunks;
  int team;  // lanes per key row: a power of two, up to kMaxTeam
  float scale;
  // Element strides: (batch, head) of the query, (batch, head, row) of keys and values, (batch, key) of the mask.
  int64_t q_batch, q_head, k_batch, k_head, k_row, v_batch, v_head, v_row, m_batch, m_key;
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Vectors of a row per lane: float rows of 256 are 64 vectors for a team of 32.
template <class T> constexpr int kPerLane = kMaxDim / kVec<T> > kMaxTeam ? kMaxDim / kVec<T> / kMaxTeam : 1;

// H: the block's query heads at most (heads_per_block <= H), so that a block of one head
// (multi-head attention, or a group spread over blocks) holds one head's registers.
template <class T, int H>
static __global__ void __launch_bounds__(kDecodeThreads, 2)
    decode_attention_chunks(const T* q, const T* k, const T* v, const bool* mask, T* out, float* partial, DecodeDims d) {
  constexpr int V = kVec<T>, P = kPerLane<T>, kWarps = kDecodeThreads / PF_WARP_SIZE;
  constexpr int kColumns = H * kMaxDim < kMaxColumns ? H * kMaxDim : kMaxColumns;
  __shared__ float probs[H * kMaxChunk];
  __shared__ float columns[kWarps * kColumns];  // each warp's weighted values
  __shared__ float maxima[H], sums[H];
  const int chunk = static_cast<int>(blockIdx.x % d.chunks);
  int64_t rest = blockIdx.x / d.chunks;
  const int head_block = static_cast<int>(rest % d.head_blocks);
  rest /= d.head_blocks;
  const int64_t hk = rest % d.kv_heads, n = rest / d.kv_heads;
  const int64_t h0 = hk * d.group + int64_t{head_block} * d.heads_per_block;  // the block's first query head
  const int nh = min(d.heads_per_block, d.group - head_block * d.heads_per_block);
  const int e = d.head_dim, t = threadIdx.x, vectors = e / V;
  const int team = d.team, rank = t % team, row_lane = t / team, row_lanes = kDecodeThreads / team;
  const int64_t j0 = int64_t{chunk} * d.chunk;
  const int len = static_cast<int>(min(int64_t{d.chunk}, d.keys - j0));
  const T* keys = k + n * d.k_batch + hk * d.k_head + j0 * d.k_row;
  const T* values = v + n * d.v_batch + hk * d.v_head + j0 * d.v_row;
  const bool* seen = mask ? mask + n * d.m_batch + j0 * d.m_key : nullptr;

  // This lane's columns of the block's query rows, scaled.
  float query[H][P][V];
#pragma unroll
  for (int h = 0; h < H; ++h)
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int c = rank + p * team;
      Vec<T, V> x{};
      if (h < nh && c < vectors)
        x = *reinterpret_cast<const Vec<T, V>*>(q + n * d.q_batch + (h0 + h) * d.q_head + c * V);
#pragma unroll
      for (int u = 0; u < V; ++u) query[h][p][u] = static_cast<float>(x.v[u]) * d.scale;
    }

  // Scores: every lane runs the same iterations (the shuffles need the whole warp).
  for (int base = 0; base < len; base += row_lanes * kUnroll) {
    Vec<T, V> x[kUnroll][P];
    bool live[kUnroll];
#pragma unroll
    for (int r = 0; r < kUnroll; ++r) {
      const int j = base + r * row_lanes + row_lane;
      live[r] = j < len && (!seen || seen[j * d.m_key]);
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int c = rank + p * team;
        x[r][p] = Vec<T, V>{};
        if (live[r] && c < vectors) x[r][p] = *reinterpret_cast<const Vec<T, V>*>(keys + j * d.k_row + c * V);
      }
    }
#pragma unroll
    for (int r = 0; r < kUnroll; ++r) {
      const int j = base + r * row_lanes + row_lane;
#pragma unroll
      for (int h = 0; h < H; ++h) {
        if (h < nh) {  // the same for the whole block: the shuffles are met by every lane
          float s = 0;
#pragma unroll
          for (int p = 0; p < P; ++p)
#pragma unroll
            for (int u = 0; u < V; ++u) s += query[h][p][u] * static_cast<float>(x[r][p].v[u]);
          s = warp_all_reduce(s, Plus{}, team);
          if (rank == 0 && j < len) probs[h * kMaxChunk + j] = live[r] ? s : -INFINITY;
        }
      }
    }
  }
  __syncthreads();

  // Per head, one warp: the chunk's maximum score, exp(score - maximum) in place and its sum
  // (0 for a chunk with no key seen: it adds nothing when the chunks merge).
  const int warp = t / PF_WARP_SIZE, lane = t % PF_WARP_SIZE;
  for (int h = warp; h < nh; h += kWarps) {
    float* ph = probs + h * kMaxChunk;
    float m = -INFINITY;
    for (int j = lane; j < len; j += PF_WARP_SIZE) m = fmaxf(m, ph[j]);
    m = warp_all_reduce(m, MaxOp{});
    float sum = 0;
    for (int j = lane; j < len; j += PF_WARP_SIZE) {
      const float p = ph[j] == -INFINITY ? 0.0f : expf(ph[j] - m);
      ph[j] = p;
      sum += p;
    }
    sum = warp_all_reduce(sum, Plus{});
    if (lane == 0) maxima[h] = m, sums[h] = sum;
  }
  __syncthreads();

  // The weighted values: each team's rows, then the teams of a warp in shuffles, then the warps.
  float acc[H][P][V] = {};
  for (int base = 0; base < len; base += row_lanes * kUnroll) {
    Vec<T, V> x[kUnroll][P];
#pragma unroll
    for (int r = 0; r < kUnroll; ++r) {
      const int j = base + r * row_lanes + row_lane;
      bool live = false;
#pragma unroll
      for (int h = 0; h < H; ++h)
        if (h < nh && j < len) live = live || probs[h * kMaxChunk + j] != 0.0f;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int c = rank + p * team;
        x[r][p] = Vec<T, V>{};
        if (live && c < vectors) x[r][p] = *reinterpret_cast<const Vec<T, V>*>(values + j * d.v_row + c * V);
      }
    }
#pragma unroll
    for (int r = 0; r < kUnroll; ++r) {
      const int j = base + r * row_lanes + row_lane;
#pragma unroll
      for (int h = 0; h < H; ++h) {
        const float w = h < nh && j < len ? probs[h * kMaxChunk + j] : 0.0f;
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
          for (int u = 0; u < V; ++u) acc[h][p][u] += w * static_cast<float>(x[r][p].v[u]);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < H; ++h) {
    if (h < nh) {
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int u = 0; u < V; ++u) {
          float a = acc[h][p][u];
          for (int m = team; m < PF_WARP_SIZE; m <<= 1) a += shfl_xor(a, m);
          const int c = rank + p * team;
          if (lane < team && c < vectors) columns[warp * kColumns + h * e + c * V + u] = a;
        }
    }
  }
  __syncthreads();
  for (int i = t; i < nh * e; i += kDecodeThreads) {
    float a = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) a += columns[w * kColumns + i];
    const int h = i / e, c = i % e;
    const int64_t row = n * d.heads + h0 + h;
    if (d.chunks == 1) {
      out[row * e + c] = static_cast<T>(sums[h] > 0 ? a / sums[h] : 0.0f);
    } else {
      float* slot = partial + (row * d.chunks + chunk) * (e + 2);
      slot[2 + c] = a;
      if (c == 0) slot[0] = maxima[h], slot[1] = sums[h];
    }
  }
}

// One block per (batch, query head): the chunks' partial results rescaled to the largest
// maximum, summed and divided by the merged sum (zeros where no key was seen). Every
// chunk's maximum and sum is read at once (threads over chunks), then the values a tile of
// chunks at a time with their weights in shared memory: no load waits on another.
template <class T> static __global__ void __launch_bounds__(kMergeThreads) decode_attention_merge(const float* partial,
                                                                                                   T* out, DecodeDims d) {
  __shared__ float weights[kMergeThreads];
  const int64_t row = blockIdx.x;
  const int e = d.head_dim, stride = e + 2, t = threadIdx.x;
  const float* p = partial + row * d.chunks * stride;
  float m = -INFINITY;
  for (int c = t; c < d.chunks; c += kMergeThreads)
    if (p[c * stride + 1] > 0) m = fmaxf(m, p[c * stride]);
  m = block_all_reduce<kMergeThreads>(m, MaxOp{});
  float sum = 0;
  for (int c = t; c < d.chunks; c += kMergeThreads)
    if (p[c * stride + 1] > 0) sum += p[c * stride + 1] * expf(p[c * stride] - m);
  sum = block_all_reduce<kMergeThreads>(sum, Plus{});
  float acc[kMaxDim / kMergeThreads] = {};  // columns t, t + kMergeThreads
  for (int c0 = 0; c0 < d.chunks; c0 += kMergeThreads) {
    const int c = c0 + t;
    weights[t] = c < d.chunks && p[c * stride + 1] > 0 ? expf(p[c * stride] - m) : 0.0f;
    __syncthreads();
    const int tile = min(kMergeThreads, d.chunks - c0);
#pragma unroll 4
    for (int i = 0; i < tile; ++i) {
      const float* values = p + int64_t{c0 + i} * stride + 2;
#pragma unroll
      for (int a = 0; a < kMaxDim / kMergeThreads; ++a)
        if (t + a * kMergeThreads < e) acc[a] += weights[i] * values[t + a * kMergeThreads];
    }
    __syncthreads();
  }
#pragma unroll
  for (int a = 0; a < kMaxDim / kMergeThreads; ++a)
    if (t + a * kMergeThreads < e) out[row * e + t + a * kMergeThreads] = static_cast<T>(sum > 0 ? acc[a] / sum : 0.0f);
}

std::string describe(const OpCall& call, const DecodeDims& d, const char* kernel) {
  return std::string(kernel) + " on query " + detail::to_piece(call.inputs[0].shape()) + ", keys " +
         detail::to_piece(call.inputs[1].shape()) + " (" + std::to_string(d.chunks) + " chunks of " +
         std::to_string(d.chunk) + " keys)";
}

template <class T> void decode_attention_launch(OpCall& call) {
  const Tensor &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2], &mask = call.inputs[3];
  Tensor& out = call.out();
  const Device device = out.device();
  DeviceGuard guard(device.index);
  DecodeDims d{};
  d.batch = q.size(0), d.heads = q.size(1), d.kv_heads = k.size(1), d.keys = k.size(2);
  d.head_dim = static_cast<int>(q.size(3));
  d.group = static_cast<int>(d.heads / d.kv_heads);
  d.team = 1;
  while (d.team < kMaxTeam && d.team * kVec<T> < d.head_dim) d.team *= 2;
  d.scale = static_cast<float>(call.attr<AttentionAttrs>().scale);
  d.q_batch = q.strides()[0], d.q_head = q.strides()[1];
  d.k_batch = k.strides()[0], d.k_head = k.strides()[1], d.k_row = k.strides()[2];
  d.v_batch = v.strides()[0], d.v_head = v.strides()[1], d.v_row = v.strides()[2];
  if (mask.defined()) d.m_batch = mask.strides()[0], d.m_key = mask.strides()[1];
  if (out.numel() == 0) return;
  // Until the grid has about two blocks per compute unit: chunks halve down to what a block's
  // teams load in one round, then a group's heads spread over more blocks (their keys and
  // values are read again, from the cache), then chunks halve down to kMinChunk.
  const int64_t target = 2 * int64_t{compute_units(device.index)};
  const int one_round = kDecodeThreads / d.team * kUnroll;
  d.heads_per_block = std::min({d.group, kHeads, kMaxColumns / d.head_dim});
  d.chunk = kMaxChunk;
  auto blocks = [&] {
    const int64_t head_blocks = (d.group + d.heads_per_block - 1) / d.heads_per_block;
    return d.batch * d.kv_heads * head_blocks * ((d.keys + d.chunk - 1) / d.chunk);
  };
  while (blocks() < target) {
    if (d.chunk > std::max(one_round, kMinChunk)) d.chunk /= 2;
    else if (d.heads_per_block > 1) d.heads_per_block = (d.heads_per_block + 1) / 2;
    else if (d.chunk > kMinChunk) d.chunk /= 2;
    else break;
  }
  d.head_blocks = (d.group + d.heads_per_block - 1) / d.heads_per_block;
  const int64_t chunks = (d.keys + d.chunk - 1) / d.chunk, grid = blocks();
  PF_CHECK(grid <= INT_MAX && chunks <= INT_MAX, NotSupportedError, op_name(call.op), ": ", grid,
           " blocks exceed the grid limit of 2^31-1");
  d.chunks = static_cast<int>(chunks);
  const hipStream_t stream = current_stream(device.index);
  Tensor partial;
  if (d.chunks > 1)
    partial = Tensor::empty({d.batch * d.heads * chunks * (d.head_dim + 2)}, DType::Float32, device);
  auto launch = [&](auto heads) {
    decode_attention_chunks<T, decltype(heads)::value><<<static_cast<unsigned>(grid), kDecodeThreads, 0, stream>>>(
        q.data<T>(), k.data<T>(), v.data<T>(), mask.defined() ? mask.data<bool>() : nullptr, out.data<T>(),
        d.chunks > 1 ? partial.data<float>() : nullptr, d);
  };
  if (d.heads_per_block == 1) launch(std::integral_constant<int, 1>());
  else if (d.heads_per_block == 2) launch(std::integral_constant<int, 2>());
  else if (d.heads_per_block <= 4) launch(std::integral_constant<int, 4>());
  else launch(std::integral_constant<int, kHeads>());
  check_launch(op_name(call.op), [&] { return describe(call, d, "decode_attention_chunks"); });
  if (d.chunks == 1) return;
  decode_attention_merge<T><<<static_cast<unsigned>(d.batch * d.heads), kMergeThreads, 0, stream>>>(
      partial.data<float>(), out.data<T>(), d);
  check_launch(op_name(call.op), [&] { return describe(call, d, "decode_attention_merge"); });
}

void decode_attention_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: decode_attention_launch<BFloat16>(call); break;
    case DType::Float16: decode_attention_launch<Half>(call); break;
    default: decode_attention_launch<float>(call); break;
  }
}

PF_REGISTER_KERNEL(decode_attention, ROCm, &decode_attention_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
