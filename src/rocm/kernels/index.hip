// GPU index kernels: index_select, gather, scatter, scatter_add, scatter_reduce, with the CPU
// kernels' semantics (src/cpu/index.cpp). As there, every operand is walked
// over one shape with its coalesced layout (Offsets): the indexed tensor is
// seen with stride 0 along `dim`, and the index's value times that dim's real
// stride is added per element; index_select's 1-D index is broadcast over the
// other dims. 64-bit offsets throughout. index_select of contiguous tensors
// (embedding lookups) copies whole rows instead, 16 bytes at a time.
//
// An index outside the dim (after wrapping negatives where IndexAttrs says so)
// is recorded as a kernel error (rocm/kernel_errors.h), raised by the host at
// its next wait, and its element is skipped: never read or written.
//
// scatter moves elements by width; with duplicate positions the surviving
// write is unspecified, as on PyTorch's GPUs. scatter_add sums with atomics:
// float32, float64, int32 and int64 natively; the 8- and 16-bit types (float16
// and bfloat16 included) accumulate in a float32 or int32 copy that is
// converted back once, so each sum is rounded once, as on the CPU.
// scatter_reduce's prod, amax and amin combine with a compare-and-swap loop on
// the 4- or 8-byte word (float32, float64, int32, int64), the narrow types
// through the same wide copy.

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernel_errors.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

// What a kernel needs to check one index: the dim's size, the wrap rule and where to report.
struct IndexCheck {
  int64_t size;
  bool wrap_negative;
  int64_t dim;
  int32_t op;
  KernelErrorSlot slot;

  // The index as a position along the dim, or -1 (after recording the error).
  __device__ int64_t position(int64_t given) const {
    int64_t i = given;
    if (index_in_range(i, size, wrap_negative)) return i;
    record_kernel_error(slot, KernelErrorCode::IndexOutOfRange, op, given, size, dim);
    return -1;
  }
};

template <class I> __device__ int64_t load_index(const char* p) {
  return static_cast<int64_t>(*reinterpret_cast<const I*>(p));
}

// out[i] = src[i + position(index[i]) * step]: index_select and gather.
template <class T, class I>
static __global__ void gather_kernel(char* out, const char* src, const char* index, Offsets<3> offsets, int64_t n,
                                     int64_t step, IndexCheck check) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[3];
    offsets.at(i, off);
    const int64_t at = check.position(load_index<I>(index + off[2]));
    if (at < 0) continue;
    *reinterpret_cast<T*>(out + off[0]) = *reinterpret_cast<const T*>(src + off[1] + at * step);
  }
}

// gather on contiguous tensors: out and index seen as [outer, n, inner], src
// as [outer, size, inner]. The position arithmetic runs in Idx, 32-bit where
// every element count fits (a 64-bit division costs several times a 32-bit
// one). kGroup: each thread takes four consecutive outputs that share their
// (outer, n) row or, for inner == 1, their outer row (inner % 4 == 0, or
// inner == 1 and n % 4 == 0), so one division serves four and the output is
// stored in one access.
template <class T, class I, class Idx, bool kGroup>
static __global__ void gather_contiguous_kernel(T* out, const T* src, const I* index, Idx total, Idx n, Idx inner,
                                                Idx size, IndexCheck check) {
  constexpr Idx kStep = kGroup ? 4 : 1;
  for (Idx i = (blockIdx.x * blockDim.x + threadIdx.x) * kStep; i < total; i += gridDim.x * blockDim.x * kStep) {
    const Idx rows = i / inner, k = i - rows * inner, o = rows / n;
    Vec<T, kStep> v;
#pragma unroll
    for (Idx j = 0; j < kStep; ++j) {
      const int64_t at = check.position(static_cast<int64_t>(index[i + j]));
      const Idx kj = inner == 1 ? 0 : k + j;
      v.v[j] = at < 0 ? out[i + j] : src[(o * size + static_cast<Idx>(at)) * inner + kj];
    }
    *reinterpret_cast<Vec<T, kStep>*>(out + i) = v;
  }
}

// index_select of contiguous rows: src seen as [outer, size, row], out as
// [outer, n, row] with out[o, r] = src[o, position(index[r])]; a block copies
// whole rows in units U (16 bytes where rows and pointers allow).
template <class U, class I>
static __global__ void select_rows_kernel(U* out, const U* src, const char* index, int64_t index_stride,
                                          int64_t outer, int64_t n, int64_t size, int64_t row, IndexCheck check) {
  for (int64_t item = blockIdx.x; item < outer * n; item += gridDim.x) {
    const int64_t o = item / n, r = item % n;
    const int64_t at = check.position(load_index<I>(index + r * index_stride));
    if (at < 0) continue;
    const U* from = src + (o * size + at) * row;
    U* to = out + item * row;
    for (int64_t i = threadIdx.x; i < row; i += blockDim.x) to[i] = from[i];
  }
}

// How a scatter writes: a plain store, an atomic add, or a functor of
// kernels/functors.h applied atomically.
enum class Write { Store, Add, Mul, Max, Min };

// *dst = F(*dst, v) atomically, for 4- and 8-byte T: compare-and-swap on the word.
template <template <class> class F, class T> __device__ void atomic_combine(T* dst, T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_combine works on 4- and 8-byte words");
  using U = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
  U* word = reinterpret_cast<U*>(dst);
  U old = *word, assumed;
  do {
    assumed = old;
    T current;
    memcpy(&current, &assumed, sizeof(T));
    const T next = F<T>()(current, v);
    U bits;
    memcpy(&bits, &next, sizeof(T));
    if (bits == assumed) return;
    old = atomicCAS(word, assumed, bits);
  } while (old != assumed);
}

// out[i + position(index[i]) * step] = src[i], or combined with it (Write).
template <class T, class I, Write kWrite>
static __global__ void scatter_kernel(char* out, const char* index, const char* src, Offsets<3> offsets, int64_t n,
                                      int64_t step, IndexCheck check) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[3];
    offsets.at(i, off);
    const int64_t at = check.position(load_index<I>(index + off[1]));
    if (at < 0) continue;
    T* dst = reinterpret_cast<T*>(out + off[0] + at * step);
    const T v = *reinterpret_cast<const T*>(src + off[2]);
    if constexpr (kWrite == Write::Add) {
      if constexpr (std::is_same_v<T, int64_t>) {
        atomicAdd(reinterpret_cast<unsigned long long*>(dst), static_cast<unsigned long long>(v));
      } else {
        atomicAdd(dst, v);
      }
    } else if constexpr (kWrite == Write::Mul) {
      atomic_combine<kernels::Mul>(dst, v);
    } else if constexpr (kWrite == Write::Max) {
      atomic_combine<kernels::Maximum>(dst, v);
    } else if constexpr (kWrite == Write::Min) {
      atomic_combine<kernels::Minimum>(dst, v);
    } else {
      *dst = v;
    }
  }
}

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

// `t` seen with `shape` (no larger than t's outside `dim`) and stride 0 along `dim`.
Tensor pinned_along(const Tensor& t, const Shape& shape, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return t.as_strided(shape, strides, t.offset());
}

IndexCheck make_check(const OpCall& call, int64_t size, int device) {
  const IndexAttrs& a = call.attr<IndexAttrs>();
  return {size, a.wrap_negative, a.dim, static_cast<int32_t>(call.op), kernel_error_slot(device)};
}

std::string describe(const OpCall& call) {
  std::string s = "shapes";
  for (const Tensor& t : call.inputs) s += " " + detail::to_piece(t.shape());
  return s + " along dim " + std::to_string(call.attr<IndexAttrs>().dim) + " (" + dtype_name(call.out().dtype()) + ")";
}

// out = src gathered along dim by `index` (already of out's shape, stride 0 where it repeats).
void launch_gather(const OpCall& call, Tensor& out, const Tensor& src, const Tensor& index) {
  const int device = out.device().index;
  const int64_t d = call.attr<IndexAttrs>().dim, n = out.numel();
  const Tensor pinned = pinned_along(src, out.shape(), d);
  const Offsets<3> offsets = make_offsets<3>({&out, &pinned, &index}, op_name(call.op));
  const IndexCheck check = make_check(call, src.shape()[d], device);
  const int64_t step = src.strides()[d] * static_cast<int64_t>(src.itemsize());
  visit_width(out.itemsize(), [&](auto wtag) {
    using T = typename decltype(wtag)::type;
    visit_index(index.dtype(), [&](auto itag) {
      gather_kernel<T, typename decltype(itag)::type><<<grid_for(n), kThreads, 0, current_stream(device)>>>(
          static_cast<char*>(out.data_ptr()), static_cast<const char*>(src.data_ptr()),
          static_cast<const char*>(index.data_ptr()), offsets, n, step, check);
    });
  });
  check_launch(op_name(call.op), describe(call));
}

// index_select on contiguous tensors: whole rows after `dim` copied at once
// (an embedding lookup is one row per index).
void launch_select_rows(const OpCall& call, Tensor& out, const Tensor& src, const Tensor& index) {
  const int device = out.device().index;
  const int64_t d = call.attr<IndexAttrs>().dim, n = index.numel();
  int64_t outer = 1, row_bytes = static_cast<int64_t>(src.itemsize());
  for (int64_t i = 0; i < d; ++i) outer *= src.shape()[i];
  for (int64_t i = d + 1; i < src.dim(); ++i) row_bytes *= src.shape()[i];
  const IndexCheck check = make_check(call, src.shape()[d], device);
  const int64_t index_stride = index.strides()[0] * static_cast<int64_t>(index.itemsize());
  if (outer * n == 0 || row_bytes == 0) return;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(outer * n, int64_t{1} << 20));
  auto launch = [&](auto utag) {
    using U = typename decltype(utag)::type;
    const int64_t row = row_bytes / static_cast<int64_t>(sizeof(U));
    // As many threads as the row has units, in whole warps: a 768-float row is 192 16-byte units,
    // and a block of 256 left a quarter of its threads idle (GPT-2's token embedding: 0.82x PyTorch).
    const int warp = warp_size(device);
    const unsigned threads = static_cast<unsigned>(std::clamp<int64_t>((row + warp - 1) / warp * warp, warp, kThreads));
    visit_index(index.dtype(), [&](auto itag) {
      select_rows_kernel<U, typename decltype(itag)::type><<<grid, threads, 0, current_stream(device)>>>(
          static_cast<U*>(out.data_ptr()), static_cast<const U*>(src.data_ptr()),
          static_cast<const char*>(index.data_ptr()), index_stride, outer, n, src.shape()[d], row, check);
    });
  };
  if (row_bytes % 16 == 0 && aligned(out.data_ptr(), 16) && aligned(src.data_ptr(), 16))
    launch(TypeTag<Vec<uint32_t, 4>>{});
  else
    visit_width(src.itemsize(), launch);
  check_launch(op_name(call.op), describe(call));
}

// inputs: x, index (1-D).
void index_select_entry(OpCall& call) {
  DeviceGuard guard(call.out().device().index);
  const Tensor& index = call.inputs[1];
  const int64_t d = call.attr<IndexAttrs>().dim;
  if (call.inputs[0].is_contiguous() && call.out().is_contiguous())
    return launch_select_rows(call, call.out(), call.inputs[0], index);
  const Shape& shape = call.out().shape();
  Shape index_strides(shape.size(), 0);
  index_strides[d] = index.strides()[0];
  launch_gather(call, call.out(), call.inputs[0], index.as_strided(shape, index_strides, index.offset()));
}

void launch_gather_contiguous(const OpCall& call, Tensor& out, const Tensor& src, const Tensor& index) {
  const int device = out.device().index;
  const int64_t d = call.attr<IndexAttrs>().dim, total = out.numel();
  int64_t inner = 1;
  for (int64_t i = d + 1; i < out.dim(); ++i) inner *= out.shape()[i];
  const IndexCheck check = make_check(call, src.shape()[d], device);
  // Below 2^31 elements, i plus the grid-stride step (at most 2^28) cannot wrap around 2^32.
  const bool narrow = total < (int64_t{1} << 31) && src.numel() < (int64_t{1} << 31);
  visit_width(out.itemsize(), [&](auto wtag) {
    using T = typename decltype(wtag)::type;
    visit_index(index.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      auto run = [&](auto idx_tag, auto group_tag) {
        using Idx = typename decltype(idx_tag)::type;
        constexpr bool kGroup = decltype(group_tag)::value;
        gather_contiguous_kernel<T, I, Idx, kGroup><<<grid_for(kGroup ? total / 4 : total), kThreads, 0,
                                                      current_stream(device)>>>(
            static_cast<T*>(out.data_ptr()), static_cast<const T*>(src.data_ptr()),
            static_cast<const I*>(index.data_ptr()), static_cast<Idx>(total), static_cast<Idx>(out.shape()[d]),
            static_cast<Idx>(inner), static_cast<Idx>(src.shape()[d]), check);
      };
      const bool group = (inner % 4 == 0 || (inner == 1 && out.shape()[d] % 4 == 0)) &&
                         aligned(out.data_ptr(), sizeof(T) * 4);
      if (narrow && group) run(TypeTag<uint32_t>{}, std::true_type());
      else if (narrow) run(TypeTag<uint32_t>{}, std::false_type());
      else if (group) run(TypeTag<uint64_t>{}, std::true_type());
      else run(TypeTag<uint64_t>{}, std::false_type());
    });
  });
  check_launch(op_name(call.op), describe(call));
}

// inputs: x, index (the output's shape).
void gather_entry(OpCall& call) {
  DeviceGuard guard(call.out().device().index);
  const Tensor &src = call.inputs[0], &index = call.inputs[1];
  Tensor& out = call.out();
  // src may be larger than index outside dim: contiguous rows then have other lengths.
  bool same_rows = src.dim() == index.dim();
  for (int64_t i = 0; same_rows && i < src.dim(); ++i)
    same_rows = i == call.attr<IndexAttrs>().dim || src.shape()[i] == index.shape()[i];
  if (out.numel() > 0 && same_rows && src.is_contiguous() && index.is_contiguous() && out.is_contiguous())
    return launch_gather_contiguous(call, out, src, index);
  launch_gather(call, out, src, index);
}

template <Write kWrite> void launch_scatter(const OpCall& call, Tensor& out, const Tensor& index, const Tensor& src) {
  const int device = out.device().index;
  const int64_t d = call.attr<IndexAttrs>().dim, n = index.numel();
  const Tensor pinned = pinned_along(out, index.shape(), d);
  const Tensor values = src.as_strided(index.shape(), src.strides(), src.offset());  // src may be larger
  const Offsets<3> offsets = make_offsets<3>({&pinned, &index, &values}, op_name(call.op));
  const IndexCheck check = make_check(call, out.shape()[d], device);
  const int64_t step = out.strides()[d] * static_cast<int64_t>(out.itemsize());
  auto launch = [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    visit_index(index.dtype(), [&](auto itag) {
      scatter_kernel<T, typename decltype(itag)::type, kWrite><<<grid_for(n), kThreads, 0, current_stream(device)>>>(
          static_cast<char*>(out.data_ptr()), static_cast<const char*>(index.data_ptr()),
          static_cast<const char*>(values.data_ptr()), offsets, n, step, check);
    });
  };
  if constexpr (kWrite != Write::Store) {
    switch (out.dtype()) {
      case DType::Float32: launch(TypeTag<float>{}); break;
      case DType::Float64: launch(TypeTag<double>{}); break;
      case DType::Int32: launch(TypeTag<int32_t>{}); break;
      case DType::Int64: launch(TypeTag<int64_t>{}); break;
      default: throw NotSupportedError(detail::cat(op_name(call.op), ": no GPU atomic for ", out.dtype()));
    }
  } else {
    visit_width(out.itemsize(), launch);
  }
  check_launch(op_name(call.op), describe(call));
}

// inputs: x, index, src. The output starts as x (it is x for an in-place scatter).
template <Write kWrite> void scatter_entry(OpCall& call) {
  DeviceGuard guard(call.out().device().index);
  const Tensor &x = call.inputs[0], &index = call.inputs[1], &src = call.inputs[2];
  Tensor& out = call.out();
  if (out.data_ptr() != x.data_ptr()) out.copy_(x);
  if (index.numel() == 0) return;
  const DType dt = out.dtype();
  const bool native = kWrite == Write::Store || dt == DType::Float32 || dt == DType::Float64 || dt == DType::Int32 ||
                      dt == DType::Int64;
  if (native) {
    launch_scatter<kWrite>(call, out, index, src);
    return;
  }
  // Narrow types: combined in a float32 (floats) or int32 (integers, bool) copy, converted back once.
  const DType wide_type = is_floating(dt) ? DType::Float32 : DType::Int32;
  Tensor wide = out.to(wide_type);
  launch_scatter<kWrite>(call, wide, index, src.to(wide_type));
  out.copy_(wide);
}

void scatter_reduce_entry(OpCall& call) {
  switch (call.attr<IndexAttrs>().reduce) {
    case kScatterProd: return scatter_entry<Write::Mul>(call);
    case kScatterAmax: return scatter_entry<Write::Max>(call);
    case kScatterAmin: return scatter_entry<Write::Min>(call);
    default: return scatter_entry<Write::Add>(call);
  }
}

PF_REGISTER_KERNEL(index_select, ROCm, &index_select_entry);
PF_REGISTER_KERNEL(gather, ROCm, &gather_entry);
PF_REGISTER_KERNEL(scatter, ROCm, &scatter_entry<Write::Store>);
PF_REGISTER_KERNEL(scatter_add, ROCm, &scatter_entry<Write::Add>);
PF_REGISTER_KERNEL(scatter_reduce, ROCm, &scatter_reduce_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
