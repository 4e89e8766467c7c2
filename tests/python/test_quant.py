"""pyflame.quant: weight-only int8/int4 quantization, against the weights and layers it replaces, on the CPU
and the GPU."""

import numpy as np
import pytest

import pyflame as pf
from pyflame import llm, quant

DEVICES = ["cpu", "rocm"]


def _placed(device):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    return device


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_error_is_bounded_by_the_group_scale(device, bits, group_size, dtype):
    _placed(device)
    rng = np.random.default_rng(bits * group_size)
    w_np = rng.standard_normal((24, 256)).astype(np.float32) * rng.uniform(0.1, 3, (24, 1)).astype(np.float32)
    w_np[0, :group_size] = np.abs(w_np[0, :group_size])  # a group of one sign: its range is widened to hold 0
    w = pf.tensor(w_np, device=device).to(getattr(pf, dtype))
    q = quant.quantize_weight(w, bits, group_size)
    packed = 256 * bits // 8
    assert q.codes.shape == (24, packed) and q.codes.dtype == pf.uint8 and q.scales.dtype == w.dtype
    assert q.scales.shape == q.zeros.shape == (24, 256 // group_size) and q.device == w.device
    back = q.dequantize()
    assert back.dtype == w.dtype and back.shape == w.shape
    exact = w.float().to("cpu").detach().numpy()
    err = np.abs(back.float().to("cpu").detach().numpy() - exact)
    scale = np.repeat(q.scales.float().to("cpu").detach().numpy(), group_size, axis=1)
    spacing = {"float32": 0.0, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}[dtype]  # the result's rounding
    assert (err <= scale * (1 + 1e-6) + np.abs(exact) * spacing).all()
    assert err.mean() < 0.3 * scale.mean()  # most weights land within half a step


def test_int4_codes_pack_two_to_a_byte():
    """The even column in the low nibble: codes 1, 2 with zero point 0 and scale 0.5 are 0.5, 1.0."""
    codes = pf.tensor([[0x21, 0x03]], dtype=pf.uint8)
    scales, zeros = pf.tensor([[0.5, 2.0]]), pf.tensor([[0, 1]], dtype=pf.uint8)
    np.testing.assert_array_equal(quant.dequantize(codes, scales, zeros, 4, 2).detach().numpy(), [[0.5, 1.0, 4.0, -2.0]])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_linear_is_linear_of_the_dequantized_weight(device, bits):
    _placed(device)
    pf.manual_seed(0)
    linear = pf.nn.Linear(128, 48).to(device)
    layer = quant.QuantizedLinear.from_linear(linear, bits, 32)
    x = pf.randn(5, 128, device=device)
    want = pf.nn.functional.linear(x, layer.weight.dequantize(), linear.bias)
    np.testing.assert_allclose(layer(x).to("cpu").detach().numpy(), want.to("cpu").detach().numpy(), rtol=1e-6, atol=1e-6)
    close = 0.05 if bits == 8 else 0.3  # of the outputs' spread
    got, exact = layer(x).to("cpu").detach().numpy(), linear(x).to("cpu").detach().numpy()
    assert np.abs(got - exact).max() < close * exact.std()
    again = quant.QuantizedLinear(128, 48, bits=bits, group_size=32)
    again.load_state_dict({k: v.to("cpu") for k, v in layer.state_dict().items()})
    assert sorted(layer.state_dict()) == ["bias", "qweight", "scales", "zeros"]
    np.testing.assert_allclose(again.to(device)(x).to("cpu").detach().numpy(), got, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_quantized_model_generates_close_to_the_original(device):
    _placed(device)
    pf.manual_seed(1)
    config = llm.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2)
    model = llm.LlamaForCausalLM(config).to(device)
    ids = pf.tensor(np.random.default_rng(3).integers(1, 96, size=(2, 6)), device=device)
    with pf.no_grad():
        want = model(ids).logits.to("cpu").detach().numpy()
        model.quantize(8, 32)
        got = model(ids).logits.to("cpu").detach().numpy()
    assert isinstance(model.lm_head, quant.QuantizedLinear)
    assert isinstance(model.model.layers[1].mlp.down_proj, quant.QuantizedLinear)
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()
    assert model.generate(ids, max_new_tokens=4).shape == (2, 10)


def test_bad_arguments():
    with pytest.raises(ValueError, match="bits"):
        quant.quantize_weight(pf.randn(4, 64), bits=3)
    with pytest.raises(ValueError, match="multiple of group_size"):
        quant.quantize_weight(pf.randn(4, 48), bits=8, group_size=32)
    with pytest.raises(TypeError, match="floating"):
        quant.quantize_weight(pf.ones(4, 64, dtype=pf.int32), group_size=32)
    tied = llm.LlamaForCausalLM(llm.LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=64,
                                                num_hidden_layers=1, num_attention_heads=4, tie_word_embeddings=True))
    tied.quantize(4, 32)
    assert tied.lm_head.weight is tied.model.embed_tokens.weight  # the embedding stays as it is
