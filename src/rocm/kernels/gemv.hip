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

#include <string>

#include "core/dispatch.h"
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
};

struct Plus {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <class T> static __global__ void gemv_rows(GemvArgs<T> a) {
  constexpr int V = kVec<T>;
  constexpr int64_t kStride = int64_t{PF_WARP_SIZE} * V;  // elements a warp reads per load
  const int lane = threadIdx.x % PF_WARP_SIZE;
  int64_t row = int64_t{blockIdx.x} * (kGemvThreads / PF_WARP_SIZE) + threadIdx.x / PF_WARP_SIZE;
  int p = 0;
  while (p < a.parts && row >= a.part[p].rows) row -= a.part[p++].rows;
  if (p == a.parts) return;  // the whole warp: past the last row
  const GemvPart<T> part = a.part[p];
  const T* w = part.w + row * part.ldw;
  float acc = 0.0f;
  for (int64_t c0 = int64_t{lane} * V; c0 < a.k; c0 += kStride * kGemvUnroll) {
    Vec<T, V> wv[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      wv[u] = Vec<T, V>{};
      if (c0 + u * kStride < a.k) wv[u] = *reinterpret_cast<const Vec<T, V>*>(w + c0 + u * kStride);
    }
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      if (c0 + u * kStride >= a.k) break;
      const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(a.x + c0 + u * kStride);
#pragma unroll
      for (int e = 0; e < V; ++e) acc += static_cast<float>(wv[u].v[e]) * static_cast<float>(xv.v[e]);
    }
  }
  const float sum = warp_all_reduce(acc, Plus{});
  if (lane == 0) part.y[row] = static_cast<T>(sum + (part.bias ? static_cast<float>(part.bias[row]) : 0.0f));
}

template <class T> void launch(const Tensor& x, const std::vector<GemvProblem>& parts, const char* op) {
  GemvArgs<T> args{x.data<T>(), x.size(1), static_cast<int>(parts.size()), {}};
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const GemvProblem& p = parts[i];
    args.part[i] = {p.w->data<T>(), p.bias ? p.bias->data<T>() : nullptr, p.y->data<T>(), p.w->size(0),
                    p.w->strides()[0]};
    rows += p.w->size(0);
  }
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t warps = kGemvThreads / warp_size(device);
  gemv_rows<T><<<static_cast<unsigned>((rows + warps - 1) / warps), kGemvThreads, 0, current_stream(device)>>>(args);
  check_launch(op, [&] {
    return "gemv_rows of a row of " + std::to_string(args.k) + " by " + std::to_string(rows) + " weight rows in " +
           std::to_string(args.parts) + " part(s)";
  });
}

// Rows of `t` (2-d) contiguous, each starting 16 bytes aligned.
bool rows_aligned(const Tensor& t) {
  const int64_t vec = 16 / static_cast<int64_t>(itemsize(t.dtype()));
  return t.strides()[1] == 1 && (t.size(0) == 1 || t.strides()[0] % vec == 0) && aligned(t.data_ptr(), 16);
}

}  // namespace

bool gemv_serves(const Tensor& x, const std::vector<GemvProblem>& parts) {
  const DType dt = x.dtype();
  if (dt != DType::BFloat16 && dt != DType::Float16 && dt != DType::Float32) return false;
  if (x.dim() != 2 || x.size(0) != 1 || parts.empty() || parts.size() > kMaxGemvParts) return false;
  const int64_t k = x.size(1), vec = 16 / static_cast<int64_t>(itemsize(dt));
  if (k == 0 || k % vec != 0 || !rows_aligned(x)) return false;
  for (const GemvProblem& p : parts) {
    if (p.w->dtype() != dt || p.w->dim() != 2 || p.w->size(1) != k || p.w->size(0) == 0 || !rows_aligned(*p.w))
      return false;
    if (!p.y->is_contiguous() || p.y->dtype() != dt || p.y->shape() != Shape({1, p.w->size(0)})) return false;
    if (p.bias && (!p.bias->is_contiguous() || p.bias->dtype() != dt || p.bias->numel() != p.w->size(0))) return false;
  }
  return true;
}

void gemv(const Tensor& x, const std::vector<GemvProblem>& parts, const char* op) {
  switch (x.dtype()) {
    case DType::BFloat16: launch<BFloat16>(x, parts, op); break;
    case DType::Float16: launch<Half>(x, parts, op); break;
    default: launch<float>(x, parts, op); break;
  }
}

}  // namespace pyflame::backend::rocm
