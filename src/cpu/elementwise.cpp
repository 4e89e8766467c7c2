// CPU elementwise kernels of the unary families, clamp and where (binary.cpp
// has the binary ones): one loop per arity, instantiated for every such op of
// the op table with that op's functor. Registering an op here takes no code:
// its ops.def line does it.

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/functors.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

// Unary ops: input of type T, output of type O (T, or bool for UNARY_BOOL).
template <template <class> class F, kernels::DTypeSet kTypes, bool kToBool> void unary_kernel(OpCall& call) {
  visit_dtype(call.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::accepts<kTypes, T>()) {
      using A = acc_t<T>;
      using O = std::conditional_t<kToBool, bool, T>;
      auto run = [&](const auto& functor) {
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
      };
      const auto functor = kernels::make_functor<F<A>>(call.attrs);
      // A functor with forms chosen once per call (GELU's approximate) runs the chosen one alone.
      if constexpr (requires { typename F<A>::template Form<true>; }) {
        if (functor.form()) run(typename F<A>::template Form<true>{});
        else run(typename F<A>::template Form<false>{});
      } else {
        run(functor);
      }
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
#define PF_FAMILY_UNARY_INT(name, F) PF_REGISTER_KERNEL(name, CPU, (&unary_kernel<kernels::F, kernels::DTypeSet::IntegerOrBool, false>));
#define PF_FAMILY_WHERE(name, F) PF_REGISTER_KERNEL(name, CPU, &where_kernel);
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::cpu
