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

TEST_CASE("the loss launchers give the mean loss") {
  if (!rocm::is_available()) {
    MESSAGE("skipped: no usable GPU: " << rocm::unavailable_reason());
    return;
  }
  const int64_t n = 1001, rows = 37, classes = 27;  // n >= rows * classes
  Buffers t(n);
  std::vector<float> p(n), q(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>(1 / (1 + std::exp(-double(t.a[i]))));  // probabilities in (0, 1)
    q[i] = static_cast<float>(std::abs(t.b[i]) / 3);                // soft targets in [0, 1]
  }
  Buffers::mm().copy_host_to_device(t.db, p.data(), t.bytes);
  Buffers::mm().copy_host_to_device(t.dc, q.data(), t.bytes);
  auto scalar = [&](const std::function<void(hipStream_t)>& launch) {
    t.poison();
    rocm::Stream stream;
    launch(stream.handle());
    stream.synchronize();
    float v;
    Buffers::mm().copy_device_to_host(&v, t.dout, sizeof v);
    return double(v);
  };
  double mse = 0, bce = 0;
  for (int64_t i = 0; i < n; ++i) {
    mse += (double(t.a[i]) - p[i]) * (double(t.a[i]) - p[i]);
    bce -= q[i] * std::max(std::log(double(p[i])), -100.0) + (1 - q[i]) * std::max(std::log(1 - double(p[i])), -100.0);
  }
  CHECK(scalar([&](hipStream_t s) { rocm::launch_mse_loss(t.dout, t.da, t.db, n, s); }) ==
        doctest::Approx(mse / n).epsilon(1e-5));
  CHECK(scalar([&](hipStream_t s) { rocm::launch_bce_loss(t.dout, t.db, t.dc, n, s); }) ==
        doctest::Approx(bce / n).epsilon(1e-5));
  // Cross entropy of `rows` rows of `classes` logits (the first values of a).
  std::vector<int32_t> target(rows);
  double ce = 0;
  for (int64_t r = 0; r < rows; ++r) {
    target[r] = static_cast<int32_t>((r * 7) % classes);
    double m = -1e300, sum = 0;
    for (int64_t k = 0; k < classes; ++k) m = std::max(m, double(t.a[r * classes + k]));
    for (int64_t k = 0; k < classes; ++k) sum += std::exp(double(t.a[r * classes + k]) - m);
    ce += m + std::log(sum) - t.a[r * classes + target[r]];
  }
  auto* dtarget = static_cast<int32_t*>(rocm::get_memory_manager().allocate(rows * sizeof(int32_t)));
  Buffers::mm().copy_host_to_device(dtarget, target.data(), rows * sizeof(int32_t));
  CHECK(scalar([&](hipStream_t s) { rocm::launch_cross_entropy_loss(t.dout, t.da, dtarget, rows, classes, s); }) ==
        doctest::Approx(ce / rows).epsilon(1e-5));
  Buffers::mm().deallocate(dtarget);
}
