// CPU copy (strided, converting between any two dtypes, from any device) and fill.

#include <algorithm>
#include <cstring>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/convert.h"

namespace pyflame::cpu {
namespace {

// A source on a GPU is read through its backend: straight into the output
// when no conversion or layout change is needed, else into a host buffer first.
void copy_kernel(OpCall& call) {
  Tensor src = call.inputs[0];
  if (!src.device().is_cpu()) {
    src = src.contiguous();
    if (call.out().is_contiguous() && call.out().dtype() == src.dtype()) {
      backend_for(src.device().type)->copy_to_host(call.out().data_ptr(), src.data_ptr(), src.nbytes(),
                                                    src.device().index);
      return;
    }
    src = src.to(Device::cpu());
  }
  visit_dtype(call.out().dtype(), [&](auto otag) {
    using O = typename decltype(otag)::type;
    visit_dtype(src.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      for_each_strided<2>({&call.out(), &src}, [&](auto p, auto s, int64_t n) {
        if constexpr (std::is_same_v<O, I>) {
          if (s[0] == sizeof(O) && s[1] == sizeof(I)) {
            std::memcpy(p[0], p[1], n * sizeof(O));
            return;
          }
        }
        if (s[0] == sizeof(O) && s[1] == sizeof(I)) {
          O* o = reinterpret_cast<O*>(p[0]);
          const I* x = reinterpret_cast<const I*>(p[1]);
          for (int64_t i = 0; i < n; ++i) o[i] = kernels::convert<O>(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<O*>(p[0] + i * s[0]) = kernels::convert<O>(*reinterpret_cast<const I*>(p[1] + i * s[1]));
        }
      });
    });
  });
}

void fill_kernel(OpCall& call) {
  const Scalar& v = call.attr<FillAttrs>().value;
  visit_dtype(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T value = kernels::scalar_as<T>(v);
    for_each_strided<1>({&call.out()}, [&](auto p, auto s, int64_t n) {
      if (s[0] == sizeof(T)) {  // a run along memory: a loop the compiler vectorises
        std::fill_n(reinterpret_cast<T*>(p[0]), n, value);
        return;
      }
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = value;
    });
  });
}

PF_REGISTER_KERNEL(copy, CPU, &copy_kernel);
PF_REGISTER_KERNEL(fill, CPU, &fill_kernel);

}  // namespace
}  // namespace pyflame::cpu
