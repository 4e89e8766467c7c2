// GPU quantized_linear (modules_ops.h has the op and pyflame.quant's layout): linear by a
// weight-only int8 or int4 weight. For one row of input (a decode step at batch 1) a GEMV
// reads the codes, never a dequantized weight: as gemv.hip, a warp takes weight rows (two),
// its lanes 16 bytes of codes of each at a time (16 int8 or 32 int4 weights, inside one
// group: the group size is a multiple of that) with several loads in flight. Reading the
// codes is cheap next to turning them into floats: a code is shifted into a float's mantissa
// (one shift and one AND-OR) and multiplied with x, the zero point taken off once a chunk
// through the sum of its x, and the group's scale applied once a chunk; x, read from the
// caches, is converted once for the warp's rows. (A first version, one row a warp with the
// zero point subtracted from each code, read an int4 4096 x 14336 weight in 23.3 us on an
// H200: 32% of the copy rate.)
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
constexpr int kQuantUnroll = 2;  // chunks of each row a lane loads before using them
constexpr int kRowsPerWarp = 2;
constexpr int kChunkBytes = 16;  // a lane's load of codes

template <class T> struct QuantizedRows {
  const uint8_t* codes;  // (rows, code_row) packed
  const T* scales;       // (rows, groups)
  const uint8_t* zeros;  // (rows, groups)
  int64_t rows, k, code_row, groups, group_size;
};

// Code j of a word (8 bits: bytes; 4 bits: nibbles, the even weight low) as the float
// kBase<kBits> + code, exactly: the code shifted into the mantissa of kBase, whose last bit
// there is worth 1 (256 + code: bits 15..22; 128 + code: bits 16..19), one shift and one AND-OR.
template <int kBits> constexpr float kBase = kBits == 8 ? 256.0f : 128.0f;
template <int kBits> __device__ __forceinline__ float based_code(uint32_t word, int j) {
  constexpr int kAt = kBits == 8 ? 15 : 16;  // where the code's lowest bit goes
  constexpr uint32_t kField = ((1u << kBits) - 1) << kAt, kExponent = kBits == 8 ? 0x43800000u : 0x43000000u;
  const int shift = kAt - kBits * j;
  const uint32_t moved = shift >= 0 ? word << shift : word >> -shift;
  return __uint_as_float((moved & kField) | kExponent);
}

// A warp takes kRowsPerWarp weight rows, so that each x value it loads and converts serves
// them all. Per 16-byte chunk of a row: s = sum (base + code) x, and the chunk adds
// scale * (s - (base + zero) * sum x): one multiply-add a weight (for 16-bit results; the
// base's products cancel with float32's rounding, a few units of 2^-24 of base * |x|).
template <class T, int kBits>
static __global__ void quantized_gemv_rows(QuantizedRows<T> w, const T* x, const T* bias, T* y) {
  constexpr int kPerWord = 32 / kBits, kPerChunk = kChunkBytes * 8 / kBits, V = kVec<T>, R = kRowsPerWarp;
  // float32 results keep float32's accuracy: the zero point comes off each code (exactly),
  // one subtraction a weight more (through the sum of x, an int4 row of 256 was 1.6e-5 off).
  constexpr bool kExact = std::is_same_v<T, float>;
  constexpr int64_t kStride = int64_t{PF_WARP_SIZE} * kChunkBytes;  // bytes a warp reads per load
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t first_row = (int64_t{blockIdx.x} * (kQuantThreads / PF_WARP_SIZE) + threadIdx.x / PF_WARP_SIZE) * R;
  if (first_row >= w.rows) return;  // the whole warp
  const int rows = static_cast<int>(min(int64_t{R}, w.rows - first_row));
  float acc[R] = {};
  for (int64_t c0 = int64_t{lane} * kChunkBytes; c0 < w.code_row; c0 += kStride * kQuantUnroll) {
    uint4 chunk[kQuantUnroll][R];
#pragma unroll
    for (int u = 0; u < kQuantUnroll; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        chunk[u][r] = uint4{0, 0, 0, 0};
        if (r < rows && c0 + u * kStride < w.code_row)
          chunk[u][r] = *reinterpret_cast<const uint4*>(w.codes + (first_row + r) * w.code_row + c0 + u * kStride);
      }
#pragma unroll
    for (int u = 0; u < kQuantUnroll; ++u) {
      if (c0 + u * kStride >= w.code_row) break;
      const int64_t first = (c0 + u * kStride) * 8 / kBits;  // the chunk's first weight
      const int64_t g = first / w.group_size;
      float xs[kPerChunk], x_sum = 0.0f;
#pragma unroll
      for (int v = 0; v < kPerChunk / V; ++v) {
        const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + first + v * V);
#pragma unroll
        for (int e = 0; e < V; ++e) xs[v * V + e] = static_cast<float>(xv.v[e]), x_sum += xs[v * V + e];
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t at = (first_row + min(r, rows - 1)) * w.groups + g;  // a missing row: the last one's
        const float offset = kBase<kBits> + static_cast<float>(w.zeros[at]);
        const uint32_t words[4] = {chunk[u][r].x, chunk[u][r].y, chunk[u][r].z, chunk[u][r].w};
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < kPerWord; ++j) {
            const float code = kExact ? based_code<kBits>(words[i], j) - offset : based_code<kBits>(words[i], j);
            s = fmaf(code, xs[i * kPerWord + j], s);
          }
        acc[r] = fmaf(static_cast<float>(w.scales[at]), kExact ? s : fmaf(-offset, x_sum, s), acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float sum = warp_all_reduce(acc[r], Plus{});
    if (lane == 0 && r < rows)
      y[first_row + r] = static_cast<T>(sum + (bias ? static_cast<float>(bias[first_row + r]) : 0.0f));
  }
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
      const int64_t rows_per_block = kQuantThreads / warp_size(device) * kRowsPerWarp;
      const auto blocks = static_cast<unsigned>((w.rows + rows_per_block - 1) / rows_per_block);
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
