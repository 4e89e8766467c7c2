#include <doctest/doctest.h>

#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame;

TEST_CASE("conv2d: braced sizes and the 'same'/'valid' overload") {
  manual_seed(11);
  Tensor x = randn({2, 3, 7, 7});
  Tensor w = randn({4, 3, 3, 3});
  Tensor b = randn({4});
  CHECK(conv2d(x, w).shape() == Shape{2, 4, 5, 5});
  CHECK(conv2d(x, w, b, {2}, {1}).shape() == Shape{2, 4, 4, 4});
  CHECK(conv2d(x, w, std::nullopt, {1, 2}, {0, 1}, {2, 1}).shape() == Shape{2, 4, 3, 4});
  CHECK(conv2d(x, w, b, {1}, "same").shape() == Shape{2, 4, 7, 7});
  CHECK(conv2d(x, w, b, {1}, std::string("valid")).shape() == Shape{2, 4, 5, 5});
  CHECK(conv1d(randn({3, 10}), randn({2, 3, 4}), std::nullopt, {1}, "same").shape() == Shape{2, 10});
  CHECK(conv3d(randn({1, 2, 4, 4, 4}), randn({4, 1, 2, 2, 2}), std::nullopt, {2}, {0}, {1}, 2).shape() ==
        Shape{1, 4, 2, 2, 2});
  CHECK_THROWS_AS(conv2d(x, w, b, {2}, "same"), ValueError);
  CHECK_THROWS_AS(conv2d(x, randn({4, 2, 3, 3})), ValueError);
}

TEST_CASE("conv2d of a one-hot kernel picks its input element") {
  Tensor x = arange(Scalar(0.0), Scalar(16.0)).reshape({1, 1, 4, 4});
  Tensor w = zeros({1, 1, 3, 3});
  w.data<float>()[2 * 3 + 1] = 1.0f;  // tap (2, 1): y[i, j] = x[i + 1, j] with padding 1
  Tensor y = conv2d(x, w, std::nullopt, {1}, {1});
  CHECK(y.data<float>()[0] == 4.0f);           // x[1, 0]
  CHECK(y.data<float>()[3 * 4 + 2] == 0.0f);   // below the input: padding
  CHECK(y.data<float>()[1 * 4 + 3] == 11.0f);  // x[2, 3]
}

TEST_CASE("pooling, transposed convolution and pad") {
  Tensor x = arange(Scalar(0.0), Scalar(16.0)).reshape({1, 1, 4, 4});
  Tensor m = max_pool2d(x, {2});
  CHECK(m.shape() == Shape{1, 1, 2, 2});
  CHECK(m.data<float>()[3] == 15.0f);
  CHECK(avg_pool2d(x, {2}).data<float>()[0] == 2.5f);  // (0 + 1 + 4 + 5) / 4
  CHECK(avg_pool2d(x, {3}, {1}, {1}, false, true, 2).data<float>()[0] == 5.0f);  // (0 + 1 + 4 + 5) / 2
  CHECK(adaptive_avg_pool2d(x, {1}).data<float>()[0] == 7.5f);
  CHECK(adaptive_avg_pool2d(x, {std::nullopt, 1}).shape() == Shape{1, 1, 4, 1});
  CHECK(max_pool1d(randn({2, 9}), {3}).shape() == Shape{2, 3});
  CHECK(conv_transpose2d(x, ones({1, 2, 3, 3}), std::nullopt, {2}, {1}, {1}).shape() == Shape{1, 2, 8, 8});
  Tensor p = pad(x, {1, 0, -1, 2}, "constant", Scalar(9.0));
  CHECK(p.shape() == Shape{1, 1, 5, 5});
  CHECK(p.data<float>()[0] == 9.0f);
  CHECK(p.data<float>()[1] == 4.0f);  // row 1 of x (row 0 cropped), column 0
  CHECK_THROWS_AS(pad(x, {1, 1}, "reflect"), NotSupportedError);
  CHECK_THROWS_AS(max_pool2d(x, {3}, {}, {2}), ValueError);
  // The backward passes: each window's gradient to its maximum, or shared over it.
  Tensor g = ones({1, 1, 2, 2});
  Tensor gm = max_pool2d_backward(g, x, {2});
  CHECK(gm.shape() == x.shape());
  CHECK(gm.data<float>()[5] == 1.0f);  // x[1, 1], the first window's maximum
  CHECK(gm.data<float>()[0] == 0.0f);
  CHECK(avg_pool2d_backward(g, x.shape(), {2}).data<float>()[0] == 0.25f);
  CHECK(adaptive_avg_pool2d_backward(ones({1, 1, 1, 1}), x.shape()).data<float>()[15] == 1.0f / 16);
  CHECK_THROWS_AS(max_pool2d_backward(ones({1, 1, 3, 3}), x, {2}), ValueError);
}
