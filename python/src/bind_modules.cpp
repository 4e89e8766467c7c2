// Python binding of the nn-modules area's ops (pyflame.nn's layers call them).

#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/ir/op_call.h"
#include "pyflame/modules_ops.h"

namespace pyflame::python {

void bind_modules(nb::module_& m, nb::class_<Tensor>& /*tensor*/) {
  m.def("linear", [](const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
    return pyflame::linear(input, weight, bias);
  }, "input"_a, "weight"_a, "bias"_a = nb::none(), "y = input @ weight.T + bias (torch.nn.functional.linear).");
  m.def("linear_relu", [](const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
    return pyflame::apply(OpCall{ir::OpType::linear_relu, {input, weight, bias.value_or(Tensor())}, NoAttrs{}})[0];
  }, "input"_a, "weight"_a, "bias"_a = nb::none(),
     "relu(linear(input, weight, bias)) in one call: what pf.compile makes of the pair (the ReLU in the GEMM's "
     "epilogue on the GPU).");
  m.def("grouped_linear", [](const Tensor& input, const nb::args& params, const std::optional<double>& rms_norm_eps,
                             const std::optional<Tensor>& norm_weight, bool swiglu) {
    GroupedLinearAttrs attrs{rms_norm_eps.has_value(), rms_norm_eps.value_or(0.0), swiglu};
    OpCall call{ir::OpType::grouped_linear, {input, norm_weight.value_or(Tensor())}, attrs, {}};
    for (nb::handle p : params) call.inputs.push_back(p.is_none() ? Tensor() : nb::cast<Tensor>(p));
    return nb::tuple(nb::cast(pyflame::apply(std::move(call))));
  }, "input"_a, "params"_a, nb::kw_only(), "rms_norm_eps"_a = nb::none(), "norm_weight"_a = nb::none(),
     "swiglu"_a = false,
     "grouped_linear(input, weight0, bias0, weight1, bias1, ..., rms_norm_eps=None, norm_weight=None, swiglu=False) "
     "-> (linear(input, weight0, bias0), ...) in one call (a bias may be None): what pf.compile makes of linears "
     "reading the same input (one GEMV launch on the GPU for one row of input and up to 4 weights). With "
     "rms_norm_eps, the input is rms_norm(input, (input.shape[-1],), norm_weight, rms_norm_eps) first; with swiglu "
     "(two weights), the one result is silu(first) * second.");
  m.def("quantized_linear", &pyflame::quantized_linear, "input"_a, "qweight"_a, "scales"_a, "zeros"_a,
        "bias"_a = nb::none(), "bits"_a = 8, "group_size"_a = 128,
        "linear(input, W, bias) with W weight-only quantized (pyflame.quant's layout: uint8 codes, scales, uint8 "
        "zero points per group of group_size input columns), the weight dequantized inside the product (one GEMV "
        "reading the codes on the GPU for one row of input).");
  m.def("lstm_sequence", [](const Tensor& input_gates, const Tensor& h0, const Tensor& c0, const Tensor& weight_hh,
                            const std::optional<Tensor>& bias_hh, bool reverse) {
    return pyflame::lstm_sequence(input_gates, h0, c0, weight_hh, bias_hh.value_or(Tensor()), reverse);
  }, "input_gates"_a, "h0"_a, "c0"_a, "weight_hh"_a, "bias_hh"_a = nb::none(), "reverse"_a = false,
     "One LSTM layer's recurrence over a sequence (nn.LSTM's): input_gates (T, N, 4H) = x W_ih^T + b_ih, h0 and "
     "c0 (N, H), weight_hh (4H, H), bias_hh (4H) -> (output (T, N, H), cell_states (T, N, H)): the h and c of "
     "every step. reverse runs the steps from the last to the first.");
  m.def("lstm_sequence_backward", &pyflame::lstm_sequence_backward, "grad_output"_a, "grad_cell_states"_a, "gates"_a,
        "cell_states"_a, "c0"_a, "weight_hh"_a, "reverse"_a = false,
        "lstm_sequence's gradients of input_gates, h0 and c0 from those of output and cell_states, the forward's "
        "activated gates (T, N, 4H) and cell_states, and c0 and weight_hh.");
}

}  // namespace pyflame::python
