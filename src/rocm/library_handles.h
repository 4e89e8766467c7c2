#pragma once
// The BLAS and DNN adapters' instances: one per thread and device, made on
// first use and bound to the device's current stream at every get. They live
// as long as the process unless released: destroying library handles during
// exit races the GPU runtime's own teardown (PyTorch keeps its handles too).

#include <unordered_map>

#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"

namespace pyflame::backend::rocm {

template <class Library> class LibraryHandles {
 public:
  static Library& get() {
    int device;
    HIP_CHECK(hipGetDevice(&device));
    Library*& library = instances_[device];
    if (!library) library = new Library();
    library->set_stream(current_stream(device));
    return *library;
  }

  static void release() {
    for (auto& [device, library] : instances_) delete library;
    instances_.clear();
  }

 private:
  static inline thread_local std::unordered_map<int, Library*> instances_;
};

}  // namespace pyflame::backend::rocm
