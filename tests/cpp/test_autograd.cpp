// The C++ autograd API: recording through the public ops, backward and grad.

#include <doctest/doctest.h>

#include <cmath>

#include "pyflame/autograd.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame;

TEST_CASE("autograd: backward accumulates d(sum(x * x + 3 x))/dx = 2x + 3 into x.grad") {
  Tensor x = linspace(-1.0, 2.0, 4, DType::Float64);
  x.set_requires_grad(true);
  Tensor y = sum(add(mul(x, x), mul(x, Scalar(3.0))));
  CHECK(y.requires_grad());
  CHECK(y.grad_fn()->name() == "SumBackward0");
  autograd::backward({y}, {}, false);
  const double* g = x.grad().data<double>();
  const double* v = x.data<double>();
  for (int i = 0; i < 4; ++i) CHECK(g[i] == doctest::Approx(2 * v[i] + 3));
  CHECK_THROWS_AS(autograd::backward({y}, {}, false), AutogradError);  // the graph was freed
}

TEST_CASE("autograd: grad() returns without accumulating; no graph under GradModeGuard(false)") {
  Tensor x = full({3}, Scalar(2.0), DType::Float64);
  x.set_requires_grad(true);
  std::vector<Tensor> g = autograd::grad({sum(exp(x))}, {x}, {}, false, false);
  CHECK(g[0].data<double>()[1] == doctest::Approx(std::exp(2.0)));
  CHECK_FALSE(x.grad().defined());
  autograd::GradModeGuard off(false);
  CHECK_FALSE(mul(x, x).requires_grad());
}

TEST_CASE("autograd: an in-place composite op (addcmul_) records its decomposition and its write") {
  Tensor x = linspace(-1.0, 2.0, 4, DType::Float64), a = full({4}, Scalar(3.0), DType::Float64);
  x.set_requires_grad(true);
  Tensor y = mul(x, Scalar(2.0));
  addcmul_(y, x, a, Scalar(0.5));  // y = 2x + 0.5 * 3x = 3.5x
  CHECK(y.grad_fn() != nullptr);
  autograd::backward({sum(y)}, {}, false);
  for (int i = 0; i < 4; ++i) CHECK(x.grad().data<double>()[i] == doctest::Approx(3.5));
  CHECK_THROWS_AS(addcmul_(x, x, a), AutogradError);  // a leaf that requires grad
}
