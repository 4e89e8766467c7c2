// CPU index kernels: index_select, gather, scatter, scatter_add. Each is one
// strided loop (for_each_strided, as elementwise ops) over the shape of the
// output (index_select, gather) or of the index (scatter), in which the
// indexed tensor is seen through a view whose stride along `dim` is 0: the
// body adds index * (its real stride) to reach the element. index_select is a
// gather whose index is broadcast over the other dims, so runs that share
// one index are contiguous copies. The op layer has range-checked the index.
// Moves go by element width only, so one instantiation serves every dtype of
// a size; scatter_add adds in its dtype (the op layer widens float16 and
// bfloat16 to float32 first, so that each sum is rounded once).

#include <cstring>

#include "core/dispatch.h"
#include "cpu/loops.h"

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

// `t` seen with `shape` (no larger than t's outside `dim`) and stride 0 along `dim`.
Tensor pinned_along(const Tensor& t, const Shape& shape, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return t.as_strided(shape, strides, t.offset());
}

// out[i] = src[i + index[i] * step] over out's shape; step in bytes.
void gather_into(Tensor& out, const Tensor& src, const Tensor& index, int64_t step) {
  visit_width(out.itemsize(), [&](auto wtag) {
    using T = typename decltype(wtag)::type;
    visit_index(index.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      for_each_strided<3>({&out, &src, &index}, [&](auto p, auto s, int64_t n) {
        if (s[2] == 0) {  // one index for the whole run
          const char* from = p[1] + index_at<I>(p[2]) * step;
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
              *reinterpret_cast<const T*>(p[1] + i * s[1] + index_at<I>(p[2] + i * s[2]) * step);
      });
    });
  });
}

// inputs: x, index (1-D).
void index_select_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const int64_t d = call.attrs.dim;
  const Shape& shape = call.out.shape();
  Shape index_strides(shape.size(), 0);
  index_strides[d] = index.strides()[0];
  gather_into(call.out, pinned_along(x, shape, d), index.as_strided(shape, index_strides, index.offset()),
              x.strides()[d] * static_cast<int64_t>(x.itemsize()));
}

// inputs: x, index (the output's shape).
void gather_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const int64_t d = call.attrs.dim;
  gather_into(call.out, pinned_along(x, index.shape(), d), index, x.strides()[d] * static_cast<int64_t>(x.itemsize()));
}

// inputs: index, src; out holds the input's values and is written in place.
// Elements that differ only along `dim` may land on the same place, so `dim`
// is made the innermost loop and its runs are never split between threads:
// each place then sees its writes in index order, the last one winning.
template <bool kAdd> void scatter_kernel(OpCall& call) {
  const Tensor& index = call.inputs[0];
  const Tensor& src = call.inputs[1];
  const int64_t d = call.attrs.dim;
  std::vector<int64_t> order;
  for (int64_t k = 0; k < index.dim(); ++k)
    if (k != d) order.push_back(k);
  order.push_back(d);
  const Tensor idx = index.permute(order);
  const Tensor from = src.as_strided(index.shape(), src.strides(), src.offset()).permute(order);
  const Tensor to = pinned_along(call.out, index.shape(), d).permute(order);
  const int64_t step = call.out.strides()[d] * static_cast<int64_t>(call.out.itemsize());
  const bool split_runs = index.shape()[d] <= 1;
  auto run = [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    visit_index(index.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      for_each_strided<3>({&to, &from, &idx}, [&](auto p, auto s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          T& o = *reinterpret_cast<T*>(p[0] + i * s[0] + index_at<I>(p[2] + i * s[2]) * step);
          const T v = *reinterpret_cast<const T*>(p[1] + i * s[1]);
          if constexpr (kAdd) o = static_cast<T>(static_cast<acc_t<T>>(o) + static_cast<acc_t<T>>(v));
          else o = v;
        }
      }, split_runs);
    });
  };
  if constexpr (kAdd) visit_dtype(call.out.dtype(), run);
  else visit_width(call.out.itemsize(), run);
}

PF_REGISTER_KERNEL(index_select, CPU, &index_select_kernel);
PF_REGISTER_KERNEL(gather, CPU, &gather_kernel);
PF_REGISTER_KERNEL(scatter, CPU, &scatter_kernel<false>);
PF_REGISTER_KERNEL(scatter_add, CPU, &scatter_kernel<true>);

}  // namespace
}  // namespace pyflame::cpu
