#pragma once
// Typed attributes of op calls: one small struct per op family, named by the
// op table's attrs column (ops.def). A call is then a value (op, inputs,
// attributes) that can be compared, hashed and printed, which the kernel
// cache, autograd and graph capture rely on.
//
// Each struct lists its fields once, in `fields(visitor)`; equality, hashing
// and printing are derived from that list, so adding a field is one line.
// Attributes are stored canonical (dims wrapped and sorted, one entry per
// spatial dim): two calls that mean the same compare equal.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pyflame/dtype.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

// How a loss combines its per-element values.
enum class Reduction : int8_t { None, Mean, Sum };
PF_API const char* reduction_name(Reduction r);

struct NoAttrs {
  bool operator==(const NoAttrs&) const = default;
  template <class V> void fields(V&&) const {}
};

// Elementwise ops' parameters by name: ParamName::<op>_<parameter> for each
// line of op_params.def (ParamName::hardtanh_min_val).
enum class ParamName : int16_t {
#define PF_OP_PARAM(op, name, default_) op##_##name,
#include "pyflame/op_params.def"
#undef PF_OP_PARAM
};

namespace detail {
constexpr const char* kParamOps[] = {
#define PF_OP_PARAM(op, name, default_) #op,
#include "pyflame/op_params.def"
#undef PF_OP_PARAM
};
constexpr bool same_op(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
}  // namespace detail

// Where a parameter stands among its op's (op_params.def's order).
constexpr size_t param_index(ParamName p) {
  size_t n = 0;
  for (size_t j = 0; j < static_cast<size_t>(p); ++j)
    n += detail::same_op(detail::kParamOps[j], detail::kParamOps[static_cast<size_t>(p)]);
  return n;
}

// Elementwise ops: their parameters (op_params.def) in table order, defaults
// filled in; read by name, param<ParamName::elu_alpha>().
struct ElementwiseAttrs {
  std::vector<Scalar> params;
  template <ParamName P> const Scalar& param() const {
    constexpr size_t i = param_index(P);
    return params[i];
  }
  bool operator==(const ElementwiseAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("params", params); }
};

struct ClampAttrs {
  std::optional<Scalar> min, max;
  bool operator==(const ClampAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("min", min), v("max", max); }
};

// Reductions over dims (sorted, non-negative; empty: all). var/std also take
// the divisor's correction; arg reductions reduce one dim or (empty) all.
struct ReduceAttrs {
  std::vector<int64_t> dims;
  bool keepdim = false;
  double correction = 0;
  bool operator==(const ReduceAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dims", dims), v("keepdim", keepdim), v("correction", correction); }
};

// Indexing along one dim (index_select, gather, scatter, scatter_add). With
// wrap_negative, index -1 is the last position (tensor keys, x[idx]); without,
// negative indices are out of range (as in PyTorch's functions).
// scatter_reduce's `reduce` is a ScatterReduce (mean is a composition of sum).
enum ScatterReduce : int64_t { kScatterSum, kScatterProd, kScatterAmax, kScatterAmin };
struct IndexAttrs {
  int64_t dim = 0;
  bool wrap_negative = false;
  int64_t reduce = kScatterSum;
  bool operator==(const IndexAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dim", dim), v("wrap_negative", wrap_negative), v("reduce", reduce); }
};

// searchsorted: the first index whose element is > value (right) or >= value
// (left), as int32 or int64.
struct SearchAttrs {
  bool right = false;
  bool out_int32 = false;
  bool operator==(const SearchAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("right", right), v("out_int32", out_int32); }
};

// Ops along one dim: softmax, log_softmax, cumsum and cumprod, with the dtype they compute in.
struct DimAttrs {
  int64_t dim = 0;
  std::optional<DType> dtype;
  bool operator==(const DimAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dim", dim), v("dtype", dtype); }
};

// Sorting and selection: sort along dim (stable is PyTorch's flag; every sort
// keeps ties in index order); nonzero's count of nonzero entries (its rows).
struct SortAttrs {
  int64_t dim = -1;
  bool descending = false;
  bool stable = false;
  int64_t count = 0;
  bool operator==(const SortAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("dim", dim), v("descending", descending), v("stable", stable), v("count", count);
  }
};

// Views: the dims an op names (permute's order, transpose's two, squeeze's,
// unsqueeze's, select's and slice's one), a shape (view, reshape, expand; -1
// entries resolved) and positions (select's index; slice's start, stop, step).
struct ViewAttrs {
  std::vector<int64_t> dims;
  Shape shape;
  std::vector<int64_t> positions;
  bool operator==(const ViewAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dims", dims), v("shape", shape), v("positions", positions); }
};

// Convolutions: one entry per spatial dim; padding is symmetric.
struct ConvAttrs {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool operator==(const ConvAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("stride", stride), v("padding", padding), v("dilation", dilation), v("output_padding", output_padding),
        v("groups", groups);
  }
};

// conv2d followed by batch_norm in eval (and relu): what graph mode folds that chain into, the
// normalisation's per-channel scale and shift taken into the convolution's weight and bias.
struct ConvBatchNormAttrs {
  ConvAttrs conv;
  double eps = 1e-5;
  bool relu = false;
  bool operator==(const ConvBatchNormAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    conv.fields(v);
    v("eps", eps), v("relu", relu);
  }
};

// Pooling windows, one entry per spatial dim. output_size: adaptive pooling's;
// for the average pools' backward ops, the (forward) input's shape.
struct PoolAttrs {
  std::vector<int64_t> kernel_size, stride, padding, dilation, output_size;
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg: padded zeros count in the divisor
  int64_t divisor_override = 0;   // avg: divide by this instead (0: none)
  bool operator==(const PoolAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("kernel_size", kernel_size), v("stride", stride), v("padding", padding), v("dilation", dilation),
        v("output_size", output_size), v("ceil_mode", ceil_mode), v("count_include_pad", count_include_pad),
        v("divisor_override", divisor_override);
  }
};

// Normalizations: batch_norm (training, momentum), layer/rms norm
// (normalized_shape), group_norm (num_groups); all take eps.
struct NormAttrs {
  std::vector<int64_t> normalized_shape;
  int64_t num_groups = 0;
  bool training = false;
  double momentum = 0;
  double eps = 0;
  // layer_norm_backward, rms_norm_backward: whether the parameters' gradients are
  // made too (autograd asks for them only when a parameter requires grad).
  bool param_grads = true;
  bool operator==(const NormAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("normalized_shape", normalized_shape), v("num_groups", num_groups), v("training", training),
        v("momentum", momentum), v("eps", eps), v("param_grads", param_grads);
  }
};

// Random ops: the Philox key and first counter (the draws this call made),
// the distribution's parameters (uniform [low, high), normal mean low and
// std high, integers in [low, high), dropout's probability p) and, for
// creation, the shape and dtype.
struct RandomAttrs {
  Shape shape;
  DType dtype = DType::Float32;
  double low = 0, high = 1, p = 0;
  uint64_t seed = 0, offset = 0;
  bool operator==(const RandomAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("shape", shape), v("dtype", dtype), v("low", low), v("high", high), v("p", p), v("seed", seed),
        v("offset", offset);
  }
};

// Recurrent sequences (lstm_sequence): reverse runs the steps from the last
// time step to the first (a bidirectional layer's second direction).
struct RnnAttrs {
  bool reverse = false;
  bool operator==(const RnnAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("reverse", reverse); }
};

// Attention: is_causal lets query i see keys 0..i; scale multiplies the scores
// (1/sqrt(head_dim) when the caller gave none). scaled_dot_product_attention
// also drops probabilities with dropout_p and, with enable_gqa, repeats key and
// value heads for grouped-query attention (flash_attention takes neither: it
// draws nothing, and serves grouped heads as given).
struct AttentionAttrs {
  bool is_causal = false;
  double scale = 1;
  double dropout_p = 0;
  bool enable_gqa = false;
  bool operator==(const AttentionAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("is_causal", is_causal), v("scale", scale), v("dropout_p", dropout_p), v("enable_gqa", enable_gqa);
  }
};

struct LossAttrs {
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0;
  bool operator==(const LossAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("ignore_index", ignore_index), v("reduction", reduction), v("label_smoothing", label_smoothing);
  }
};

// The pointwise losses (mse_loss, l1_loss, smooth_l1_loss, kl_div,
// binary_cross_entropy and its logits form): the reduction, smooth_l1_loss's
// beta, kl_div's log_target and 'batchmean' (the sum over the batch size).
struct PointwiseLossAttrs {
  Reduction reduction = Reduction::Mean;
  double beta = 1.0;
  bool log_target = false;
  bool batchmean = false;
  bool operator==(const PointwiseLossAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("reduction", reduction), v("beta", beta), v("log_target", log_target), v("batchmean", batchmean);
  }
};

// The norms of torch.linalg (linalg_vector_norm, linalg_matrix_norm). ord is a
// number (+-inf included; the vector norm's 0 counts the nonzero elements)
// unless ord_name says the matrix norm's 'fro' or 'nuc'. dims: the vector
// norm's, sorted (empty: every dim); the matrix norm's two, rows' then columns'
// (the order decides which is summed). dtype: what the input is converted to
// first (PyTorch's dtype=).
enum NormOrdName : int64_t { kOrdNumber, kOrdFro, kOrdNuc };
struct LinalgNormAttrs {
  double ord = 2;
  int64_t ord_name = kOrdNumber;
  std::vector<int64_t> dims;
  bool keepdim = false;
  std::optional<DType> dtype;
  bool operator==(const LinalgNormAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("ord", ord), v("ord_name", ord_name), v("dims", dims), v("keepdim", keepdim), v("dtype", dtype);
  }
};

// nansum and nanmean: the dims (empty: all), keepdim, and the dtype the input
// is converted to first, which the result has (PyTorch's dtype=).
struct NanReduceAttrs {
  std::vector<int64_t> dims;
  bool keepdim = false;
  std::optional<DType> dtype;
  bool operator==(const NanReduceAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dims", dims), v("keepdim", keepdim), v("dtype", dtype); }
};

// addcmul and addcdiv: input + value * tensor1 * tensor2 (tensor1 / tensor2),
// value a number that takes the result's dtype (PyTorch's Scalar).
struct AddcAttrs {
  Scalar value = Scalar(int64_t{1});
  bool operator==(const AddcAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("value", value); }
};

// addmm, addmv, addr, baddbmm and addbmm: beta * input + alpha * the product,
// beta and alpha numbers as PyTorch's Scalars.
struct AddProductAttrs {
  Scalar beta = Scalar(int64_t{1});
  Scalar alpha = Scalar(int64_t{1});
  bool operator==(const AddProductAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("beta", beta), v("alpha", alpha); }
};

// isclose: |input - other| <= atol + rtol * |other|, NaNs close to each other
// only with equal_nan (PyTorch's arguments).
struct IscloseAttrs {
  double rtol = 1e-05;
  double atol = 1e-08;
  bool equal_nan = false;
  bool operator==(const IscloseAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("rtol", rtol), v("atol", atol), v("equal_nan", equal_nan); }
};

// index_add, index_copy and index_fill along dim: value is index_add's alpha
// and index_fill's value (numbers as PyTorch's Scalars; index_copy has none).
struct IndexAlongAttrs {
  int64_t dim = 0;
  Scalar value = Scalar(int64_t{1});
  bool operator==(const IndexAlongAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dim", dim), v("value", value); }
};

// diff: the n-th forward difference along dim.
struct DiffAttrs {
  int64_t n = 1;
  int64_t dim = -1;
  bool operator==(const DiffAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("n", n), v("dim", dim); }
};

// tensordot: the dims of each operand summed over, paired in order.
struct TensordotAttrs {
  std::vector<int64_t> dims_a;
  std::vector<int64_t> dims_b;
  bool operator==(const TensordotAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dims_a", dims_a), v("dims_b", dims_b); }
};

// einsum: each operand's subscripts, one operand after another (label_counts
// says how many are each one's), and the result's. Letters are 0-25 (a-z) and
// 26-51 (A-Z); the ellipsis's dims kEinsumEllipsis + i, right-aligned, so
// operands with fewer of them broadcast over the others.
constexpr int64_t kEinsumEllipsis = 52;
struct EinsumAttrs {
  std::vector<int64_t> labels;
  std::vector<int64_t> label_counts;
  std::vector<int64_t> output;
  bool operator==(const EinsumAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("labels", labels), v("label_counts", label_counts), v("output", output);
  }
};

// topk, kthvalue and median along dim: k (topk: how many; kthvalue: which,
// from 1), the largest first (topk), and keepdim (kthvalue, median).
struct SelectAttrs {
  int64_t k = 0;
  int64_t dim = -1;
  bool largest = true;
  bool keepdim = false;
  bool operator==(const SelectAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("k", k), v("dim", dim), v("largest", largest), v("keepdim", keepdim); }
};

// diag_embed: the diagonal (offset above the main one when > 0) of the
// matrices in dims dim1, dim2 of the result.
struct DiagonalAttrs {
  int64_t offset = 0;
  int64_t dim1 = -2;
  int64_t dim2 = -1;
  bool operator==(const DiagonalAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("offset", offset), v("dim1", dim1), v("dim2", dim2); }
};

// flip: the dims reversed (wrapped, each once).
struct FlipAttrs {
  std::vector<int64_t> dims;
  bool operator==(const FlipAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("dims", dims); }
};

// roll: the shift along each of dims (dims empty: one shift over the flattened tensor).
struct RollAttrs {
  std::vector<int64_t> shifts;
  std::vector<int64_t> dims;
  bool operator==(const RollAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("shifts", shifts), v("dims", dims); }
};

// lerp: the weight when it is a number (a weight tensor is the op's third input).
struct LerpAttrs {
  double weight = 0;
  bool operator==(const LerpAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("weight", weight); }
};

// logit: p clamped to [eps, 1 - eps] first when eps is given.
struct LogitAttrs {
  std::optional<double> eps;
  bool operator==(const LogitAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("eps", eps); }
};

// cdist: the p of the p-norm distances.
struct CdistAttrs {
  double p = 2;
  bool operator==(const CdistAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("p", p); }
};

// copy: non_blocking lets a copy from pinned host memory run without the host
// waiting or staging (the source must then not change until it has run, as in PyTorch).
struct CopyAttrs {
  bool non_blocking = false;
  bool operator==(const CopyAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("non_blocking", non_blocking); }
};

struct FillAttrs {
  Scalar value;
  bool operator==(const FillAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("value", value); }
};

// One Adam/AdamW step (pf.optim.Adam): the group's options and this step's
// bias corrections 1 - beta1^t and 1 - beta2^t.
struct AdamAttrs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double bias_correction1 = 1, bias_correction2 = 1;
  bool decoupled_weight_decay = false, amsgrad = false, maximize = false;
  bool operator==(const AdamAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("lr", lr), v("beta1", beta1), v("beta2", beta2), v("eps", eps), v("weight_decay", weight_decay),
        v("bias_correction1", bias_correction1), v("bias_correction2", bias_correction2),
        v("decoupled_weight_decay", decoupled_weight_decay), v("amsgrad", amsgrad), v("maximize", maximize);
  }
};

// One SGD step (pf.optim.SGD); first_step: the momentum buffer starts as the gradient.
struct SgdAttrs {
  double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false, first_step = false;
  bool operator==(const SgdAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("lr", lr), v("momentum", momentum), v("dampening", dampening), v("weight_decay", weight_decay),
        v("nesterov", nesterov), v("maximize", maximize), v("first_step", first_step);
  }
};

// One RMSprop step (pf.optim.RMSprop).
struct RmspropAttrs {
  double lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;
  bool operator==(const RmspropAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("lr", lr), v("alpha", alpha), v("eps", eps), v("weight_decay", weight_decay), v("momentum", momentum),
        v("centered", centered), v("maximize", maximize);
  }
};

// linalg_solve_triangular: A's upper (else lower) triangle read, its diagonal taken as ones.
struct TriangularAttrs {
  bool upper = false;
  bool unitriangular = false;
  bool operator==(const TriangularAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("upper", upper), v("unitriangular", unitriangular); }
};

// linalg_svd: U and Vh with all m and n columns and rows, or min(m, n) (torch's full_matrices);
// linalg_qr: Q (m, m) and R (m, n), or (m, k) and (k, n) (mode 'complete' or 'reduced').
struct SvdAttrs {
  bool full_matrices = false;
  bool operator==(const SvdAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("full_matrices", full_matrices); }
};

// grouped_linear's fusions (graph mode's, src/ir/passes.cpp): the input RMS-normalised
// over its last dimension first (rms_norm with eps, the call's norm weight), and the
// first two products met as silu(y0) * y1 (SwiGLU), the call's one result.
struct GroupedLinearAttrs {
  bool rms_norm = false;
  double eps = 0;
  bool swiglu = false;
  bool operator==(const GroupedLinearAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("rms_norm", rms_norm), v("eps", eps), v("swiglu", swiglu); }
};

// quantized_linear's weight layout (pyflame.quant): `bits` (8 or 4) a code, groups of
// `group_size` consecutive input columns sharing a scale and a zero point.
struct QuantAttrs {
  int64_t bits = 8;
  int64_t group_size = 128;
  bool operator==(const QuantAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("bits", bits), v("group_size", group_size); }
};

// A chain of elementwise calls run as one kernel (fused_elementwise: what pf.compile's
// fusion pass makes of them). Step k applies `op`, an elementwise op of the table, with
// its parameters (ElementwiseAttrs::params, canonical), to `args`: input i of the call
// (i >= 0) or the result of step j (-1 - j, j < k). The last step's result is the call's.
struct FusedStep {
  ir::OpType op{};
  std::vector<int64_t> args;
  std::vector<Scalar> params;
  bool operator==(const FusedStep&) const = default;
  template <class V> void fields(V&& v) const { v("op", op), v("args", args), v("params", params); }
};
struct FusedElementwiseAttrs {
  std::vector<FusedStep> steps;
  bool operator==(const FusedElementwiseAttrs&) const = default;
  template <class V> void fields(V&& v) const { v("steps", steps); }
};

// An elementwise chain (steps as FusedElementwiseAttrs') whose result one reduction takes
// (fused_reduction): `reduce` is sum, mean, max or min over `dims` of the chain's
// broadcast shape (every dim when empty), with `keepdim`, as the reduction's ReduceAttrs.
struct FusedReductionAttrs {
  std::vector<FusedStep> steps;
  ir::OpType reduce = ir::OpType::sum;
  std::vector<int64_t> dims;
  bool keepdim = false;
  bool operator==(const FusedReductionAttrs&) const = default;
  template <class V> void fields(V&& v) const {
    v("steps", steps), v("reduce", reduce), v("dims", dims), v("keepdim", keepdim);
  }
};

// Every attribute struct after NoAttrs, once: OpAttrs and attrs_name() come from this list.
#define PF_FOR_EACH_ATTRS(X)                                                                                \
  X(ElementwiseAttrs) X(ClampAttrs) X(ReduceAttrs) X(IndexAttrs) X(SearchAttrs) X(DimAttrs) X(ViewAttrs)     \
  X(ConvAttrs) X(ConvBatchNormAttrs) X(PoolAttrs) X(NormAttrs) X(RandomAttrs) X(LossAttrs) X(CopyAttrs) X(FillAttrs) X(AdamAttrs)  \
  X(SgdAttrs) X(RmspropAttrs) X(SortAttrs) X(SelectAttrs) X(RnnAttrs) X(AttentionAttrs) X(PointwiseLossAttrs) \
  X(LinalgNormAttrs) X(AddcAttrs) X(IscloseAttrs) X(NanReduceAttrs) X(AddProductAttrs) X(IndexAlongAttrs)    \
  X(DiffAttrs) X(DiagonalAttrs) X(FlipAttrs) X(RollAttrs) X(TensordotAttrs) X(EinsumAttrs) X(LerpAttrs)   \
  X(LogitAttrs) X(CdistAttrs) X(FusedElementwiseAttrs) X(FusedReductionAttrs) X(GroupedLinearAttrs) X(SvdAttrs) X(TriangularAttrs) \
  X(QuantAttrs)
#define PF_ATTRS_ALTERNATIVE(A) , A
using OpAttrs = std::variant<NoAttrs PF_FOR_EACH_ATTRS(PF_ATTRS_ALTERNATIVE)>;
#undef PF_ATTRS_ALTERNATIVE

PF_API size_t hash_attrs(const OpAttrs& attrs);
// "stride=[1, 1], padding=[0, 0], ..." (empty for NoAttrs).
PF_API std::string attrs_to_string(const OpAttrs& attrs);
PF_API const char* attrs_name(const OpAttrs& attrs);  // "ConvAttrs"

}  // namespace pyflame
