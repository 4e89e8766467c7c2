#pragma once
// Exceptions. The Python layer maps each class to the Python exception a user
// expects (ValueError, TypeError, IndexError, the ROCmError family), so C++
// code raises by meaning, never by catching and re-wrapping strings.

#include <stdexcept>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "pyflame/macros.h"

namespace pyflame {

struct PF_API ValueError : std::invalid_argument { using std::invalid_argument::invalid_argument; };
struct PF_API TypeError : std::invalid_argument { using std::invalid_argument::invalid_argument; };
struct PF_API IndexError : std::out_of_range { using std::out_of_range::out_of_range; };
// A feature this build or device does not provide; listed in docs/ops.md.
struct PF_API NotSupportedError : std::runtime_error { using std::runtime_error::runtime_error; };
// A misuse of autograd that PyTorch reports as RuntimeError (backward through a
// freed graph, an in-place change to a saved tensor, ...).
struct PF_API AutogradError : std::runtime_error { using std::runtime_error::runtime_error; };
// Integer division by zero. Python: pf.ZeroDivisionError, both a ZeroDivisionError
// and (as PyTorch raises RuntimeError for it) a RuntimeError.
struct PF_API ZeroDivisionError : std::runtime_error { using std::runtime_error::runtime_error; };

// The ROCm backend's family (seed 000); ROCmMemoryError is also a MemoryError in Python.
struct PF_API ROCmError : std::runtime_error { using std::runtime_error::runtime_error; };
struct PF_API ROCmNotAvailableError : ROCmError { using ROCmError::ROCmError; };
struct PF_API DeviceError : ROCmError { using ROCmError::ROCmError; };
struct PF_API ROCmMemoryError : ROCmError { using ROCmError::ROCmError; };
struct PF_API HIPCompilationError : ROCmError { using ROCmError::ROCmError; };

// A collective that failed or timed out (pyflame.distributed's backends). Python: DistBackendError.
struct PF_API DistBackendError : std::runtime_error { using std::runtime_error::runtime_error; };

// A warning: what a user should hear about but that does not stop the call (a
// corrupt kernel-cache entry, recompiled). The Python layer installs a handler
// that raises Python's UserWarning; without one it goes to stderr.
using WarningHandler = void (*)(const std::string& message);
PF_API void set_warning_handler(WarningHandler handler);
PF_API void warn(const std::string& message);

namespace detail {
inline std::string to_piece(const std::string& s) { return s; }
inline std::string to_piece(const char* s) { return s; }
inline std::string to_piece(char c) { return std::string(1, c); }
inline std::string to_piece(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
template <class T> std::string to_piece(const T& v) {
  if constexpr (std::is_arithmetic_v<T>) return std::to_string(v);
  else return to_string(v);  // found by ADL: DType, Device, ...
}
template <class... Args> std::string cat(const Args&... args) {
  std::string s;
  ((s += to_piece(args)), ...);
  return s;
}
}  // namespace detail

// PF_CHECK(cond, ErrorType, pieces...): raise ErrorType with the pieces joined.
#define PF_CHECK(cond, Err, ...) \
  do { if (!(cond)) throw ::pyflame::Err(::pyflame::detail::cat(__VA_ARGS__)); } while (0)

}  // namespace pyflame
