#pragma once
// The rotary embedding's arithmetic and the rows of a key/value cache update, shared by
// the CPU's and the GPU's rotary_embedding and rotary_kv_cache kernels (nn_ops.h has the
// ops). A pair of dims (i, i + D/2) of a row is the unit of work: it is read once and
// written rotated, in float32 for 16-bit dtypes (float64 in float64).

#include <cstdint>
#include <type_traits>

#include "pyflame/macros.h"

namespace pyflame::kernels {

// x * cos + rotate_half(x) * sin at dims i and i + half of a row: x read with stride
// `step`, cos and sin (the position's row of D) and out contiguous.
template <class T>
PF_HOST_DEVICE void rotate_pair(const T* x, int64_t step, const T* cos, const T* sin, T* out, int64_t i,
                                int64_t half) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const A x1 = static_cast<A>(x[i * step]), x2 = static_cast<A>(x[(i + half) * step]);
  out[i] = static_cast<T>(x1 * static_cast<A>(cos[i]) - x2 * static_cast<A>(sin[i]));
  out[i + half] = static_cast<T>(x2 * static_cast<A>(cos[i + half]) + x1 * static_cast<A>(sin[i + half]));
}

// rotary_kv_cache's rows, all contiguous: the rows of q (B, H, T, D) first, then those of k
// and of v (B, KV, T, D). A q row is rotated into q_out; a k row rotated, and a v row copied,
// into the cache row (B, KV, L, D) at position + t.
struct RotaryCacheRows {
  int64_t batch, heads, kv_heads, tokens, dim, length;
  int64_t cos_batch_stride;  // rows of D between the batches' cos and sin: 0 for one (T, D) table

  PF_HOST_DEVICE int64_t q_rows() const { return batch * heads * tokens; }
  PF_HOST_DEVICE int64_t kv_rows() const { return batch * kv_heads * tokens; }
  PF_HOST_DEVICE int64_t rows() const { return q_rows() + 2 * kv_rows(); }

  // Row r (of rows()): which of q, k, v it is (0, 1, 2), its row in that tensor, the row of
  // its output (q_out's, or the cache's at `position`) and its cos/sin row.
  struct Row {
    int which;
    int64_t in, out, table;
  };
  PF_HOST_DEVICE Row locate(int64_t r, int64_t position) const {
    Row row{0, r, r, 0};
    if (r >= q_rows()) {
      row.in = (r - q_rows()) % kv_rows();
      row.which = r - q_rows() < kv_rows() ? 1 : 2;
      const int64_t t = row.in % tokens, head = row.in / tokens;  // head: b * kv_heads + kv head
      row.out = head * length + position + t;
      row.table = head / kv_heads * cos_batch_stride + t;
    } else {
      row.table = r / (heads * tokens) * cos_batch_stride + r % tokens;
    }
    return row;
  }
};

}  // namespace pyflame::kernels
