#pragma once
// Tensor: a strided view (shape, strides in elements, offset) onto a
// reference-counted Storage. Views share the storage; ops allocate fresh,
// contiguous outputs. Indexing math is 64-bit throughout.
//
// The methods below are the raw building blocks that the op layer and the
// kernels use: they call kernels directly and are never recorded by autograd
// or graph capture. The public ops (pyflame/ops.h: transpose, copy_, to, ...)
// go through apply().

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pyflame/device.h"
#include "pyflame/dtype.h"
#include "pyflame/macros.h"

namespace pyflame {

using Shape = std::vector<int64_t>;

// A block of memory on one device, freed by its deleter when the last view goes.
class PF_API Storage {
 public:
  using Deleter = std::function<void(void*)>;
  Storage(void* data, size_t nbytes, Device device, Deleter deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // Allocates on `device` through that device's allocator.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Bumped by every in-place op writing this memory: autograd's check that a
  // tensor saved for backward still holds the values it saved.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // Storages are numbered as they are made: a graph trace tells the memory that
  // existed before it (parameters) from memory the traced code made.
  uint64_t serial() const { return serial_; }
  static uint64_t next_serial();
  // Bumped when a tensor viewing this memory is given other data (Tensor::set_data,
  // `p.data = ...`): a traced graph that kept the old tensor no longer reads what
  // its source reads now (ir::graph_applies).
  uint64_t rebinds() const { return rebinds_; }
  void note_rebound() { ++rebinds_; }

 private:
  uint64_t version_ = 0;
  uint64_t rebinds_ = 0;
  uint64_t serial_;
  void* data_;
  size_t nbytes_;
  Device device_;
  Deleter deleter_;
};

// A Python number (or C++ literal) taking part in an op. Like PyTorch's wrapped
// numbers it only decides the result's category, never its width: int32 + 2.5
// is float32, float16 * 3 is float16.
struct PF_API Scalar {
  enum class Kind : int8_t { Bool, Int, Float };
  Kind kind = Kind::Float;
  double f = 0;
  int64_t i = 0;

  Scalar() = default;
  Scalar(double v) : kind(Kind::Float), f(v), i(static_cast<int64_t>(v)) {}
  Scalar(float v) : Scalar(static_cast<double>(v)) {}
  Scalar(int64_t v) : kind(Kind::Int), f(static_cast<double>(v)), i(v) {}
  Scalar(int v) : Scalar(static_cast<int64_t>(v)) {}
  Scalar(bool v) : kind(Kind::Bool), f(v), i(v) {}
  DType dtype() const;  // bool, int64 or float32 (the default float)
  // Same kind and value (NaN equals NaN: equal scalars make equal op calls).
  bool operator==(const Scalar& o) const {
    return kind == o.kind && i == o.i && (f == o.f || (f != f && o.f != o.f));
  }
};

struct AutogradMeta;
namespace autograd {
class Node;
}

class PF_API Tensor {
 public:
  Tensor() = default;  // undefined; defined() is false
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);

  // Uninitialised, contiguous, on `device` (default: the current device).
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32);
  static Tensor empty(const Shape& shape, DType dtype, Device device);
  // A 0-d CPU tensor holding `s`, marked as a wrapped number for promotion.
  static Tensor scalar(Scalar s);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  DType dtype() const { return dtype_; }
  size_t itemsize() const { return pyflame::itemsize(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  Device device() const { return storage_->device(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  void* data_ptr() const;  // address of element [0, ..., 0]
  template <class T> T* data() const { return static_cast<T*>(data_ptr()); }
  bool is_contiguous() const;
  bool is_wrapped_number() const { return wrapped_number_; }
  // Placed: put on its device by the user (device=, .to(device), Module.to) or the result of an
  // op with a placed input. An op with a placed input runs on that input's device; an op whose
  // inputs are all unplaced runs on the current device (DESIGN.md, execution model). A property
  // of this tensor object, not of its memory: x.to(x.device) places the result, not x.
  bool is_placed() const { return placed_; }
  Tensor& set_placed(bool placed) {
    placed_ = placed;
    return *this;
  }
  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }

  // Views (no copies). Dims may be negative.
  Tensor view(Shape shape) const;      // needs compatible strides, else ValueError
  // The same bytes read as `dtype` (PyTorch's view(dtype)): the last dim scales by the ratio
  // of the element sizes (it must then have stride 1); no history, as torch.
  // (A name of its own: view({}) must stay the 0-d view, not a view as DType 0.)
  Tensor view_dtype(DType dtype) const;
  Tensor reshape(Shape shape) const;   // a view when possible, else a copy; -1 infers
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size; new leading dims allowed
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, int64_t start, int64_t stop, int64_t step) const;  // Python slice semantics, step > 0
  // Windows of `size` elements `step` apart along dim, as a new last dim (overlapping when step < size).
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;
  Tensor as_strided(Shape shape, Shape strides, int64_t offset) const;

  // Copies.
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;    // self when the dtype already matches
  Tensor to(Device device) const;  // self when already there
  // A copy in page-locked host memory (self when already pinned): copies from
  // it to a GPU run without staging and without the host waiting. Needs a
  // usable GPU backend (NotSupportedError otherwise); CPU tensors only.
  Tensor pin_memory() const;
  bool is_pinned() const;
  // Writes src (broadcast, converted) into this tensor's elements, in place.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(Scalar value);

  // The value of a one-element tensor, as a bool, int64 or double Scalar; waits for the device.
  Scalar item() const;

  std::string to_string() const;  // "Tensor(shape=[2, 3], dtype=float32, device=cpu)"

  // Autograd (pyflame/autograd.h). Copies of a Tensor share this state.
  bool requires_grad() const;  // a leaf marked so, or a result recorded from one
  // Leaves only; floating dtypes only (AutogradError otherwise, as PyTorch).
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  Tensor grad() const;  // undefined until a backward reaches this tensor
  void set_grad(const Tensor& grad);
  void retain_grad();  // keep .grad of a non-leaf
  bool retains_grad() const;
  // Calls `hook` with every gradient computed for this tensor, before it flows on (or, for a
  // leaf, before it accumulates into .grad); a defined result replaces the gradient. Returns
  // an id for remove_hook. PyTorch's Tensor.register_hook.
  uint64_t register_hook(std::function<Tensor(const Tensor&)> hook);
  // A leaf's: calls `hook` with .grad each time a backward has accumulated into it (its
  // result is ignored). DistributedDataParallel starts a bucket's all-reduce from it, as
  // PyTorch's register_post_accumulate_grad_hook. Returns an id for remove_hook.
  uint64_t register_grad_accumulated_hook(std::function<Tensor(const Tensor&)> hook);
  void remove_hook(uint64_t id);
  Tensor detach() const;  // the same memory, no history, not requiring grad
  // x.data = y: this tensor takes y's memory, view, dtype and placement and keeps its own
  // autograd state (requires_grad, grad), as PyTorch's set_data.
  void set_data(const Tensor& other);
  AutogradMeta* autograd_meta() const { return autograd_.get(); }
  AutogradMeta& ensure_autograd_meta();  // creates the state shared with the copies made after this call
  const std::shared_ptr<AutogradMeta>& autograd_meta_ptr() const { return autograd_; }

 private:
  std::shared_ptr<AutogradMeta> autograd_;
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::Float32;
  bool wrapped_number_ = false;
  bool placed_ = false;
};

PF_API int64_t shape_numel(const Shape& shape);
PF_API Shape contiguous_strides(const Shape& shape);
// NumPy broadcasting; ValueError naming `op` and both shapes on mismatch.
PF_API Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Normalises a possibly negative dim for a tensor of `ndim` dims; IndexError if out of range.
PF_API int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op = "");

}  // namespace pyflame
