// Python binding of the shape area (include/pyflame/shape_ops.h): functions
// and Tensor methods with PyTorch's argument names and defaults. Tensor
// indexing with tensors (x[index], x[mask]) is in bindings.cpp's get_item.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame::python {

namespace {

nb::tuple to_tuple(const std::vector<Tensor>& parts) {
  nb::list l;
  for (const Tensor& t : parts) l.append(nb::cast(t));
  return nb::tuple(l);
}

// split's sizes: an int (the size of every part) or a sequence of ints (one per part).
std::vector<Tensor> split_any(const Tensor& x, nb::handle sizes, int64_t dim) {
  if (PyIndex_Check(sizes.ptr())) return pyflame::split(x, nb::cast<int64_t>(nb::int_(sizes)), dim);
  if (!PySequence_Check(sizes.ptr()))
    throw pyflame::TypeError("split: split_size_or_sections must be an int or a sequence of ints, got " +
                             py_type_name(sizes));
  std::vector<int64_t> s;
  for (nb::handle v : nb::borrow<nb::sequence>(sizes)) {
    if (!PyIndex_Check(v.ptr()))
      throw pyflame::TypeError("split: split sizes must be integers, got " + py_type_name(v));
    s.push_back(nb::cast<int64_t>(nb::int_(v)));
  }
  return pyflame::split(x, s, dim);
}

// A fill value: a number or a 0-d tensor, as PyTorch accepts.
Scalar fill_value(nb::handle v, const char* op) {
  if (nb::isinstance<Tensor>(v) && nb::cast<Tensor>(v).dim() != 0)
    throw pyflame::ValueError(std::string(op) + ": value must be a number or a 0-d tensor, got a tensor of shape " +
                              pyflame::detail::to_piece(nb::cast<Tensor>(v).shape()));
  return as_scalar(v, op);
}

// scatter's fourth argument, given by position or as src= (a tensor) or value= (a number).
nb::handle src_or_value(nb::handle src, nb::handle value) {
  if (src.is_none() == value.is_none())
    throw pyflame::TypeError("scatter: give exactly one of src (a tensor) and value (a number)");
  return src.is_none() ? value : src;
}

// scatter's reduce names, as scatter_reduce's.
std::string scatter_reduce_name(const std::string& reduce) {
  if (reduce == "add") return "sum";
  if (reduce == "multiply") return "prod";
  throw pyflame::ValueError("scatter: reduce argument must be either add or multiply, got " + reduce);
}

}  // namespace

void bind_shape(nb::module_& m, nb::class_<Tensor>& tensor) {
  m.def("cat", [](const std::vector<Tensor>& tensors, int64_t dim) { return pyflame::cat(tensors, dim); },
        "tensors"_a, "dim"_a = 0);
  m.def("stack", [](const std::vector<Tensor>& tensors, int64_t dim) { return pyflame::stack(tensors, dim); },
        "tensors"_a, "dim"_a = 0);
  auto split = [](const Tensor& x, nb::handle sizes, int64_t dim) { return to_tuple(split_any(x, sizes, dim)); };
  m.def("split", split, "tensor"_a, "split_size_or_sections"_a, "dim"_a = 0);
  tensor.def("split", split, "split_size"_a, "dim"_a = 0);
  auto chunk = [](const Tensor& x, int64_t chunks, int64_t dim) { return to_tuple(pyflame::chunk(x, chunks, dim)); };
  m.def("chunk", chunk, "input"_a, "chunks"_a, "dim"_a = 0);
  tensor.def("chunk", chunk, "chunks"_a, "dim"_a = 0);

  auto index_select = [](const Tensor& x, int64_t dim, const Tensor& index) {
    return pyflame::index_select(x, dim, index);
  };
  m.def("index_select", index_select, "input"_a, "dim"_a, "index"_a);
  tensor.def("index_select", index_select, "dim"_a, "index"_a);
  auto gather = [](const Tensor& x, int64_t dim, const Tensor& index) { return pyflame::gather(x, dim, index); };
  m.def("gather", gather, "input"_a, "dim"_a, "index"_a);
  tensor.def("gather", gather, "dim"_a, "index"_a);

  // torch.searchsorted; a number for `input` needs a 1-D sequence and gives a 0-d result.
  m.def("searchsorted",
        [](const Tensor& seq, nb::handle input, bool out_int32, bool right, std::optional<std::string> side,
           std::optional<Tensor> sorter) {
          if (side) {
            PF_CHECK(*side == "left" || *side == "right", ValueError,
                     "searchsorted: side can only be 'left' or 'right' but got ", *side);
            PF_CHECK(!(right && *side == "left"), ValueError,
                     "searchsorted: side and right can't be set to opposites, got side of left while right was True");
            right = *side == "right";
          }
          Tensor values;
          if (nb::isinstance<Tensor>(input)) {
            values = nb::cast<Tensor>(input);
          } else {
            PF_CHECK(seq.dim() == 1, ValueError,
                     "searchsorted: input value can be a scalar only when boundaries tensor dimension is 1, but we "
                     "got boundaries tensor dim(", seq.dim(), ")");
            Tensor number = as_operand(input);
            values = pyflame::full({}, number.item(), pyflame::result_type({seq, number}));
          }
          return pyflame::searchsorted(seq, values, out_int32, right, sorter.value_or(Tensor()));
        },
        "sorted_sequence"_a, "input"_a, nb::kw_only(), "out_int32"_a = false, "right"_a = false,
        "side"_a = nb::none(), "sorter"_a = nb::none());

  // reduce='add'|'multiply': PyTorch's older form of scatter_reduce ('sum'|'prod', x included).
  auto scatter = [](const Tensor& x, int64_t dim, const Tensor& index, nb::handle src, nb::handle value,
                    std::optional<std::string> reduce) {
    nb::handle v = src_or_value(src, value);
    if (reduce) {
      Tensor values = nb::isinstance<Tensor>(v)
                          ? nb::cast<Tensor>(v)
                          : expand(full({}, as_scalar(v, "scatter value"), x.dtype()), index.shape());
      return pyflame::scatter_reduce(x, dim, index, values, scatter_reduce_name(*reduce), true);
    }
    if (nb::isinstance<Tensor>(v)) return pyflame::scatter(x, dim, index, nb::cast<Tensor>(v));
    return pyflame::scatter(x, dim, index, as_scalar(v, "scatter value"));
  };
  m.def("scatter", scatter, "input"_a, "dim"_a, "index"_a, "src"_a = nb::none(), "value"_a = nb::none(),
        nb::kw_only(), "reduce"_a = nb::none());
  tensor.def("scatter", scatter, "dim"_a, "index"_a, "src"_a = nb::none(), "value"_a = nb::none(), nb::kw_only(),
             "reduce"_a = nb::none());
  tensor.def("scatter_", [scatter](nb::handle self, int64_t dim, const Tensor& index, nb::handle src, nb::handle value,
                                   std::optional<std::string> reduce) {
    nb::handle v = src_or_value(src, value);
    return in_place(self, [&](Tensor& x) {
      if (reduce) pyflame::copy_(x, scatter(x, dim, index, src, value, reduce));
      else if (nb::isinstance<Tensor>(v)) pyflame::scatter_(x, dim, index, nb::cast<Tensor>(v));
      else pyflame::scatter_(x, dim, index, as_scalar(v, "scatter_ value"));
    });
  }, "dim"_a, "index"_a, "src"_a = nb::none(), "value"_a = nb::none(), nb::kw_only(), "reduce"_a = nb::none());
  auto scatter_reduce = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                           const std::string& reduce, bool include_self) {
    return pyflame::scatter_reduce(x, dim, index, src, reduce, include_self);
  };
  m.def("scatter_reduce", scatter_reduce, "input"_a, "dim"_a, "index"_a, "src"_a, "reduce"_a, nb::kw_only(),
        "include_self"_a = true);
  tensor.def("scatter_reduce", scatter_reduce, "dim"_a, "index"_a, "src"_a, "reduce"_a, nb::kw_only(),
             "include_self"_a = true);
  tensor.def("scatter_reduce_", [](nb::handle self, int64_t dim, const Tensor& index, const Tensor& src,
                                   const std::string& reduce, bool include_self) {
    return in_place(self, [&](Tensor& x) { pyflame::scatter_reduce_(x, dim, index, src, reduce, include_self); });
  }, "dim"_a, "index"_a, "src"_a, "reduce"_a, nb::kw_only(), "include_self"_a = true);
  auto scatter_add = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    return pyflame::scatter_add(x, dim, index, src);
  };
  m.def("scatter_add", scatter_add, "input"_a, "dim"_a, "index"_a, "src"_a);
  tensor.def("scatter_add", scatter_add, "dim"_a, "index"_a, "src"_a);
  tensor.def("scatter_add_", [](nb::handle self, int64_t dim, const Tensor& index, const Tensor& src) {
    return in_place(self, [&](Tensor& x) { pyflame::scatter_add_(x, dim, index, src); });
  }, "dim"_a, "index"_a, "src"_a);

  m.def("embedding", [](const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
    return pyflame::embedding(input, weight, padding_idx);
  }, "input"_a, "weight"_a, "padding_idx"_a = nb::none());
  m.def("one_hot", [](const Tensor& x, int64_t num_classes) { return pyflame::one_hot(x, num_classes); },
        "tensor"_a, "num_classes"_a = -1);

  auto masked_fill = [](const Tensor& x, const Tensor& mask, nb::handle value) {
    return pyflame::masked_fill(x, mask, fill_value(value, "masked_fill"));
  };
  m.def("masked_fill", masked_fill, "input"_a, "mask"_a, "value"_a);
  tensor.def("masked_fill", masked_fill, "mask"_a, "value"_a);
  tensor.def("masked_fill_", [](nb::handle self, const Tensor& mask, nb::handle value) {
    Scalar v = fill_value(value, "masked_fill_");
    return in_place(self, [&](Tensor& x) { pyflame::masked_fill_(x, mask, v); });
  }, "mask"_a, "value"_a);

  const std::pair<const char*, Tensor (*)(const Tensor&, int64_t)> triangles[] = {
      {"tril", &pyflame::tril}, {"triu", &pyflame::triu}};
  for (auto [name, fn] : triangles) {
    m.def(name, [fn](const Tensor& x, int64_t diagonal) { return fn(x, diagonal); }, "input"_a, "diagonal"_a = 0);
    tensor.def(name, [fn](const Tensor& x, int64_t diagonal) { return fn(x, diagonal); }, "diagonal"_a = 0);
    tensor.def((std::string(name) + "_").c_str(), [fn](nb::handle self, int64_t diagonal) {
      return in_place(self, [&](Tensor& x) { x.copy_(fn(x, diagonal)); });
    }, "diagonal"_a = 0);
  }
}

}  // namespace pyflame::python
