#pragma once
// The combine operators of the scans (cumsum, cumprod), shared by the CPU and
// GPU kernels: one scan, written once per backend, runs either of them.
// Running values are kept in double for floats and int64 for integers
// (PyTorch's CPU accumulation types).

#include <cstdint>
#include <type_traits>

#include "pyflame/dtype.h"
#include "pyflame/macros.h"

namespace pyflame::kernels {

template <class T> using scan_acc_t = std::conditional_t<is_float_v<T>, double, int64_t>;

template <class A> struct ScanSum {
  PF_HOST_DEVICE static constexpr A identity() { return A(0); }
  PF_HOST_DEVICE A operator()(A a, A b) const { return a + b; }
};

template <class A> struct ScanProd {
  PF_HOST_DEVICE static constexpr A identity() { return A(1); }
  PF_HOST_DEVICE A operator()(A a, A b) const {
    // Integer products wrap around as PyTorch's do (signed overflow would be undefined).
    if constexpr (std::is_integral_v<A>)
      return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    else return a * b;
  }
};

}  // namespace pyflame::kernels
