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
// Block-wide maxima and sums go through block_reduce.h: right for wave32 and wave64.

#include <climits>
#include <cmath>
#include <string>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kDecodeThreads = 256;
constexpr int kMaxChunk = kDecodeThreads;  // keys per block: one per thread for the scores
constexpr int kMinChunk = 32;
constexpr int kHeads = 8;  // query heads per block; a larger group is split across blocks
constexpr int kMaxDim = 256;

struct DecodeDims {
  int64_t batch, heads, kv_heads, keys;
  int head_dim, group, heads_per_block, head_blocks, chunk, chunks;
  float scale;
  // Element strides: (batch, head) of the query, (batch, head, row) of keys and values, (batch, key) of the mask.
  int64_t q_batch, q_head, k_batch, k_head, k_row, v_batch, v_head, v_row, m_batch, m_key;
};

struct PlusOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T>
static __global__ void decode_attention_chunks(const T* q, const T* k, const T* v, const bool* mask, T* out,
                                               float* partial, DecodeDims d) {
  __shared__ float query[kHeads * kMaxDim];
  __shared__ float probs[kHeads * kMaxChunk];
  const int chunk = static_cast<int>(blockIdx.x % d.chunks);
  int64_t rest = blockIdx.x / d.chunks;
  const int head_block = static_cast<int>(rest % d.head_blocks);
  rest /= d.head_blocks;
  const int64_t hk = rest % d.kv_heads, n = rest / d.kv_heads;
  const int64_t h0 = hk * d.group + int64_t{head_block} * d.heads_per_block;  // the block's first query head
  const int nh = min(d.heads_per_block, d.group - head_block * d.heads_per_block);
  const int e = d.head_dim, t = threadIdx.x;
  for (int i = t; i < nh * e; i += blockDim.x)
    query[(i / e) * kMaxDim + i % e] = static_cast<float>(q[n * d.q_batch + (h0 + i / e) * d.q_head + i % e]) * d.scale;
  __syncthreads();

  const int64_t j0 = int64_t{chunk} * d.chunk;
  const int len = static_cast<int>(min(int64_t{d.chunk}, d.keys - j0));
  const float none = -INFINITY;
  if (t < len) {
    const int64_t j = j0 + t;
    const bool seen = !mask || mask[n * d.m_batch + j * d.m_key];
    float s[kHeads] = {};
    if (seen) {
      constexpr int V = kVec<T>;
      const T* kj = k + n * d.k_batch + hk * d.k_head + j * d.k_row;
      for (int c = 0; c < e; c += V) {
        const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(kj + c);
#pragma unroll
        for (int u = 0; u < V; ++u) {
          const float kc = static_cast<float>(x.v[u]);
#pragma unroll
          for (int h = 0; h < kHeads; ++h)
            if (h < nh) s[h] += query[h * kMaxDim + c + u] * kc;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < kHeads; ++h)
      if (h < nh) probs[h * kMaxChunk + t] = seen ? s[h] : none;
  }
  __syncthreads();

  // Per head: the chunk's maximum score, then exp(score - maximum) in place and its sum
  // (0 for a chunk with no key seen: it adds nothing when the chunks merge).
  float maxima[kHeads], sums[kHeads];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    if (h < nh) {  // the same for every thread: the reductions' barriers are met by all
      const float x = t < len ? probs[h * kMaxChunk + t] : none;
      const float m = block_all_reduce<kDecodeThreads>(x, MaxOp{});
      const float p = x == none ? 0.0f : expf(x - m);
      if (t < len) probs[h * kMaxChunk + t] = p;
      maxima[h] = m;
      sums[h] = block_all_reduce<kDecodeThreads>(p, PlusOp{});
    }
  }
  __syncthreads();

  // The weighted values: thread i takes (head i / e, column i % e), so a warp reads a row of
  // values at once; keys with no weight (masked) are not read.
  for (int i = t; i < nh * e; i += blockDim.x) {
    const int h = i / e, c = i % e;
    const T* vc = v + n * d.v_batch + hk * d.v_head + j0 * d.v_row + c;
    const float* ph = probs + h * kMaxChunk;
    float acc = 0;
    for (int jj = 0; jj < len; ++jj)
      if (ph[jj] != 0.0f) acc += ph[jj] * static_cast<float>(vc[jj * d.v_row]);
    const int64_t row = n * d.heads + h0 + h;
    float sum = 0;
#pragma unroll
    for (int g = 0; g < kHeads; ++g)
      if (g == h) sum = sums[g];
    if (d.chunks == 1) out[row * e + c] = static_cast<T>(sum > 0 ? acc / sum : 0.0f);
    else partial[(row * d.chunks + chunk) * (e + 2) + 2 + c] = acc;
  }
  if (d.chunks > 1) {
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      if (h < nh && t == h) {
        float* slot = partial + ((n * d.heads + h0 + h) * d.chunks + chunk) * (e + 2);
        slot[0] = maxima[h];
        slot[1] = sums[h];
      }
    }
  }
}

// One block per (batch, query head): the chunks' partial results rescaled to the largest
// maximum, summed and divided by the merged sum (zeros where no key was seen).
template <class T> static __global__ void decode_attention_merge(const float* partial, T* out, DecodeDims d) {
  const int64_t row = blockIdx.x;
  const int e = d.head_dim, stride = e + 2;
  const float* p = partial + row * d.chunks * stride;
  float m = -INFINITY, sum = 0;
  for (int c = 0; c < d.chunks; ++c)
    if (p[c * stride + 1] > 0) m = fmaxf(m, p[c * stride]);
  for (int c = 0; c < d.chunks; ++c)
    if (p[c * stride + 1] > 0) sum += p[c * stride + 1] * expf(p[c * stride] - m);
  for (int col = threadIdx.x; col < e; col += blockDim.x) {
    float acc = 0;
    for (int c = 0; c < d.chunks; ++c)
      if (p[c * stride + 1] > 0) acc += p[c * stride + 2 + col] * expf(p[c * stride] - m);
    out[row * e + col] = static_cast<T>(sum > 0 ? acc / sum : 0.0f);
  }
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
  d.heads_per_block = d.group < kHeads ? d.group : kHeads;
  d.head_blocks = (d.group + d.heads_per_block - 1) / d.heads_per_block;
  d.scale = static_cast<float>(call.attr<AttentionAttrs>().scale);
  d.q_batch = q.strides()[0], d.q_head = q.strides()[1];
  d.k_batch = k.strides()[0], d.k_head = k.strides()[1], d.k_row = k.strides()[2];
  d.v_batch = v.strides()[0], d.v_head = v.strides()[1], d.v_row = v.strides()[2];
  if (mask.defined()) d.m_batch = mask.strides()[0], d.m_key = mask.strides()[1];
  if (out.numel() == 0) return;
  // Chunks halve until the grid has about two blocks per compute unit (or reach kMinChunk).
  const int64_t pairs = d.batch * d.kv_heads * d.head_blocks, target = 2 * int64_t{compute_units(device.index)};
  d.chunk = kMaxChunk;
  while (d.chunk > kMinChunk && pairs * ((d.keys + d.chunk - 1) / d.chunk) < target) d.chunk /= 2;
  const int64_t chunks = (d.keys + d.chunk - 1) / d.chunk;
  PF_CHECK(pairs * chunks <= INT_MAX && chunks <= INT_MAX, NotSupportedError, op_name(call.op), ": ",
           pairs * chunks, " blocks exceed the grid limit of 2^31-1");
  d.chunks = static_cast<int>(chunks);
  const hipStream_t stream = current_stream(device.index);
  Tensor partial;
  if (d.chunks > 1)
    partial = Tensor::empty({d.batch * d.heads * chunks * (d.head_dim + 2)}, DType::Float32, device);
  decode_attention_chunks<T><<<static_cast<unsigned>(pairs * chunks), kDecodeThreads, 0, stream>>>(
      q.data<T>(), k.data<T>(), v.data<T>(), mask.defined() ? mask.data<bool>() : nullptr, out.data<T>(),
      d.chunks > 1 ? partial.data<float>() : nullptr, d);
  check_launch(op_name(call.op), [&] { return describe(call, d, "decode_attention_chunks"); });
  if (d.chunks == 1) return;
  const int merge_threads = (d.head_dim + 31) / 32 * 32;
  decode_attention_merge<T><<<static_cast<unsigned>(d.batch * d.heads), merge_threads, 0, stream>>>(
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
