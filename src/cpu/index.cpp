// CPU index kernels: index_select, gather, scatter, scatter_add, scatter_reduce. index_select
// and gather are one strided loop (for_each_strided, as elementwise ops) over
// the output, in which the input is seen through a view whose stride along
// `dim` is 0: the body adds index * (its real stride) to reach the element.
// index_select is a gather whose index is broadcast over the other dims, so
// runs that share one index are contiguous copies. scatter has a loop of its
// own (scatter_loop) because its writes may collide. Every index is checked
// before anything is written (kernels/kernel_error.h): a bad one raises
// IndexError and leaves the output untouched. With IndexAttrs::wrap_negative
// (tensor keys, x[idx]) negative indices count from the end.
// Moves go by element width only, so one instantiation serves every dtype of
// a size; scatter_add and scatter_reduce combine float16 and bfloat16 in
// float32, so that each result is rounded once.

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/functors.h"
#include "kernels/kernel_error.h"

namespace pyflame::cpu {
namespace {

// Calls f(TypeTag<U>{}) with the unsigned integer type of `itemsize` bytes.
template <class F> void visit_width(size_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    default: return f(TypeTag<uint64_t>{});
  }
}

template <class F> void visit_index(DType d, F&& f) {
  if (d == DType::Int32) f(TypeTag<int32_t>{});
  else f(TypeTag<int64_t>{});
}

template <class I> int64_t index_at(const char* p) { return static_cast<int64_t>(*reinterpret_cast<const I*>(p)); }

// Raises the IndexError of the first index outside [0, size) (or [-size, size)
// with wrap_negative). Indices are read in memory order: the check is a pass
// over the index alone, before the op touches anything.
void check_indices(const OpCall& call, const Tensor& index, int64_t size) {
  const IndexAttrs& a = call.attr<IndexAttrs>();
  visit_index(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    for_each_strided<1>({&index}, [&](auto p, auto s, int64_t n) {
      if (s[0] == 0) n = std::min<int64_t>(n, 1);  // an expanded index: one value for the run
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = index_at<I>(p[0] + i * s[0]);
        const int64_t given = v;
        if (!index_in_range(v, size, a.wrap_negative))
          raise_kernel_error({static_cast<int32_t>(KernelErrorCode::IndexOutOfRange), static_cast<int32_t>(call.op),
                              given, size, a.dim});
      }
    });
  });
}

// An index as the kernels use it: negative entries (already checked) count from the end.
inline int64_t wrapped(int64_t v, int64_t size) { return v < 0 ? v + size : v; }

// `t` seen with `shape` (no larger than t's outside `dim`) and stride 0 along `dim`.
Tensor pinned_along(const Tensor& t, const Shape& shape, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return t.as_strided(shape, strides, t.offset());
}

// out[i] = src[i + index[i] * step] over out's shape; step in bytes; `size`
// (the indexed dim's) wraps negative indices.
void gather_into(Tensor& out, const Tensor& src, const Tensor& index, int64_t step, int64_t size) {
  visit_width(out.itemsize(), [&](auto wtag) {
    using T = typename decltype(wtag)::type;
    visit_index(index.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      for_each_strided<3>({&out, &src, &index}, [&](auto p, auto s, int64_t n) {
        if (s[2] == 0) {  // one index for the whole run
          const char* from = p[1] + wrapped(index_at<I>(p[2]), size) * step;
          if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
            std::memcpy(p[0], from, n * sizeof(T));
          } else {
            for (int64_t i = 0; i < n; ++i)
              *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(from + i * s[1]);
          }
          return;
        }
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<T*>(p[0] + i * s[0]) =
              *reinterpret_cast<const T*>(p[1] + i * s[1] + wrapped(index_at<I>(p[2] + i * s[2]), size) * step);
      });
    });
  });
}

// inputs: x, index (1-D).
void index_select_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const int64_t d = call.attr<IndexAttrs>().dim;
  check_indices(call, index, x.shape()[d]);
  const Shape& shape = call.out().shape();
  Shape index_strides(shape.size(), 0);
  index_strides[d] = index.strides()[0];
  gather_into(call.out(), pinned_along(x, shape, d), index.as_strided(shape, index_strides, index.offset()),
              x.strides()[d] * static_cast<int64_t>(x.itemsize()), x.shape()[d]);
}

// inputs: x, index (the output's shape).
void gather_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const int64_t d = call.attr<IndexAttrs>().dim;
  check_indices(call, index, x.shape()[d]);
  gather_into(call.out(), pinned_along(x, index.shape(), d), index, x.strides()[d] * static_cast<int64_t>(x.itemsize()),
              x.shape()[d]);
}

// scatter / scatter_add. Positions that differ only along `dim` may write the
// same place, so threads split the positions by their coordinates outside
// `dim`, and each thread walks `dim` in index order: the last write wins and
// sums lose nothing. Within a block of positions the walk along `dim` is the
// inner loop when `dim` is the index's innermost dim, else the outer one, so
// memory is read in order either way.
// How scatter combines a value v into its place o: Assign, or a functor of
// kernels/functors.h (Add, Mul, Maximum, Minimum) in the accumulation type.
struct Assign {
  template <class T> void operator()(T& o, T v) const { o = v; }
};
template <template <class> class F> struct Combine {
  template <class T> void operator()(T& o, T v) const {
    using A = acc_t<T>;
    o = static_cast<T>(F<A>()(static_cast<A>(o), static_cast<A>(v)));
  }
};

template <class T, class I, class Op>
void scatter_loop(Tensor& out, const Tensor& index, const Tensor& src, int64_t d) {
  constexpr int64_t kBlock = 256;
  const int64_t size = out.shape()[d];
  const int64_t nd = index.shape()[d];
  const int64_t t_size = static_cast<int64_t>(sizeof(T)), i_size = static_cast<int64_t>(sizeof(I));
  Shape sizes;                                // the dims other than d, outermost first
  std::vector<std::array<int64_t, 3>> steps;  // their byte strides in out, index, src
  bool dim_inner = true;
  for (int64_t k = 0; k < index.dim(); ++k) {
    if (k == d) continue;
    sizes.push_back(index.shape()[k]);
    steps.push_back({out.strides()[k] * t_size, index.strides()[k] * i_size, src.strides()[k] * t_size});
    if (index.shape()[k] > 1 && std::abs(index.strides()[k]) < std::abs(index.strides()[d])) dim_inner = false;
  }
  const int64_t out_step = out.strides()[d] * t_size, index_step = index.strides()[d] * i_size,
                src_step = src.strides()[d] * t_size;
  char* const out_base = static_cast<char*>(out.data_ptr());
  const char* const index_base = static_cast<const char*>(index.data_ptr());
  const char* const src_base = static_cast<const char*>(src.data_ptr());
  const int64_t rows = shape_numel(sizes);
  parallel_for(rows, std::max<int64_t>(1, kParallelGrain / nd), [&](int64_t b, int64_t e) {
    std::array<int64_t, kBlock> oo, io, so;  // byte offsets of a block of rows
    std::vector<int64_t> coord(sizes.size());
    for (int64_t r0 = b; r0 < e; r0 += kBlock) {
      const int64_t m = std::min(kBlock, e - r0);
      int64_t rest = r0;
      std::array<int64_t, 3> off = {0, 0, 0};
      for (size_t k = sizes.size(); k-- > 0;) {
        coord[k] = rest % sizes[k];
        rest /= sizes[k];
        for (int a = 0; a < 3; ++a) off[a] += coord[k] * steps[k][a];
      }
      for (int64_t j = 0; j < m; ++j) {
        oo[j] = off[0], io[j] = off[1], so[j] = off[2];
        for (size_t k = sizes.size(); k-- > 0;) {  // next row: carry over the dims
          for (int a = 0; a < 3; ++a) off[a] += steps[k][a];
          if (++coord[k] < sizes[k]) break;
          for (int a = 0; a < 3; ++a) off[a] -= sizes[k] * steps[k][a];
          coord[k] = 0;
        }
      }
      auto one = [&](int64_t j, int64_t i) {
        const int64_t at = wrapped(index_at<I>(index_base + io[j] + i * index_step), size);
        T& o = *reinterpret_cast<T*>(out_base + oo[j] + at * out_step);
        const T v = *reinterpret_cast<const T*>(src_base + so[j] + i * src_step);
        Op()(o, v);
      };
      if (dim_inner) {
        for (int64_t j = 0; j < m; ++j)
          for (int64_t i = 0; i < nd; ++i) one(j, i);
      } else {
        for (int64_t i = 0; i < nd; ++i)
          for (int64_t j = 0; j < m; ++j) one(j, i);
      }
    }
  });
}

// Whether a scatter along dim 0 is row by row: out and src contiguous, the index
// the same along every other dim (an expanded 1-D index, as index_select's and
// embedding's gradients give) over whole rows of out.
bool scatters_rows(const Tensor& out, const Tensor& index, const Tensor& src, int64_t d) {
  if (d != 0 || !out.is_contiguous() || !src.is_contiguous() || src.shape() != index.shape()) return false;
  for (int64_t k = 1; k < index.dim(); ++k)
    if (index.strides()[k] != 0 || index.shape()[k] != out.shape()[k]) return false;
  return true;
}

// out[index[i], :] op= src[i, :] in index order; threads split the columns, so
// repeated indices never meet across threads and the loop over a row vectorises.
template <class T, class I, class Op> void scatter_rows(Tensor& out, const Tensor& index, const Tensor& src) {
  const int64_t size = out.shape()[0], nd = index.shape()[0];
  const int64_t width = size ? out.numel() / size : 0;
  T* const o = out.data<T>();
  const T* const v = src.data<T>();
  const I* const idx = index.data<I>();
  const int64_t index_step = index.strides()[0];
  parallel_for(width, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(nd, 1)), [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < nd; ++i) {
      T* row = o + wrapped(static_cast<int64_t>(idx[i * index_step]), size) * width;
      const T* from = v + i * width;
      for (int64_t c = c0; c < c1; ++c) Op()(row[c], from[c]);
    }
  });
}

// inputs: x, index, src (at least index's size). The output starts as x
// (it is x itself for an in-place scatter) and src is written into it.
template <class Op> void scatter_kernel(OpCall& call) {
  const Tensor &x = call.inputs[0], &index = call.inputs[1], &src = call.inputs[2];
  const int64_t d = call.attr<IndexAttrs>().dim;
  Tensor& out = call.out();
  check_indices(call, index, x.shape()[d]);
  if (out.data_ptr() != x.data_ptr()) out.copy_(x);
  if (index.numel() == 0) return;
  auto run = [&](Tensor& target, const Tensor& values, auto ttag) {
    using T = typename decltype(ttag)::type;
    visit_index(index.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      if (scatters_rows(target, index, values, d)) scatter_rows<T, I, Op>(target, index, values);
      else scatter_loop<T, I, Op>(target, index, values, d);
    });
  };
  if constexpr (!std::is_same_v<Op, Assign>) {
    if (out.dtype() == DType::Float16 || out.dtype() == DType::BFloat16) {
      Tensor wide = out.to(DType::Float32);
      run(wide, src.to(DType::Float32), TypeTag<float>{});
      out.copy_(wide);
      return;
    }
    visit_dtype(out.dtype(), [&](auto ttag) { run(out, src, ttag); });
  } else {
    visit_width(out.itemsize(), [&](auto ttag) { run(out, src, ttag); });
  }
}

PF_REGISTER_KERNEL(index_select, CPU, &index_select_kernel);
PF_REGISTER_KERNEL(gather, CPU, &gather_kernel);
void scatter_reduce_kernel(OpCall& call) {
  switch (call.attr<IndexAttrs>().reduce) {
    case kScatterProd: return scatter_kernel<Combine<kernels::Mul>>(call);
    case kScatterAmax: return scatter_kernel<Combine<kernels::Maximum>>(call);
    case kScatterAmin: return scatter_kernel<Combine<kernels::Minimum>>(call);
    default: return scatter_kernel<Combine<kernels::Add>>(call);
  }
}

PF_REGISTER_KERNEL(scatter, CPU, &scatter_kernel<Assign>);
PF_REGISTER_KERNEL(scatter_add, CPU, &scatter_kernel<Combine<kernels::Add>>);
PF_REGISTER_KERNEL(scatter_reduce, CPU, &scatter_reduce_kernel);

}  // namespace
}  // namespace pyflame::cpu
