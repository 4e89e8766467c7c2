// GPU GEMV: linear of one row of input (a language model's decode step at
// batch 1), y (1, n) = x (1, k) w (n, k)^T + b. Its cost is reading w once. A
// warp takes one row of w; its lanes read the row 16 bytes at a time with
// kGemvUnroll loads in flight before the multiply-adds (a row of 4096 bf16 is
// 16 loads a lane on wave32, 8 on wave64), multiply them with x, which every
// warp reads (it stays in the caches), and sum across the warp (block_reduce.h:
// right for wave64 and wave32). Several weights that share x (a layer's query,
// key and value projections) are parts of one launch: the rows of all parts are
// numbered one after another. On an H200 (docs/perf.md) this reads a bf16
// 4096 x 14336 weight at 81% of a copy's rate (cuBLAS 89%) and the small weights
// of a 1B model's layers 2-3x faster than cuBLAS's calls; with 2 to 8 rows of x
// (a first version multiplied them all in registers) cuBLAS was faster, so those
// stay with it, as do blocks of one weight row per block (tried: 1.7x slower).
//
// A decode step's norms and SwiGLU ride along (grouped_linear's fusions, made by
// graph mode): a block normalises x into shared memory while its warps' first
// weight loads are in flight, and its warps read x from there (a first version
// had each warp sum x's squares itself and normalise x as it read it: the GEMVs
// of TinyLlama's step took 1214 us instead of 770); with SwiGLU a warp takes row
// r of both the gate and the up weights and writes silu(gate) * up. Each was a
// kernel of its own, about 2 us at a 1B model's sizes.

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/gemv.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kGemvThreads = 256;
constexpr int kGemvUnroll = 4;
constexpr int64_t kMaxNormedRow = 8192;  // elements of x a fused norm holds in shared memory

template <class T> struct GemvPart {
  const T* w;
  const T* bias;  // null: none
  T* y;
  int64_t rows, ldw;
};

template <class T> struct GemvArgs {
  const T* x;
  int64_t k;
  int parts;
  GemvPart<T> part[kMaxGemvParts];
  const T* norm_weight;  // kNorm: null for ones
  float eps;
  T* swiglu_out;  // kSwiglu
};

// rms_norm of x (1, k) into `out` (shared memory), rounded to T as rms_norm writes it; the
// whole block takes part (block_all_reduce: every thread must call this).
template <class T> __device__ void normalize_row(const GemvArgs<T>& a, T* out) {
  constexpr int V = kVec<T>;
  float q = 0.0f;
  for (int64_t c = int64_t{threadIdx.x} * V; c < a.k; c += int64_t{kGemvThreads} * V) {
    const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(a.x + c);
#pragma unroll
    for (int e = 0; e < V; ++e) q += static_cast<float>(xv.v[e]) * static_cast<float>(xv.v[e]);
  }
  q = block_all_reduce<kGemvThreads>(q, Plus{});
  const float rstd = 1.0f / sqrtf(q / static_cast<float>(a.k) + a.eps);
  for (int64_t c = int64_t{threadIdx.x} * V; c < a.k; c += int64_t{kGemvThreads} * V) {
    const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(a.x + c);
    Vec<T, V> nw, y;
    if (a.norm_weight) nw = *reinterpret_cast<const Vec<T, V>*>(a.norm_weight + c);
#pragma unroll
    for (int e = 0; e < V; ++e)
      y.v[e] = static_cast<T>(static_cast<float>(xv.v[e]) * rstd * (a.norm_weight ? static_cast<float>(nw.v[e]) : 1.0f));
    *reinterpret_cast<Vec<T, V>*>(out + c) = y;
  }
  __syncthreads();
}

// kNorm: the block normalises x into shared memory once, while its warps' first weight loads
// are in flight, and the warps read it from there; such blocks stay resident and take group after
// group of rows (row_blocks of them), so that a second wave does not normalise x again. kSwiglu:
// parts 0 and 1 (gate and up) of as many rows, a warp taking row r of both.
template <class T, bool kNorm, bool kSwiglu> static __global__ void gemv_rows(GemvArgs<T> a, int64_t row_blocks) {
  constexpr int V = kVec<T>, W = kSwiglu ? 2 : 1;  // weight rows a warp reads
  constexpr int64_t kStride = int64_t{PF_WARP_SIZE} * V;  // elements a warp reads per load
  constexpr int kWarps = kGemvThreads / PF_WARP_SIZE;
  alignas(16) __shared__ unsigned char normed[kNorm ? kMaxNormedRow * sizeof(T) : 16];
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t first = int64_t{lane} * V;
  const T* x = a.x;
  bool normalized = !kNorm;
  for (int64_t group = blockIdx.x; group < row_blocks; group += gridDim.x) {
    int64_t row = group * kWarps + threadIdx.x / PF_WARP_SIZE;
    int p = 0;
    if constexpr (!kSwiglu)
      while (p < a.parts && row >= a.part[p].rows) row -= a.part[p++].rows;
    const bool live = p < a.parts && row < a.part[p].rows;  // the whole warp: false past the last row
    const T* w[W];
    Vec<T, V> wv[W][kGemvUnroll];
    auto load = [&](int64_t c0) {
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u)
#pragma unroll
        for (int i = 0; i < W; ++i) {
          wv[i][u] = Vec<T, V>{};
          if (c0 + u * kStride < a.k) wv[i][u] = *reinterpret_cast<const Vec<T, V>*>(w[i] + c0 + u * kStride);
        }
    };
    if (live) {
#pragma unroll
      for (int i = 0; i < W; ++i) w[i] = a.part[p + i].w + row * a.part[p + i].ldw;
    }
    bool preloaded = false;
    if (!normalized) {  // the block's first rows (group is the same for the whole block)
      if (live) load(first);
      preloaded = live;
      normalize_row(a, reinterpret_cast<T*>(normed));
      x = reinterpret_cast<const T*>(normed);
      normalized = true;
    }
    if (!live) {
      if constexpr (kNorm) continue;
      break;
    }
    float acc[W] = {};
    for (int64_t c0 = first; c0 < a.k; c0 += kStride * kGemvUnroll) {
      if (!preloaded || c0 != first) load(c0);
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) {
        if (c0 + u * kStride >= a.k) break;
        const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + c0 + u * kStride);
#pragma unroll
        for (int i = 0; i < W; ++i)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[i] += static_cast<float>(wv[i][u].v[e]) * static_cast<float>(xv.v[e]);
      }
    }
    float y[W];
#pragma unroll
    for (int i = 0; i < W; ++i) {
      const T* bias = a.part[p + i].bias;
      y[i] = warp_all_reduce(acc[i], Plus{}) + (bias ? static_cast<float>(bias[row]) : 0.0f);
    }
    if (lane == 0) {
      if constexpr (kSwiglu) {
        // As the unfused graph: each product rounded to T, then silu(gate) * up.
        const float gate = static_cast<float>(static_cast<T>(y[0])), up = static_cast<float>(static_cast<T>(y[1]));
        a.swiglu_out[row] = static_cast<T>(kernels::Silu<float>{}(gate) * up);
      } else {
        a.part[p].y[row] = static_cast<T>(y[0]);
      }
    }
    if constexpr (!kNorm) break;  // one group a block
  }
}

template <class T>
void launch(const Tensor& x, const std::vector<GemvProblem>& parts, const char* op, const GemvFusion& f) {
  GemvArgs<T> args{x.data<T>(), x.size(1), static_cast<int>(parts.size()), {}, nullptr, static_cast<float>(f.eps),
                   nullptr};
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const GemvProblem& p = parts[i];
    args.part[i] = {p.w->data<T>(), p.bias ? p.bias->data<T>() : nullptr, p.y ? p.y->data<T>() : nullptr,
                    p.w->size(0), p.w->strides()[0]};
    rows += p.w->size(0);
  }
  if (f.norm_weight) args.norm_weight = f.norm_weight->data<T>();
  if (f.swiglu_out) args.swiglu_out = f.swiglu_out->data<T>(), rows = parts[0].w->size(0);
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t warps = kGemvThreads / warp_size(device);
  const int64_t row_blocks = (rows + warps - 1) / warps;
  const hipStream_t stream = current_stream(device);
  auto run = [&](auto norm, auto swiglu) {
    const auto kernel = gemv_rows<T, decltype(norm)::value, decltype(swiglu)::value>;
    int64_t grid = row_blocks;
    if (norm) {  // as many blocks as stay resident: each normalises x once
      static const int per_unit = [&] {
        int n = 0;
        HIP_CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kGemvThreads, 0));
        return std::max(n, 1);
      }();
      grid = std::min<int64_t>(grid, int64_t{per_unit} * compute_units(device));
    }
    kernel<<<static_cast<unsigned>(grid), kGemvThreads, 0, stream>>>(args, row_blocks);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  if (f.rms_norm) f.swiglu_out ? run(Yes{}, Yes{}) : run(Yes{}, No{});
  else f.swiglu_out ? run(No{}, Yes{}) : run(No{}, No{});
  check_launch(op, [&] {
    return std::string("gemv_rows") + (f.rms_norm ? " (rms_norm first)" : "") + (f.swiglu_out ? " (swiglu)" : "") +
           " of a row of " + std::to_string(args.k) + " by " + std::to_string(rows) + " weight rows in " +
           std::to_string(args.parts) + " part(s)";
  });
}

// Rows of `t` (2-d) contiguous, each starting 16 bytes aligned.
bool rows_aligned(const Tensor& t) {
  const int64_t vec = 16 / static_cast<int64_t>(itemsize(t.dtype()));
  return t.strides()[1] == 1 && (t.size(0) == 1 || t.strides()[0] % vec == 0) && aligned(t.data_ptr(), 16);
}

}  // namespace

bool gemv_serves(const Tensor& x, const std::vector<GemvProblem>& parts, const GemvFusion& fusion) {
  const DType dt = x.dtype();
  if (dt != DType::BFloat16 && dt != DType::Float16 && dt != DType::Float32) return false;
  if (x.dim() != 2 || x.size(0) != 1 || parts.empty() || parts.size() > kMaxGemvParts) return false;
  const int64_t k = x.size(1), vec = 16 / static_cast<int64_t>(itemsize(dt));
  if (k == 0 || k % vec != 0 || !rows_aligned(x)) return false;
  for (const GemvProblem& p : parts) {
    if (p.w->dtype() != dt || p.w->dim() != 2 || p.w->size(1) != k || p.w->size(0) == 0 || !rows_aligned(*p.w))
      return false;
    Tensor* y = fusion.swiglu_out ? fusion.swiglu_out : p.y;
    if (!y->is_contiguous() || y->dtype() != dt || y->shape() != Shape({1, p.w->size(0)})) return false;
    if (p.bias && (!p.bias->is_contiguous() || p.bias->dtype() != dt || p.bias->numel() != p.w->size(0))) return false;
  }
  const Tensor* nw = fusion.norm_weight;
  if (nw && (nw->dtype() != dt || nw->numel() != k || !nw->is_contiguous() || !aligned(nw->data_ptr(), 16)))
    return false;
  if (fusion.rms_norm && k > kMaxNormedRow) return false;
  return !fusion.swiglu_out || (parts.size() == 2 && parts[0].w->size(0) == parts[1].w->size(0));
}

void gemv(const Tensor& x, const std::vector<GemvProblem>& parts, const char* op, const GemvFusion& fusion) {
  switch (x.dtype()) {
    case DType::BFloat16: launch<BFloat16>(x, parts, op, fusion); break;
    case DType::Float16: launch<Half>(x, parts, op, fusion); break;
    default: launch<float>(x, parts, op, fusion); break;
  }
}

}  // namespace pyflame::backend::rocm
