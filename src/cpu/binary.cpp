// CPU kernels of the binary families and comparisons, instantiated for every
// such op of the op table with its functor (a file of their own: with the
// unary ones, the largest compile of the CPU library).

#include <atomic>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/functors.h"
#include "kernels/kernel_error.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

// A functor that notes whether it was given inputs it cannot take (kernels::has_invalid).
template <class F> struct Checked {
  F f;
  std::atomic<bool>* seen;
  template <class... A> auto operator()(A... a) const {
    if (f.invalid(a...)) seen->store(true, std::memory_order_relaxed);
    return f(a...);
  }
};

// Runs body(functor), checked when F declares invalid inputs; then raises their
// kernel error, as the GPU does at its next wait.
template <class F, class A, class Body> void run_checked(const OpCall& call, const F& functor, const Body& body) {
  if constexpr (kernels::has_invalid<F, A, A>) {
    std::atomic<bool> seen{false};
    body(Checked<F>{functor, &seen});
    if (seen.load()) raise_kernel_error({static_cast<int32_t>(F::kInvalid), static_cast<int32_t>(call.op), 0, 0, 0});
  } else {
    body(functor);
  }
}

// Binary ops and comparisons: inputs of type T, output of type O (T, or bool).
template <template <class> class F, kernels::DTypeSet kTypes, bool kCompare> void binary_kernel(OpCall& call) {
  visit_dtype(call.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::accepts<kTypes, T>()) {
      using A = acc_t<T>;
      using O = std::conditional_t<kCompare, bool, T>;
      run_checked<F<A>, A>(call, kernels::make_functor<F<A>>(call.attrs), [&](const auto& functor) {
        for_each_strided<3>({&call.out(), &call.inputs[0], &call.inputs[1]}, [&](auto p, auto s, int64_t n) {
          const auto f = functor;  // a local copy: its fields provably do not alias the output
          O* o = reinterpret_cast<O*>(p[0]);
          const T* a = reinterpret_cast<const T*>(p[1]);
          const T* b = reinterpret_cast<const T*>(p[2]);
          if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == sizeof(T)) {
            store_run(o, n, [&](int64_t i) { return static_cast<O>(f(static_cast<A>(a[i]), static_cast<A>(b[i]))); });
          } else if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == 0) {  // tensor op scalar
            const A bv = static_cast<A>(b[0]);
            store_run(o, n, [&](int64_t i) { return static_cast<O>(f(static_cast<A>(a[i]), bv)); });
          } else if (s[0] == sizeof(O) && s[1] == 0 && s[2] == sizeof(T)) {  // scalar op tensor
            const A av = static_cast<A>(a[0]);
            store_run(o, n, [&](int64_t i) { return static_cast<O>(f(av, static_cast<A>(b[i]))); });
          } else {
            for (int64_t i = 0; i < n; ++i)
              at<O>(p[0], i, s[0]) = static_cast<O>(f(static_cast<A>(at<T>(p[1], i, s[1])), static_cast<A>(at<T>(p[2], i, s[2]))));
          }
        });
      });
    } else {
      throw TypeError(std::string(op_name(call.op)) + ": no CPU kernel for " + dtype_name(call.inputs[0].dtype()));
    }
  });
}

#define PF_FAMILY_BINARY(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::All, false>));
#define PF_FAMILY_BINARY_FLOAT(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::FloatOnly, false>));
#define PF_FAMILY_BINARY_INT(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::IntegerOrBool, false>));
#define PF_FAMILY_COMPARE(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::All, true>));
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::cpu
