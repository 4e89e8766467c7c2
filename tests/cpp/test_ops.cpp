#include <doctest/doctest.h>

#include <cmath>

#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame;

TEST_CASE("result_type: numbers decide the category, tensors the width") {
  Tensor i32 = zeros({2}, DType::Int32);
  Tensor f16 = zeros({2}, DType::Float16);
  CHECK(result_type({i32, Tensor::scalar(Scalar(2.5))}) == DType::Float32);
  CHECK(result_type({f16, Tensor::scalar(Scalar(3.0))}) == DType::Float16);
  CHECK(result_type({i32, Tensor::scalar(Scalar(int64_t{7}))}) == DType::Int32);
  CHECK(result_type({i32, zeros({}, DType::Int64)}) == DType::Int32);       // 0-d tensor ranks below
  CHECK(result_type({i32, zeros({}, DType::Float64)}) == DType::Float64);   // ...unless a higher category
  CHECK(result_type({zeros({2}, DType::Bool), Tensor::scalar(Scalar(int64_t{1}))}) == DType::Int64);
}

TEST_CASE("elementwise ops broadcast and promote") {
  manual_seed(3);
  Tensor a = randn({3, 1});
  Tensor b = randn({4});
  Tensor c = add(a, b);
  CHECK(c.shape() == Shape{3, 4});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(c.data<float>()[i * 4 + j] == doctest::Approx(a.data<float>()[i] + b.data<float>()[j]));
  Tensor d = div(arange(Scalar(int64_t{0}), Scalar(int64_t{4})), Scalar(int64_t{2}));
  CHECK(d.dtype() == DType::Float32);
  CHECK(d.data<float>()[3] == 1.5f);
  CHECK(lt(a, Scalar(0.0)).dtype() == DType::Bool);
  CHECK_THROWS_AS(add(randn({2, 3}), randn({4, 3})), ValueError);
}

TEST_CASE("reductions with dims and keepdim") {
  Tensor t = arange(Scalar(0.0), Scalar(24.0)).reshape({2, 3, 4});
  Tensor s = sum(t, {0, 2}, true);
  CHECK(s.shape() == Shape{1, 3, 1});
  CHECK(s.data<float>()[0] == 0 + 1 + 2 + 3 + 12 + 13 + 14 + 15);
  CHECK(sum(t).item().f == 276.0);
  CHECK(argmax(t, 1).shape() == Shape{2, 4});
  CHECK(argmax(t).item().i == 23);
  CHECK(sum(zeros({3}, DType::Int32)).dtype() == DType::Int64);
  CHECK_THROWS_AS(mean(zeros({3}, DType::Int32)), TypeError);
}

TEST_CASE("matmul goes through BLAS with transposed views") {
  manual_seed(5);
  Tensor a = randn({4, 3});
  Tensor b = randn({4, 5});
  Tensor c = matmul(a.transpose(0, 1), b);  // (3x4)(4x5), first operand a transposed view
  CHECK(c.shape() == Shape{3, 5});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double ref = 0;
      for (int k = 0; k < 4; ++k) ref += a.data<float>()[k * 3 + i] * b.data<float>()[k * 5 + j];
      CHECK(c.data<float>()[i * 5 + j] == doctest::Approx(ref).epsilon(1e-5));
    }
  CHECK_THROWS_AS(matmul(a, a), ValueError);
  CHECK_THROWS_AS(matmul(a, randn({3, 2}, DType::Float64)), TypeError);
}

TEST_CASE("softmax is stable for large logits") {
  Tensor x = full({4}, Scalar(1e4));
  Tensor y = softmax(x, 0);
  for (int i = 0; i < 4; ++i) CHECK(y.data<float>()[i] == doctest::Approx(0.25));
}

TEST_CASE("the library keeps working after an error") {
  Tensor a = ones({2, 2});
  CHECK_THROWS_AS(add(a, ones({3})), ValueError);
  CHECK(add(a, a).data<float>()[3] == 2.0f);
}
