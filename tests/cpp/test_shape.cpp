#include <doctest/doctest.h>

#include "pyflame/error.h"
#include "pyflame/tensor.h"

using namespace pyflame;

TEST_CASE("contiguous strides are row-major, size-0 and size-1 dims included") {
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(contiguous_strides({}) == Shape{});
  CHECK(contiguous_strides({5, 0, 2}) == Shape{2, 2, 1});
  CHECK(shape_numel({2, 3, 4}) == 24);
  CHECK(shape_numel({}) == 1);
  CHECK(shape_numel({3, 0}) == 0);
}

TEST_CASE("broadcasting follows NumPy") {
  CHECK(broadcast_shapes({3, 1, 5}, {4, 1}, "add") == Shape{3, 4, 5});
  CHECK(broadcast_shapes({}, {2, 2}, "add") == Shape{2, 2});
  CHECK(broadcast_shapes({0, 1}, {1, 7}, "add") == Shape{0, 7});
  CHECK_THROWS_AS(broadcast_shapes({2, 3}, {4, 3}, "add"), ValueError);
  try {
    broadcast_shapes({2, 3}, {4, 3}, "mul");
    FAIL("expected ValueError");
  } catch (const ValueError& e) {
    std::string msg = e.what();
    CHECK(msg.find("mul") != std::string::npos);
    CHECK(msg.find("[2, 3]") != std::string::npos);
    CHECK(msg.find("[4, 3]") != std::string::npos);
  }
}

TEST_CASE("wrap_dim accepts negative dims and rejects out-of-range ones") {
  CHECK(wrap_dim(-1, 3) == 2);
  CHECK(wrap_dim(0, 3) == 0);
  CHECK(wrap_dim(-1, 0) == 0);  // 0-d tensors accept dim 0 / -1, as in PyTorch
  CHECK_THROWS_AS(wrap_dim(3, 3), IndexError);
  CHECK_THROWS_AS(wrap_dim(-4, 3), IndexError);
}
