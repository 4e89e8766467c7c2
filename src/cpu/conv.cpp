// CPU convolution and transposed convolution as im2col + GEMM (OpenBLAS).
// For each image and group, the input values seen by a block of output
// positions are unrolled into a column matrix (rows: input channel x kernel
// tap; one column per output position), and one sgemm/dgemm with the group's
// weights writes those outputs in place; a 1x1 kernel with stride 1 and no
// padding multiplies the input itself. Blocks keep the column buffer near
// cache size whatever the image. The transposed convolution is the adjoint:
// a GEMM with the transposed weights makes the columns, which are added back
// onto the output (col2im). The weight gradient multiplies the output
// gradient by the forward's columns. 2-D runs as 3-D with depth 1 (kernels/window.h).
//
// Threads: one OpenMP region per call splits independent tasks (image x
// block of output positions; for the transpose, image x group x block of
// output channels, since col2im's blocks overlap) and every thread calls BLAS
// single-threaded. OpenMP's and OpenBLAS's threads must never take turns on
// the cores: each hand-over between the two pools costs far more than the
// work (measured: 30x slower for batch 1 with im2col and GEMM threaded
// separately, see docs/perf.md). float16/bfloat16 run in float32.

#include <omp.h>

#include <climits>
#include <mutex>

#include "core/dispatch.h"
#include "cpu/blas.h"
#include "cpu/loops.h"
#include "kernels/window.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

using kernels::make_window;
using kernels::valid_range;
using kernels::Window;

// Column buffer per thread, in elements: 1 MiB of floats, about a core's L2.
constexpr int64_t kColumnBudget = int64_t{1} << 18;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls f(c, kd, kh, kw, row) for every row of the column matrix of `channels` channels.
template <class F> void for_each_row(const Window& w, int64_t channels, const F& f) {
  int64_t row = 0;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kd = 0; kd < w.k[0]; ++kd)
      for (int64_t kh = 0; kh < w.k[1]; ++kh)
        for (int64_t kw = 0; kw < w.k[2]; ++kw) f(c, kd, kh, kw, row++);
}

// Calls f(line, o0, o1, column) for the pieces of output positions [p0, p1)
// of the flattened output plane that lie on one output line (one (depth, row)
// pair): positions o0..o1 of the line start at `column` of the block.
template <class F> void for_each_line_piece(const Window& w, int64_t p0, int64_t p1, const F& f) {
  const int64_t width = w.out[2];
  for (int64_t p = p0; p < p1;) {
    const int64_t line = p / width, o0 = p % width, o1 = std::min(width, o0 + p1 - p);
    f(line, o0, o1, p - p0);
    p += o1 - o0;
  }
}

// Input plane offset of the row that output line `line` reads at kernel tap (kd, kh), or -1 for padding.
int64_t input_row(const Window& w, int64_t line, int64_t kd, int64_t kh) {
  const int64_t id = (line / w.out[1]) * w.s[0] - w.p[0] + kd * w.d[0];
  const int64_t ih = (line % w.out[1]) * w.s[1] - w.p[1] + kh * w.d[1];
  if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1]) return -1;
  return (id * w.in[1] + ih) * w.in[2];
}

// col (channels x kernel volume rows, p1 - p0 columns) = the values of img
// (channels x input plane) that output positions [p0, p1) read.
template <class T> void im2col(const Window& w, int64_t channels, int64_t p0, int64_t p1, const T* img, T* col) {
  const int64_t ncols = p1 - p0, s = w.s[2];
  for_each_row(w, channels, [&](int64_t c, int64_t kd, int64_t kh, int64_t kw, int64_t r) {
    const int64_t off = kw * w.d[2] - w.p[2];
    const auto [lo, hi] = valid_range(off, s, w.in[2], w.out[2]);
    for_each_line_piece(w, p0, p1, [&](int64_t line, int64_t o0, int64_t o1, int64_t column) {
      T* dst = col + r * ncols + column;  // dst[o - o0] for o in [o0, o1)
      const int64_t base = input_row(w, line, kd, kh);
      const int64_t a = base < 0 ? o1 : std::clamp(lo, o0, o1), b = base < 0 ? o1 : std::clamp(hi, a, o1);
      std::fill(dst, dst + (a - o0), T(0));
      const T* src = img + c * w.in_plane() + base;
      if (a < b && s == 1) std::copy(src + a + off, src + b + off, dst + (a - o0));
      else for (int64_t o = a; o < b; ++o) dst[o - o0] = src[o * s + off];
      std::fill(dst + (b - o0), dst + (o1 - o0), T(0));
    });
  });
}

// The adjoint of im2col: adds each column entry onto the img element it stands for.
template <class T> void col2im(const Window& w, int64_t channels, int64_t p0, int64_t p1, const T* col, T* img) {
  const int64_t ncols = p1 - p0, s = w.s[2];
  for_each_row(w, channels, [&](int64_t c, int64_t kd, int64_t kh, int64_t kw, int64_t r) {
    const int64_t off = kw * w.d[2] - w.p[2];
    const auto [lo, hi] = valid_range(off, s, w.in[2], w.out[2]);
    for_each_line_piece(w, p0, p1, [&](int64_t line, int64_t o0, int64_t o1, int64_t column) {
      const int64_t base = input_row(w, line, kd, kh);
      if (base < 0) return;
      const T* src = col + r * ncols + column;  // src[o - o0] for o in [o0, o1)
      T* dst = img + c * w.in_plane() + base;
      for (int64_t o = std::clamp(lo, o0, o1), b = std::clamp(hi, o0, o1); o < b; ++o) dst[o * s + off] += src[o - o0];
    });
  });
}

// Runs task(t, column buffer) for t in [0, tasks), each about `macs`
// multiply-adds, split across threads (their BLAS calls run serially).
template <class T, class F> void run_tasks(int64_t tasks, int64_t macs, const F& task) {
  parallel_for(tasks, ceil_div(kParallelMacs, std::max<int64_t>(1, macs)), [&](int64_t b, int64_t e) {
    std::vector<T> col;
    for (int64_t t = b; t < e; ++t) task(t, col);
  });
}

void check_blas_sizes(ir::OpType op, std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes)
    PF_CHECK(s <= INT_MAX, ValueError, op_name(op), ": a matrix dimension of ", s,
             " exceeds the CPU BLAS limit of 2^31-1 (a single image is too large)");
}

// inputs: x (N, C, spatial...), weight (O, C / groups, kernel...), optional bias (O); all contiguous.
template <class T> void conv_forward(ir::OpType op, const std::vector<Tensor>& in, Tensor& out, const ConvAttrs& a) {
  const Tensor& x = in[0];
  const Tensor& weight = in[1];
  const Window w = make_window(x.shape(), out.shape(), Shape(weight.shape().begin() + 2, weight.shape().end()), a);
  const int64_t batch = x.shape()[0], channels = x.shape()[1], out_channels = out.shape()[1];
  const int64_t cg = channels / a.groups, og = out_channels / a.groups, k = cg * w.kernel_volume();
  const int64_t plane = w.out_plane(), in_plane = w.in_plane();
  check_blas_sizes(op, {og, k, plane});
  const bool direct = w.kernel_volume() == 1 && w.s[0] == 1 && w.s[1] == 1 && w.s[2] == 1 && w.p[0] == 0 &&
                      w.p[1] == 0 && w.p[2] == 0;  // the input is its own column matrix
  // Blocks of output positions: cache-sized, and enough of them for every thread.
  int64_t block = direct ? plane : std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(1, k), 1, plane);
  block = std::min(block, ceil_div(plane, ceil_div(omp_get_max_threads(), batch)));
  const int64_t blocks = ceil_div(plane, block);
  const T* bias = in[2].defined() ? in[2].data<T>() : nullptr;
  run_tasks<T>(batch * blocks, out_channels * k * block, [&](int64_t t, std::vector<T>& col) {
    const int64_t n = t / blocks, p0 = (t % blocks) * block, p1 = std::min(plane, p0 + block);
    const T* xn = x.data<T>() + n * channels * in_plane;
    T* yn = out.data<T>() + n * out_channels * plane;
    if (!direct) col.resize(k * (p1 - p0));
    for (int64_t g = 0; g < a.groups; ++g) {
      const T* xg = xn + g * cg * in_plane;
      const T* b = xg + p0;
      int64_t ldb = plane;
      if (!direct) {
        im2col(w, cg, p0, p1, xg, col.data());
        b = col.data();
        ldb = p1 - p0;
      }
      gemm<T>(false, false, og, p1 - p0, k, weight.data<T>() + g * og * k, k, b, ldb, yn + g * og * plane + p0, plane);
    }
    if (bias)
      for (int64_t o = 0; o < out_channels; ++o)
        for (int64_t p = p0; p < p1; ++p) yn[o * plane + p] += bias[o];
  });
}

// The window is the forward convolution's from y to x: w.in describes y (the
// output), w.out describes x. weight: (C, O / groups, kernel...).
template <class T>
void conv_transpose_forward(ir::OpType op, const std::vector<Tensor>& in, Tensor& out, const ConvAttrs& a) {
  const Tensor& x = in[0];
  const Tensor& weight = in[1];
  const Window w = make_window(out.shape(), x.shape(), Shape(weight.shape().begin() + 2, weight.shape().end()), a);
  const int64_t batch = x.shape()[0], channels = x.shape()[1], out_channels = out.shape()[1], groups = a.groups;
  const int64_t cg = channels / groups, og = out_channels / groups, kvol = w.kernel_volume(), m = og * kvol;
  const int64_t x_plane = w.out_plane(), y_plane = w.in_plane();
  check_blas_sizes(op, {m, cg, x_plane});
  // Tasks own output channels, since col2im's column blocks overlap on the output.
  const int64_t chunk = ceil_div(og, ceil_div(omp_get_max_threads(), batch * groups)), chunks = ceil_div(og, chunk);
  const int64_t block = std::clamp<int64_t>(kColumnBudget / (chunk * kvol), 1, x_plane);
  const T* bias = in[2].defined() ? in[2].data<T>() : nullptr;
  run_tasks<T>(batch * groups * chunks, chunk * kvol * cg * x_plane, [&](int64_t t, std::vector<T>& col) {
    const int64_t n = t / (groups * chunks), g = t / chunks % groups, c0 = t % chunks * chunk;
    const int64_t c1 = std::min(og, c0 + chunk), rows = (c1 - c0) * kvol;
    const T* xg = x.data<T>() + (n * channels + g * cg) * x_plane;
    T* yc = out.data<T>() + (n * out_channels + g * og + c0) * y_plane;  // the task's first channel
    std::fill(yc, yc + (c1 - c0) * y_plane, T(0));
    col.resize(rows * std::min(block, x_plane));
    for (int64_t p0 = 0; p0 < x_plane && cg > 0; p0 += block) {
      const int64_t p1 = std::min(x_plane, p0 + block);
      gemm<T>(true, false, rows, p1 - p0, cg, weight.data<T>() + g * cg * m + c0 * kvol, m, xg + p0, x_plane,
              col.data(), p1 - p0);
      col2im(w, c1 - c0, p0, p1, col.data(), yc);
    }
    if (bias)
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t i = 0; i < y_plane; ++i) yc[(c - c0) * y_plane + i] += bias[g * og + c];
  });
}

// The weight gradient of the convolution: per image, group and block of
// output positions, dW_g (og x k) += dy_g (og x block) * col^T (block x k),
// with col the block's im2col columns as in the forward. Each thread sums into
// its own dW, and the partial sums are added at the end (dW is small next to
// the images). inputs: x (N, C, spatial...), dy (N, O, spatial...); out: dW (O, C / groups, kernel...).
template <class T>
void conv_weight_backward(ir::OpType op, const std::vector<Tensor>& in, Tensor& out, const ConvAttrs& a) {
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  const Window w = make_window(x.shape(), dy.shape(), Shape(out.shape().begin() + 2, out.shape().end()), a);
  const int64_t batch = x.shape()[0], channels = x.shape()[1], out_channels = dy.shape()[1];
  const int64_t cg = channels / a.groups, og = out_channels / a.groups, k = cg * w.kernel_volume();
  const int64_t plane = w.out_plane(), in_plane = w.in_plane();
  check_blas_sizes(op, {og, k, plane});
  const int64_t block = std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(1, k), 1, plane);
  const int64_t blocks = ceil_div(plane, block);
  T* dw = out.data<T>();
  std::fill(dw, dw + out.numel(), T(0));
  std::mutex merge;
  parallel_for(batch * blocks, ceil_div(kParallelMacs, std::max<int64_t>(1, out_channels * k * block)),
               [&](int64_t t0, int64_t t1) {
    std::vector<T> col, partial(out.numel(), T(0));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks, p0 = (t % blocks) * block, p1 = std::min(plane, p0 + block);
      col.resize(k * (p1 - p0));
      for (int64_t g = 0; g < a.groups; ++g) {
        im2col(w, cg, p0, p1, x.data<T>() + (n * channels + g * cg) * in_plane, col.data());
        const T* dyg = dy.data<T>() + (n * out_channels + g * og) * plane + p0;
        gemm_serial<T>(false, true, og, k, p1 - p0, dyg, plane, col.data(), p1 - p0, partial.data() + g * og * k, k,
                       T(1));
      }
    }
    std::lock_guard<std::mutex> lock(merge);
    for (int64_t i = 0; i < out.numel(); ++i) dw[i] += partial[i];
  });
}

// Runs body(TypeTag<T>, inputs, out) in the BLAS type of the call's dtype:
// float16 and bfloat16 convert to float32 and round once on the way back.
template <class Body> void in_blas_type(OpCall& call, const Body& body) {
  switch (call.out().dtype()) {
    case DType::Float32: return body(TypeTag<float>{}, call.inputs, call.out());
    case DType::Float64: return body(TypeTag<double>{}, call.inputs, call.out());
    default: {
      std::vector<Tensor> in32;
      for (const Tensor& t : call.inputs) in32.push_back(t.to(DType::Float32));
      Tensor out32 = Tensor::empty(call.out().shape(), DType::Float32, call.out().device());
      body(TypeTag<float>{}, in32, out32);
      call.out().copy_(out32);
    }
  }
}

void conv_kernel(OpCall& call) {
  in_blas_type(call, [&](auto tag, const std::vector<Tensor>& in, Tensor& out) {
    conv_forward<typename decltype(tag)::type>(call.op, in, out, call.attr<ConvAttrs>());
  });
}

void conv_transpose_kernel(OpCall& call) {
  in_blas_type(call, [&](auto tag, const std::vector<Tensor>& in, Tensor& out) {
    conv_transpose_forward<typename decltype(tag)::type>(call.op, in, out, call.attr<ConvAttrs>());
  });
}

void conv_weight_backward_kernel(OpCall& call) {
  in_blas_type(call, [&](auto tag, const std::vector<Tensor>& in, Tensor& out) {
    conv_weight_backward<typename decltype(tag)::type>(call.op, in, out, call.attr<ConvAttrs>());
  });
}

PF_REGISTER_KERNEL(conv2d, CPU, &conv_kernel);
PF_REGISTER_KERNEL(conv3d, CPU, &conv_kernel);
PF_REGISTER_KERNEL(conv_transpose2d, CPU, &conv_transpose_kernel);
PF_REGISTER_KERNEL(conv_weight_backward, CPU, &conv_weight_backward_kernel);

}  // namespace
}  // namespace pyflame::cpu
