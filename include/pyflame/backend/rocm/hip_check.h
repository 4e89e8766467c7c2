#pragma once
// Status checks for the ROCm backend (seed 000's HIP_CHECK). A failed call
// raises the exception of its meaning (out of memory -> ROCmMemoryError,
// bad device -> DeviceError, no driver/device -> ROCmNotAvailableError, else
// ROCmError) with the call, file and line in the message.

#include <string>
#include <type_traits>

#include "pyflame/backend/rocm/hip_compat.h"
#include "pyflame/error.h"

namespace pyflame::backend::rocm {

[[noreturn]] PF_API void throw_hip_error(hipError_t err, const char* call, const char* file, int line);

inline void check_hip(hipError_t err, const char* call, const char* file, int line) {
  if (err != hipSuccess) throw_hip_error(err, call, file, line);
}

// After a kernel launch: a launch error names the op and what it was run on.
PF_API void check_launch(const char* op, const std::string& what);

// The same, describing what it was run on (describe() -> std::string) only when
// the launch failed: for kernels of every call of an op that is itself cheap,
// where building the description would cost more than checking.
template <class Describe, class = std::enable_if_t<std::is_invocable_r_v<std::string, const Describe&>>>
void check_launch(const char* op, const Describe& describe) {
  if (hipPeekAtLastError() != hipSuccess) check_launch(op, describe());
}

}  // namespace pyflame::backend::rocm

#define HIP_CHECK(call) ::pyflame::backend::rocm::check_hip((call), #call, __FILE__, __LINE__)
