#pragma once
// What both halves of ROCmDNN use: the convolutions of the op table (dnn.cpp)
// and the spec's other DNN entry points (dnn_api.cpp): shapes in messages,
// the library's dtype, scratch memory and descriptors owned by a scope.

#include <string>
#include <utility>
#include <vector>

#include "pyflame/backend/rocm/dnn.h"
#include "pyflame/backend/rocm/memory.h"

// A library call for problem `p`: a failure names the op, its shapes and the call.
#define DNN_CHECK_FOR(p, call) (p).check((call), #call, __FILE__, __LINE__)

namespace pyflame::backend::rocm {

inline std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) {
    if (!s.empty()) s += 'x';
    s += std::to_string(x);
  }
  return s;
}

inline std::string join(const std::vector<int>& v) { return join(std::vector<int64_t>(v.begin(), v.end())); }

inline miopenDataType_t dnn_type(DType d) {
  switch (d) {
    case DType::Float16: return miopenHalf;
    case DType::BFloat16: return miopenBFloat16;
    case DType::Float64: return miopenDouble;
    default: return miopenFloat;
  }
}

// Scratch device memory for one call, returned to the cache in stream order.
class Scratch {
 public:
  Scratch(int device, hipStream_t stream, size_t bytes) : device_(device), stream_(stream) {
    if (bytes) ptr_ = get_memory_manager(device).allocate_async(bytes, stream);
  }
  ~Scratch() {
    if (ptr_) get_memory_manager(device_).deallocate_async(ptr_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }

 private:
  int device_;
  hipStream_t stream_;
  void* ptr_ = nullptr;
};

// A library descriptor owned by a scope: destroyed when it ends, also when a
// later step throws. out() receives it from the (checked) create call.
template <class D, auto destroy> class Descriptor {
 public:
  Descriptor() = default;
  ~Descriptor() {
    if (d_) (void)destroy(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor(Descriptor&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(d_, other.d_);
    return *this;
  }
  D* out() { return &d_; }
  operator D() const { return d_; }

 private:
  D d_ = nullptr;
};

}  // namespace pyflame::backend::rocm
