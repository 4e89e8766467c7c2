#include <doctest/doctest.h>

#include <cmath>

#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame;

TEST_CASE("elementwise parameters: defaults, given values, checks") {
  Tensor x = arange(Scalar(-2.0), Scalar(2.0));  // -2 -1 0 1
  CHECK(leaky_relu(x).data<float>()[0] == doctest::Approx(-0.02));
  CHECK(leaky_relu(x, {0.5}).data<float>()[1] == doctest::Approx(-0.5));
  CHECK(hardtanh(x, {-1.5, 0.5}).data<float>()[0] == -1.5f);
  CHECK(softplus(x, {2.0, 1.0}).data<float>()[3] == 1.0f);  // beta x > threshold: linear
  CHECK(op_params(ir::OpType::softplus).size() == 2);
  CHECK_THROWS_AS(hardtanh(x, {1.0, -1.0}), ValueError);
  CHECK_THROWS_AS(round(x, {0.5}), TypeError);  // decimals is an integer parameter
  CHECK_THROWS_AS(leaky_relu(x, {0.1, 0.2}), TypeError);
  CHECK(logical_not(x).dtype() == DType::Bool);
}

TEST_CASE("normalization and running statistics") {
  manual_seed(11);
  Tensor x = add(mul(randn({8, 3, 4}), Scalar(2.0)), Scalar(5.0));
  Tensor y = layer_norm(x, {3, 4});
  Tensor row = y.reshape({8, 12});
  CHECK(mean(row, {1}).data<float>()[0] == doctest::Approx(0.0).epsilon(1e-5));
  CHECK(var(row, {1}, 0).data<float>()[0] == doctest::Approx(1.0).epsilon(1e-3));
  Tensor rm = zeros({3}), rv = ones({3});
  batch_norm(x, rm, rv, {}, {}, true, 1.0);  // momentum 1: the batch statistics themselves
  Tensor channel = x.permute({1, 0, 2}).reshape({3, 32});
  CHECK(rm.data<float>()[1] == doctest::Approx(mean(channel, {1}).data<float>()[1]).epsilon(1e-5));
  CHECK(rv.data<float>()[2] == doctest::Approx(var(channel, {1}).data<float>()[2]).epsilon(1e-5));
  CHECK_THROWS_AS(group_norm(x, 2), ValueError);  // 2 groups do not divide 3 channels
}

TEST_CASE("cross_entropy: stable, and class indices are checked") {
  Tensor logits = full({2, 3}, Scalar(1e4));
  Tensor target = zeros({2}, DType::Int64);
  CHECK(cross_entropy(logits, target).item().f == doctest::Approx(std::log(3.0)));
  Tensor bad = full({2}, Scalar(int64_t{3}));
  CHECK_THROWS_AS(cross_entropy(logits, bad), IndexError);
  CHECK_THROWS_AS(mse_loss(logits, logits, "avg"), ValueError);
  CHECK(scaled_dot_product_attention(ones({2, 4}), ones({3, 4}), ones({3, 5})).shape() == Shape{2, 5});
}
