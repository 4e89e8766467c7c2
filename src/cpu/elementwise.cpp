// CPU elementwise kernels: one loop per arity, instantiated for every
// elementwise op of the op table with that op's functor. Registering an op
// here takes no code: its ops.def line does it.

#include <atomic>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/functors.h"
#include "kernels/kernel_error.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

template <class T> T& at(char* p, int64_t i, int64_t stride) { return *reinterpret_cast<T*>(p + i * stride); }

// o[i] = value(i) over a contiguous run, in blocks computed into a local
// buffer and then stored. The output may be one of the inputs (in-place ops),
// so a plain loop gets a run-time overlap check from GCC, and some
// instantiations (float add among them) ran its scalar fallback: 4x slower.
// Block by block, the reads and the writes are separate loops that vectorise
// with no check, and an exactly aliased input is still read before written.
template <class O, class Value> void store_run(O* o, int64_t n, const Value& value) {
  constexpr int64_t kBlock = 64;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    O block[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) block[j] = value(i + j);
    for (int64_t j = 0; j < kBlock; ++j) o[i + j] = block[j];
  }
  for (; i < n; ++i) o[i] = value(i);
}

// Unary ops: input of type T, output of type O (T, or bool for UNARY_BOOL).
template <template <class> class F, kernels::DTypeSet kTypes, bool kToBool> void unary_kernel(OpCall& call) {
  visit_dtype(call.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::accepts<kTypes, T>()) {
      using A = acc_t<T>;
      using O = std::conditional_t<kToBool, bool, T>;
      const auto functor = kernels::make_functor<F<A>>(call.attrs);
      for_each_strided<2>({&call.out(), &call.inputs[0]}, [&](auto p, auto s, int64_t n) {
        const auto f = functor;  // a local copy: its fields provably do not alias the output
        if (s[0] == sizeof(O) && s[1] == sizeof(T)) {
          O* o = reinterpret_cast<O*>(p[0]);
          const T* x = reinterpret_cast<const T*>(p[1]);
          store_run(o, n, [&](int64_t i) { return static_cast<O>(f(static_cast<A>(x[i]))); });
        } else {
          for (int64_t i = 0; i < n; ++i) at<O>(p[0], i, s[0]) = static_cast<O>(f(static_cast<A>(at<T>(p[1], i, s[1]))));
        }
      });
    } else {
      throw TypeError(std::string(op_name(call.op)) + ": no CPU kernel for " + dtype_name(call.inputs[0].dtype()));
    }
  });
}

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

void where_kernel(OpCall& call) {
  visit_dtype(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_strided<4>({&call.out(), &call.inputs[0], &call.inputs[1], &call.inputs[2]}, [&](auto p, auto s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        at<T>(p[0], i, s[0]) = at<bool>(p[1], i, s[1]) ? at<T>(p[2], i, s[2]) : at<T>(p[3], i, s[3]);
    });
  });
}

#define PF_FAMILY_UNARY(name, F) PF_REGISTER_KERNEL(name, CPU, (&unary_kernel<kernels::F, kernels::DTypeSet::NoBool, false>));
#define PF_FAMILY_CLAMP(name, F) PF_REGISTER_KERNEL(name, CPU, (&unary_kernel<kernels::F, kernels::DTypeSet::NoBool, false>));
#define PF_FAMILY_UNARY_FLOAT(name, F) PF_REGISTER_KERNEL(name, CPU, (&unary_kernel<kernels::F, kernels::DTypeSet::FloatOnly, false>));
#define PF_FAMILY_UNARY_BOOL(name, F) PF_REGISTER_KERNEL(name, CPU, (&unary_kernel<kernels::F, kernels::DTypeSet::All, true>));
#define PF_FAMILY_BINARY(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::All, false>));
#define PF_FAMILY_BINARY_FLOAT(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::FloatOnly, false>));
#define PF_FAMILY_UNARY_INT(name, F) PF_REGISTER_KERNEL(name, CPU, (&unary_kernel<kernels::F, kernels::DTypeSet::IntegerOrBool, false>));
#define PF_FAMILY_BINARY_INT(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::IntegerOrBool, false>));
#define PF_FAMILY_COMPARE(name, F) PF_REGISTER_KERNEL(name, CPU, (&binary_kernel<kernels::F, kernels::DTypeSet::All, true>));
#define PF_FAMILY_WHERE(name, F) PF_REGISTER_KERNEL(name, CPU, &where_kernel);
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::cpu
