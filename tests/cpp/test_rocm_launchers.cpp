// The seed's launch_* functions on a real GPU, on a non-default stream, against
// host references; outputs are poisoned first. Skips when no GPU is usable.

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "pyflame/backend/rocm/device.h"
#include "pyflame/backend/rocm/kernels.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/error.h"

namespace rocm = pyflame::backend::rocm;
using pyflame::ir::OpType;

namespace {

struct Buffers {
  explicit Buffers(int64_t n) : n(n), bytes(size_t(n) * sizeof(float)) {
    std::mt19937 rng(static_cast<unsigned>(n));
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    for (auto* v : {&a, &b, &c}) {
      v->resize(n);
      for (auto& x : *v) x = u(rng);
    }
    for (int64_t i = 0; i < n; i += 7) b[i] = a[i];  // ties for the comparisons
    for (int64_t i = 0; i < n; i += 5) c[i] = 0.0f;  // false conditions
    for (auto** d : {&da, &db, &dc, &dout}) *d = static_cast<float*>(rocm::get_memory_manager().allocate(bytes));
    mm().copy_host_to_device(da, a.data(), bytes);
    mm().copy_host_to_device(db, b.data(), bytes);
    mm().copy_host_to_device(dc, c.data(), bytes);
  }
  ~Buffers() {
    for (float* d : {da, db, dc, dout}) mm().deallocate(d);
  }
  static rocm::ROCmMemoryManager& mm() { return rocm::get_memory_manager(); }
  void poison() { mm().memset(dout, 0xFF, bytes); }
  // Runs `launch` on a fresh stream and compares element i with want(i).
  void check(const std::function<void(hipStream_t)>& launch, const std::function<double(int64_t)>& want, double tol) {
    poison();
    rocm::Stream stream;
    launch(stream.handle());
    stream.synchronize();
    std::vector<float> out(n);
    mm().copy_device_to_host(out.data(), dout, bytes);
    for (int64_t i = 0; i < n; ++i) {
      INFO("element " << i);
      REQUIRE(std::abs(out[i] - want(i)) <= tol * (1 + std::abs(want(i))));
    }
  }
  int64_t n;
  size_t bytes;
  std::vector<float> a, b, c;
  float *da, *db, *dc, *dout;
};

}  // namespace

TEST_CASE("launch_* run the op kernels on the given stream") {
  if (!rocm::is_available()) {
    MESSAGE("skipped: no usable GPU: " << rocm::unavailable_reason());
    return;
  }
  Buffers t(100003);  // odd: exercises the vector path's tail
  const auto& a = t.a;
  const auto& b = t.b;
  const auto& c = t.c;
  t.check([&](hipStream_t s) { rocm::launch_gelu_forward(t.dout, t.da, t.n, s); },
          [&](int64_t i) { return 0.5 * a[i] * (1 + std::erf(a[i] / std::sqrt(2.0))); }, 1e-5);
  t.check([&](hipStream_t s) { rocm::launch_silu_forward(t.dout, t.da, t.n, s); },
          [&](int64_t i) { return a[i] / (1 + std::exp(-double(a[i]))); }, 1e-5);
  t.check([&](hipStream_t s) { rocm::launch_elementwise_binary(OpType::sub, t.dout, t.da, t.db, t.n, s); },
          [&](int64_t i) { return double(a[i]) - b[i]; }, 1e-6);
  t.check([&](hipStream_t s) { rocm::launch_elementwise_unary(OpType::exp, t.dout, t.da, t.n, s); },
          [&](int64_t i) { return std::exp(double(a[i])); }, 1e-5);
  t.check([&](hipStream_t s) { rocm::launch_comparison(OpType::le, t.dout, t.da, t.db, t.n, s); },
          [&](int64_t i) { return a[i] <= b[i] ? 1.0 : 0.0; }, 0);
  t.check([&](hipStream_t s) { rocm::launch_where(t.dout, t.dc, t.da, t.db, t.n, s); },
          [&](int64_t i) { return c[i] != 0 ? a[i] : b[i]; }, 0);
  t.check([&](hipStream_t s) { rocm::launch_clamp(t.dout, t.da, -0.5f, 1.25f, t.n, s); },
          [&](int64_t i) { return std::min(std::max(double(a[i]), -0.5), 1.25); }, 0);
  CHECK_THROWS_AS(rocm::launch_elementwise_unary(OpType::add, t.dout, t.da, t.n, nullptr), pyflame::ValueError);
  CHECK_THROWS_AS(rocm::launch_comparison(OpType::add, t.dout, t.da, t.db, t.n, nullptr), pyflame::ValueError);
}
