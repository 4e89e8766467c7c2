#pragma once
// Errors that only a kernel can see: a value out of range (an index past the
// end, a class target past the number of classes), an integer divisor of zero. Reading values on the host
// to check them first would make every indexing op wait for the GPU, so the
// kernel checks as it goes, skips the bad element and records the first error
// here; the CPU kernels raise it at once, and the GPU backend raises it at the
// host's next wait for the device (synchronize, .item(), .numpy(), ...).
// Either way the exception, its class and its message are the same, made by
// raise_kernel_error, and the library stays usable.

#include "pyflame/macros.h"

namespace pyflame {

enum class KernelErrorCode : int32_t {
  None = 0,
  IndexOutOfRange,   // IndexError: value, bound = the dim's size, dim
  TargetOutOfRange,  // IndexError: value = the class target, bound = the number of classes, dim = ignore_index
  DivisionByZero,    // ZeroDivisionError: an integer divided by zero
};

struct KernelError {
  int32_t code = 0;  // a KernelErrorCode; 0 while no error was recorded
  int32_t op = 0;    // the ir::OpType that failed
  int64_t value = 0;
  int64_t bound = 0;
  int64_t dim = 0;
};

// Throws the error `e` describes (IndexError, ...), naming its op.
[[noreturn]] PF_API void raise_kernel_error(const KernelError& e);

// Whether index `i` lies in [0, size), or in [-size, size) when negative
// indices count from the end; `i` is then made non-negative.
PF_HOST_DEVICE bool index_in_range(int64_t& i, int64_t size, bool wrap_negative) {
  if (wrap_negative && i < 0) i += size;
  return i >= 0 && i < size;
}

}  // namespace pyflame
