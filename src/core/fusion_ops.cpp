// The op layer of fused_elementwise (include/pyflame/ir/fusion.h): a chain of
// elementwise calls as one call. pf.compile's fusion pass (src/ir/passes.cpp) makes
// them from chains of a traced graph; the GPU runs one as the kernel whose source is
// made here (fused_elementwise_source), compiled at run time
// (src/rocm/fused_elementwise.cpp); every other device, and autograd, runs the steps
// one by one (the decomposition), as eagerly.
//
// Every step computes as its op would alone: the inputs are tensors of one floating
// dtype and Python numbers, each step's result has that dtype (the families whose
// result keeps a floating input's dtype), so rounding to it after each step gives
// the eager results, but for the GPU compiler's freedom to contract a multiply and
// an add of two steps (one rounding instead of two: float rounding).

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ir/fusion.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

constexpr const char* kFunctors[] = {
#define PF_OP(name, family, functor, attrs, grad, autocast) #functor,
#include "pyflame/ops.def"
#undef PF_OP
};

bool unary_step(ir::OpType op) {
  const OpFamily f = op_family(op);
  return f == OpFamily::UNARY || f == OpFamily::UNARY_FLOAT;
}

// Checks a chain's steps over the call's inputs (and canonicalises their parameters);
// returns the tensors' dtype and the shape they broadcast to.
std::pair<DType, Shape> check_chain(const OpCall& call, std::vector<FusedStep>& steps, const char* op) {
  PF_CHECK(!steps.empty(), ValueError, op, ": needs at least one step");
  std::optional<DType> dtype;
  for (const Tensor& t : call.inputs) {
    PF_CHECK(t.defined(), ValueError, op, ": an input is None");
    if (t.is_wrapped_number()) continue;
    if (!dtype) dtype = t.dtype();
    PF_CHECK(t.dtype() == *dtype, TypeError, op, ": the tensor inputs must have one dtype, got ", *dtype, " and ",
             t.dtype());
  }
  PF_CHECK(dtype, ValueError, op, ": needs a tensor input (Python numbers alone have no dtype to compute in)");
  PF_CHECK(is_floating(*dtype), TypeError, op, ": computes in a floating dtype, got tensors of ", *dtype);
  const int64_t num_inputs = static_cast<int64_t>(call.inputs.size());
  std::vector<bool> read(num_inputs);
  for (size_t k = 0; k < steps.size(); ++k) {
    FusedStep& s = steps[k];
    PF_CHECK(ir::fusable_elementwise(s.op), ValueError, op, ": step ", k, " is ", op_name(s.op),
             ", not an elementwise op whose result keeps its input's dtype");
    const size_t arity = unary_step(s.op) ? 1 : 2;
    PF_CHECK(s.args.size() == arity, ValueError, op, ": step ", k, " (", op_name(s.op), ") takes ", arity,
             " argument(s), got ", s.args.size());
    for (int64_t a : s.args) {
      PF_CHECK(a < num_inputs && -1 - a < static_cast<int64_t>(k), IndexError, op, ": step ", k, " reads ",
               a >= 0 ? detail::cat("input ", a, " of ", num_inputs) : detail::cat("step ", -1 - a),
               " (an argument is an input i >= 0 or an earlier step j as -1 - j)");
      if (a >= 0) read[a] = true;
    }
    s.params = canonical_params(s.op, s.params, *dtype);
  }
  // An input no step reads would still broadcast the result to its shape.
  for (int64_t i = 0; i < num_inputs; ++i) PF_CHECK(read[i], ValueError, op, ": no step reads input ", i);
  Shape shape = call.inputs[0].shape();
  for (const Tensor& t : call.inputs) shape = broadcast_shapes(shape, t.shape(), op);
  return {*dtype, shape};
}

// The kernels' view of the inputs: Python numbers read on the host and passed by value,
// tensors as broadcast views of the chain's shape (nothing copied).
decltype(Inferred::inputs) chain_inputs(const OpCall& call, DType dtype, const Shape& shape) {
  decltype(Inferred::inputs) plans;
  for (const Tensor& t : call.inputs) {
    InputPlan p{dtype};
    if (t.is_wrapped_number()) p.host_scalar = true;
    else if (t.shape() != shape) p.expand = shape;
    plans.push_back(p);
  }
  return plans;
}

// The steps one by one, as eagerly; returns the last one's result.
Tensor run_chain(const OpCall& call, const std::vector<FusedStep>& steps) {
  std::vector<Tensor> results;
  for (const FusedStep& s : steps) {
    std::vector<Tensor> args;
    for (int64_t a : s.args) args.push_back(a >= 0 ? call.inputs[a] : results[-1 - a]);
    results.push_back(apply_one(s.op, std::move(args), ElementwiseAttrs{s.params}));
  }
  return results.back();
}

Inferred infer_fused_elementwise(OpCall& call) {
  auto [dtype, shape] = check_chain(call, std::get<FusedElementwiseAttrs>(call.attrs).steps, "fused_elementwise");
  return {current_device(), chain_inputs(call, dtype, shape), {{shape, dtype}}, {}};
}

std::vector<Tensor> fused_elementwise_composite(const OpCall& call) {
  return {run_chain(call, std::get<FusedElementwiseAttrs>(call.attrs).steps)};
}

PF_REGISTER_COMPOSITE(fused_elementwise, &infer_fused_elementwise, &fused_elementwise_composite);

// As the reduction's own inference (infer_reduce in ops.cpp) over the chain's shape.
Inferred infer_fused_reduction(OpCall& call) {
  const char* op = "fused_reduction";
  auto& a = std::get<FusedReductionAttrs>(call.attrs);
  auto [dtype, shape] = check_chain(call, a.steps, op);
  PF_CHECK(ir::fusable_reduction(a.reduce), ValueError, op, ": reduces by sum, mean, max or min, got ",
           op_name(a.reduce));
  a.dims = normalize_dims(a.dims, static_cast<int64_t>(shape.size()), a.reduce);
  Inferred inf{current_device(), chain_inputs(call, dtype, shape), {{reduced_shape(shape, a.dims, a.keepdim), dtype}},
               {}};
  if (shape_numel(shape) == 0) {  // the reductions' identities, as infer_reduce
    const bool empty_reduction = std::any_of(a.dims.begin(), a.dims.end(), [&](int64_t d) { return shape[d] == 0; });
    PF_CHECK(!empty_reduction || a.reduce == ir::OpType::sum || a.reduce == ir::OpType::mean, ValueError, op, ": ",
             op_name(a.reduce), " cannot reduce over an empty dimension (shape ", shape, "); there is no identity");
    inf.constant = a.reduce == ir::OpType::mean ? Scalar(NAN) : Scalar(int64_t{0});
  }
  return inf;
}

std::vector<Tensor> fused_reduction_composite(const OpCall& call) {
  const auto& a = std::get<FusedReductionAttrs>(call.attrs);
  return {apply_one(a.reduce, {run_chain(call, a.steps)}, ReduceAttrs{a.dims, a.keepdim})};
}

PF_REGISTER_COMPOSITE(fused_reduction, &infer_fused_reduction, &fused_reduction_composite);

const char* storage_type(DType d) {
  switch (d) {
    case DType::Float16: return "pyflame::Half";
    case DType::BFloat16: return "pyflame::BFloat16";
    case DType::Float64: return "double";
    default: return "float";
  }
}

// One element's statements: input i read as reads[i] into v<i>, the steps into s<k>
// (each result rounded to the dtype, as the eager op stores it); returns them and
// leaves the chain's result in s<last>.
std::string element(const std::vector<FusedStep>& steps, const std::vector<std::string>& reads, const std::string& T,
                    const std::string& A, const std::string& indent) {
  std::string s;
  for (size_t i = 0; i < reads.size(); ++i)
    s += indent + "const " + A + " v" + std::to_string(i) + " = " + reads[i] + ";\n";
  for (size_t k = 0; k < steps.size(); ++k) {
    std::string args;
    for (int64_t x : steps[k].args)
      args += (args.empty() ? "" : ", ") + (x >= 0 ? "v" + std::to_string(x) : "s" + std::to_string(-1 - x));
    s += indent + "const " + A + " s" + std::to_string(k) + " = static_cast<" + A + ">(static_cast<" + T + ">(f" +
         std::to_string(k) + "(" + args + ")));\n";
  }
  return s;
}

// Statements adding the coordinates of `index` over the Layout dims [first, first + count),
// times each of the `tensors` inputs' strides, to offsets[t]. Dims are taken from the
// innermost; the outermost needs no division.
std::string walk(const std::string& index, int64_t first, int64_t count, const std::string& offsets,
                 int64_t tensors) {
  const std::string nt = std::to_string(tensors);
  std::string w = "    long long rest = " + index + ";\n";
  for (int64_t d = first + count - 1; d >= first; --d) {
    const std::string ds = std::to_string(d);
    w += d == first ? "    const long long c" + ds + " = rest;\n"
                    : "    const long long c" + ds + " = rest % layout.size[" + ds + "];\n    rest /= layout.size[" + ds +
                          "];\n";
    w += "    for (int t = 0; t < " + nt + "; ++t) " + offsets + "[t] += c" + ds + " * layout.stride[t][" + ds + "];\n";
  }
  return w;
}

// The kernel's parameters after its output: the inputs (a Python number by value in the
// compute type A), then the steps' functors.
std::string chain_parameters(const std::vector<FusedStep>& steps, const std::vector<bool>& number, const std::string& T,
                             const std::string& A) {
  std::string s;
  for (size_t i = 0; i < number.size(); ++i)
    s += number[i] ? ", " + A + " in" + std::to_string(i) : ", const " + T + "* __restrict__ in" + std::to_string(i);
  for (size_t k = 0; k < steps.size(); ++k)
    s += std::string(", ") + kFunctors[static_cast<int>(steps[k].op)] + "<" + A + "> f" + std::to_string(k);
  return s;
}

}  // namespace

std::string fused_elementwise_source(const FusedElementwiseAttrs& a, DType dtype, const std::vector<bool>& number,
                                     int64_t ndim, int64_t vec, bool rows) {
  const std::string T = storage_type(dtype), A = dtype == DType::Float64 ? "double" : "float";
  const std::string last = "s" + std::to_string(a.steps.size() - 1);
  int64_t tensors = 0;
  for (bool b : number) tensors += !b;
  const std::string nd = std::to_string(ndim), nt = std::to_string(tensors), v = std::to_string(vec);
  std::string s = "#include \"kernels/functors.h\"\nusing namespace pyflame::kernels;\n";
  if (ndim) s += "struct Layout { long long size[" + nd + "]; long long stride[" + nt + "][" + nd + "]; };\n";
  if (vec > 1) s += "struct alignas(16) Pack { " + T + " v[" + v + "]; };\n";
  s += "extern \"C\" __global__ void fused_elementwise(" + T + "* __restrict__ out";
  s += chain_parameters(a.steps, number, T, A);
  if (ndim) s += ", Layout layout";
  s += ", long long n) {\n"
       "  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
       "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  // reads[i] for input i, given how a tensor input's element is named.
  auto reads_of = [&](const std::function<std::string(size_t input, size_t tensor)>& tensor_read) {
    std::vector<std::string> reads;
    for (size_t i = 0, t = 0; i < number.size(); ++i)
      reads.push_back(number[i] ? "in" + std::to_string(i) : "static_cast<" + A + ">(" + tensor_read(i, t++) + ")");
    return reads;
  };
  std::string start = "first";
  if (ndim && rows) {
    // blockIdx.y walks the rows (the outer dims: their offsets once a row), x the innermost
    // dim, four elements a thread a round (loaded before any is computed).
    const std::string inner = "layout.size[" + std::to_string(ndim - 1) + "]";
    s += "  const long long rows = n / " + inner + ";\n"
         "  for (long long row = blockIdx.y; row < rows; row += gridDim.y) {\n"
         "    long long base[" + nt + "] = {};\n    {\n" + walk("row", 0, ndim - 1, "base", tensors) + "    }\n"
         "    for (long long c = 4 * (long long)blockIdx.x * blockDim.x + threadIdx.x; c < " + inner +
         "; c += 4 * step) {\n";
    for (int u = 0; u < 4; ++u) {
      const std::string us = std::to_string(u), cu = "c" + us;
      s += "      const long long " + cu + " = c + " + us + " * (long long)blockDim.x;\n";
      size_t t = 0;
      for (size_t i = 0; i < number.size(); ++i) {
        if (number[i]) continue;
        const std::string ts = std::to_string(t++);
        s += "      const " + T + " x" + us + "_" + std::to_string(i) + " = " + cu + " < " + inner + " ? in" +
             std::to_string(i) + "[base[" + ts + "] + " + cu + " * layout.stride[" + ts + "][" +
             std::to_string(ndim - 1) + "]] : " + T + "();\n";
      }
    }
    for (int u = 0; u < 4; ++u) {
      const std::string us = std::to_string(u);
      s += "      if (c" + us + " < " + inner + ") {\n";
      s += element(a.steps, reads_of([&](size_t i, size_t) { return "x" + us + "_" + std::to_string(i); }), T, A,
                   "        ");
      s += "        out[row * " + inner + " + c" + us + "] = static_cast<" + T + ">(" + last + ");\n      }\n";
    }
    return s + "    }\n  }\n}\n";
  }
  if (ndim) {
    s += "  for (long long i = first; i < n; i += step) {\n"
         "    long long o[" + nt + "] = {};\n    {\n" + walk("i", 0, ndim, "o", tensors) + "    }\n";
    const auto strided = [](size_t i, size_t t) { return "in" + std::to_string(i) + "[o[" + std::to_string(t) + "]]"; };
    s += element(a.steps, reads_of(strided), T, A, "    ");
    return s + "    out[i] = static_cast<" + T + ">(" + last + ");\n  }\n}\n";
  }
  if (vec > 1) {
    s += "  const long long packs = n / " + v + ";\n"
         "  for (long long p = first; p < packs; p += step) {\n";
    for (size_t i = 0; i < number.size(); ++i)
      if (!number[i])
        s += "    const Pack x" + std::to_string(i) + " = reinterpret_cast<const Pack*>(in" + std::to_string(i) +
             ")[p];\n";
    s += "    Pack r;\n#pragma unroll\n    for (int e = 0; e < " + v + "; ++e) {\n";
    s += element(a.steps, reads_of([](size_t i, size_t) { return "x" + std::to_string(i) + ".v[e]"; }), T, A, "      ");
    s += "      r.v[e] = static_cast<" + T + ">(" + last + ");\n    }\n"
         "    reinterpret_cast<Pack*>(out)[p] = r;\n  }\n";
    start = "packs * " + v + " + first";
  }
  s += "  for (long long i = " + start + "; i < n; i += step) {\n";
  s += element(a.steps, reads_of([](size_t i, size_t) { return "in" + std::to_string(i) + "[i]"; }), T, A, "    ");
  return s + "    out[i] = static_cast<" + T + ">(" + last + ");\n  }\n}\n";
}

std::string fused_reduction_source(const FusedReductionAttrs& a, DType dtype, const std::vector<bool>& number,
                                   int64_t kept, int64_t reduced, bool partial) {
  const std::string T = storage_type(dtype), A = dtype == DType::Float64 ? "double" : "float";
  const std::string R = std::string(kFunctors[static_cast<int>(a.reduce)]) + "<" + A + ">";
  int64_t tensors = 0;
  for (bool b : number) tensors += !b;
  const std::string nd = std::to_string(kept + reduced), nt = std::to_string(tensors);
  std::string s = "#include \"kernels/functors.h\"\nusing namespace pyflame::kernels;\n"
                  "struct Layout { long long size[" + nd + "]; long long stride[" + nt + "][" + nd + "]; };\n";
  s += "extern \"C\" __global__ void fused_reduction(" + (partial ? A : T) + "* __restrict__ out";
  s += chain_parameters(a.steps, number, T, A);
  s += ", " + R + " reduce, Layout layout, long long outputs, long long length, long long chunk, int group) {\n"
       "  __shared__ " + A + " parts[256];\n"
       "  const int lane = threadIdx.x % group;\n"
       "  const long long o = (long long)blockIdx.x * (blockDim.x / group) + threadIdx.x / group;\n"
       "  const long long begin = (long long)blockIdx.y * chunk;\n"
       "  const long long end = begin + chunk < length ? begin + chunk : length;\n"
       "  " + A + " acc = " + R + "::identity();\n"
       "  if (o < outputs) {\n"
       "    long long base[" + nt + "] = {};\n";
  s += "    {\n" + walk("o", 0, kept, "base", tensors) + "    }\n";
  // Element u of a round at reduced index q: its offsets and loads (x<u>_<input>); then its
  // steps, into acc. A round loads four elements before computing any, so each lane has four
  // loads of each input in flight whatever branches the steps take.
  auto load = [&](int u, const std::string& q) {
    const std::string us = std::to_string(u);
    std::string l = "    long long at" + us + "[" + nt + "];\n    for (int t = 0; t < " + nt + "; ++t) at" + us +
                    "[t] = base[t];\n    {\n" + walk(q, kept, reduced, "at" + us, tensors) + "    }\n";
    for (size_t i = 0, t = 0; i < number.size(); ++i)
      if (!number[i])
        l += "    const " + A + " x" + us + "_" + std::to_string(i) + " = static_cast<" + A + ">(in" +
             std::to_string(i) + "[at" + us + "[" + std::to_string(t++) + "]]);\n";
    return l;
  };
  auto compute = [&](int u) {
    std::vector<std::string> reads;
    for (size_t i = 0; i < number.size(); ++i)
      reads.push_back(number[i] ? "in" + std::to_string(i) : "x" + std::to_string(u) + "_" + std::to_string(i));
    return "    {\n" + element(a.steps, reads, T, A, "    ") + "    acc = reduce(acc, s" +
           std::to_string(a.steps.size() - 1) + ");\n    }\n";
  };
  s += "    long long r = begin + lane;\n    for (; r + 3 * group < end; r += 4 * group) {\n";
  for (int u = 0; u < 4; ++u) s += load(u, "r + " + std::to_string(u) + " * group");
  for (int u = 0; u < 4; ++u) s += compute(u);
  s += "    }\n    for (; r < end; r += group) {\n" + load(0, "r") + compute(0) + "    }\n  }\n";
  // The group's lanes combine their accumulators (shared memory: any wave size).
  s += "  parts[threadIdx.x] = acc;\n"
       "  for (int w = group / 2; w > 0; w /= 2) {\n"
       "    __syncthreads();\n"
       "    if (lane < w) parts[threadIdx.x] = reduce(parts[threadIdx.x], parts[threadIdx.x + w]);\n"
       "  }\n"
       "  if (lane != 0 || o >= outputs) return;\n";
  s += partial ? "  out[o * gridDim.y + blockIdx.y] = parts[threadIdx.x];\n}\n"
               : "  out[o] = static_cast<" + T + ">(reduce.finish(parts[threadIdx.x], length));\n}\n";
  return s;
}

std::string fused_reduction_finish_source(ir::OpType reduce, DType dtype) {
  const std::string T = storage_type(dtype), A = dtype == DType::Float64 ? "double" : "float";
  const std::string R = std::string(kFunctors[static_cast<int>(reduce)]) + "<" + A + ">";
  return "#include \"kernels/functors.h\"\nusing namespace pyflame::kernels;\n"
         "extern \"C\" __global__ void fused_reduction_finish(" + T + "* __restrict__ out, const " + A +
         "* __restrict__ parts, " + R + " reduce, long long outputs, long long count, long long length) {\n"
         "  const long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (o >= outputs) return;\n"
         "  " + A + " acc = " + R + "::identity();\n"
         "  for (long long p = 0; p < count; ++p) acc = reduce(acc, parts[o * count + p]);\n"
         "  out[o] = static_cast<" + T + ">(reduce.finish(acc, length));\n}\n";
}

bool ir::fusable_reduction(OpType op) {
  return op == OpType::sum || op == OpType::mean || op == OpType::max || op == OpType::min;
}

bool ir::fusable_elementwise(OpType op) {
  const OpFamily f = op_family(op);
  return (f == OpFamily::UNARY || f == OpFamily::UNARY_FLOAT || f == OpFamily::BINARY ||
          f == OpFamily::BINARY_FLOAT) &&
         std::string_view(kFunctors[static_cast<int>(op)]) != "-";
}

Tensor fused_elementwise(const std::vector<Tensor>& inputs, FusedElementwiseAttrs attrs) {
  return apply_one(ir::OpType::fused_elementwise, inputs, std::move(attrs));
}

Tensor fused_reduction(const std::vector<Tensor>& inputs, FusedReductionAttrs attrs) {
  return apply_one(ir::OpType::fused_reduction, inputs, std::move(attrs));
}

}  // namespace pyflame
