#pragma once
// The op API. Each function builds an op call and hands it to apply()
// (pyflame/ir/op_call.h), which validates it (shapes, broadcasting, dtype
// promotion, device placement) and runs it on the current device. The
// declarations of the table's families are generated from the op table.

#include <optional>
#include <string>
#include <vector>

#include "pyflame/generator.h"
#include "pyflame/ir/op_call.h"
#include "pyflame/tensor.h"

namespace pyflame {

// params: the op's parameters (op_params.def) in order; missing trailing ones take their defaults.
#define PF_DECL_UNARY(name) PF_API Tensor name(const Tensor& x, const std::vector<Scalar>& params = {});
#define PF_DECL_BINARY(name)                            \
  PF_API Tensor name(const Tensor& a, const Tensor& b); \
  PF_API Tensor name(const Tensor& a, Scalar b);        \
  PF_API Tensor name(Scalar a, const Tensor& b);
#define PF_FAMILY_UNARY(name, functor) PF_DECL_UNARY(name)
#define PF_FAMILY_UNARY_FLOAT(name, functor) PF_DECL_UNARY(name)
#define PF_FAMILY_UNARY_BOOL(name, functor) PF_DECL_UNARY(name)
#define PF_FAMILY_BINARY(name, functor) PF_DECL_BINARY(name)
#define PF_FAMILY_BINARY_FLOAT(name, functor) PF_DECL_BINARY(name)
#define PF_FAMILY_UNARY_INT(name, functor) PF_DECL_UNARY(name)
#define PF_FAMILY_BINARY_INT(name, functor) PF_DECL_BINARY(name)
#define PF_FAMILY_COMPARE(name, functor) PF_DECL_BINARY(name)
#define PF_FAMILY_REDUCE(name, functor) \
  PF_API Tensor name(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
#define PF_FAMILY_ARG_REDUCE(name, functor) \
  PF_API Tensor name(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
#define PF_FAMILY_MATMUL(name, functor) PF_API Tensor name(const Tensor& a, const Tensor& b);
#define PF_FAMILY_SOFTMAX(name, functor) \
  PF_API Tensor name(const Tensor& x, int64_t dim = -1, std::optional<DType> dtype = std::nullopt);
#include "pyflame/for_each_op.inc"
#undef PF_DECL_UNARY
#undef PF_DECL_BINARY

// approximate: "none" (exact erf form) or "tanh".
PF_API Tensor gelu(const Tensor& x, const std::string& approximate);
PF_API Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
PF_API Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// Bounds that are tensors broadcast with x (the result has the broadcast shape
// and promoted dtype); wrapped numbers among them act as the Scalar form's.
PF_API Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
PF_API Tensor& clamp_(Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);

// Views (ops of the table; Tensor's methods of the same names are their raw,
// unrecorded forms). Shapes may hold one -1; reshape copies when no view can
// express the shape; squeeze removes the listed size-1 dims ({}: all of them);
// slice has Python's slice semantics with a positive step.
PF_API Tensor view(const Tensor& x, const Shape& shape);
PF_API Tensor reshape(const Tensor& x, const Shape& shape);
PF_API Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
PF_API Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
PF_API Tensor expand(const Tensor& x, const Shape& shape);
PF_API Tensor squeeze(const Tensor& x, const std::vector<int64_t>& dims = {});
PF_API Tensor unsqueeze(const Tensor& x, int64_t dim);
PF_API Tensor select(const Tensor& x, int64_t dim, int64_t index);
PF_API Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t stop, int64_t step = 1);
PF_API Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step);  // Tensor.unfold, a view
PF_API Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);  // a reshape

// Copies as ops (Tensor's own copy_/fill_/to are the raw, unrecorded forms).
// copy_ converts and broadcasts `src` into `dst`, from any device. non_blocking:
// a copy from pinned host memory (Tensor::pin_memory) to a GPU returns before it
// has run (the source must not change until then), as in PyTorch.
PF_API Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking = false);
PF_API Tensor& fill_(Tensor& dst, Scalar value);
PF_API Tensor to(const Tensor& x, DType dtype);    // x itself when the dtype matches
PF_API Tensor to(const Tensor& x, Device device, bool non_blocking = false);  // x itself when already there
PF_API Tensor clone(const Tensor& x);
PF_API Tensor contiguous(const Tensor& x);         // x itself when contiguous

// Generic entry points (used by the bindings, which are generated from the table).
PF_API Tensor unary_op(ir::OpType op, const Tensor& x, const std::vector<Scalar>& params = {});
PF_API Tensor binary_op(ir::OpType op, const Tensor& a, const Tensor& b);
// In place: a = op(a, b). TypeError if the result dtype cannot be stored in a.
PF_API Tensor& binary_op_(ir::OpType op, Tensor& a, const Tensor& b);
PF_API Tensor& unary_op_(ir::OpType op, Tensor& x, const std::vector<Scalar>& params = {});
PF_API Tensor reduce_op(ir::OpType op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
// PyTorch's result_type for the operands of an elementwise op.
PF_API DType result_type(const std::vector<Tensor>& operands);

// Creation, on the current device unless one is given.
PF_API Tensor zeros(const Shape& shape, DType dtype = DType::Float32);
PF_API Tensor ones(const Shape& shape, DType dtype = DType::Float32);
PF_API Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype = std::nullopt);
PF_API Tensor arange(Scalar start, Scalar end, Scalar step = Scalar(int64_t{1}),
                     std::optional<DType> dtype = std::nullopt);
PF_API Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32);
PF_API Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::Float32);
PF_API Tensor full_like(const Tensor& x, Scalar value, std::optional<DType> dtype = std::nullopt);
PF_API Tensor zeros_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
PF_API Tensor ones_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);

// Random numbers (pyflame/generator.h): drawn on the current device from
// `generator`, or the default generator that manual_seed seeds; a seed gives
// the same draws on every run and every device.
PF_API Tensor rand(const Shape& shape, DType dtype = DType::Float32, Generator* generator = nullptr);   // U[0, 1)
PF_API Tensor randn(const Shape& shape, DType dtype = DType::Float32, Generator* generator = nullptr);  // N(0, 1)
PF_API Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::Int64,
                      Generator* generator = nullptr);
// 1 with the probability probs holds (broadcast to like's shape), or p where
// probs is undefined, else 0: like's shape and dtype and device (torch.bernoulli).
PF_API Tensor bernoulli(const Tensor& like, const Tensor& probs, double p = 0.5, Generator* generator = nullptr);
// N(mean, stddev^2) samples, as torch.normal: mean and stddev tensors (broadcast;
// the result has mean's dtype) or, where undefined, the numbers; with neither,
// of `shape` and `dtype`.
PF_API Tensor normal(const Tensor& mean, const Tensor& stddev, double mean_value = 0.0, double std_value = 1.0,
                     const Shape& shape = {}, DType dtype = DType::Float32, Generator* generator = nullptr);

}  // namespace pyflame
#include "pyflame/shape_ops.h"

#include "pyflame/conv_ops.h"

#include "pyflame/nn_ops.h"
#include "pyflame/linalg_ops.h"
#include "pyflame/misc_ops.h"
#include "pyflame/optim_ops.h"
#include "pyflame/modules_ops.h"
#include "pyflame/sort_ops.h"
