// CPU pooling of contiguous (N, C, spatial...) tensors: max and average over
// sliding windows (2-D and 3-D; 2-D runs as 3-D with depth 1, kernels/window.h)
// and adaptive average pooling. Work splits across threads by (n, c) plane.
// The sliding-window kernels build one output row at a time: each kernel tap
// sweeps its input row across the whole output row (acc[o] = max(acc[o],
// in[o * stride + offset])) with the valid range clipped once per tap, not
// per element, so the inner loops are branch-free and vectorise.
// float16/bfloat16 are read and accumulated as float.
//
// The backward passes add each output's gradient (its share, for averages)
// into the input elements it came from, output after output, so that every
// element sums its shares in ascending output order: the order in which the
// GPU's gather kernels (rocm/kernels/pool.hip) sum them, so that the two
// agree bit for bit. Max pooling's backward finds each window's maximum
// again, as the forward does.

#include <array>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/lanes.h"
#include "cpu/loops.h"
#include "kernels/window.h"

namespace pyflame::cpu {
namespace {

using kernels::make_window;
using kernels::valid_range;
using kernels::Window;

// The width taps of an output row of `width` outputs: each tap's offset and the outputs
// [lo, hi) whose input it reaches, the same for every row (made once per call: on small
// planes the divisions cost more than the row).
struct WidthTaps {
  std::vector<std::array<int64_t, 3>> taps;  // off, lo, hi
  WidthTaps(const Window& w, int64_t width) {
    for (int64_t kw = 0; kw < w.k[2]; ++kw) {
      const int64_t off = kw * w.d[2] - w.p[2];
      const auto [lo, hi] = valid_range(off, w.s[2], w.in[2], width);
      taps.push_back({off, lo, hi});
    }
  }
};

// The taps of output row (od, oh): for each kernel tap inside the input in
// depth and height, visit(row, off, lo, hi) with row the input row's first
// element, off the tap's width offset; outputs o in [lo, hi) read row + o * s + off.
template <class F> void for_each_row_tap(const Window& w, const WidthTaps& width_taps, int64_t od, int64_t oh,
                                         const F& visit) {
  for (int64_t kd = 0; kd < w.k[0]; ++kd) {
    const int64_t id = od * w.s[0] - w.p[0] + kd * w.d[0];
    if (id < 0 || id >= w.in[0]) continue;
    for (int64_t kh = 0; kh < w.k[1]; ++kh) {
      const int64_t ih = oh * w.s[1] - w.p[1] + kh * w.d[1];
      if (ih < 0 || ih >= w.in[1]) continue;
      for (const auto& [off, lo, hi] : width_taps.taps) visit((id * w.in[1] + ih) * w.in[2], off, lo, hi);
    }
  }
}

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
  const WidthTaps width_taps(w, width);
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
          const int64_t s = w.s[2];
          for_each_row_tap(w, width_taps, od, oh, [&](int64_t row, int64_t off, int64_t lo, int64_t hi) {
            const T* r = src + row;
            A* acc_p = acc.data();
            for (int64_t o = lo; o < hi; ++o) {
              const A v = static_cast<A>(r[o * s + off]);
              if constexpr (kMax) acc_p[o] = (v > acc_p[o] || v != v) ? v : acc_p[o];  // NaN wins, as in torch
              else acc_p[o] += v;
            }
          });
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

// Each plane's sum of its `size` elements over `divisor`: global average pooling
// (adaptive_avg_pool2d to 1x1, an average pool whose window is the whole unpadded
// plane). One pass along memory in lanes (cpu/lanes.h), so that the loop vectorises: 8
// for small planes, 32 (several independent vector sums) from 128 elements, where one
// chain of vector adds would wait on itself. The general kernels' per-row setup cost more than
// the sums on planes of 4x4 or 7x7 (0.18-0.24x PyTorch's time).
template <class T> void plane_means(const T* in, T* out, int64_t planes, int64_t size, int64_t divisor) {
  using A = acc_t<T>;
  parallel_for(planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, size)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T* x = in + p * size;
      auto element = [&](int64_t i) { return static_cast<A>(x[i]); };
      const A sum = size >= 128 ? lanes_sum<A, 32>(size, element) : lanes_sum<A>(size, element);
      out[p] = static_cast<T>(sum / static_cast<A>(divisor));
    }
  });
}

template <bool kMax> void sliding_pool_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const PoolAttrs& a = call.attr<PoolAttrs>();
  const Window w = make_window(x.shape(), call.out().shape(), a.kernel_size, a);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  bool whole_plane = !kMax && w.out_plane() == 1;
  for (int i = 0; i < 3; ++i) whole_plane = whole_plane && w.k[i] == w.in[i] && w.p[i] == 0;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      if (whole_plane)
        plane_means(x.data<T>(), call.out().data<T>(), planes, w.in_plane(),
                    a.divisor_override ? a.divisor_override : w.in_plane());
      else
        sliding_pool<T, kMax>(w, a, x.data<T>(), call.out().data<T>(), planes);
    }
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
      if (oh == 1 && ow == 1) return plane_means(in, out, planes, ih * iw, ih * iw);
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

// ---- backward passes

// The taps [lo, hi) of a window of k contiguous taps starting at `start` that lie inside [0, in).
std::pair<int64_t, int64_t> taps_inside(int64_t start, int64_t k, int64_t in) {
  const int64_t lo = std::max<int64_t>(0, -start);
  return {lo, std::max(lo, std::min(k, in - start))};
}

// out (planes of in_plane elements) from fill(acc, plane), which adds one
// plane's gradient into acc, zeroed, in float for float16/bfloat16.
template <class T, class Fill> void plane_grads(T* out, int64_t planes, int64_t in_plane, int64_t cost,
                                                const Fill& fill) {
  using A = acc_t<T>;
  constexpr bool in_place = std::is_same_v<T, A>;
  parallel_for(planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, cost)), [&](int64_t b, int64_t e) {
    std::vector<A> scratch(in_place ? 0 : in_plane);
    for (int64_t plane = b; plane < e; ++plane) {
      T* dst = out + plane * in_plane;
      A* acc = nullptr;
      if constexpr (in_place) acc = dst;
      else acc = scratch.data();
      std::fill(acc, acc + in_plane, A(0));
      fill(acc, plane);
      if constexpr (!in_place)
        for (int64_t i = 0; i < in_plane; ++i) dst[i] = static_cast<T>(acc[i]);
    }
  });
}

// (grad, input): each output's gradient to its window's first maximum (the
// last NaN; the first element inside the input when all are -inf). The
// maxima of an output row are found as the forward finds them, tap by tap
// across the row, remembering where each was taken; then the row's
// gradients are added, in order.
void max_pool_backward_kernel(OpCall& call) {
  const Tensor &grad = call.inputs[0], &x = call.inputs[1];
  const Window w = make_window(x.shape(), grad.shape(), call.attr<PoolAttrs>().kernel_size, call.attr<PoolAttrs>());
  const int64_t planes = x.shape()[0] * x.shape()[1], width = w.out[2];
  const WidthTaps width_taps(w, width);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T *in = x.data<T>(), *g = grad.data<T>();
      plane_grads<T>(call.out().data<T>(), planes, w.in_plane(), w.out_plane() * w.kernel_volume(),
                     [&](A* acc, int64_t plane) {
        const T* src = in + plane * w.in_plane();
        const T* gy = g + plane * w.out_plane();
        // A row's maxima and where each was taken (-1: none yet; a window of dilated taps may
        // miss the input altogether); per thread, not per plane: small planes are many.
        thread_local std::vector<A> m;
        thread_local std::vector<int64_t> best;
        m.resize(width);
        best.resize(width);
        for (int64_t od = 0; od < w.out[0]; ++od)
          for (int64_t oh = 0; oh < w.out[1]; ++oh, gy += width) {
            std::fill(m.begin(), m.end(), -std::numeric_limits<A>::infinity());
            std::fill(best.begin(), best.end(), int64_t{-1});
            for_each_row_tap(w, width_taps, od, oh, [&](int64_t row, int64_t off, int64_t lo, int64_t hi) {
              for (int64_t o = lo; o < hi; ++o) {
                const int64_t at = row + o * w.s[2] + off;
                const A v = static_cast<A>(src[at]);
                if (best[o] < 0 || v > m[o] || v != v) m[o] = v, best[o] = at;
              }
            });
            for (int64_t o = 0; o < width; ++o)
              if (best[o] >= 0) acc[best[o]] += static_cast<A>(gy[o]);
          }
      });
    }
  });
}

// (grad), the input's shape in output_size: each output's gradient divided
// as the forward divides, added to every input element of its window.
void avg_pool_backward_kernel(OpCall& call) {
  const Tensor& grad = call.inputs[0];
  const PoolAttrs& a = call.attr<PoolAttrs>();
  const Window w = make_window(call.out().shape(), grad.shape(), a.kernel_size, a);
  const int64_t planes = grad.shape()[0] * grad.shape()[1];
  visit_dtype(grad.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T* g = grad.data<T>();
      auto extent = [&](int64_t i, int64_t o) {
        return avg_extent(o, w.k[i], w.s[i], w.p[i], w.in[i], a.count_include_pad);
      };
      plane_grads<T>(call.out().data<T>(), planes, w.in_plane(), w.out_plane() * w.kernel_volume(),
                     [&](A* acc, int64_t plane) {
        const T* gy = g + plane * w.out_plane();
        for (int64_t od = 0; od < w.out[0]; ++od) {
          const int64_t d0 = od * w.s[0] - w.p[0];
          const auto [kd_lo, kd_hi] = taps_inside(d0, w.k[0], w.in[0]);
          for (int64_t oh = 0; oh < w.out[1]; ++oh) {
            const int64_t h0 = oh * w.s[1] - w.p[1];
            const auto [kh_lo, kh_hi] = taps_inside(h0, w.k[1], w.in[1]);
            for (int64_t ow = 0; ow < w.out[2]; ++ow, ++gy) {
              const int64_t w0 = ow * w.s[2] - w.p[2];
              const auto [kw_lo, kw_hi] = taps_inside(w0, w.k[2], w.in[2]);
              const int64_t divisor = a.divisor_override ? a.divisor_override
                                                         : extent(0, od) * extent(1, oh) * extent(2, ow);
              const A share = static_cast<A>(*gy) / static_cast<A>(divisor);
              for (int64_t kd = kd_lo; kd < kd_hi; ++kd)
                for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
                  A* row = acc + ((d0 + kd) * w.in[1] + h0 + kh) * w.in[2] + w0;
                  for (int64_t kw = kw_lo; kw < kw_hi; ++kw) row[kw] += share;
                }
            }
          }
        }
      });
    }
  });
}

// (grad), the input's shape in output_size: each cell's gradient over its area, added to the cell's elements.
void adaptive_avg_pool2d_backward_kernel(OpCall& call) {
  const Tensor& grad = call.inputs[0];
  const Shape& in_shape = call.out().shape();
  const int64_t planes = in_shape[0] * in_shape[1], ih = in_shape[2], iw = in_shape[3];
  const int64_t oh = grad.shape()[2], ow = grad.shape()[3];
  visit_dtype(grad.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T* g = grad.data<T>();
      plane_grads<T>(call.out().data<T>(), planes, ih * iw, ih * iw + oh * ow, [&](A* acc, int64_t plane) {
        const T* gy = g + plane * oh * ow;
        for (int64_t r = 0; r < oh; ++r) {
          const int64_t h0 = adaptive_start(r, ih, oh), h1 = adaptive_end(r, ih, oh);
          for (int64_t q = 0; q < ow; ++q, ++gy) {
            const int64_t w0 = adaptive_start(q, iw, ow), w1 = adaptive_end(q, iw, ow);
            const A share = static_cast<A>(*gy) / static_cast<A>((h1 - h0) * (w1 - w0));
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t c = w0; c < w1; ++c) acc[h * iw + c] += share;
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
PF_REGISTER_KERNEL(max_pool2d_backward, CPU, &max_pool_backward_kernel);
PF_REGISTER_KERNEL(max_pool3d_backward, CPU, &max_pool_backward_kernel);
PF_REGISTER_KERNEL(avg_pool2d_backward, CPU, &avg_pool_backward_kernel);
PF_REGISTER_KERNEL(avg_pool3d_backward, CPU, &avg_pool_backward_kernel);
PF_REGISTER_KERNEL(adaptive_avg_pool2d_backward, CPU, &adaptive_avg_pool2d_backward_kernel);

}  // namespace
}  // namespace pyflame::cpu
