// CPU pooling of contiguous (N, C, spatial...) tensors: max and average over
// sliding windows (2-D and 3-D; 2-D runs as 3-D with depth 1, cpu/window.h)
// and adaptive average pooling. Work splits across threads by (n, c) plane.
// The sliding-window kernels build one output row at a time: each kernel tap
// sweeps its input row across the whole output row (acc[o] = max(acc[o],
// in[o * stride + offset])) with the valid range clipped once per tap, not
// per element, so the inner loops are branch-free and vectorise.
// float16/bfloat16 are read and accumulated as float.

#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "cpu/window.h"

namespace pyflame::cpu {
namespace {

// The divisor's part from one dim of an average window at output position o:
// the window clipped to the padded input (count_include_pad) or to the input.
int64_t avg_extent(int64_t o, int64_t k, int64_t s, int64_t p, int64_t in, bool count_include_pad) {
  const int64_t start = o * s - p, end = std::min(start + k, in + p);
  if (count_include_pad) return end - start;
  return std::min(end, in) - std::max<int64_t>(start, 0);
}

template <class T, bool kMax> void sliding_pool(const Window& w, const PoolAttrs& a, const T* in, T* out, int64_t planes) {
  using A = acc_t<T>;
  const int64_t width = w.out[2];
  std::vector<A> width_extent(width);  // average pooling: the width part of each column's divisor
  for (int64_t o = 0; o < width; ++o)
    width_extent[o] = static_cast<A>(avg_extent(o, w.k[2], w.s[2], w.p[2], w.in[2], a.count_include_pad));
  parallel_for(planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, w.in_plane())), [&](int64_t b,
                                                                                                      int64_t e) {
    std::vector<A> acc(width);
    for (int64_t plane = b; plane < e; ++plane) {
      const T* src = in + plane * w.in_plane();
      T* dst = out + plane * w.out_plane();
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh, dst += width) {
          std::fill(acc.begin(), acc.end(), kMax ? -std::numeric_limits<A>::infinity() : A(0));
          for (int64_t kd = 0; kd < w.k[0]; ++kd) {
            const int64_t id = od * w.s[0] - w.p[0] + kd * w.d[0];
            if (id < 0 || id >= w.in[0]) continue;
            for (int64_t kh = 0; kh < w.k[1]; ++kh) {
              const int64_t ih = oh * w.s[1] - w.p[1] + kh * w.d[1];
              if (ih < 0 || ih >= w.in[1]) continue;
              const T* row = src + (id * w.in[1] + ih) * w.in[2];
              for (int64_t kw = 0; kw < w.k[2]; ++kw) {
                const int64_t off = kw * w.d[2] - w.p[2], s = w.s[2];
                const auto [lo, hi] = valid_range(off, s, w.in[2], width);
                A* acc_p = acc.data();
                for (int64_t o = lo; o < hi; ++o) {
                  const A v = static_cast<A>(row[o * s + off]);
                  if constexpr (kMax) acc_p[o] = (v > acc_p[o] || v != v) ? v : acc_p[o];  // NaN wins, as in torch
                  else acc_p[o] += v;
                }
              }
            }
          }
          if constexpr (kMax) {
            for (int64_t o = 0; o < width; ++o) dst[o] = static_cast<T>(acc[o]);
          } else if (a.divisor_override) {
            const A divisor = static_cast<A>(a.divisor_override);
            for (int64_t o = 0; o < width; ++o) dst[o] = static_cast<T>(acc[o] / divisor);
          } else {
            const A outer = static_cast<A>(avg_extent(od, w.k[0], w.s[0], w.p[0], w.in[0], a.count_include_pad) *
                                           avg_extent(oh, w.k[1], w.s[1], w.p[1], w.in[1], a.count_include_pad));
            for (int64_t o = 0; o < width; ++o) dst[o] = static_cast<T>(acc[o] / (outer * width_extent[o]));
          }
        }
    }
  });
}

template <bool kMax> void sliding_pool_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Window w = make_window(x.shape(), call.out().shape(), call.attr<PoolAttrs>().kernel_size, call.attr<PoolAttrs>());
  const int64_t planes = x.shape()[0] * x.shape()[1];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) sliding_pool<T, kMax>(w, call.attr<PoolAttrs>(), x.data<T>(), call.out().data<T>(), planes);
  });
}

// Output cell o of n over an input of `in`: [floor(o * in / n), ceil((o + 1) * in / n)).
int64_t adaptive_start(int64_t o, int64_t in, int64_t n) { return o * in / n; }
int64_t adaptive_end(int64_t o, int64_t in, int64_t n) { return ((o + 1) * in + n - 1) / n; }

void adaptive_avg_pool2d_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t planes = x.shape()[0] * x.shape()[1], ih = x.shape()[2], iw = x.shape()[3];
  const int64_t oh = call.out().shape()[2], ow = call.out().shape()[3];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T* in = x.data<T>();
      T* out = call.out().data<T>();
      parallel_for(planes, std::max<int64_t>(1, kParallelGrain / (ih * iw)), [&](int64_t b, int64_t e) {
        std::vector<A> acc(iw);
        for (int64_t p = b; p < e; ++p)
          for (int64_t r = 0; r < oh; ++r) {
            // Sum the cell rows once (vectorised along the row), then each cell's columns.
            const int64_t h0 = adaptive_start(r, ih, oh), h1 = adaptive_end(r, ih, oh);
            std::fill(acc.begin(), acc.end(), A(0));
            for (int64_t h = h0; h < h1; ++h) {
              const T* row = in + (p * ih + h) * iw;
              for (int64_t c = 0; c < iw; ++c) acc[c] += static_cast<A>(row[c]);
            }
            for (int64_t q = 0; q < ow; ++q) {
              const int64_t w0 = adaptive_start(q, iw, ow), w1 = adaptive_end(q, iw, ow);
              A sum = 0;
              for (int64_t c = w0; c < w1; ++c) sum += acc[c];
              out[(p * oh + r) * ow + q] = static_cast<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
            }
          }
      });
    }
  });
}

PF_REGISTER_KERNEL(max_pool2d, CPU, &sliding_pool_kernel<true>);
PF_REGISTER_KERNEL(max_pool3d, CPU, &sliding_pool_kernel<true>);
PF_REGISTER_KERNEL(avg_pool2d, CPU, &sliding_pool_kernel<false>);
PF_REGISTER_KERNEL(avg_pool3d, CPU, &sliding_pool_kernel<false>);
PF_REGISTER_KERNEL(adaptive_avg_pool2d, CPU, &adaptive_avg_pool2d_kernel);

}  // namespace
}  // namespace pyflame::cpu
