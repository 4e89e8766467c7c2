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

Inferred infer_fused_elementwise(OpCall& call) {
  const char* op = "fused_elementwise";
  auto& attrs = std::get<FusedElementwiseAttrs>(call.attrs);
  PF_CHECK(!attrs.steps.empty(), ValueError, op, ": needs at least one step");
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
  for (size_t k = 0; k < attrs.steps.size(); ++k) {
    FusedStep& s = attrs.steps[k];
    PF_CHECK(ir::fusable_elementwise(s.op), ValueError, op, ": step ", k, " is ", op_name(s.op),
             ", not an elementwise op whose result keeps its input's dtype");
    const size_t arity = unary_step(s.op) ? 1 : 2;
    PF_CHECK(s.args.size() == arity, ValueError, op, ": step ", k, " (", op_name(s.op), ") takes ", arity,
             " argument(s), got ", s.args.size());
    for (int64_t a : s.args)
      PF_CHECK(a < num_inputs && -1 - a < static_cast<int64_t>(k), IndexError, op, ": step ", k, " reads ",
               a >= 0 ? detail::cat("input ", a, " of ", num_inputs) : detail::cat("step ", -1 - a),
               " (an argument is an input i >= 0 or an earlier step j as -1 - j)");
    s.params = canonical_params(s.op, s.params, *dtype);
  }
  Shape shape = call.inputs[0].shape();
  for (const Tensor& t : call.inputs) shape = broadcast_shapes(shape, t.shape(), op);
  Inferred inf{current_device(), {}, {{shape, *dtype}}, {}};
  for (const Tensor& t : call.inputs) {
    InputPlan p{*dtype};
    if (t.is_wrapped_number()) p.host_scalar = true;  // read on the host, passed by value
    else if (t.shape() != shape) p.expand = shape;    // a broadcast view: nothing copied
    inf.inputs.push_back(p);
  }
  return inf;
}

std::vector<Tensor> fused_elementwise_composite(const OpCall& call) {
  std::vector<Tensor> results;
  for (const FusedStep& s : std::get<FusedElementwiseAttrs>(call.attrs).steps) {
    std::vector<Tensor> args;
    for (int64_t a : s.args) args.push_back(a >= 0 ? call.inputs[a] : results[-1 - a]);
    results.push_back(apply_one(s.op, std::move(args), ElementwiseAttrs{s.params}));
  }
  return {results.back()};
}

PF_REGISTER_COMPOSITE(fused_elementwise, &infer_fused_elementwise, &fused_elementwise_composite);

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
std::string element(const FusedElementwiseAttrs& a, const std::vector<std::string>& reads, const std::string& T,
                    const std::string& A, const std::string& indent) {
  std::string s;
  for (size_t i = 0; i < reads.size(); ++i)
    s += indent + "const " + A + " v" + std::to_string(i) + " = " + reads[i] + ";\n";
  for (size_t k = 0; k < a.steps.size(); ++k) {
    std::string args;
    for (int64_t x : a.steps[k].args)
      args += (args.empty() ? "" : ", ") + (x >= 0 ? "v" + std::to_string(x) : "s" + std::to_string(-1 - x));
    s += indent + "const " + A + " s" + std::to_string(k) + " = static_cast<" + A + ">(static_cast<" + T + ">(f" +
         std::to_string(k) + "(" + args + ")));\n";
  }
  return s;
}

}  // namespace

std::string fused_elementwise_source(const FusedElementwiseAttrs& a, DType dtype, const std::vector<bool>& number,
                                     int64_t ndim, int64_t vec) {
  const std::string T = storage_type(dtype), A = dtype == DType::Float64 ? "double" : "float";
  const std::string last = "s" + std::to_string(a.steps.size() - 1);
  int64_t tensors = 0;
  for (bool b : number) tensors += !b;
  const std::string nd = std::to_string(ndim), nt = std::to_string(tensors), v = std::to_string(vec);
  std::string s = "#include \"kernels/functors.h\"\nusing namespace pyflame::kernels;\n";
  if (ndim) s += "struct Layout { long long size[" + nd + "]; long long stride[" + nt + "][" + nd + "]; };\n";
  if (vec > 1) s += "struct alignas(16) Pack { " + T + " v[" + v + "]; };\n";
  s += "extern \"C\" __global__ void fused_elementwise(" + T + "* __restrict__ out";
  for (size_t i = 0; i < number.size(); ++i)
    s += number[i] ? ", " + A + " in" + std::to_string(i) : ", const " + T + "* __restrict__ in" + std::to_string(i);
  for (size_t k = 0; k < a.steps.size(); ++k)
    s += std::string(", ") + kFunctors[static_cast<int>(a.steps[k].op)] + "<" + A + "> f" + std::to_string(k);
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
  if (ndim) {
    s += "  for (long long i = first; i < n; i += step) {\n"
         "    long long o[" + nt + "] = {}, rest = i;\n"
         "    for (int d = " + nd + " - 1; d >= 0; --d) {\n"
         "      const long long c = rest % layout.size[d];\n"
         "      rest /= layout.size[d];\n"
         "      for (int t = 0; t < " + nt + "; ++t) o[t] += c * layout.stride[t][d];\n"
         "    }\n";
    const auto strided = [](size_t i, size_t t) { return "in" + std::to_string(i) + "[o[" + std::to_string(t) + "]]"; };
    s += element(a, reads_of(strided), T, A, "    ");
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
    s += element(a, reads_of([](size_t i, size_t) { return "x" + std::to_string(i) + ".v[e]"; }), T, A, "      ");
    s += "      r.v[e] = static_cast<" + T + ">(" + last + ");\n    }\n"
         "    reinterpret_cast<Pack*>(out)[p] = r;\n  }\n";
    start = "packs * " + v + " + first";
  }
  s += "  for (long long i = " + start + "; i < n; i += step) {\n";
  s += element(a, reads_of([](size_t i, size_t) { return "in" + std::to_string(i) + "[i]"; }), T, A, "    ");
  return s + "    out[i] = static_cast<" + T + ">(" + last + ");\n  }\n}\n";
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

}  // namespace pyflame
