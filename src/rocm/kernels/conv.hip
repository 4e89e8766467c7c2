// GPU convolutions without a DNN library: im2col + BLAS. MIOpen is packaged
// nowhere a build machine can fetch it, so an AMD build may lack it; this
// file then runs conv2d/conv3d (and conv1d, which the op layer lifts to 2-D),
// conv_transpose2d and the weight gradient with the BLAS adapter alone. Where
// the DNN adapter is built, its entries hand over to these when the library is
// switched off (math_mode.h: set_dnn_enabled), which is how they run on NVIDIA.
//
// As on the CPU (src/cpu/conv.cpp, whose Window geometry this shares), the
// input values each output position reads are unrolled into a column matrix
// (rows: input channel x kernel tap; one column per output position):
//   forward        out[n, group]   = W[group] . col[n, group]        (one strided batched GEMM per group)
//   transposed     col[n, group]   = W[group]^T . x[n, group]; out = col2im(col)
//   weight grad    dW[group]       = sum_n dy[n, group] . col[n, group]^T
// Images go through in chunks whose column matrices fit a fixed budget.
//
// The unrolling is a copy that writes `taps` column entries per input element
// read, so it should run at the speed of its stores. Its index arithmetic is
// divisions; one thread per (image, channel, output positions) splits its index
// once and walks the taps with additions, so a 3x3 kernel pays for a thread's
// few divisions over nine stores, of up to 16 bytes each (the first version
// split every column entry's index, ten divisions each: 0.66 ms where this
// takes 0.10 for 231 MB of columns on an H100, docs/perf.md). col2im gathers:
// each input element sums the column entries that land on it (no atomics, the
// same result every run); a thread sums up to 4 neighbours of an input row,
// divides by each dimension's stride once, and the taps step quotient and
// remainder (0.27 -> 0.10 ms reading the same 231 MB).
// Kernels are grid-stride loops in 32-bit indices where every index fits,
// 64-bit otherwise; nothing depends on the warp size (wave64 and wave32).
//
// float16/bfloat16 multiply with float32 accumulation (the BLAS adapter's
// gemm_ex); col2im sums in float32 (float64 for float64). float32 GEMMs may use
// TF32 on NVIDIA when convolutions may (conv_allow_tf32, on by default, as
// torch.backends.cudnn.allow_tf32): the precision the DNN path has, not the
// matmul setting's, since these are convolutions.

#include "rocm/kernels/conv.h"

#include <algorithm>
#include <climits>
#include <type_traits>

#include "kernels/window.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"
#if PYFLAME_WITH_BLAS
#include "pyflame/backend/rocm/blas.h"
#endif

namespace pyflame::backend::rocm {
namespace {

using kernels::Window;

// Elements of one chunk's column matrices: 64 MiB of float32.
constexpr int64_t kColumnBudget = int64_t{1} << 24;

// The window in the kernels' index type: 32-bit where every index fits (integer
// division, which a thread's index decomposition is made of, costs several times less).
// dq, dr: d / s and d % s, col2im's step from one tap to the next.
template <class I> struct Geometry {
  I in[3], out[3], k[3], s[3], p[3], d[3], dq[3], dr[3];
};

template <class I> Geometry<I> geometry(const Window& w) {
  Geometry<I> g;
  for (int i = 0; i < 3; ++i) {
    g.in[i] = static_cast<I>(w.in[i]), g.out[i] = static_cast<I>(w.out[i]), g.k[i] = static_cast<I>(w.k[i]);
    g.s[i] = static_cast<I>(w.s[i]), g.p[i] = static_cast<I>(w.p[i]), g.d[i] = static_cast<I>(w.d[i]);
    g.dq[i] = static_cast<I>(w.d[i] / w.s[i]), g.dr[i] = static_cast<I>(w.d[i] % w.s[i]);
  }
  return g;
}

// col[n * image_stride + (c * taps + tap) * row_stride + p] = the input value that
// output position p of image n reads at channel c and tap `tap`, 0 in the padding.
// One thread per (image, channel, V output positions of one output row): it splits
// its index once, then walks the taps with additions, storing the V positions'
// entries as one vector; a warp's stores fill consecutive p of one row, and its
// loads hit input elements that the other taps' loads bring into cache. V divides
// out[2], so also plane and the callers' strides (multiples of plane): with col
// aligned to V elements, every vector store is.
template <class T, class I, int V>
static __global__ void im2col_kernel(T* __restrict__ col, const T* __restrict__ img, Geometry<I> w, I channels,
                                     I images, I image_stride, I row_stride) {
  const I plane = w.out[0] * w.out[1] * w.out[2], in_plane = w.in[0] * w.in[1] * w.in[2];
  const I taps = w.k[0] * w.k[1] * w.k[2], runs = plane / V, total = images * channels * runs;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I nc = i / runs, p = (i - nc * runs) * V, n = nc / channels, c = nc - n * channels;
    const I rest = p / w.out[2], ow = p - rest * w.out[2], od = rest / w.out[1], oh = rest - od * w.out[1];
    const T* src = img + nc * in_plane;
    I o = n * image_stride + c * taps * row_stride + p;
    I id = od * w.s[0] - w.p[0];
    for (I kd = 0; kd < w.k[0]; ++kd, id += w.d[0]) {
      const bool depth_inside = id >= 0 && id < w.in[0];
      I ih = oh * w.s[1] - w.p[1];
      for (I kh = 0; kh < w.k[1]; ++kh, ih += w.d[1]) {
        const bool row_inside = depth_inside && ih >= 0 && ih < w.in[1];
        const I line = row_inside ? (id * w.in[1] + ih) * w.in[2] : 0;
        I iw = ow * w.s[2] - w.p[2];
        for (I kw = 0; kw < w.k[2]; ++kw, iw += w.d[2], o += row_stride) {
          Vec<T, V> v;
          for (int j = 0; j < V; ++j) {
            const I x = iw + j * w.s[2];
            v.v[j] = row_inside && x >= 0 && x < w.in[2] ? src[line + x] : T(0);
          }
          *reinterpret_cast<Vec<T, V>*>(col + o) = v;
        }
      }
    }
  }
}

// The next tap's output position along `dim`: o = t / s and r = t % s for
// t = in + p - k * d, moved from tap k to k + 1 (t falls by d) without a division.
template <class I> __device__ __forceinline__ void next_tap(I& o, I& r, const Geometry<I>& w, int dim) {
  o -= w.dq[dim], r -= w.dr[dim];
  if (r < 0) r += w.s[dim], --o;
}

// img[n, c, position] = the sum of the column entries (rows of channel c,
// layout [n][row][p]) whose output position reads it: the adjoint of im2col.
// Output position o reads input position in at tap k where o * s - p + k * d == in:
// t = in + p - k * d must divide by s with a quotient below out. t falls as k rises,
// so a negative t ends that dimension's taps. Each dimension divides once per thread;
// the taps then step quotient and remainder (next_tap). A thread sums V neighbouring
// positions of one input row (V divides in[2]), whose loads are independent of each
// other, and stores them as one vector.
template <class T, class I, int V>
static __global__ void col2im_kernel(T* __restrict__ img, const T* __restrict__ col, Geometry<I> w, I channels,
                                     I images) {
  using A = acc_t<T>;
  const I taps = w.k[0] * w.k[1] * w.k[2], plane = w.out[0] * w.out[1] * w.out[2];
  const I in_plane = w.in[0] * w.in[1] * w.in[2], runs = in_plane / V;
  const I total = images * channels * runs;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I nc = i / runs, pos = (i - nc * runs) * V;
    const I rest = pos / w.in[2], iw = pos - rest * w.in[2], id = rest / w.in[1], ih = rest - id * w.in[1];
    const I td = id + w.p[0], th = ih + w.p[1], tw = iw + w.p[2];
    const I od0 = td / w.s[0], oh0 = th / w.s[1];
    const I rd0 = td - od0 * w.s[0], rh0 = th - oh0 * w.s[1];
    I ow0[V], rw0[V];  // tap 0's quotient and remainder for positions iw + j: t one larger each
    ow0[0] = tw / w.s[2], rw0[0] = tw - ow0[0] * w.s[2];
    for (int j = 1; j < V; ++j) {
      ow0[j] = ow0[j - 1], rw0[j] = rw0[j - 1] + 1;
      if (rw0[j] == w.s[2]) rw0[j] = 0, ++ow0[j];
    }
    const T* rows = col + nc * taps * plane;  // [n][c * taps + tap][p] with n * channels + c = nc
    A sum[V] = {};
    I od = od0, rd = rd0;
    for (I kd = 0; kd < w.k[0] && od >= 0; ++kd, next_tap(od, rd, w, 0)) {
      if (rd != 0 || od >= w.out[0]) continue;
      I oh = oh0, rh = rh0;
      for (I kh = 0; kh < w.k[1] && oh >= 0; ++kh, next_tap(oh, rh, w, 1)) {
        if (rh != 0 || oh >= w.out[1]) continue;
        I ow[V], rw[V];
        for (int j = 0; j < V; ++j) ow[j] = ow0[j], rw[j] = rw0[j];
        I at = (kd * w.k[1] + kh) * w.k[2] * plane + (od * w.out[1] + oh) * w.out[2];  // tap kw = 0's row
        for (I kw = 0; kw < w.k[2] && ow[V - 1] >= 0; ++kw, at += plane) {  // ow[V - 1]: the largest t
          for (int j = 0; j < V; ++j) {
            if (rw[j] == 0 && ow[j] >= 0 && ow[j] < w.out[2]) sum[j] += static_cast<A>(rows[at + ow[j]]);
            next_tap(ow[j], rw[j], w, 2);
          }
        }
      }
    }
    Vec<T, V> v;
    for (int j = 0; j < V; ++j) v.v[j] = static_cast<T>(sum[j]);
    *reinterpret_cast<Vec<T, V>*>(img + nc * in_plane + pos) = v;
  }
}

// out[n, c, p] += bias[c] over out (N, C, P) contiguous: a thread per V consecutive
// elements of one plane (V divides P), its channel from its index by one division
// and one remainder, 16-byte accesses where the planes allow; the sum in acc_t<T>,
// rounded once. The elementwise add of the bias expanded to out's shape, which ran
// before, split every element's index over the coalesced dims in 64-bit divisions
// and remainders and accessed one element at a time. Both convolution paths (the
// DNN library's, im2col + BLAS) add the bias here.
template <class T, class I, int V>
static __global__ void add_channel_bias_kernel(T* __restrict__ out, const T* __restrict__ bias, I channels, I runs,
                                               I total) {
  using A = acc_t<T>;
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const A b = static_cast<A>(bias[(i / runs) % channels]);
    Vec<T, V>* at = reinterpret_cast<Vec<T, V>*>(out) + i;
    Vec<T, V> v = *at;
    for (int j = 0; j < V; ++j) v.v[j] = static_cast<T>(static_cast<A>(v.v[j]) + b);
    *at = v;
  }
}

// Calls f(I{}) with the narrowest index type that holds every index below
// `extent`, with room for a grid-stride step (at most 2^28) past the end.
template <class F> void with_index_type(int64_t extent, const F& f) {
  if (extent < (int64_t{1} << 30)) f(int32_t{});
  else f(int64_t{});
}

std::string describe(const OpCall& call) {
  const ConvAttrs& a = call.attr<ConvAttrs>();
  std::string s = "shapes";
  for (const Tensor& t : call.inputs)
    if (t.defined()) s += " " + detail::to_piece(t.shape());
  return s + " -> " + detail::to_piece(call.out().shape()) + ", stride " + detail::to_piece(Shape(a.stride)) +
         ", padding " + detail::to_piece(Shape(a.padding)) + ", dilation " + detail::to_piece(Shape(a.dilation)) +
         ", groups " + std::to_string(a.groups) + " (" + dtype_name(call.out().dtype()) + ")";
}

template <class F> void visit_float(DType dtype, const F& f) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) f(tag);
  });
}

void im2col(const OpCall& call, void* col, const void* img, const Window& w, int64_t channels, int64_t images,
            int64_t image_stride, int64_t row_stride) {
  const int device = call.out().device().index;
  const int64_t positions = images * channels * w.out_plane();
  visit_float(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_index_type(std::max(positions * w.kernel_volume(), images * channels * w.in_plane()), [&](auto index) {
      using I = decltype(index);
      const auto launch = [&](auto vec) {
        constexpr int V = decltype(vec)::value;
        im2col_kernel<T, I, V><<<grid_for(positions / V), kThreads, 0, current_stream(device)>>>(
            static_cast<T*>(col), static_cast<const T*>(img), geometry<I>(w), static_cast<I>(channels),
            static_cast<I>(images), static_cast<I>(image_stride), static_cast<I>(row_stride));
      };
      // Stores of 4 elements (2 of float64, 16 bytes) where output rows split into them:
      // scalar stores reach half the write bandwidth of 16-byte ones (H100).
      constexpr int V = std::min(kVec<T>, 4);
      if (w.out[2] % V == 0 && aligned(col, V * sizeof(T))) launch(std::integral_constant<int, V>{});
      else launch(std::integral_constant<int, 1>{});
    });
  });
  check_launch(op_name(call.op), "im2col, " + describe(call));
}

void col2im(const OpCall& call, void* img, const void* col, const Window& w, int64_t channels, int64_t images) {
  const int device = call.out().device().index;
  const int64_t n = images * channels * w.in_plane();
  visit_float(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_index_type(std::max(n, images * channels * w.kernel_volume() * w.out_plane()), [&](auto index) {
      using I = decltype(index);
      const auto launch = [&](auto vec) {
        constexpr int V = decltype(vec)::value;
        col2im_kernel<T, I, V><<<grid_for(n / V), kThreads, 0, current_stream(device)>>>(
            static_cast<T*>(img), static_cast<const T*>(col), geometry<I>(w), static_cast<I>(channels),
            static_cast<I>(images));
      };
      constexpr int V = std::min(kVec<T>, 4);  // as im2col's stores
      if (w.in[2] % V == 0 && aligned(img, V * sizeof(T))) launch(std::integral_constant<int, V>{});
      else launch(std::integral_constant<int, 1>{});
    });
  });
  check_launch(op_name(call.op), "col2im, " + describe(call));
}

// A GEMM dimension as the BLAS interface takes it.
int blas_int(const OpCall& call, int64_t v) {
  PF_CHECK(v <= INT_MAX, NotSupportedError, op_name(call.op), " without the DNN library: a matrix dimension of ", v,
           " is beyond the BLAS interface's int range (", describe(call), ")");
  return static_cast<int>(v);
}

// Images per chunk whose column matrices (`per_image` elements each) fit the budget.
int64_t images_per_chunk(int64_t images, int64_t per_image) {
  return std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(images, 1));
}

const char* at(const Tensor& t, int64_t elements) {
  return static_cast<const char*>(t.data_ptr()) + elements * static_cast<int64_t>(itemsize(t.dtype()));
}
char* at(Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<int64_t>(itemsize(t.dtype()));
}

std::vector<int64_t> kernel_size(const Tensor& weight) {
  return std::vector<int64_t>(weight.shape().begin() + 2, weight.shape().end());
}

#if PYFLAME_WITH_BLAS
rocblas_operation transposed(bool t) { return t ? rocblas_operation_transpose : rocblas_operation_none; }
#endif

// C (m x n, row-major, `batch` of them c_stride apart) = op(A) . op(B) + beta C, in
// the row-major terms of this file: the column-major BLAS computes C^T = op(B)^T op(A)^T.
void gemm(const OpCall& call, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
          int64_t lda, int64_t a_stride, const void* b, int64_t ldb, int64_t b_stride, double beta, void* c,
          int64_t ldc, int64_t c_stride, int64_t batch) {
#if PYFLAME_WITH_BLAS
  get_blas().gemm_ex(call.out().dtype(), transposed(trans_b), transposed(trans_a), blas_int(call, n), blas_int(call, m),
                     blas_int(call, k), 1.0, b, blas_int(call, ldb), b_stride, a, blas_int(call, lda), a_stride, beta,
                     c, blas_int(call, ldc), c_stride, blas_int(call, batch), conv_allow_tf32());
#else
  throw NotSupportedError(detail::cat(op_name(call.op), " on the GPU needs the DNN adapter (MIOpen / cuDNN) or the ",
                                      "BLAS adapter (rocBLAS / cuBLAS); this build has neither (", describe(call), ")"));
#endif
}

}  // namespace

void add_conv_bias(OpCall& call) {
  const Tensor& bias = call.inputs[2];
  Tensor& out = call.out();
  if (!bias.defined() || out.numel() == 0) return;
  const int64_t channels = out.shape()[1], plane = out.numel() / (out.shape()[0] * channels);
  const int device = out.device().index;
  DeviceGuard guard(device);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      with_index_type(out.numel(), [&](auto index) {
        using I = decltype(index);
        const auto launch = [&](auto vec) {
          constexpr int V = decltype(vec)::value;
          const int64_t runs = plane / V;
          add_channel_bias_kernel<T, I, V><<<grid_for(out.numel() / V), kThreads, 0, current_stream(device)>>>(
              static_cast<T*>(out.data_ptr()), static_cast<const T*>(bias.data_ptr()), static_cast<I>(channels),
              static_cast<I>(runs), static_cast<I>(out.numel() / V));
        };
        constexpr int V = kVec<T>;
        if (plane % V == 0 && aligned(out.data_ptr(), V * sizeof(T))) launch(std::integral_constant<int, V>{});
        else launch(std::integral_constant<int, 1>{});
      });
    } else {
      throw TypeError(std::string(op_name(call.op)) + ": no GPU bias kernel for " + dtype_name(out.dtype()));
    }
  });
  check_launch(op_name(call.op), [&] { return "bias, " + describe(call); });
}

// x (N, C, spatial...), weight (O, C / groups, kernel...) -> out (N, O, spatial...).
void conv_gemm_entry(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& weight = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  if (out.numel() == 0) return;
  const int64_t groups = call.attr<ConvAttrs>().groups, images = x.shape()[0];
  const int64_t channels = x.shape()[1], group_in = channels / groups, group_out = out.shape()[1] / groups;
  if (group_in == 0) {
    out.fill_(Scalar(0.0));  // no input channels: empty sums
  } else {
    const Window w = kernels::make_window(x.shape(), out.shape(), kernel_size(weight), call.attr<ConvAttrs>());
    const int64_t taps = w.kernel_volume(), plane = w.out_plane(), rows = channels * taps;
    // A 1x1 kernel with stride 1 and no padding reads the input as its own column matrix.
    const bool direct = taps == 1 && w.in_plane() == plane && w.p[0] == 0 && w.p[1] == 0 && w.p[2] == 0;
    const int64_t chunk = images_per_chunk(images, direct ? 0 : rows * plane);
    Tensor col = direct ? Tensor() : Tensor::empty({chunk, rows, plane}, x.dtype(), x.device());
    for (int64_t n0 = 0; n0 < images; n0 += chunk) {
      const int64_t count = std::min(chunk, images - n0);
      const Tensor& columns = direct ? x : col;
      const int64_t first = direct ? n0 * rows * plane : 0;
      if (!direct) im2col(call, col.data_ptr(), at(x, n0 * channels * w.in_plane()), w, channels, count, rows * plane, plane);
      for (int64_t g = 0; g < groups; ++g)
        gemm(call, false, false, group_out, plane, group_in * taps, at(weight, g * group_out * group_in * taps),
             group_in * taps, 0, at(columns, first + g * group_in * taps * plane), plane, rows * plane, 0.0,
             at(out, (n0 * groups + g) * group_out * plane), plane, out.shape()[1] * plane, count);
    }
  }
  add_conv_bias(call);
}

// x (N, C_in, spatial...), weight (C_in, C_out / groups, kernel...) -> out (N,
// C_out, spatial...): the adjoint of the convolution from out's spatial size to
// x's with this weight. Every output_padding needs nothing more: positions no
// window reaches get no column entries.
void conv_transpose_gemm_entry(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& weight = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  if (out.numel() == 0) return;
  const int64_t groups = call.attr<ConvAttrs>().groups, images = x.shape()[0];
  const int64_t in_channels = x.shape()[1], channels = out.shape()[1];
  const int64_t group_in = in_channels / groups, group_out = channels / groups;
  if (group_in == 0) {
    out.fill_(Scalar(0.0));  // no input channels: empty sums
  } else {
    const Window w = kernels::make_window(out.shape(), x.shape(), kernel_size(weight), call.attr<ConvAttrs>());
    const int64_t taps = w.kernel_volume(), plane = w.out_plane(), rows = channels * taps;
    const int64_t chunk = images_per_chunk(images, rows * plane);
    Tensor col = Tensor::empty({chunk, rows, plane}, x.dtype(), x.device());
    for (int64_t n0 = 0; n0 < images; n0 += chunk) {
      const int64_t count = std::min(chunk, images - n0);
      for (int64_t g = 0; g < groups; ++g)
        gemm(call, true, false, group_out * taps, plane, group_in, at(weight, g * group_in * group_out * taps),
             group_out * taps, 0, at(x, (n0 * groups + g) * group_in * plane), plane, in_channels * plane, 0.0,
             at(col, g * group_out * taps * plane), plane, rows * plane, count);
      col2im(call, at(out, n0 * channels * w.in_plane()), col.data_ptr(), w, channels, count);
    }
  }
  add_conv_bias(call);
}

// x (N, C, spatial...), dy (N, O, spatial...) -> dW (O, C / groups, kernel...);
// inputs[2] (the weight) gives the shape only. A chunk's columns lie as
// [row][image][p] and its dy as [O][image][p], so one GEMM per group sums over
// the chunk's images inside the BLAS, in its accumulation precision.
void conv_weight_backward_gemm_entry(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& dy = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  if (out.numel() == 0) return;
  if (x.numel() == 0 || dy.numel() == 0) {
    out.fill_(Scalar(0.0));  // empty sums
    return;
  }
  const int64_t groups = call.attr<ConvAttrs>().groups, images = x.shape()[0];
  const int64_t channels = x.shape()[1], out_channels = dy.shape()[1];
  const int64_t group_in = channels / groups, group_out = out_channels / groups;
  const Window w = kernels::make_window(x.shape(), dy.shape(), kernel_size(out), call.attr<ConvAttrs>());
  const int64_t taps = w.kernel_volume(), plane = w.out_plane(), rows = channels * taps;
  const int64_t chunk = images_per_chunk(images, rows * plane);
  Tensor col = Tensor::empty({rows, chunk * plane}, x.dtype(), x.device());
  for (int64_t n0 = 0; n0 < images; n0 += chunk) {
    const int64_t count = std::min(chunk, images - n0), width = count * plane;
    im2col(call, col.data_ptr(), at(x, n0 * channels * w.in_plane()), w, channels, count, plane, width);
    const Tensor grads = dy.slice(0, n0, n0 + count, 1).reshape({count, out_channels, plane}).permute({1, 0, 2})
                             .contiguous();
    for (int64_t g = 0; g < groups; ++g)
      gemm(call, false, true, group_out, group_in * taps, width, at(grads, g * group_out * width), width, 0,
           at(col, g * group_in * taps * width), width, 0, n0 == 0 ? 0.0 : 1.0,
           at(out, g * group_out * group_in * taps), group_in * taps, 0, 1);
  }
}

#if !PYFLAME_WITH_DNN
PF_REGISTER_KERNEL(conv2d, ROCm, &conv_gemm_entry);
PF_REGISTER_KERNEL(conv3d, ROCm, &conv_gemm_entry);
PF_REGISTER_KERNEL(conv_transpose2d, ROCm, &conv_transpose_gemm_entry);
PF_REGISTER_KERNEL(conv_weight_backward, ROCm, &conv_weight_backward_gemm_entry);
#endif

}  // namespace pyflame::backend::rocm
