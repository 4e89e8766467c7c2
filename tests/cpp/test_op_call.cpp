// The op layer's apply point: calls as values (equality, hash, printout),
// attribute checks, composites and has_kernel / is_supported.

#include <doctest/doctest.h>

#include <unordered_set>

#include "pyflame/conv_ops.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {

OpCall conv_call(const Tensor& x, const Tensor& w, std::vector<int64_t> stride, int64_t groups = 1) {
  return {ir::OpType::conv2d, {x, w, Tensor()}, ConvAttrs{stride, {0, 0}, {1, 1}, {}, groups}, {}};
}

struct CallHash {
  size_t operator()(const OpCall& c) const { return c.hash(); }
};

}  // namespace

TEST_CASE("equal calls are equal and hash alike; different calls differ") {
  Tensor x = randn({1, 3, 8, 8}), w = randn({4, 3, 3, 3});
  Tensor x2 = randn({1, 3, 8, 8});  // other values, same metadata
  OpCall a = conv_call(x, w, {1, 1}), b = conv_call(x2, w, {1, 1});
  CHECK(a == b);
  CHECK(a.hash() == b.hash());

  std::vector<OpCall> different = {
      conv_call(x, w, {2, 2}),                                          // an attribute
      conv_call(randn({1, 3, 9, 8}), w, {1, 1}),                        // an input's shape
      conv_call(x.to(DType::Float64), w.to(DType::Float64), {1, 1}),   // the dtype
      conv_call(randn({1, 8, 8, 3}).permute({0, 3, 1, 2}), w, {1, 1}),  // the strides
      {ir::OpType::conv3d, {x, w, Tensor()}, ConvAttrs{{1, 1}, {0, 0}, {1, 1}, {}, 1}, {}},  // the op
      {ir::OpType::conv2d, {x, w, randn({4})}, ConvAttrs{{1, 1}, {0, 0}, {1, 1}, {}, 1}, {}},  // a bias
  };
  std::unordered_set<OpCall, CallHash> seen = {a};
  for (const OpCall& c : different) {
    CHECK_FALSE(c == a);
    CHECK(c.hash() != a.hash());
    seen.insert(c);
  }
  CHECK(seen.size() == different.size() + 1);
}

TEST_CASE("attributes of every family compare, hash and print by their fields") {
  CHECK(ReduceAttrs{{0, 2}, true} == ReduceAttrs{{0, 2}, true});
  CHECK_FALSE(ReduceAttrs{{0, 2}, true} == ReduceAttrs{{0, 2}, false});
  CHECK(hash_attrs(ReduceAttrs{{0, 2}, true}) != hash_attrs(ReduceAttrs{{0, 1}, true}));
  CHECK(hash_attrs(ClampAttrs{Scalar(1.0), std::nullopt}) != hash_attrs(ClampAttrs{std::nullopt, Scalar(1.0)}));
  CHECK(hash_attrs(ClampAttrs{Scalar(int64_t{1}), {}}) != hash_attrs(ClampAttrs{Scalar(1.0), {}}));  // int vs float
  // The same fields in two structs are two different attributes.
  CHECK(OpAttrs(DimAttrs{1, {}}) != OpAttrs(IndexAttrs{1, false}));
  CHECK(hash_attrs(DimAttrs{1, {}}) != hash_attrs(IndexAttrs{1, false}));
  // NaN parameters compare equal, so such calls can be cached too.
  CHECK(ElementwiseAttrs{{Scalar(NAN)}} == ElementwiseAttrs{{Scalar(NAN)}});

  CHECK(attrs_to_string(PoolAttrs{{2, 2}, {2, 2}, {0, 0}, {1, 1}, {}, true, true, 0}) ==
        "kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], dilation=[1, 1], output_size=[], ceil_mode=true, "
        "count_include_pad=true, divisor_override=0");
  CHECK(attrs_to_string(LossAttrs{-100, Reduction::Sum, 0.1}) ==
        "ignore_index=-100, reduction=sum, label_smoothing=0.1");
  CHECK(attrs_name(NormAttrs{}) == std::string("NormAttrs"));

  Tensor x = zeros({2, 3});
  OpCall c{ir::OpType::sum, {x}, ReduceAttrs{{1}, false}, {}};
  CHECK(c.to_string() == "sum(float32[2, 3] cpu; dims=[1], keepdim=false, correction=0)");
  OpCall n{ir::OpType::add, {x, Tensor::scalar(Scalar(2.5))}, ElementwiseAttrs{}, {}};
  CHECK(n.to_string() == "add(float32[2, 3] cpu, float64[] number; params=[])");
}

TEST_CASE("apply makes attributes canonical and refuses the wrong attribute struct") {
  Tensor x = randn({2, 3, 4});
  // sum over dims (-1, 0) and over (0, 2) is one call: dims are wrapped and sorted.
  Tensor a = apply({ir::OpType::sum, {x}, ReduceAttrs{{-1, 0}, false}, {}})[0];
  Tensor b = sum(x, {0, 2});
  CHECK(a.shape() == Shape{3});
  for (int i = 0; i < 3; ++i) CHECK(a.data<float>()[i] == b.data<float>()[i]);
  CHECK_THROWS_AS(apply({ir::OpType::sum, {x}, ConvAttrs{}, {}}), TypeError);
  // A failed call leaves the library usable.
  CHECK(add(x, x).shape() == x.shape());
}

TEST_CASE("in-place calls write into the given output and refuse overlapping memory") {
  Tensor x = ones({2, 3});
  const void* data = x.data_ptr();
  Tensor& r = binary_op_(ir::OpType::add, x, Tensor::scalar(Scalar(1.0)));
  CHECK(r.data_ptr() == data);
  CHECK(x.data<float>()[5] == 2.0f);
  Tensor e = ones({3}).expand({2, 3});  // six elements on three floats
  CHECK_THROWS_AS(binary_op_(ir::OpType::add, e, Tensor::scalar(Scalar(1.0))), ValueError);
}

TEST_CASE("linear runs fused on the CPU and as its composite elsewhere") {
  CHECK(has_kernel(ir::OpType::linear, Device::cpu()));
  CHECK(is_supported(ir::OpType::linear, Device::cpu()));
  // Every device runs linear through its composite (matmul + add), and transpose needs no kernel.
  CHECK(is_supported(ir::OpType::linear, Device::rocm(0)));
  CHECK(is_supported(ir::OpType::transpose, Device::rocm(0)));
  Tensor x = randn({5, 4}), w = randn({3, 4}), b = randn({3});
  Tensor y = linear(x, w, b), ref = add(matmul(x, transpose(w, 0, 1)), b);
  for (int i = 0; i < 15; ++i) CHECK(y.data<float>()[i] == doctest::Approx(ref.data<float>()[i]).epsilon(1e-5));
}
