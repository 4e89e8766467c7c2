#include "pyflame/tensor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/thread_state.h"
#include "kernels/convert.h"
#include "pyflame/error.h"

namespace pyflame {

// ---------------------------------------------------------------- Storage

namespace {
std::atomic<uint64_t> g_storage_serial{0};
}

Storage::Storage(void* data, size_t nbytes, Device device, Deleter deleter)
    : serial_(g_storage_serial.fetch_add(1, std::memory_order_relaxed)),
      data_(data),
      nbytes_(nbytes),
      device_(device),
      deleter_(std::move(deleter)) {}

uint64_t Storage::next_serial() { return g_storage_serial.load(std::memory_order_relaxed); }

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  DeviceBackend* be = backend_for(device.type);
  if (!be) throw ROCmNotAvailableError("cannot allocate on '" + to_string(device) + "': " + rocm_unavailable_reason());
  void* p = be->allocate(nbytes, device.index);
  int index = device.index;
  return std::make_shared<Storage>(p, nbytes, device, [be, index](void* q) { be->deallocate(q, index); });
}

DType Scalar::dtype() const {
  switch (kind) {
    case Kind::Bool: return DType::Bool;
    case Kind::Int: return DType::Int64;
    case Kind::Float: break;
  }
  return default_float();
}

// ---------------------------------------------------------------- shapes

// A count that would wrap around raises: a wrapped count allocates a wrong
// (often empty) buffer for a tensor that claims the full shape. Dims of 0
// count as 1 for the check, as PyTorch's: the contiguous strides multiply
// the other dims even when the tensor is empty.
int64_t shape_numel(const Shape& shape) {
  int64_t n = 1, span = 1;
  bool overflow = false;
  for (int64_t s : shape) {
    (void)__builtin_mul_overflow(n, s, &n);  // wraps without UB; the span check below catches it
    overflow = __builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span) || overflow;
  }
  PF_CHECK(!overflow, ValueError, "a tensor of shape ", shape, " would have more elements than int64 can count");
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    PF_CHECK(da == db || da == 1 || db == 1, ValueError, op, ": shapes ", a, " and ", b,
             " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  PF_CHECK(dim >= -n && dim < n, IndexError, op, *op ? ": " : "", "dimension ", dim,
           " is out of range for a tensor of ", ndim, " dimension(s) (expected in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

namespace {
void check_shape(const Shape& shape, const char* what) {
  for (int64_t s : shape) PF_CHECK(s >= 0, ValueError, what, ": negative dimension in shape ", shape);
}

// Replaces one -1 by the size that keeps numel; ValueError if impossible.
Shape infer_shape(Shape shape, int64_t numel, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      PF_CHECK(infer < 0, ValueError, op, ": only one dimension can be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      PF_CHECK(shape[i] >= 0, ValueError, op, ": invalid size ", shape[i], " in shape ", shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    PF_CHECK(known != 0 && numel % known == 0, ValueError, op, ": shape ", shape,
             " is invalid for a tensor of ", numel, " elements");
    shape[infer] = numel / known;
  }
  PF_CHECK(shape_numel(shape) == numel, ValueError, op, ": shape ", shape, " is invalid for a tensor of ",
           numel, " elements");
  return shape;
}

// Strides that present (shape, strides) as new_shape without copying, if any
// exist: each run of dims that is contiguous in memory may be split or merged.
bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape& out) {
  out.assign(new_shape.size(), 1);
  if (shape.empty()) return true;
  if (shape_numel(shape) == 0) {
    out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

// ---------------------------------------------------------------- Tensor

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)),
      offset_(offset), dtype_(dtype) {
  shape_numel(shape_);  // every tensor, views included: a shape that cannot be counted raises here
}

Tensor Tensor::empty(const Shape& shape, DType dtype) { return empty(shape, dtype, current_device()); }

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_shape(shape, "empty");
  const int64_t numel = shape_numel(shape);
  PF_CHECK(numel <= std::numeric_limits<int64_t>::max() / static_cast<int64_t>(pyflame::itemsize(dtype)), ValueError,
           "a ", dtype, " tensor of shape ", shape, " would need more bytes than int64 can count");
  size_t n = static_cast<size_t>(numel) * pyflame::itemsize(dtype);
  return Tensor(Storage::allocate(n, device), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::scalar(Scalar s) {
  // Stored at full width (float64/int64) so float64 ops lose nothing; promotion
  // counts a float number as the default float (see result_type).
  Tensor t = empty({}, s.kind == Scalar::Kind::Float ? DType::Float64 : s.dtype(), Device::cpu());
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) *t.data<T>() = s.i != 0;
    else if constexpr (std::is_integral_v<T>) *t.data<T>() = static_cast<T>(s.i);
    else *t.data<T>() = static_cast<T>(s.f);
  });
  t.wrapped_number_ = true;
  return t;
}

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::numel() const { return shape_numel(shape_); }

void* Tensor::data_ptr() const {
  if (tracing_threads.load(std::memory_order_relaxed) != 0) {
    const ThreadState& state = thread_state();
    if (state.tracing && state.apply_depth == 0 && apply_hooks().raw_access) apply_hooks().raw_access(storage_.get());
  }
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(itemsize());
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (shape_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

Tensor Tensor::as_strided(Shape shape, Shape strides, int64_t offset) const {
  Tensor t(storage_, std::move(shape), std::move(strides), offset, dtype_);
  return t;
}

Tensor Tensor::view(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), "view");
  Shape st;
  PF_CHECK(view_strides(shape_, strides_, shape, st), ValueError, "view: shape ", shape,
           " is not compatible with the input's size ", shape_, " and strides ", strides_,
           " (use reshape(), which copies when needed)");
  return as_strided(std::move(shape), std::move(st), offset_);
}

Tensor Tensor::view_dtype(DType dtype) const {
  const int64_t from = static_cast<int64_t>(itemsize()), to = static_cast<int64_t>(pyflame::itemsize(dtype));
  Shape shape = shape_, strides = strides_;
  int64_t offset = offset_;
  if (from != to) {
    const std::string what = detail::cat("to view ", dtype_name(dtype_), " as ", dtype_name(dtype),
                                         " (different element sizes)");
    PF_CHECK(dim() > 0, ValueError, "view: a 0-dim tensor cannot be viewed ", what);
    PF_CHECK(strides.back() == 1, ValueError, "view: stride(-1) must be 1 ", what, ", but got ", strides.back());
    if (from > to) {
      const int64_t ratio = from / to;
      shape.back() *= ratio;
      for (size_t d = 0; d + 1 < strides.size(); ++d) strides[d] *= ratio;
      offset *= ratio;
    } else {
      const int64_t ratio = to / from;
      PF_CHECK(shape.back() % ratio == 0, ValueError, "view: size(-1) must be divisible by ", ratio, " ", what,
               ", but got ", shape.back());
      for (size_t d = 0; d + 1 < strides.size(); ++d)
        PF_CHECK(strides[d] % ratio == 0, ValueError, "view: stride(", d, ") must be divisible by ", ratio, " ",
                 what, ", but got ", strides[d]);
      PF_CHECK(offset % ratio == 0, ValueError, "view: the storage offset must be divisible by ", ratio, " ", what,
               ", but got ", offset);
      shape.back() /= ratio;
      for (size_t d = 0; d + 1 < strides.size(); ++d) strides[d] /= ratio;
      offset /= ratio;
    }
  }
  Tensor t(storage_, std::move(shape), std::move(strides), offset, dtype);
  return t.set_placed(placed_);
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), "reshape");
  Shape st;
  if (view_strides(shape_, strides_, shape, st)) return as_strided(std::move(shape), std::move(st), offset_);
  return contiguous().view(std::move(shape));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  PF_CHECK(start_dim <= end_dim, ValueError, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape s(shape_.begin(), shape_.begin() + start_dim);
  int64_t m = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) m *= shape_[i];
  s.push_back(m);
  s.insert(s.end(), shape_.begin() + end_dim + 1, shape_.end());
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  PF_CHECK(static_cast<int64_t>(dims.size()) == dim(), ValueError, "permute: got ", dims.size(),
           " dims for a tensor of ", dim(), " dimension(s)");
  Shape s(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    PF_CHECK(!seen[d], ValueError, "permute: dimension ", d, " repeats in ", Shape(dims));
    seen[d] = true;
    s[i] = shape_[d];
    st[i] = strides_[d];
  }
  return as_strided(s, st, offset_);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  if (dim() == 0) {
    wrap_dim(dim0, 0, "transpose");
    wrap_dim(dim1, 0, "transpose");
    return *this;
  }
  dim0 = wrap_dim(dim0, dim(), "transpose");
  dim1 = wrap_dim(dim1, dim(), "transpose");
  Shape s = shape_, st = strides_;
  std::swap(s[dim0], s[dim1]);
  std::swap(st[dim0], st[dim1]);
  return as_strided(s, st, offset_);
}

Tensor Tensor::squeeze() const {
  Shape s, st;
  for (size_t i = 0; i < shape_.size(); ++i)
    if (shape_[i] != 1) {
      s.push_back(shape_[i]);
      st.push_back(strides_[i]);
    }
  return as_strided(s, st, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) {
    wrap_dim(d, 0, "squeeze");
    return *this;
  }
  d = wrap_dim(d, dim(), "squeeze");
  if (shape_[d] != 1) return *this;
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return as_strided(s, st, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape_, st = strides_;
  int64_t stride = d < dim() ? shape_[d] * strides_[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return as_strided(s, st, offset_);
}

Tensor Tensor::expand(const Shape& shape) const {
  PF_CHECK(shape.size() >= shape_.size(), ValueError, "expand: target shape ", shape,
           " has fewer dimensions than the tensor's ", shape_);
  size_t lead = shape.size() - shape_.size();
  Shape s(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      PF_CHECK(shape[i] >= 0, ValueError, "expand: size -1 is not allowed for a new leading dimension in ", shape);
      s[i] = shape[i];
      st[i] = 0;
      continue;
    }
    int64_t cur = shape_[i - lead];
    int64_t want = shape[i] == -1 ? cur : shape[i];
    PF_CHECK(want == cur || cur == 1, ValueError, "expand: the tensor's size ", shape_, " cannot be expanded to ",
             shape, " (dimension ", i, ": ", cur, " vs ", want, "; only size-1 dimensions expand)");
    s[i] = want;
    st[i] = want == cur ? strides_[i - lead] : 0;
  }
  return as_strided(s, st, offset_);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  PF_CHECK(dim() > 0, IndexError, "invalid index of a 0-d tensor");
  d = wrap_dim(d, dim(), "select");
  int64_t n = shape_[d];
  PF_CHECK(index >= -n && index < n, IndexError, "index ", index, " is out of bounds for dimension ", d,
           " with size ", n);
  if (index < 0) index += n;
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return as_strided(s, st, offset_ + index * strides_[d]);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t stop, int64_t step) const {
  PF_CHECK(dim() > 0, IndexError, "cannot slice a 0-d tensor");
  d = wrap_dim(d, dim(), "slice");
  PF_CHECK(step > 0, ValueError, "slice step must be positive, got ", step);
  int64_t n = shape_[d];
  auto clampi = [n](int64_t i) { return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n); };
  start = clampi(start);
  stop = clampi(stop);
  int64_t len = stop > start ? (stop - start + step - 1) / step : 0;
  Shape s = shape_, st = strides_;
  s[d] = len;
  st[d] = strides_[d] * step;
  return as_strided(s, st, offset_ + (len > 0 ? start * strides_[d] : 0));
}

Tensor Tensor::unfold(int64_t d, int64_t size, int64_t step) const {
  d = wrap_dim(d, dim(), "unfold");
  const int64_t length = dim() ? shape_[d] : 1, stride = dim() ? strides_[d] : 1;
  PF_CHECK(size >= 0 && size <= length, ValueError, "unfold: maximum size for tensor at dimension ", d, " is ",
           length, " but size is ", size);
  PF_CHECK(step > 0, ValueError, "unfold: step is ", step, " but must be > 0");
  Shape s = shape_, st = strides_;
  if (dim()) {
    s[d] = (length - size) / step + 1;
    st[d] = stride * step;
  }
  s.push_back(size);
  st.push_back(stride);
  return as_strided(s, st, offset_);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype, device());
  // A 0-d host tensor (a Python number on its way into an op, converted to the op's dtype)
  // converts here, as the copy kernel would: dispatching a kernel costs more than the value.
  if (dim() == 0 && device().is_cpu()) {
    visit_dtype(dtype_, [&](auto from) {
      visit_dtype(dtype, [&](auto to) {
        using I = typename decltype(from)::type;
        using O = typename decltype(to)::type;
        *out.data<O>() = kernels::convert<O>(*data<I>());
      });
    });
    return out;
  }
  out.copy_(*this);
  return out;
}

Tensor Tensor::pin_memory() const {
  PF_CHECK(device().is_cpu(), ValueError, "pin_memory: only CPU tensors can be pinned; this one is on '",
           pyflame::to_string(device()), "'");
  if (is_pinned()) return *this;
  DeviceBackend* gpu = backend_for(DeviceType::ROCm);
  void* p = gpu ? gpu->allocate_pinned(nbytes()) : nullptr;
  PF_CHECK(p, NotSupportedError, "pin_memory: page-locked memory needs a usable GPU (", rocm_unavailable_reason(),
           ")");
  auto storage = std::make_shared<Storage>(p, nbytes(), Device::cpu(), [gpu](void* q) { gpu->deallocate_pinned(q); });
  Tensor out(std::move(storage), shape_, contiguous_strides(shape_), 0, dtype_);
  out.copy_(*this);
  return out;
}

bool Tensor::is_pinned() const {
  if (!device().is_cpu()) return false;
  DeviceBackend* gpu = backend_for(DeviceType::ROCm);
  return gpu && gpu->is_pinned(data_ptr());
}

Tensor Tensor::to(Device dst) const {
  Device src = device();
  if (dst == src) return *this;
  Tensor c = contiguous();
  Tensor out = empty(shape_, dtype_, dst);
  size_t n = nbytes();
  if (n == 0) return out;
  if (src.is_cpu()) {
    backend_for(dst.type)->copy_from_host(out.data_ptr(), c.data_ptr(), n, dst.index);
  } else if (dst.is_cpu()) {
    backend_for(src.type)->copy_to_host(out.data_ptr(), c.data_ptr(), n, src.index);
  } else {
    backend_for(dst.type)->copy_between_devices(out.data_ptr(), dst.index, c.data_ptr(), src.index, n);
  }
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  OpCall call{ir::OpType::copy, {src.expand(shape_)}, CopyAttrs{}, {*this}};  // the kernel reads any device
  run_kernel(call, device());
  storage_->bump_version();  // written, as by an in-place op
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  OpCall call{ir::OpType::fill, {}, FillAttrs{value}, {*this}};
  run_kernel(call, device());
  storage_->bump_version();
  return *this;
}

Scalar Tensor::item() const {
  PF_CHECK(numel() == 1, ValueError, "item(): a tensor with ", numel(),
           " elements cannot be converted to a Python number (only 1-element tensors can)");
  Tensor h = to(Device::cpu());
  return visit_dtype(dtype_, [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    T v = *h.data<T>();
    if constexpr (std::is_same_v<T, bool>) return Scalar(v);
    else if constexpr (std::is_integral_v<T>) return Scalar(static_cast<int64_t>(v));
    else return Scalar(static_cast<double>(v));
  });
}

std::string Tensor::to_string() const {
  return "Tensor(shape=" + detail::to_piece(shape_) + ", dtype=" + dtype_name(dtype_) +
         ", device=" + pyflame::to_string(device()) + ")";
}

}  // namespace pyflame
