#include "kernels/kernel_error.h"

#include "pyflame/error.h"
#include "pyflame/ir/op_type.h"

namespace pyflame {

void raise_kernel_error(const KernelError& e) {
  const char* op = op_name(static_cast<ir::OpType>(e.op));
  switch (static_cast<KernelErrorCode>(e.code)) {
    case KernelErrorCode::IndexOutOfRange:
      throw IndexError(detail::cat(op, ": index ", e.value, " is out of bounds for dimension ", e.dim, " with size ",
                                   e.bound));
    case KernelErrorCode::TargetOutOfRange:
      throw IndexError(detail::cat(op, ": target ", e.value, " is out of bounds for ", e.bound, " classes (valid: 0 to ",
                                   e.bound - 1, ", or ignore_index ", e.dim, ")"));
    case KernelErrorCode::DivisionByZero:
      throw ZeroDivisionError(detail::cat(op, ": integer division by zero (ZeroDivisionError, as PyTorch on the CPU)"));
    case KernelErrorCode::None: break;
  }
  throw ROCmError(detail::cat(op, ": a kernel reported error code ", e.code, " (a library bug)"));
}

}  // namespace pyflame
