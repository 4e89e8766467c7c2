#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "pyflame/dtype.h"
#include "pyflame/error.h"

using namespace pyflame;

TEST_CASE("promote_types matches PyTorch's table") {
  CHECK(promote_types(DType::Bool, DType::Int32) == DType::Int32);
  CHECK(promote_types(DType::UInt8, DType::Int8) == DType::Int16);
  CHECK(promote_types(DType::UInt8, DType::Int32) == DType::Int32);
  CHECK(promote_types(DType::Int64, DType::Float16) == DType::Float16);
  CHECK(promote_types(DType::Float16, DType::BFloat16) == DType::Float32);
  CHECK(promote_types(DType::BFloat16, DType::Float32) == DType::Float32);
  CHECK(promote_types(DType::Float32, DType::Float64) == DType::Float64);
  CHECK(promote_types(DType::Int32, DType::Int32) == DType::Int32);
}

TEST_CASE("dtype names and sizes") {
  CHECK(std::string(dtype_name(DType::BFloat16)) == "bfloat16");
  CHECK(parse_dtype("float") == DType::Float32);
  CHECK(parse_dtype("int64") == DType::Int64);
  CHECK_THROWS_AS(parse_dtype("complex64"), ValueError);
  CHECK(itemsize(DType::Float16) == 2);
  CHECK(itemsize(DType::Int64) == 8);
  CHECK(is_floating(DType::BFloat16));
  CHECK_FALSE(is_floating(DType::Int32));
  CHECK_FALSE(is_integral(DType::Bool));
}

TEST_CASE("float16 conversion rounds to nearest even and keeps specials") {
  CHECK(float(Half(1.0f)) == 1.0f);
  CHECK(float(Half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(float(Half(65520.0f))));       // halfway to the next binade rounds up to inf
  CHECK(float(Half(65519.0f)) == 65504.0f);
  CHECK(float(Half(1.0f + 1.0f / 2048)) == 1.0f);  // tie -> even
  CHECK(float(Half(1.0f + 3.0f / 2048)) == 1.0f + 2.0f / 1024);
  CHECK(float(Half(5.9604644775390625e-8f)) == 5.9604644775390625e-8f);  // smallest subnormal
  CHECK(std::isnan(float(Half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(float(Half(-0.0f)) == 0.0f);
  CHECK(std::signbit(float(Half(-0.0f))));
  // Every half value survives a round trip through float.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = Half::to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    REQUIRE(Half::from_float(f) == bits);
  }
}

TEST_CASE("bfloat16 conversion rounds to nearest even") {
  CHECK(float(BFloat16(1.0f)) == 1.0f);
  CHECK(float(BFloat16(1.0f + 1.0f / 256)) == 1.0f);  // tie -> even
  CHECK(float(BFloat16(1.0f + 3.0f / 256)) == 1.0f + 2.0f / 128);
  CHECK(std::isnan(float(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(float(BFloat16(std::numeric_limits<float>::infinity()))));
}
