#include "pyflame/backend/rocm/hip_check.h"

namespace pyflame::backend::rocm {

void throw_hip_error(hipError_t err, const char* call, const char* file, int line) {
  (void)hipGetLastError();  // clear a non-sticky error so later calls do not report it again
  std::string msg = std::string("HIP error ") + hipGetErrorName(err) + " (" + hipGetErrorString(err) + ") in " +
                    call + " at " + file + ":" + std::to_string(line);
  if (err == hipErrorOutOfMemory) throw ROCmMemoryError(msg);
  if (err == hipErrorInvalidDevice) throw DeviceError(msg);
  if (err == hipErrorNoDevice || err == hipErrorInsufficientDriver) throw ROCmNotAvailableError(msg);
  throw ROCmError(msg);
}

void check_launch(const char* op, const std::string& what) {
  hipError_t err = hipGetLastError();
  if (err != hipSuccess)
    throw ROCmError(std::string("kernel launch of '") + op + "' on " + what + " failed: " + hipGetErrorName(err) +
                    " (" + hipGetErrorString(err) + ")");
}

}  // namespace pyflame::backend::rocm
