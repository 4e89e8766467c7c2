#pragma once
// Sliding-window geometry shared by the convolution and pooling kernels (the
// CPU's, and the GPU's im2col convolutions).
// Spatial dims are padded to three (depth, height, width) with leading 1s, so
// 2-D work runs as 3-D with a depth of 1 and one loop nest serves both.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/dispatch.h"

namespace pyflame::kernels {

struct Window {
  // Per (depth, height, width): input and output sizes, kernel size, stride, padding, dilation.
  int64_t in[3], out[3], k[3], s[3], p[3], d[3];

  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_volume() const { return k[0] * k[1] * k[2]; }
};

// The window between the spatial dims of `in` and `out` ((N, C, spatial...)
// shapes) for a kernel of the given sizes; stride, padding and dilation come
// from the attrs (ConvAttrs or PoolAttrs: one entry per spatial dim; dilation 1 when absent).
template <class Attrs>
Window make_window(const Shape& in, const Shape& out, const std::vector<int64_t>& kernel, const Attrs& a) {
  Window w;
  const int64_t nd = static_cast<int64_t>(kernel.size()), lead = 3 - nd;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = i - lead;  // the dim in the op's terms, < 0 for the added ones
    w.in[i] = j < 0 ? 1 : in[2 + j];
    w.out[i] = j < 0 ? 1 : out[2 + j];
    w.k[i] = j < 0 ? 1 : kernel[j];
    w.s[i] = j < 0 ? 1 : a.stride[j];
    w.p[i] = j < 0 ? 0 : a.padding[j];
    w.d[i] = j < 0 || a.dilation.empty() ? 1 : a.dilation[j];
  }
  return w;
}

// [lo, hi): the output positions o in [0, out) whose input position
// o * s + offset lies inside [0, in).
inline std::pair<int64_t, int64_t> valid_range(int64_t offset, int64_t s, int64_t in, int64_t out) {
  const int64_t lo = std::min(out, offset >= 0 ? 0 : (-offset + s - 1) / s);
  const int64_t hi = in - 1 - offset < 0 ? 0 : std::min(out, (in - 1 - offset) / s + 1);
  return {lo, std::max(lo, hi)};
}

}  // namespace pyflame::kernels
