// The ops of the op table's own families, generated from the table:
// pf.<op>(...), Tensor.<op>(...) and the in-place Tensor.<op>_(...); the
// table queries (op_table, has_kernel, is_supported).

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>

#include "bindings.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame::python;

namespace {

std::vector<Scalar> param_values(OpType op, std::initializer_list<nb::handle> values) {
  std::vector<Scalar> out;
  for (nb::handle v : values) out.push_back(as_scalar(v, pyflame::op_name(op)));
  return out;
}

// A unary elementwise op as pf.<op>(input, ...), Tensor.<op>(...) and the
// in-place Tensor.<op>_(...). Its parameters (op_params.def) become keyword
// arguments with PyTorch's names and defaults.
void bind_unary(nb::module_& m, nb::class_<Tensor>& tensor, OpType op) {
  if (op == OpType::gelu || op == OpType::nan_to_num) return;  // parameters of their own in Python: bound below
  const char* name = pyflame::op_name(op);
  const std::string inplace = std::string(name) + "_";
  std::vector<pyflame::OpParam> params = pyflame::op_params(op);
  auto arg = [&](size_t i) { return nb::arg(params[i].name) = scalar_to_python(params[i].default_value); };
  switch (params.size()) {
    case 0: {
      auto f = [op](const Tensor& x) { return pyflame::unary_op(op, x); };
      m.def(name, f, "input"_a);
      tensor.def(name, f);
      tensor.def(inplace.c_str(), [op](nb::handle self) {
        return in_place(self, [&](Tensor& x) { pyflame::unary_op_(op, x); });
      });
      break;
    }
    case 1: {
      auto f = [op](const Tensor& x, nb::handle a) { return pyflame::unary_op(op, x, param_values(op, {a})); };
      m.def(name, f, "input"_a, arg(0));
      tensor.def(name, f, arg(0));
      tensor.def(inplace.c_str(), [op](nb::handle self, nb::handle a) {
        return in_place(self, [&](Tensor& x) { pyflame::unary_op_(op, x, param_values(op, {a})); });
      }, arg(0));
      break;
    }
    case 2: {
      auto f = [op](const Tensor& x, nb::handle a, nb::handle b) {
        return pyflame::unary_op(op, x, param_values(op, {a, b}));
      };
      m.def(name, f, "input"_a, arg(0), arg(1));
      tensor.def(name, f, arg(0), arg(1));
      tensor.def(inplace.c_str(), [op](nb::handle self, nb::handle a, nb::handle b) {
        return in_place(self, [&](Tensor& x) { pyflame::unary_op_(op, x, param_values(op, {a, b})); });
      }, arg(0), arg(1));
      break;
    }
    default:
      throw std::logic_error(std::string(name) + ": bind_unary handles up to 2 parameters; add a case");
  }
}
// A reduction as PyTorch takes it: dtype= converts the input first and is the
// result's dtype (an integer sum, widened to int64, comes back to it); axis= is
// dim's NumPy name.
Tensor reduce(OpType op, const Tensor& x, nb::handle dim, bool keepdim, nb::handle dtype, nb::handle axis) {
  if (!axis.is_none()) {
    PF_CHECK(dim.is_none(), TypeError, pyflame::op_name(op), "(): got both dim and axis (axis is dim's NumPy name)");
    dim = axis;
  }
  if (dtype.is_none()) return pyflame::reduce_op(op, x, as_dims(dim), keepdim);
  const DType d = as_dtype(dtype);
  return pyflame::to(pyflame::reduce_op(op, pyflame::to(x, d), as_dims(dim), keepdim), d);
}
}  // namespace

namespace pyflame::python {

void bind_ops(nb::module_& m, nb::class_<Tensor>& tensor) {
  // pf.<op>(...) and Tensor.<op>(...), plus in-place Tensor.<op>_ for
  // elementwise ops that keep their input's shape.
#define PF_BIND_UNARY(name) bind_unary(m, tensor, OpType::name);
#define PF_BIND_BINARY(name)                                                                              \
  m.def(#name, [](nb::handle a, nb::handle b) { return pyflame::binary_op(OpType::name, as_operand(a), as_operand(b)); }, \
        "input"_a, "other"_a);                                                                            \
  tensor.def(#name, [](const Tensor& a, nb::handle b) { return pyflame::binary_op(OpType::name, a, as_operand(b)); }, \
             "other"_a);                                                                                  \
  tensor.def(#name "_", [](nb::handle self, nb::handle b) {                                               \
    return in_place(self, [&](Tensor& a) { pyflame::binary_op_(OpType::name, a, as_operand(b)); }); }, "other"_a);
#define PF_FAMILY_UNARY(name, functor) PF_BIND_UNARY(name)
#define PF_FAMILY_UNARY_FLOAT(name, functor) PF_BIND_UNARY(name)
#define PF_FAMILY_UNARY_BOOL(name, functor) PF_BIND_UNARY(name)
#define PF_FAMILY_BINARY(name, functor) PF_BIND_BINARY(name)
#define PF_FAMILY_BINARY_FLOAT(name, functor) PF_BIND_BINARY(name)
#define PF_FAMILY_UNARY_INT(name, functor) PF_BIND_UNARY(name)
#define PF_FAMILY_BINARY_INT(name, functor) PF_BIND_BINARY(name)
#define PF_FAMILY_COMPARE(name, functor) PF_BIND_BINARY(name)
#define PF_FAMILY_REDUCE(name, functor)                                                                    \
  m.def(#name, [](const Tensor& x, nb::handle dim, bool keepdim, nb::handle dtype, nb::handle axis) {      \
    return reduce(OpType::name, x, dim, keepdim, dtype, axis); }, "x"_a, "dim"_a = nb::none(),             \
    "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(), "axis"_a = nb::none());                    \
  tensor.def(#name, [](const Tensor& x, nb::handle dim, bool keepdim, nb::handle dtype, nb::handle axis) { \
    return reduce(OpType::name, x, dim, keepdim, dtype, axis); }, "dim"_a = nb::none(), "keepdim"_a = false, \
    nb::kw_only(), "dtype"_a = nb::none(), "axis"_a = nb::none());
#define PF_FAMILY_ARG_REDUCE(name, functor)                                                            \
  m.def(#name, [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {                         \
    return pyflame::name(x, dim, keepdim); }, "x"_a, "dim"_a = nb::none(), "keepdim"_a = false);       \
  tensor.def(#name, [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {                    \
    return pyflame::name(x, dim, keepdim); }, "dim"_a = nb::none(), "keepdim"_a = false);
#define PF_FAMILY_MATMUL(name, functor)                                                      \
  m.def(#name, [](const Tensor& a, const Tensor& b) { return pyflame::name(a, b); }, "input"_a, "other"_a); \
  tensor.def(#name, [](const Tensor& a, const Tensor& b) { return pyflame::name(a, b); }, "other"_a);
#define PF_FAMILY_SOFTMAX(name, functor)                                                                     \
  m.def(#name, [](const Tensor& x, int64_t dim, nb::handle dtype) { return pyflame::name(x, dim, as_opt_dtype(dtype)); }, \
        "x"_a, "dim"_a = -1, "dtype"_a = nb::none());                                                      \
  tensor.def(#name, [](const Tensor& x, int64_t dim, nb::handle dtype) {                                  \
    return pyflame::name(x, dim, as_opt_dtype(dtype)); }, "dim"_a = -1, "dtype"_a = nb::none());
#include "pyflame/for_each_op.inc"
#undef PF_BIND_UNARY
#undef PF_BIND_BINARY

  // add and sub also take PyTorch's alpha: input + alpha * other. Overloads
  // after the plain ones, so a call without alpha takes the plain path.
  for (auto [name, op] : {std::pair{"add", OpType::add}, std::pair{"sub", OpType::sub}}) {
    auto scaled = [op = op](const Tensor& a, nb::handle b, nb::handle alpha) {
      Tensor other = as_operand(b);
      PF_CHECK(!(nb::isinstance<nb::float_>(alpha) && !is_floating(a.dtype()) && !is_floating(other.dtype())),
               TypeError, op_name(op), ": for integer tensors, alpha must not be a float");
      return pyflame::binary_op(OpType::mul, other, as_operand(alpha));
    };
    m.def(name, [op = op, scaled](nb::handle a, nb::handle b, nb::handle alpha) {
      Tensor x = as_operand(a);
      return pyflame::binary_op(op, x, scaled(x, b, alpha));
    }, "input"_a, "other"_a, nb::kw_only(), "alpha"_a);
    tensor.def(name, [op = op, scaled](const Tensor& a, nb::handle b, nb::handle alpha) {
      return pyflame::binary_op(op, a, scaled(a, b, alpha));
    }, "other"_a, nb::kw_only(), "alpha"_a);
    tensor.def((std::string(name) + "_").c_str(), [op = op, scaled](nb::handle self, nb::handle b, nb::handle alpha) {
      return in_place(self, [&](Tensor& a) { pyflame::binary_op_(op, a, scaled(a, b, alpha)); });
    }, "other"_a, nb::kw_only(), "alpha"_a);
  }

  // Ops whose signature is their own.
  auto gelu = [](const Tensor& x, const std::string& approximate) { return pyflame::gelu(x, approximate); };
  m.def("gelu", gelu, "input"_a, "approximate"_a = "none");
  tensor.def("gelu", gelu, "approximate"_a = "none");
  tensor.def("gelu_", [](nb::handle self, const std::string& approximate) {
    return in_place(self, [&](Tensor& x) {
      PF_CHECK(approximate == "none" || approximate == "tanh", ValueError,
               "gelu_: approximate must be 'none' or 'tanh', got '", approximate, "'");
      pyflame::unary_op_(OpType::gelu, x, {Scalar(int64_t{approximate == "tanh"})});
    });
  }, "approximate"_a = "none");
  // clamp and its PyTorch names: bounds are numbers or tensors (broadcast), either may be None.
  auto bound = [](nb::handle b) { return b.is_none() ? std::nullopt : std::optional<Tensor>(as_operand(b)); };
  auto clamp = [bound](const Tensor& x, nb::handle lo, nb::handle hi) {
    return pyflame::clamp(x, bound(lo), bound(hi));
  };
  auto clamp_ = [bound](nb::handle self, nb::handle lo, nb::handle hi) {
    return in_place(self, [&](Tensor& x) { pyflame::clamp_(x, bound(lo), bound(hi)); });
  };
  for (const char* name : {"clamp", "clip"}) {
    m.def(name, clamp, "input"_a, "min"_a = nb::none(), "max"_a = nb::none());
    tensor.def(name, clamp, "min"_a = nb::none(), "max"_a = nb::none());
    tensor.def((std::string(name) + "_").c_str(), clamp_, "min"_a = nb::none(), "max"_a = nb::none());
  }
  auto clamp_min = [clamp](const Tensor& x, nb::handle lo) { return clamp(x, lo, nb::none()); };
  auto clamp_max = [clamp](const Tensor& x, nb::handle hi) { return clamp(x, nb::none(), hi); };
  m.def("clamp_min", clamp_min, "input"_a, "min"_a);
  m.def("clamp_max", clamp_max, "input"_a, "max"_a);
  tensor.def("clamp_min", clamp_min, "min"_a);
  tensor.def("clamp_max", clamp_max, "max"_a);
  tensor.def("clamp_min_", [clamp_](nb::handle self, nb::handle lo) { return clamp_(self, lo, nb::none()); }, "min"_a);
  tensor.def("clamp_max_", [clamp_](nb::handle self, nb::handle hi) { return clamp_(self, nb::none(), hi); }, "max"_a);

  // nan_to_num: posinf/neginf None are the dtype's largest finite values (NaN tells the op layer so).
  auto nan_to_num_params = [](nb::handle nan, nb::handle posinf, nb::handle neginf) {
    std::vector<Scalar> p;
    for (nb::handle v : {nan, posinf, neginf})
      p.push_back(v.is_none() ? Scalar(std::nan("")) : as_scalar(v, "nan_to_num"));
    return p;
  };
  auto nan_to_num = [nan_to_num_params](const Tensor& x, nb::handle nan, nb::handle posinf, nb::handle neginf) {
    return pyflame::unary_op(OpType::nan_to_num, x, nan_to_num_params(nan, posinf, neginf));
  };
  m.def("nan_to_num", nan_to_num, "input"_a, "nan"_a = 0.0, "posinf"_a = nb::none(), "neginf"_a = nb::none());
  tensor.def("nan_to_num", nan_to_num, "nan"_a = 0.0, "posinf"_a = nb::none(), "neginf"_a = nb::none());
  tensor.def("nan_to_num_", [nan_to_num_params](nb::handle self, nb::handle nan, nb::handle posinf, nb::handle neginf) {
    return in_place(self, [&](Tensor& x) {
      pyflame::unary_op_(OpType::nan_to_num, x, nan_to_num_params(nan, posinf, neginf));
    });
  }, "nan"_a = 0.0, "posinf"_a = nb::none(), "neginf"_a = nb::none());

  // div's rounding_mode (None, 'trunc', 'floor'), its aliases divide and true_divide.
  auto div_op = [](nb::handle mode) {
    if (mode.is_none()) return OpType::div;
    const std::string m = nb::isinstance<nb::str>(mode) ? nb::cast<std::string>(mode) : std::string("?");
    PF_CHECK(m == "trunc" || m == "floor", ValueError,
             "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found ", nb::repr(mode).c_str());
    return m == "trunc" ? OpType::trunc_divide : OpType::floor_divide;
  };
  for (const char* name : {"div", "divide", "true_divide"}) {
    const bool rounding = std::string(name) != "true_divide";
    if (std::string(name) != "div") {  // div's plain forms come from the table
      m.def(name, [](nb::handle a, nb::handle b) {
        return pyflame::binary_op(OpType::div, as_operand(a), as_operand(b));
      }, "input"_a, "other"_a);
      tensor.def(name, [](const Tensor& a, nb::handle b) { return pyflame::binary_op(OpType::div, a, as_operand(b)); },
                 "other"_a);
      tensor.def((std::string(name) + "_").c_str(), [](nb::handle self, nb::handle b) {
        return in_place(self, [&](Tensor& a) { pyflame::binary_op_(OpType::div, a, as_operand(b)); });
      }, "other"_a);
    }
    if (!rounding) continue;
    m.def(name, [div_op](nb::handle a, nb::handle b, nb::handle mode) {
      return pyflame::binary_op(div_op(mode), as_operand(a), as_operand(b));
    }, "input"_a, "other"_a, nb::kw_only(), "rounding_mode"_a.none());
    tensor.def(name, [div_op](const Tensor& a, nb::handle b, nb::handle mode) {
      return pyflame::binary_op(div_op(mode), a, as_operand(b));
    }, "other"_a, nb::kw_only(), "rounding_mode"_a.none());
    tensor.def((std::string(name) + "_").c_str(), [div_op](nb::handle self, nb::handle b, nb::handle mode) {
      return in_place(self, [&](Tensor& a) { pyflame::binary_op_(div_op(mode), a, as_operand(b)); });
    }, "other"_a, nb::kw_only(), "rounding_mode"_a.none());
  }
  m.def("where", [](const Tensor& c, nb::handle a, nb::handle b) { return pyflame::where(c, as_operand(a), as_operand(b)); },
        "condition"_a, "input"_a, "other"_a);
  // Views (Tensor's methods of the same names are in bind_tensor.cpp).
  m.def("transpose", &pyflame::transpose, "input"_a, "dim0"_a, "dim1"_a);
  m.def("view", [](const Tensor& x, nb::handle shape) { return pyflame::view(x, as_shape(nb::make_tuple(shape))); },
        "input"_a, "shape"_a);
  m.def("reshape", [](const Tensor& x, nb::handle shape) {
    return pyflame::reshape(x, as_shape(nb::make_tuple(shape))); }, "input"_a, "shape"_a);
  m.def("permute", [](const Tensor& x, nb::handle dims) { return pyflame::permute(x, as_shape(nb::make_tuple(dims))); },
        "input"_a, "dims"_a);
  m.def("expand", [](const Tensor& x, nb::handle shape) { return pyflame::expand(x, as_shape(nb::make_tuple(shape))); },
        "input"_a, "size"_a);
  m.def("squeeze", [](const Tensor& x, nb::handle dim) { return pyflame::squeeze(x, as_dims(dim)); }, "input"_a,
        "dim"_a = nb::none());
  m.def("unsqueeze", &pyflame::unsqueeze, "input"_a, "dim"_a);
  m.def("select", &pyflame::select, "input"_a, "dim"_a, "index"_a);
  m.def("slice", &pyflame::slice, "input"_a, "dim"_a, "start"_a, "stop"_a, "step"_a = 1,
        "input[..., start:stop:step, ...] along dim (the view x[...] makes).");
  m.def("unfold", &pyflame::unfold, "input"_a, "dimension"_a, "size"_a, "step"_a,
        "Windows of size elements step apart along dimension, as a new last dim (Tensor.unfold, a view).");
  m.def("flatten", &pyflame::flatten, "input"_a, "start_dim"_a = 0, "end_dim"_a = -1);
  m.def("op_table", [] {
    std::vector<std::pair<std::string, std::string>> ops;
    for (int i = 0; i < pyflame::kNumOps; ++i) {
      auto op = static_cast<OpType>(i);
      if (pyflame::op_family(op) == pyflame::OpFamily::COPY) continue;
      ops.emplace_back(pyflame::op_name(op), pyflame::family_name(pyflame::op_family(op)));
    }
    return ops;
  }, "(name, family) of every op in the op table.");
  m.def("has_kernel", [](const std::string& op, nb::handle device) {
    return pyflame::has_kernel(pyflame::op_from_name(op), as_device(device));
  }, "op"_a, "device"_a, "Whether `device` has a native kernel for the op.");
  m.def("is_supported", [](const std::string& op, nb::handle device) {
    return pyflame::is_supported(pyflame::op_from_name(op), as_device(device));
  }, "op"_a, "device"_a, "Whether the op runs on `device` at all: a native kernel, a composite of other ops, or a view.");

}

}  // namespace pyflame::python
