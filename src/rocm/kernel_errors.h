#pragma once
// The GPU side of kernel errors (kernels/kernel_error.h). Each device has one
// KernelError record in mapped (page-locked, device-visible) host memory and
// one claim flag in device memory. The first failing thread claims the flag
// with an atomic, writes the record and fences; every failing thread skips its
// element, so a bad index is never dereferenced and nothing traps. The host
// reads the record only after it has waited for the device (its writes are
// then visible), raises the CPU's exception and clears both, so the next op
// runs normally.

#include <cstdint>

#include "kernels/kernel_error.h"
#include "pyflame/backend/rocm/hip_compat.h"

namespace pyflame::backend::rocm {

struct KernelErrorSlot {
  KernelError* record;  // mapped host memory, written by the device
  int32_t* claimed;     // device memory: 0 until an error claims the record
};

// The slot of `device` (made on first use); pass it to kernels by value.
KernelErrorSlot kernel_error_slot(int device);

// After the host waited for `device`: raises the recorded error, if any, and clears it.
void raise_pending_kernel_error(int device);

#if defined(__HIPCC__) || defined(__CUDACC__)
__device__ inline void record_kernel_error(const KernelErrorSlot& slot, KernelErrorCode code, int32_t op,
                                           int64_t value, int64_t bound, int64_t dim) {
  if (atomicCAS(slot.claimed, 0, 1) != 0) return;  // an earlier error is reported
  slot.record->op = op;
  slot.record->value = value;
  slot.record->bound = bound;
  slot.record->dim = dim;
  __threadfence_system();  // the fields before the code: a set code means a whole record
  slot.record->code = static_cast<int32_t>(code);
  __threadfence_system();
}
#endif

}  // namespace pyflame::backend::rocm
