// GPU quantized_linear (modules_ops.h has the op and pyflame.quant's layout): linear by a
// weight-only int8 or int4 weight. For one row of input (a decode step at batch 1) a GEMV
// reads the codes, never a dequantized weight: as gemv.hip, a warp takes a weight row, its
// lanes 16 bytes of codes at a time (16 int8 or 32 int4 weights, inside one group: the
// group size is a multiple of that) with several loads in flight. A code becomes a float
// with an OR into the mantissa of 2^23 and one subtraction that also takes the zero point
// off (exact: both are below 2^8), so a weight costs about 3 instructions besides its
// multiply-add; the group's scale multiplies the chunk's sum once. x is read from the
// caches by every warp, as in gemv.hip.
// More rows of input (a prompt, a batch) dequantize the weight once per call into the
// input's dtype and run linear's GEMM: the codes save memory at rest, and the GEMM's time is
// the product's.

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/ir/op_call.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kQuantThreads = 256;
constexpr int kQuantUnroll = 4;
constexpr int kChunkBytes = 16;  // a lane's load of codes

template <class T> struct QuantizedRows {
  const uint8_t* codes;  // (rows, code_row) packed
  const T* scales;       // (rows, groups)
  const uint8_t* zeros;  // (rows, groups)
  int64_t rows, k, code_row, groups, group_size;
};

// (code - zero) as a float: the code ORed into the mantissa of 2^23 is 2^23 + code, exactly.
__device__ __forceinline__ float centred(uint32_t code, float offset) {
  return __uint_as_float(0x4B000000u | code) - offset;
}

template <class T, int kBits>
static __global__ void quantized_gemv_rows(QuantizedRows<T> w, const T* x, const T* bias, T* y) {
  constexpr int kPerWord = 32 / kBits, kPerChunk = kChunkBytes * 8 / kBits, V = kVec<T>;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  constexpr int64_t kStride = int64_t{PF_WARP_SIZE} * kChunkBytes;  // bytes a warp reads per load
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t row = int64_t{blockIdx.x} * (kQuantThreads / PF_WARP_SIZE) + threadIdx.x / PF_WARP_SIZE;
  if (row >= w.rows) return;  // the whole warp
  const uint8_t* codes = w.codes + row * w.code_row;
  const T* scales = w.scales + row * w.groups;
  const uint8_t* zeros = w.zeros + row * w.groups;
  float acc = 0.0f;
  for (int64_t c0 = int64_t{lane} * kChunkBytes; c0 < w.code_row; c0 += kStride * kQuantUnroll) {
    uint4 chunk[kQuantUnroll];
#pragma unroll
    for (int u = 0; u < kQuantUnroll; ++u) {
      chunk[u] = uint4{0, 0, 0, 0};
      if (c0 + u * kStride < w.code_row) chunk[u] = *reinterpret_cast<const uint4*>(codes + c0 + u * kStride);
    }
#pragma unroll
    for (int u = 0; u < kQuantUnroll; ++u) {
      if (c0 + u * kStride >= w.code_row) break;
      const int64_t first = (c0 + u * kStride) * 8 / kBits;  // the chunk's first weight
      const int64_t g = first / w.group_size;
      const float offset = 8388608.0f + static_cast<float>(zeros[g]);
      float xs[kPerChunk];
#pragma unroll
      for (int v = 0; v < kPerChunk / V; ++v) {
        const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + first + v * V);
#pragma unroll
        for (int e = 0; e < V; ++e) xs[v * V + e] = static_cast<float>(xv.v[e]);
      }
      const uint32_t words[4] = {chunk[u].x, chunk[u].y, chunk[u].z, chunk[u].w};
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kPerWord; ++j)
          s = fmaf(centred((words[i] >> (kBits * j)) & kMask, offset), xs[i * kPerWord + j], s);
      acc = fmaf(static_cast<float>(scales[g]), s, acc);
    }
  }
  acc = warp_all_reduce(acc, Plus{});
  if (lane == 0) y[row] = static_cast<T>(acc + (bias ? static_cast<float>(bias[row]) : 0.0f));
}

// The weight (rows, k) in T: a thread per byte of codes (one int8 weight, two int4 ones).
template <class T, int kBits> static __global__ void dequantize_rows(QuantizedRows<T> w, T* out) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t bytes = w.rows * w.code_row;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < bytes; b += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = b / w.code_row, first = b % w.code_row * 8 / kBits;
    const int64_t g = row * w.groups + first / w.group_size;
    const A scale = static_cast<A>(w.scales[g]), zero = static_cast<A>(w.zeros[g]);
    const uint32_t code = w.codes[b];
    T* o = out + row * w.k + first;
    if constexpr (kBits == 8) {
      o[0] = static_cast<T>((static_cast<A>(code) - zero) * scale);
    } else {
      o[0] = static_cast<T>((static_cast<A>(code & 15) - zero) * scale);
      o[1] = static_cast<T>((static_cast<A>(code >> 4) - zero) * scale);
    }
  }
}

template <class T> QuantizedRows<T> quantized_rows(const OpCall& call) {
  const auto& a = call.attr<QuantAttrs>();
  const Tensor &codes = call.inputs[1], &scales = call.inputs[2], &zeros = call.inputs[3];
  return {codes.data<uint8_t>(), scales.data<T>(), zeros.data<uint8_t>(), codes.size(0), call.inputs[0].size(1),
          codes.size(1), scales.size(1), a.group_size};
}

// One row of x, 16 bytes of codes a lane inside one group, rows of codes and x 16-byte aligned.
bool gemv_serves(const OpCall& call) {
  const auto& a = call.attr<QuantAttrs>();
  const Tensor &x = call.inputs[0], &codes = call.inputs[1];
  const DType dt = x.dtype();
  const int64_t per_chunk = kChunkBytes * 8 / a.bits;
  return (dt == DType::BFloat16 || dt == DType::Float16 || dt == DType::Float32) && x.size(0) == 1 &&
         codes.size(1) % kChunkBytes == 0 && a.group_size % per_chunk == 0 && aligned(codes.data_ptr(), 16) &&
         aligned(x.data_ptr(), 16);
}

template <class T> void quantized_linear_launch(OpCall& call) {
  const auto& a = call.attr<QuantAttrs>();
  const Tensor &x = call.inputs[0], &bias = call.inputs[4];
  Tensor& out = call.out();
  const int device = out.device().index;
  DeviceGuard guard(device);
  const hipStream_t stream = current_stream(device);
  const QuantizedRows<T> w = quantized_rows<T>(call);
  if (w.rows == 0 || x.size(0) == 0) return;
  const std::string shapes = "x " + detail::to_piece(x.shape()) + ", " + std::to_string(a.bits) + "-bit weight (" +
                             std::to_string(w.rows) + ", " + std::to_string(w.k) + "), groups of " +
                             std::to_string(a.group_size);
  if constexpr (!std::is_same_v<T, double>) {
    if (gemv_serves(call)) {
      const int64_t warps = kQuantThreads / warp_size(device);
      const auto blocks = static_cast<unsigned>((w.rows + warps - 1) / warps);
      const T* b = bias.defined() ? bias.data<T>() : nullptr;
      if (a.bits == 8) quantized_gemv_rows<T, 8><<<blocks, kQuantThreads, 0, stream>>>(w, x.data<T>(), b, out.data<T>());
      else quantized_gemv_rows<T, 4><<<blocks, kQuantThreads, 0, stream>>>(w, x.data<T>(), b, out.data<T>());
      check_launch("quantized_linear", [&] { return "quantized_gemv_rows on " + shapes; });
      return;
    }
  }
  Tensor weight = Tensor::empty({w.rows, w.k}, x.dtype(), x.device());
  if (w.k > 0) {
    const unsigned grid = grid_for(w.rows * w.code_row);
    if (a.bits == 8) dequantize_rows<T, 8><<<grid, kThreads, 0, stream>>>(w, weight.data<T>());
    else dequantize_rows<T, 4><<<grid, kThreads, 0, stream>>>(w, weight.data<T>());
    check_launch("quantized_linear", [&] { return "dequantize_rows on " + shapes; });
  }
  apply({ir::OpType::linear, {x, weight, bias}, NoAttrs{}, {out}});
}

void quantized_linear_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: quantized_linear_launch<BFloat16>(call); break;
    case DType::Float16: quantized_linear_launch<Half>(call); break;
    case DType::Float64: quantized_linear_launch<double>(call); break;
    default: quantized_linear_launch<float>(call); break;
  }
}

PF_REGISTER_KERNEL(quantized_linear, ROCm, &quantized_linear_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
