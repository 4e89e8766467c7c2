#include "pyflame/dtype.h"

#include "pyflame/error.h"

namespace pyflame {

namespace {
struct DTypeInfo { const char* name; size_t size; };
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", 1}, {"uint8", 1}, {"int8", 1}, {"int16", 2}, {"int32", 4}, {"int64", 8},
    {"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8},
};
const DTypeInfo& info(DType d) { return kInfo[static_cast<int>(d)]; }
}  // namespace

const char* dtype_name(DType d) { return info(d).name; }
std::string to_string(DType d) { return dtype_name(d); }
size_t itemsize(DType d) { return info(d).size; }
bool is_floating(DType d) { return d >= DType::Float16; }
bool is_integral(DType d) { return d >= DType::UInt8 && d <= DType::Int64; }

DType parse_dtype(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == kInfo[i].name) return static_cast<DType>(i);
  // The aliases NumPy and PyTorch users type.
  if (name == "float" || name == "f4") return DType::Float32;
  if (name == "double" || name == "f8") return DType::Float64;
  if (name == "half" || name == "f2") return DType::Float16;
  if (name == "int" || name == "long") return DType::Int64;
  if (name == "short") return DType::Int16;
  if (name == "bool_") return DType::Bool;  // NumPy 1's name
  throw ValueError("unknown dtype '" + name + "'");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if ((a == DType::UInt8 && b == DType::Int8) || (a == DType::Int8 && b == DType::UInt8))
    return DType::Int16;  // neither holds the other's range
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return a > b ? a : b;
}

}  // namespace pyflame
