// CPU convolution and transposed convolution as im2col + GEMM (OpenBLAS).
// For each block of output positions and group, the input values those
// positions see are unrolled into a column matrix (rows: input channel x
// kernel tap; one column per output position), and one sgemm/dgemm with the
// group's weights writes those outputs; a 1x1 kernel with stride 1 and no
// padding multiplies the input itself. A block is part of one image's plane,
// or several whole images when planes are small: a GEMM needs about a hundred
// columns to run near BLAS's peak (ResNet's 4x4 planes alone made 16-column
// products at a third of it), and the column buffer stays near cache size
// whatever the image. The transposed convolution is the adjoint: a GEMM with
// the transposed weights makes the columns, which are added back onto the
// output (col2im). The weight gradient multiplies the output gradient by the
// forward's columns. 2-D runs as 3-D with depth 1 (kernels/window.h).
//
// Threads: one OpenMP region per call splits independent tasks (blocks of
// output positions; for the transpose, blocks x group x output channels,
// since col2im's blocks overlap) and every thread calls BLAS
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
// Fewest columns a block gets even past the budget: OpenBLAS's sgemm on one
// AVX2 core runs at 28 GFLOP/s with 16 columns, 62 with 64, 71-75 with 128-256
// (512 x 4608 weights, ResNet-18's last layer).
constexpr int64_t kMinColumns = 128;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The batch's output positions cut into blocks: `positions` of one image's
// plane, or `images` whole images (positions == plane) when planes are small.
// A block's columns run image by image.
struct ColumnBlocks {
  int64_t batch, plane, images, positions;

  struct Block {
    int64_t n0, n1, p0, p1;  // images [n0, n1), positions [p0, p1) of each
    int64_t width() const { return p1 - p0; }
    int64_t columns() const { return (n1 - n0) * (p1 - p0); }
    bool one_image() const { return n1 - n0 == 1; }
  };

  int64_t per_image() const { return ceil_div(plane, positions); }
  int64_t count() const { return ceil_div(batch, images) * per_image(); }
  Block operator[](int64_t t) const {
    const int64_t n0 = t / per_image() * images, p0 = t % per_image() * positions;
    return {n0, std::min(batch, n0 + images), p0, std::min(plane, p0 + positions)};
  }
};

// Blocks of about kColumnBudget / rows columns (rows: the column matrix's),
// at least kMinColumns, and at least min_blocks of them; parts of a plane are
// whole output lines (`line` positions each) where a block holds one.
ColumnBlocks split_columns(int64_t batch, int64_t plane, int64_t line, int64_t rows, int64_t min_blocks) {
  if (batch == 0 || plane == 0) return {batch, plane, 1, 1};  // no blocks
  const int64_t target = std::max(kMinColumns, kColumnBudget / std::max<int64_t>(1, rows));
  if (plane >= target || batch == 1) {
    const int64_t positions = std::min({plane, target, ceil_div(plane, ceil_div(min_blocks, batch))});
    const int64_t unit = positions >= line ? line : 1, units = plane / unit;
    return {batch, plane, 1, ceil_div(units, ceil_div(units, std::max<int64_t>(1, positions / unit))) * unit};
  }
  const int64_t images = std::clamp<int64_t>(target / plane, 1, ceil_div(batch, min_blocks));
  return {batch, plane, images, plane};
}

// dst (channels x the block's columns) = positions [p0, p1) of `channels`
// planes of each of the block's images; image n's planes start at src + n * image_stride.
template <class T>
void gather_columns(const ColumnBlocks::Block& b, int64_t channels, int64_t plane, const T* src, int64_t image_stride,
                    T* dst) {
  const int64_t cols = b.columns();
  for (int64_t n = b.n0; n < b.n1; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const T* from = src + n * image_stride + c * plane + b.p0;
      std::copy(from, from + b.width(), dst + c * cols + (n - b.n0) * b.width());
    }
}

// The inverse: the block's columns back into their images' planes.
template <class T>
void scatter_columns(const ColumnBlocks::Block& b, int64_t channels, int64_t plane, const T* src, T* dst,
                     int64_t image_stride) {
  const int64_t cols = b.columns();
  for (int64_t n = b.n0; n < b.n1; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const T* from = src + c * cols + (n - b.n0) * b.width();
      std::copy(from, from + b.width(), dst + n * image_stride + c * plane + b.p0);
    }
}

// Calls f(c, kd, kh, row) for every (channel, depth tap, height tap) of the
// column matrix of `channels` channels; its width taps are rows row.. row + k[2] - 1.
template <class F> void for_each_tap_line(const Window& w, int64_t channels, const F& f) {
  int64_t row = 0;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kd = 0; kd < w.k[0]; ++kd)
      for (int64_t kh = 0; kh < w.k[1]; ++kh, row += w.k[2]) f(c, kd, kh, row);
}

// Per width tap: its input offset along a line, and the output positions
// [lo, hi) of a line whose input lies inside the line.
struct WidthTap {
  int64_t off, lo, hi;
};

std::vector<WidthTap> width_taps(const Window& w) {
  std::vector<WidthTap> taps;
  for (int64_t kw = 0; kw < w.k[2]; ++kw) {
    const int64_t off = kw * w.d[2] - w.p[2];
    const auto [lo, hi] = valid_range(off, w.s[2], w.in[2], w.out[2]);
    taps.push_back({off, lo, hi});
  }
  return taps;
}

// Output positions o0..o1 of output line (od, oh), which are a block's columns from `column` on.
struct LinePiece {
  int64_t od, oh, o0, o1, column;
};

// The pieces of output positions [p0, p1) of the flattened output plane that
// lie on one output line each; computed once per block, since every row of
// the column matrix and every image of the block walk the same ones.
std::vector<LinePiece> line_pieces(const Window& w, int64_t p0, int64_t p1) {
  std::vector<LinePiece> pieces;
  const int64_t width = w.out[2];
  for (int64_t p = p0; p < p1;) {
    const int64_t line = p / width, o0 = p % width, o1 = std::min(width, o0 + p1 - p);
    pieces.push_back({line / w.out[1], line % w.out[1], o0, o1, p - p0});
    p += o1 - o0;
  }
  return pieces;
}

// Input plane offset of the row that output line (od, oh) reads at kernel tap (kd, kh), or -1 for padding.
int64_t input_row(const Window& w, const LinePiece& q, int64_t kd, int64_t kh) {
  const int64_t id = q.od * w.s[0] - w.p[0] + kd * w.d[0];
  const int64_t ih = q.oh * w.s[1] - w.p[1] + kh * w.d[1];
  if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1]) return -1;
  return (id * w.in[1] + ih) * w.in[2];
}

// Whether each row of the column matrix of output positions [p0, p1) is its
// input plane shifted by one offset: 2-D, stride 1, the output as wide as the
// input ('same' padding, most of a ResNet), and [p0, p1) whole output lines.
bool rows_are_shifted_planes(const Window& w, int64_t p0, int64_t p1) {
  return w.in[0] == 1 && w.out[0] == 1 && w.s[1] == 1 && w.s[2] == 1 && w.out[2] == w.in[2] &&
         p0 % w.out[2] == 0 && p1 % w.out[2] == 0;
}

// col (channels x kernel volume rows of ld elements) = the values of img
// (channels x input plane) that output positions [p0, p1) read (`pieces`
// their line pieces). Pieces are a few elements long on small planes: the
// line's input row is found once for all width taps, and plain loops copy.
template <class T>
void im2col(const Window& w, int64_t channels, int64_t p0, int64_t p1, const std::vector<LinePiece>& pieces,
            const std::vector<WidthTap>& taps, const T* img, T* col, int64_t ld) {
  if (rows_are_shifted_planes(w, p0, p1)) {
    // Lines [h0, h1) of the output read inside the input; one copy for them, then the columns outside zeroed.
    const int64_t width = w.out[2];
    for_each_tap_line(w, channels, [&](int64_t c, int64_t, int64_t kh, int64_t row) {
      const int64_t dh = kh * w.d[1] - w.p[1];
      const int64_t h0 = std::clamp(-dh, p0 / width, p1 / width), h1 = std::clamp(w.in[1] - dh, h0, p1 / width);
      for (int64_t kw = 0; kw < w.k[2]; ++kw) {
        T* dst = col + (row + kw) * ld - p0;  // dst[j] for j in [p0, p1)
        const auto [off, lo, hi] = taps[kw];
        int64_t a = p0, b = p0;  // [a, b): the lines copied
        if (h0 < h1 && lo < hi) {
          a = h0 * width, b = h1 * width;
          const T* src = img + c * w.in_plane() + (h0 + dh) * width + lo + off;  // holds dst[a + lo]
          std::copy(src, src + (b - width + hi) - (a + lo), dst + a + lo);
          // The padding's column or two, down the lines (a memset call per line costs more than the stores).
          for (int64_t o = 0; o < lo; ++o)
            for (int64_t line = a; line < b; line += width) dst[line + o] = T(0);
          for (int64_t o = hi; o < width; ++o)
            for (int64_t line = a; line < b; line += width) dst[line + o] = T(0);
        }
        std::fill(dst + p0, dst + a, T(0));
        std::fill(dst + b, dst + p1, T(0));
      }
    });
    return;
  }
  const int64_t s = w.s[2];
  for_each_tap_line(w, channels, [&](int64_t c, int64_t kd, int64_t kh, int64_t row) {
    for (const LinePiece& q : pieces) {
      const int64_t base = input_row(w, q, kd, kh);
      const T* src = img + c * w.in_plane() + (base < 0 ? 0 : base);
      for (int64_t kw = 0; kw < w.k[2]; ++kw) {
        T* dst = col + (row + kw) * ld + q.column - q.o0;  // dst[o] for o in [o0, o1)
        int64_t a = q.o1, b = q.o1;                         // [a, b): positions inside the input
        if (base >= 0) {
          a = std::clamp(taps[kw].lo, q.o0, q.o1), b = std::clamp(taps[kw].hi, a, q.o1);
          const T* from = src + taps[kw].off;
          if (s == 1)  // contiguous: the compiler vectorises it
            for (int64_t o = a; o < b; ++o) dst[o] = from[o];
          else
            for (int64_t o = a; o < b; ++o) dst[o] = from[o * s];
        }
        for (int64_t o = q.o0; o < a; ++o) dst[o] = T(0);
        for (int64_t o = b; o < q.o1; ++o) dst[o] = T(0);
      }
    }
  });
}

// The adjoint of im2col: adds each column entry onto the img element it stands for.
template <class T>
void col2im(const Window& w, int64_t channels, const std::vector<LinePiece>& pieces, const std::vector<WidthTap>& taps,
            const T* col, int64_t ld, T* img) {
  const int64_t s = w.s[2];
  for_each_tap_line(w, channels, [&](int64_t c, int64_t kd, int64_t kh, int64_t row) {
    for (const LinePiece& q : pieces) {
      const int64_t base = input_row(w, q, kd, kh);
      if (base < 0) continue;
      T* dst = img + c * w.in_plane() + base;
      for (int64_t kw = 0; kw < w.k[2]; ++kw) {
        const T* src = col + (row + kw) * ld + q.column - q.o0;  // src[o] for o in [o0, o1)
        const int64_t a = std::clamp(taps[kw].lo, q.o0, q.o1), b = std::clamp(taps[kw].hi, q.o0, q.o1);
        T* to = dst + taps[kw].off;
        if (s == 1)
          for (int64_t o = a; o < b; ++o) to[o] += src[o];
        else
          for (int64_t o = a; o < b; ++o) to[o * s] += src[o];
      }
    }
  });
}

// The column matrix of a block (rows: cg channels x the kernel's taps; `pieces`
// its line pieces) into col, image by image; group g's channels of image n
// start at x + (n * channels + g * cg) * in_plane.
template <class T>
void block_im2col(const Window& w, const ColumnBlocks::Block& b, const std::vector<LinePiece>& pieces,
                  const std::vector<WidthTap>& taps, const T* x, int64_t channels, int64_t cg, int64_t g, T* col) {
  for (int64_t n = b.n0; n < b.n1; ++n)
    im2col(w, cg, b.p0, b.p1, pieces, taps, x + (n * channels + g * cg) * w.in_plane(), col + (n - b.n0) * b.width(),
           b.columns());
}

// Runs task(t, buffer) for t in [0, tasks), each about `macs`
// multiply-adds, split across threads (their BLAS calls run serially).
template <class T, class F> void run_tasks(int64_t tasks, int64_t macs, const F& task) {
  parallel_for(tasks, ceil_div(kParallelMacs, std::max<int64_t>(1, macs)), [&](int64_t b, int64_t e) {
    std::vector<T> buffer;
    for (int64_t t = b; t < e; ++t) task(t, buffer);
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
  const bool direct = w.kernel_volume() == 1 && w.s[0] == 1 && w.s[1] == 1 && w.s[2] == 1 && w.p[0] == 0 &&
                      w.p[1] == 0 && w.p[2] == 0;  // an image is its own column matrix
  const ColumnBlocks blocks = split_columns(batch, plane, w.out[2], k, omp_get_max_threads());
  check_blas_sizes(op, {og, k, blocks.images * blocks.positions});
  const T* bias = in[2].defined() ? in[2].data<T>() : nullptr;
  const int64_t image_size = out_channels * plane;
  const std::vector<WidthTap> taps = width_taps(w);
  run_tasks<T>(blocks.count(), out_channels * k * blocks.images * blocks.positions, [&](int64_t t, std::vector<T>& buf) {
    const ColumnBlocks::Block b = blocks[t];
    const int64_t cols = b.columns();
    const bool own_columns = !(direct && b.one_image());
    const std::vector<LinePiece> pieces = own_columns ? line_pieces(w, b.p0, b.p1) : std::vector<LinePiece>();
    // buf: the column matrix, then (several images) the outputs before they go to their images.
    const int64_t col_size = own_columns ? k * cols : 0;
    buf.resize(col_size + (b.one_image() ? 0 : out_channels * cols));
    T* y = out.data<T>();
    for (int64_t g = 0; g < a.groups; ++g) {
      const T* rhs = x.data<T>() + (b.n0 * channels + g * cg) * in_plane + b.p0;
      int64_t ld_rhs = plane;
      if (own_columns) {
        block_im2col(w, b, pieces, taps, x.data<T>(), channels, cg, g, buf.data());
        rhs = buf.data();
        ld_rhs = cols;
      }
      T* dst = b.one_image() ? y + b.n0 * image_size + g * og * plane + b.p0 : buf.data() + col_size + g * og * cols;
      gemm<T>(false, false, og, cols, k, weight.data<T>() + g * og * k, k, rhs, ld_rhs, dst,
              b.one_image() ? plane : cols);
    }
    if (!b.one_image()) scatter_columns(b, out_channels, plane, buf.data() + col_size, y, image_size);
    if (bias)
      for (int64_t n = b.n0; n < b.n1; ++n)
        for (int64_t o = 0; o < out_channels; ++o)
          for (int64_t p = b.p0; p < b.p1; ++p) y[n * image_size + o * plane + p] += bias[o];
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
  // Tasks own images and output channels, since col2im's blocks overlap on the output:
  // an image's blocks of positions run in one task.
  const ColumnBlocks blocks = split_columns(batch, x_plane, w.out[2], m, std::min<int64_t>(omp_get_max_threads(), batch));
  check_blas_sizes(op, {m, cg, blocks.images * blocks.positions});
  const int64_t image_groups = ceil_div(batch, blocks.images), per_image = blocks.per_image();
  const int64_t chunk = ceil_div(og, ceil_div(omp_get_max_threads(), image_groups * groups)), chunks = ceil_div(og, chunk);
  const T* bias = in[2].defined() ? in[2].data<T>() : nullptr;
  const std::vector<WidthTap> taps = width_taps(w);
  run_tasks<T>(image_groups * groups * chunks, chunk * kvol * cg * blocks.images * x_plane,
               [&](int64_t t, std::vector<T>& buf) {
    const int64_t ig = t / (groups * chunks), g = t / chunks % groups, c0 = t % chunks * chunk;
    const int64_t c1 = std::min(og, c0 + chunk), rows = (c1 - c0) * kvol;
    const int64_t n0 = ig * blocks.images, n1 = std::min(batch, n0 + blocks.images);
    // The task's first channel of image n.
    auto y_channels = [&](int64_t n) { return out.data<T>() + (n * out_channels + g * og + c0) * y_plane; };
    for (int64_t n = n0; n < n1; ++n) std::fill(y_channels(n), y_channels(n) + (c1 - c0) * y_plane, T(0));
    for (int64_t pb = 0; pb < per_image; ++pb) {
      const ColumnBlocks::Block b = blocks[ig * per_image + pb];
      const int64_t cols = b.columns();
      // buf: the columns, then (several images) the block's input gathered into columns.
      buf.resize(rows * cols + (b.one_image() ? 0 : cg * cols));
      const T* rhs = x.data<T>() + (b.n0 * channels + g * cg) * x_plane + b.p0;
      int64_t ld_rhs = x_plane;
      if (!b.one_image()) {
        gather_columns(b, cg, x_plane, x.data<T>() + g * cg * x_plane, channels * x_plane, buf.data() + rows * cols);
        rhs = buf.data() + rows * cols;
        ld_rhs = cols;
      }
      gemm<T>(true, false, rows, cols, cg, weight.data<T>() + g * cg * m + c0 * kvol, m, rhs, ld_rhs, buf.data(), cols);
      const std::vector<LinePiece> pieces = line_pieces(w, b.p0, b.p1);
      for (int64_t n = b.n0; n < b.n1; ++n)
        col2im(w, c1 - c0, pieces, taps, buf.data() + (n - b.n0) * b.width(), cols, y_channels(n));
    }
    if (bias)
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t i = 0; i < y_plane; ++i) y_channels(n)[(c - c0) * y_plane + i] += bias[g * og + c];
  });
}

// The weight gradient of the convolution: per block of output positions and
// group, dW_g (og x k) += dy_g (og x columns) * col^T (columns x k), with col
// the block's im2col columns as in the forward. Each thread sums into its own
// dW, and the partial sums are added at the end (dW is small next to the
// images). inputs: x (N, C, spatial...), dy (N, O, spatial...); out: dW (O, C / groups, kernel...).
template <class T>
void conv_weight_backward(ir::OpType op, const std::vector<Tensor>& in, Tensor& out, const ConvAttrs& a) {
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  const Window w = make_window(x.shape(), dy.shape(), Shape(out.shape().begin() + 2, out.shape().end()), a);
  const int64_t batch = x.shape()[0], channels = x.shape()[1], out_channels = dy.shape()[1];
  const int64_t cg = channels / a.groups, og = out_channels / a.groups, k = cg * w.kernel_volume();
  const int64_t plane = w.out_plane();
  const ColumnBlocks blocks = split_columns(batch, plane, w.out[2], k, omp_get_max_threads());
  check_blas_sizes(op, {og, k, blocks.images * blocks.positions});
  T* dw = out.data<T>();
  std::fill(dw, dw + out.numel(), T(0));
  std::mutex merge;
  const std::vector<WidthTap> taps = width_taps(w);
  parallel_for(blocks.count(),
               ceil_div(kParallelMacs, std::max<int64_t>(1, out_channels * k * blocks.images * blocks.positions)),
               [&](int64_t t0, int64_t t1) {
    std::vector<T> col, dy_columns, partial(out.numel(), T(0));
    for (int64_t t = t0; t < t1; ++t) {
      const ColumnBlocks::Block b = blocks[t];
      const int64_t cols = b.columns();
      col.resize(k * cols);
      const std::vector<LinePiece> pieces = line_pieces(w, b.p0, b.p1);
      for (int64_t g = 0; g < a.groups; ++g) {
        block_im2col(w, b, pieces, taps, x.data<T>(), channels, cg, g, col.data());
        const T* lhs = dy.data<T>() + (b.n0 * out_channels + g * og) * plane + b.p0;
        int64_t ld_lhs = plane;
        if (!b.one_image()) {
          dy_columns.resize(og * cols);
          gather_columns(b, og, plane, dy.data<T>() + g * og * plane, out_channels * plane, dy_columns.data());
          lhs = dy_columns.data();
          ld_lhs = cols;
        }
        gemm_serial<T>(false, true, og, k, cols, lhs, ld_lhs, col.data(), cols, partial.data() + g * og * k, k, T(1));
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
