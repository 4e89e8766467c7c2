// CPU convolution and transposed convolution as im2col + GEMM (OpenBLAS).
// For each image and group, the input patches seen by a block of output rows
// are unrolled into a column matrix (channels x kernel volume rows, one
// column per output position), and one sgemm/dgemm with the group's weights
// writes those output rows in place; a 1x1 kernel with stride 1 and no
// padding multiplies the input itself. Blocks keep the column buffer near
// cache size whatever the image. The transposed convolution is the adjoint:
// a GEMM with the transposed weights makes the columns, which are added back
// onto the output (col2im). 2-D runs as 3-D with depth 1 (cpu/window.h).
//
// Threads: with enough images, each thread takes whole images and calls BLAS
// single-threaded, so OpenMP's and OpenBLAS's threads never compete for the
// cores; with fewer, images go one at a time, BLAS threads splitting each
// product and OpenMP the column loops. float16/bfloat16 run in float32.

#include <omp.h>

#include <climits>

#include "core/dispatch.h"
#include "cpu/blas.h"
#include "cpu/loops.h"
#include "cpu/window.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

// Column buffer per thread, in elements: 1 MiB of floats, about a core's L2.
constexpr int64_t kColumnBudget = int64_t{1} << 18;

// Output lines (one (depth, row) pair each) per column block for `rows` rows of columns.
int64_t block_lines(const Window& w, int64_t rows) {
  const int64_t lines = w.out[0] * w.out[1];
  return std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(1, rows * w.out[2]), 1, lines);
}

// Calls f(c, kd, kh, kw, row) for every row of the column matrix of
// channels [c0, c1) (row: the row's index, counted from channel c0).
template <class F> void for_each_row(const Window& w, int64_t c0, int64_t c1, const F& f) {
  int64_t row = 0;
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t kd = 0; kd < w.k[0]; ++kd)
      for (int64_t kh = 0; kh < w.k[1]; ++kh)
        for (int64_t kw = 0; kw < w.k[2]; ++kw) f(c, kd, kh, kw, row++);
}

// Input plane offset of the row read by output line `l` at kernel tap (kd, kh), or -1 if it is padding.
int64_t input_row(const Window& w, int64_t l, int64_t kd, int64_t kh) {
  const int64_t id = (l / w.out[1]) * w.s[0] - w.p[0] + kd * w.d[0];
  const int64_t ih = (l % w.out[1]) * w.s[1] - w.p[1] + kh * w.d[1];
  if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1]) return -1;
  return (id * w.in[1] + ih) * w.in[2];
}

// col (channels * kernel volume rows, (l1 - l0) * out width columns) = the
// patches of img (channels x input plane) seen by output lines [l0, l1).
template <class T> void im2col(const Window& w, int64_t channels, int64_t l0, int64_t l1, const T* img, T* col) {
  const int64_t width = w.out[2], ncols = (l1 - l0) * width, kvol = w.kernel_volume();
  parallel_for(channels, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, kvol * ncols)),
               [&](int64_t c0, int64_t c1) {
    for_each_row(w, c0, c1, [&](int64_t c, int64_t kd, int64_t kh, int64_t kw, int64_t r) {
      const int64_t off = kw * w.d[2] - w.p[2];
      const auto [lo, hi] = valid_range(off, w.s[2], w.in[2], width);
      T* dst = col + (c0 * kvol + r) * ncols;
      for (int64_t l = l0; l < l1; ++l, dst += width) {
        const int64_t base = input_row(w, l, kd, kh);
        if (base < 0) {
          std::fill(dst, dst + width, T(0));
          continue;
        }
        const T* src = img + c * w.in_plane() + base;
        std::fill(dst, dst + lo, T(0));
        if (w.s[2] == 1) std::copy(src + lo + off, src + hi + off, dst + lo);
        else for (int64_t o = lo; o < hi; ++o) dst[o] = src[o * w.s[2] + off];
        std::fill(dst + hi, dst + width, T(0));
      }
    });
  });
}

// The adjoint of im2col: adds every column entry onto the img element it was read from.
template <class T> void col2im(const Window& w, int64_t channels, int64_t l0, int64_t l1, const T* col, T* img) {
  const int64_t width = w.out[2], ncols = (l1 - l0) * width, kvol = w.kernel_volume();
  // Each channel's rows add onto that channel's plane only, so channels split across threads.
  parallel_for(channels, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, kvol * ncols)),
               [&](int64_t c0, int64_t c1) {
    for_each_row(w, c0, c1, [&](int64_t c, int64_t kd, int64_t kh, int64_t kw, int64_t r) {
      const int64_t off = kw * w.d[2] - w.p[2];
      const auto [lo, hi] = valid_range(off, w.s[2], w.in[2], width);
      const T* src = col + (c0 * kvol + r) * ncols;
      for (int64_t l = l0; l < l1; ++l, src += width) {
        const int64_t base = input_row(w, l, kd, kh);
        if (base < 0) continue;
        T* dst = img + c * w.in_plane() + base;
        for (int64_t o = lo; o < hi; ++o) dst[o * w.s[2] + off] += src[o];
      }
    });
  });
}

template <class T> void add_bias(const T* bias, int64_t channels, int64_t plane, T* y) {
  if (!bias) return;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < plane; ++i) y[c * plane + i] += bias[c];
}

// One image: x (channels x input plane) -> y (out_channels x output plane);
// weight (out_channels, channels / groups, kernel...).
template <class T> void conv_image(const Window& w, int64_t groups, int64_t channels, int64_t out_channels,
                                   const T* x, const T* weight, const T* bias, T* y, std::vector<T>& col) {
  const int64_t cg = channels / groups, og = out_channels / groups, k = cg * w.kernel_volume();
  const int64_t plane = w.out_plane(), lines = w.out[0] * w.out[1], width = w.out[2];
  const bool direct = w.kernel_volume() == 1 && w.s[0] == 1 && w.s[1] == 1 && w.s[2] == 1 && w.p[0] == 0 &&
                      w.p[1] == 0 && w.p[2] == 0;  // the input is its own column matrix
  const int64_t block = direct ? lines : block_lines(w, k);
  if (!direct && static_cast<int64_t>(col.size()) < k * block * width) col.resize(k * block * width);
  for (int64_t g = 0; g < groups; ++g) {
    const T* xg = x + g * cg * w.in_plane();
    for (int64_t l0 = 0; l0 < lines; l0 += block) {
      const int64_t l1 = std::min(lines, l0 + block), n = (l1 - l0) * width;
      const T* b = xg + l0 * width;
      int64_t ldb = plane;
      if (!direct) {
        im2col(w, cg, l0, l1, xg, col.data());
        b = col.data();
        ldb = n;
      }
      gemm<T>(false, false, og, n, k, weight + g * og * k, k, b, ldb, y + g * og * plane + l0 * width, plane);
    }
  }
  add_bias(bias, out_channels, plane, y);
}

// One image of the transposed convolution. The window is the forward
// convolution's from y to x: w.in describes y, w.out describes x.
// weight (channels, out_channels / groups, kernel...).
template <class T> void conv_transpose_image(const Window& w, int64_t groups, int64_t channels, int64_t out_channels,
                                             const T* x, const T* weight, const T* bias, T* y, std::vector<T>& col) {
  const int64_t cg = channels / groups, og = out_channels / groups, m = og * w.kernel_volume();
  const int64_t plane = w.out_plane(), lines = w.out[0] * w.out[1], width = w.out[2];
  const int64_t block = block_lines(w, m);
  if (static_cast<int64_t>(col.size()) < m * block * width) col.resize(m * block * width);
  std::fill(y, y + out_channels * w.in_plane(), T(0));
  for (int64_t g = 0; g < groups && cg > 0; ++g) {
    const T* xg = x + g * cg * plane;
    for (int64_t l0 = 0; l0 < lines; l0 += block) {
      const int64_t l1 = std::min(lines, l0 + block), n = (l1 - l0) * width;
      gemm<T>(true, false, m, n, cg, weight + g * cg * m, m, xg + l0 * width, plane, col.data(), n);
      col2im(w, og, l0, l1, col.data(), y + g * og * w.in_plane());
    }
  }
  add_bias(bias, out_channels, w.in_plane(), y);
}

// Runs f(image, column buffer) for each image of the batch (see the note on threads at the top).
template <class T, class F> void for_each_image(int64_t batch, const F& f) {
  const int64_t threads = omp_get_max_threads();
  if (threads > 1 && (batch % threads == 0 || batch >= 2 * threads)) {
    SingleThreadedBlas single;
    parallel_for(batch, 1, [&](int64_t b, int64_t e) {
      std::vector<T> col;
      for (int64_t n = b; n < e; ++n) f(n, col);
    });
  } else {
    std::vector<T> col;
    for (int64_t n = 0; n < batch; ++n) f(n, col);
  }
}

void check_blas_sizes(ir::OpType op, std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes)
    PF_CHECK(s <= INT_MAX, ValueError, op_name(op), ": a matrix dimension of ", s,
             " exceeds the CPU BLAS limit of 2^31-1 (a single image is too large)");
}

// inputs: x (N, C, spatial...), weight, optional bias; all contiguous.
template <class T> void conv_forward(ir::OpType op, const std::vector<Tensor>& in, Tensor& out, const OpAttrs& a) {
  const Tensor& x = in[0];
  const Tensor& weight = in[1];
  const Shape kernel(weight.shape().begin() + 2, weight.shape().end());
  const Window w = make_window(x.shape(), out.shape(), kernel, a);
  const int64_t channels = x.shape()[1], out_channels = out.shape()[1];
  check_blas_sizes(op, {out_channels / a.groups, channels / a.groups * w.kernel_volume(), w.out_plane()});
  const T* bias = in.size() > 2 ? in[2].data<T>() : nullptr;
  for_each_image<T>(x.shape()[0], [&](int64_t n, std::vector<T>& col) {
    conv_image<T>(w, a.groups, channels, out_channels, x.data<T>() + n * channels * w.in_plane(), weight.data<T>(),
                  bias, out.data<T>() + n * out_channels * w.out_plane(), col);
  });
}

template <class T>
void conv_transpose_forward(ir::OpType op, const std::vector<Tensor>& in, Tensor& out, const OpAttrs& a) {
  const Tensor& x = in[0];
  const Tensor& weight = in[1];
  const Shape kernel(weight.shape().begin() + 2, weight.shape().end());
  const Window w = make_window(out.shape(), x.shape(), kernel, a);
  const int64_t channels = x.shape()[1], out_channels = out.shape()[1];
  check_blas_sizes(op, {out_channels / a.groups * w.kernel_volume(), channels / a.groups, w.out_plane()});
  const T* bias = in.size() > 2 ? in[2].data<T>() : nullptr;
  for_each_image<T>(x.shape()[0], [&](int64_t n, std::vector<T>& col) {
    conv_transpose_image<T>(w, a.groups, channels, out_channels, x.data<T>() + n * channels * w.out_plane(),
                            weight.data<T>(), bias, out.data<T>() + n * out_channels * w.in_plane(), col);
  });
}

// Runs body(TypeTag<T>, inputs, out) in the BLAS type of the call's dtype:
// float16 and bfloat16 convert to float32 and round once on the way back.
template <class Body> void in_blas_type(OpCall& call, const Body& body) {
  switch (call.out.dtype()) {
    case DType::Float32: return body(TypeTag<float>{}, call.inputs, call.out);
    case DType::Float64: return body(TypeTag<double>{}, call.inputs, call.out);
    default: {
      std::vector<Tensor> in32;
      for (const Tensor& t : call.inputs) in32.push_back(t.to(DType::Float32));
      Tensor out32 = Tensor::empty(call.out.shape(), DType::Float32, call.out.device());
      body(TypeTag<float>{}, in32, out32);
      call.out.copy_(out32);
    }
  }
}

void conv_kernel(OpCall& call) {
  in_blas_type(call, [&](auto tag, const std::vector<Tensor>& in, Tensor& out) {
    conv_forward<typename decltype(tag)::type>(call.op, in, out, call.attrs);
  });
}

void conv_transpose_kernel(OpCall& call) {
  in_blas_type(call, [&](auto tag, const std::vector<Tensor>& in, Tensor& out) {
    conv_transpose_forward<typename decltype(tag)::type>(call.op, in, out, call.attrs);
  });
}

PF_REGISTER_KERNEL(conv2d, CPU, &conv_kernel);
PF_REGISTER_KERNEL(conv3d, CPU, &conv_kernel);
PF_REGISTER_KERNEL(conv_transpose2d, CPU, &conv_transpose_kernel);

}  // namespace
}  // namespace pyflame::cpu
