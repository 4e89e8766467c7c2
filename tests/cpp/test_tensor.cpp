#include <doctest/doctest.h>

#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {
Tensor iota(const Shape& shape) { return arange(Scalar(0.0), Scalar(static_cast<double>(shape_numel(shape)))).reshape(shape); }
float at(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0, d = 0;
  for (int64_t i : idx) off += i * t.strides()[d++];
  return t.data<float>()[off];
}
}  // namespace

TEST_CASE("views share storage and have the expected strides") {
  Tensor t = iota({2, 3, 4});
  CHECK(t.is_contiguous());
  Tensor p = t.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK_FALSE(p.is_contiguous());
  CHECK(p.same_storage(t));
  CHECK(at(p, {3, 1, 2}) == at(t, {1, 2, 3}));

  Tensor tr = t.transpose(0, 2);
  CHECK(tr.shape() == Shape{4, 3, 2});
  CHECK(at(tr, {1, 2, 0}) == at(t, {0, 2, 1}));

  Tensor u = t.unsqueeze(1);
  CHECK(u.shape() == Shape{2, 1, 3, 4});
  CHECK(u.squeeze().shape() == Shape{2, 3, 4});
  CHECK(u.squeeze(1).shape() == Shape{2, 3, 4});
  CHECK(u.squeeze(0).shape() == Shape{2, 1, 3, 4});

  Tensor e = iota({3, 1}).expand({2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(at(e, {1, 2, 3}) == 2.0f);
}

TEST_CASE("slicing and select follow Python semantics") {
  Tensor t = iota({5, 6});
  Tensor s = t.slice(0, 1, 100, 2).slice(1, -3, 6, 1);  // t[1::2, -3:]
  CHECK(s.shape() == Shape{2, 3});
  CHECK(at(s, {0, 0}) == 9.0f);
  CHECK(at(s, {1, 2}) == 23.0f);
  CHECK(t.slice(0, 4, 2, 1).shape() == Shape{0, 6});
  Tensor row = t.select(0, -1);
  CHECK(row.shape() == Shape{6});
  CHECK(at(row, {0}) == 24.0f);
  CHECK_THROWS_AS(t.select(0, 5), IndexError);
  CHECK_THROWS_AS(t.slice(0, 0, 2, 0), ValueError);
}

TEST_CASE("view needs compatible strides; reshape copies when it must") {
  Tensor t = iota({4, 6});
  CHECK(t.view({2, 2, 6}).same_storage(t));
  CHECK(t.view({-1}).shape() == Shape{24});
  Tensor tr = t.transpose(0, 1);  // 6 x 4, not contiguous
  CHECK_THROWS_AS(tr.view({24}), ValueError);
  Tensor r = tr.reshape({24});
  CHECK(r.is_contiguous());
  CHECK(r.data<float>()[1] == 6.0f);  // tr[0, 1] == t[1, 0]
  CHECK(tr.view({3, 2, 4}).same_storage(t));  // splitting a dim keeps strides valid
  CHECK_THROWS_AS(t.view({5, 5}), ValueError);
  CHECK_THROWS_AS(t.view({-1, -1}), ValueError);
  CHECK(t.flatten().shape() == Shape{24});
  CHECK(iota({2, 3, 4}).flatten(1).shape() == Shape{2, 12});
}

TEST_CASE("contiguous copies a permuted view in logical order") {
  Tensor t = iota({2, 3});
  Tensor c = t.transpose(0, 1).contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.same_storage(t));
  const float expected[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) CHECK(c.data<float>()[i] == expected[i]);
}

TEST_CASE("copy_ broadcasts and converts dtypes") {
  Tensor t = zeros({2, 3}, DType::Int32);
  t.copy_(arange(Scalar(1.0), Scalar(4.0)));
  const int32_t expected[] = {1, 2, 3, 1, 2, 3};
  for (int i = 0; i < 6; ++i) CHECK(t.data<int32_t>()[i] == expected[i]);
  Tensor h = t.to(DType::Float16);
  CHECK(float(h.data<Half>()[5]) == 3.0f);
}
