"""pyflame.nn against torch.nn: the Module machinery, every layer on fresh random inputs
(weights copied from the torch module through its state dict), initialisation, repr.

Layers whose functional op comes from another area skip with "pf.<op> not in this
build" until that op is there; they are written against torch's behaviour.
"""

import math
import re
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F
from module_state import randomize, to_pf_state
from op_registry import make_values

tnn = torch.nn


def randn(rng, *shape, low=-3.0, high=3.0):
    return make_values(rng, shape, "float32", low=low, high=high)


def pair(pmod_cls, tmod_cls, *args, rng=None, **kwargs):
    """The same layer in both libraries, the PyFlame one holding the torch one's (randomised) state."""
    tmod = tmod_cls(*args, **kwargs)
    if rng is not None:
        randomize(tmod, rng, high=1.5, running_var_low=0.5)
    pmod = pmod_cls(*args, **kwargs)
    pmod.load_state_dict(to_pf_state(tmod))
    return pmod, tmod


def check_output(actual, expected, rtol=1e-5, atol=1e-5, what=""):
    assert isinstance(actual, pf.Tensor), what
    assert tuple(actual.shape) == tuple(expected.shape), f"{what}: shape {actual.shape} vs {tuple(expected.shape)}"
    np.testing.assert_allclose(actual.detach().numpy(), expected.detach().numpy(), rtol=rtol, atol=atol, err_msg=what)


def run_both(pmod, tmod, x_np, rtol=1e-5, atol=1e-5, **kw):
    with torch.no_grad():
        expected = tmod(torch.from_numpy(x_np.copy()), **kw)
    actual = pmod(pf.tensor(x_np), **kw)
    check_output(actual, expected, rtol, atol, what=repr(pmod))
    return actual, expected


# ----------------------------------------------------------------- Module machinery


def make_net(lib):
    """The same small network built from pyflame.nn or torch.nn."""
    zeros = pf.zeros if lib is nn else torch.zeros

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.Conv2d(3, 4, 3)
            self.bn = lib.BatchNorm2d(4)
            self.blocks = lib.ModuleList([lib.Linear(5, 5), lib.LayerNorm(5)])
            self.head = lib.Sequential(OrderedDict(fc=lib.Linear(5, 2), act=lib.ReLU()))
            self.emb = lib.Embedding(7, 5, padding_idx=1)
            self.register_buffer("step", zeros(1))
            self.register_buffer("scratch", zeros(2), persistent=False)

    return Net()


def test_state_dict_keys_and_shapes_match_torch():
    p, t = make_net(nn), make_net(tnn)
    ps, ts = p.state_dict(), t.state_dict()
    assert list(ps.keys()) == list(ts.keys())
    for k in ts:
        assert tuple(ps[k].shape) == tuple(ts[k].shape), k
    assert [n for n, _ in p.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in p.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in p.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in p.named_children()] == [n for n, _ in t.named_children()]
    assert len(list(p.parameters())) == len(list(t.parameters()))
    assert len(list(p.buffers())) == len(list(t.buffers()))
    assert [type(m).__name__ for m in p.modules()] == [type(m).__name__ for m in t.modules()]
    assert "scratch" not in ps and isinstance(p.scratch, pf.Tensor)
    assert ps["bn.num_batches_tracked"].dtype == pf.int64
    # the state dict shares storage with the module, holding plain tensors
    assert type(ps["conv.weight"]) is pf.Tensor and ps["conv.weight"].data_ptr() == p.conv.weight.data_ptr()
    assert isinstance(p.state_dict(keep_vars=True)["conv.weight"], nn.Parameter)


def _repr(m):
    # PyTorch 2.13 shows the norms' bias flag, 2.11 does not: compare without it.
    return re.sub(r"(affine=(?:True|False)), bias=(?:True|False)", r"\1", repr(m))


def test_repr_matches_torch():
    assert _repr(make_net(nn)) == _repr(make_net(tnn))
    cases = [
        ("Linear", (3, 4), {}), ("Linear", (3, 4), dict(bias=False)),
        ("Conv1d", (3, 4, 3), dict(stride=2, padding=1, padding_mode="reflect")),
        ("Conv2d", (3, 6, (3, 5)), dict(stride=(2, 1), padding=(1, 2), dilation=2, groups=3, bias=False)),
        ("Conv2d", (3, 4, 3), dict(padding="same")), ("Conv3d", (2, 4, 3), {}),
        ("ConvTranspose2d", (3, 4, 3), dict(stride=2, padding=1, output_padding=1)),
        ("BatchNorm1d", (5,), dict(momentum=None, affine=False)), ("BatchNorm2d", (3,), dict(eps=1e-3)),
        ("BatchNorm2d", (3,), dict(track_running_stats=False)),
        ("LayerNorm", ((3, 5),), dict(elementwise_affine=False)), ("LayerNorm", (5,), dict(bias=False)),
        ("GroupNorm", (2, 6), {}), ("RMSNorm", (5,), dict(eps=1e-6)),
        ("MaxPool1d", (3,), {}), ("MaxPool2d", (3, 2, 1), dict(ceil_mode=True)), ("MaxPool3d", (2,), {}),
        ("AvgPool1d", (3,), {}), ("AvgPool2d", (3, 2, 1), dict(count_include_pad=False)), ("AvgPool3d", (2,), {}),
        ("AdaptiveAvgPool2d", ((None, 3),), {}),
        ("ReLU", (), {}), ("ReLU", (True,), {}), ("GELU", (), {}), ("GELU", ("tanh",), {}), ("SiLU", (), {}),
        ("Sigmoid", (), {}), ("Tanh", (), {}), ("LeakyReLU", (0.2, True), {}), ("Softmax", (), {}),
        ("LogSoftmax", (1,), {}), ("Dropout", (0.3,), {}), ("Flatten", (), {}), ("Flatten", (0, 2), {}),
        ("Identity", (3,), dict(x=1)), ("Embedding", (10, 3), dict(padding_idx=-1)),
        ("Embedding", (10, 3), dict(norm_type=1.0)), ("LSTM", (4, 8), {}),
        ("LSTM", (4, 8, 2), dict(batch_first=True, dropout=0.5, bidirectional=True, proj_size=3)),
        ("GRU", (4, 8), dict(bias=False)), ("RNNCell", (3, 4), dict(nonlinearity="relu")),
        ("LSTMCell", (3, 4), dict(bias=False)),
        ("CrossEntropyLoss", (), dict(label_smoothing=0.1)), ("MSELoss", (), {}), ("BCELoss", (), {}),
        ("NLLLoss", (), {}), ("L1Loss", (), dict(reduction="sum")),
    ]
    for name, args, kwargs in cases:
        assert _repr(getattr(nn, name)(*args, **kwargs)) == _repr(getattr(tnn, name)(*args, **kwargs)), (name, args)
    ml = [tnn.Linear(2, 2), tnn.Linear(2, 2), tnn.ReLU(), tnn.Linear(2, 2)]
    assert repr(nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)])) == \
        repr(tnn.ModuleList(ml))
    assert repr(nn.ModuleList()) == repr(tnn.ModuleList())


class _Extra(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 3)

    def extra_repr(self):
        return "first line\nsecond line"


def test_repr_nested_with_multiline_extra_repr():
    assert repr(_Extra()) == ("_Extra(\n  first line\n  second line\n"
                              "  (inner): Linear(in_features=2, out_features=3, bias=True)\n)")


def test_parameter_is_a_tensor_marker():
    t = pf.randn(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, pf.Tensor) and isinstance(p, nn.Parameter)
    assert p.data_ptr() == t.data_ptr() and p.shape == (2, 3)
    assert type(p + 1) is pf.Tensor  # ops return plain tensors
    assert p.requires_grad and p.is_leaf and not t.requires_grad  # a new leaf on t's memory
    with pf.no_grad():
        assert p.add_(1) is p  # in-place ops keep the object
    np.testing.assert_array_equal(t.detach().numpy(), p.detach().numpy())
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert nn.Parameter().shape == (0,)
    with pytest.raises(TypeError, match="Parameter"):
        nn.Parameter(np.zeros(3))


def test_setattr_registers_and_checks():
    m = nn.Module()
    m.w = nn.Parameter(pf.ones(2))
    m.sub = nn.Linear(2, 2)
    m.register_buffer("buf", pf.zeros(3))
    m.plain = pf.ones(1)  # a plain tensor attribute is neither
    assert [n for n, _ in m.named_parameters()] == ["w", "sub.weight", "sub.bias"]
    assert [n for n, _ in m.named_buffers()] == ["buf"]
    assert list(m.state_dict()) == ["w", "buf", "sub.weight", "sub.bias"]
    with pytest.raises(TypeError, match="parameter 'w'"):
        m.w = pf.ones(2)
    with pytest.raises(TypeError, match="child module 'sub'"):
        m.sub = pf.ones(2)
    with pytest.raises(TypeError, match="buffer 'buf'"):
        m.buf = 3
    m.buf = pf.ones(3)  # a tensor replaces a buffer
    assert m.buf.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("w", pf.ones(1))
    with pytest.raises(KeyError, match=r'contain "\."'):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="Parameter or None"):
        m.register_parameter("q", pf.ones(1))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope  # noqa: B018
    m.w = None
    assert [n for n, _ in m.named_parameters()] == ["sub.weight", "sub.bias"]
    del m.sub
    assert list(m.state_dict()) == ["buf"]
    with pytest.raises(NotImplementedError, match="forward"):
        m(pf.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        class Bad(nn.Module):
            def __init__(self):
                self.p = nn.Parameter(pf.ones(1))
        Bad()


def test_shared_parameters_counted_once():
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    tlin = tnn.Linear(3, 3)
    assert list(seq.state_dict()) == list(tnn.Sequential(tlin, tnn.ReLU(), tlin).state_dict())


def test_train_eval_recursive():
    m = make_net(nn)
    assert all(x.training for x in m.modules())
    assert m.eval() is m and not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    m.blocks.eval()
    assert m.training and not m.blocks[0].training and m.head.training
    with pytest.raises(ValueError):
        m.train("yes")


def test_apply_and_get_submodule():
    m = make_net(nn)
    names = []
    m.apply(lambda mod: names.append(type(mod).__name__))
    assert names[-1] == "Net" and names.count("Linear") == 2
    assert m.get_submodule("head.fc") is m.head.fc
    with pytest.raises(AttributeError, match="no submodule"):
        m.get_submodule("head.nope")


# ----------------------------------------------------------------- load_state_dict


def test_load_state_dict_round_trip(rng):
    t = make_net(tnn)
    randomize(t, rng, high=1.5, running_var_low=0.5)
    p = make_net(nn)
    result = p.load_state_dict(to_pf_state(t))
    assert result.missing_keys == [] and result.unexpected_keys == []
    for k, v in t.state_dict().items():
        np.testing.assert_array_equal(p.state_dict()[k].detach().numpy(), v.detach().numpy(), err_msg=k)
    # values are copied into the existing parameters, which keep their identity and dtype
    w = p.conv.weight
    p.load_state_dict({k: v.to(pf.float64) for k, v in to_pf_state(t).items()})
    assert p.conv.weight is w and w.dtype == pf.float32


def test_load_state_dict_errors_list_everything_and_change_nothing():
    p = make_net(nn)
    before = {k: v.detach().numpy().copy() for k, v in p.state_dict().items()}
    sd = to_pf_state(make_net(tnn))
    del sd["conv.bias"], sd["bn.running_var"]
    sd["extra.weight"] = pf.ones(1)
    sd["head.fc.weight"] = pf.ones(3, 3)
    with pytest.raises(RuntimeError) as e:
        p.load_state_dict(sd)
    msg = str(e.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "conv.bias", "bn.running_var"' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    assert "size mismatch for head.fc.weight: copying a param with shape (3, 3) from checkpoint, " \
           "the shape in current model is (2, 5)" in msg
    for k, v in p.state_dict().items():
        np.testing.assert_array_equal(v.detach().numpy(), before[k], err_msg=f"{k} changed by a failed load")
    # strict=False: missing/unexpected are reported, a shape mismatch still raises
    with pytest.raises(RuntimeError, match="size mismatch"):
        p.load_state_dict(sd, strict=False)
    sd["head.fc.weight"] = pf.ones(2, 5)
    result = p.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["conv.bias", "bn.running_var"]
    assert result.unexpected_keys == ["extra.weight"]
    assert p.head.fc.weight.detach().numpy().tolist() == [[1.0] * 5] * 2
    with pytest.raises(RuntimeError, match='"emb.weight".*received ndarray'):
        p.load_state_dict({**p.state_dict(), "emb.weight": np.zeros((7, 5), np.float32)})
    with pytest.raises(TypeError, match="dict-like"):
        p.load_state_dict([1, 2])


def test_load_state_dict_assign():
    p = nn.Linear(2, 3)
    w = pf.ones(3, 2, dtype=pf.float64)
    p.load_state_dict({"weight": w, "bias": pf.zeros(3)}, assign=True)
    assert isinstance(p.weight, nn.Parameter) and p.weight.dtype == pf.float64
    assert p.weight.data_ptr() == w.data_ptr()


# ----------------------------------------------------------------- to()


def test_to_dtype_converts_floating_state_only():
    m = make_net(nn)
    assert m.to(pf.float64) is m
    for name, t in m.state_dict().items():
        expected = pf.int64 if name.endswith("num_batches_tracked") else pf.float64
        assert t.dtype == expected, name
    assert isinstance(m.conv.weight, nn.Parameter)
    assert m.half().conv.weight.dtype == pf.float16
    assert m.bfloat16().bn.running_mean.dtype == pf.bfloat16
    assert m.float().conv.weight.dtype == pf.float32
    w = m.conv.weight
    assert m.to("cpu").conv.weight is w  # nothing to do
    with pytest.raises(TypeError, match="floating point"):
        m.to(pf.int32)
    with pytest.raises(TypeError):
        m.to(3)


def test_to_device(rng):
    if not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    m = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4))
    m.to("rocm")
    assert all(t.device.startswith("rocm") for t in m.state_dict().values())
    m.cpu()
    assert all(t.device == "cpu" for t in m.state_dict().values())


# ----------------------------------------------------------------- containers


def test_sequential_indexing():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4), nn.Tanh()]
    s = nn.Sequential(*layers)
    assert len(s) == 4 and list(s) == layers
    assert s[0] is layers[0] and s[-1] is layers[3] and s[-4] is layers[0]
    sub = s[1:3]
    assert isinstance(sub, nn.Sequential) and list(sub) == layers[1:3]
    assert list(sub.state_dict()) == list(tnn.Sequential(tnn.Linear(2, 3), tnn.ReLU(), tnn.Linear(3, 4))[1:3]
                                          .state_dict())
    assert list(s[::2]) == [layers[0], layers[2]]
    with pytest.raises(IndexError):
        s[4]
    with pytest.raises(IndexError):
        s[-5]
    extra = nn.Sigmoid()
    assert s.append(extra) is s and s[4] is extra and len(s) == 5
    del s[1]
    assert list(s) == [layers[0], layers[2], layers[3], extra]
    assert list(s._modules) == ["0", "1", "2", "3"]
    s.insert(1, layers[1])
    assert list(s) == layers + [extra]
    s[4] = nn.Identity()
    assert isinstance(s[4], nn.Identity)
    assert list((s[:2] + s[2:4])) == layers
    named = nn.Sequential(OrderedDict(a=nn.ReLU(), b=nn.Tanh()))
    assert list(named.state_dict()) == [] and [n for n, _ in named.named_children()] == ["a", "b"]


def test_sequential_forward_chains(rng):
    x = randn(rng, 3, 5)
    s = nn.Sequential(nn.Tanh(), nn.Sigmoid())
    np.testing.assert_allclose(s(pf.tensor(x)).detach().numpy(), torch.sigmoid(torch.tanh(torch.from_numpy(x))).detach().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_module_list():
    ml = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    ml.append(nn.Linear(2, 3))
    ml.extend([nn.Tanh()])
    ml += [nn.Sigmoid()]
    assert len(ml) == 5 and isinstance(ml[-1], nn.Sigmoid) and isinstance(ml[1:3], nn.ModuleList)
    assert [type(m).__name__ for m in ml] == ["Linear", "ReLU", "Linear", "Tanh", "Sigmoid"]
    assert list(ml.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    del ml[0]
    assert list(ml.state_dict()) == ["1.weight", "1.bias"]
    with pytest.raises(NotImplementedError):
        ml(pf.ones(2))


# ----------------------------------------------------------------- initialisation


@pytest.mark.parametrize("make,fan_in", [
    (lambda: nn.Linear(300, 200), 300),
    (lambda: nn.Conv2d(6, 40, 5, groups=2), 3 * 25),
    (lambda: nn.Conv1d(4, 30, 7), 28),
    (lambda: nn.Conv3d(2, 16, 3), 54),
    (lambda: nn.ConvTranspose2d(8, 12, 3, groups=2), 6 * 9),
])
def test_default_init_is_uniform_within_torch_bounds(make, fan_in):
    pf.manual_seed(1)
    m = make()
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) and the bias both give this
    for t in (m.weight, m.bias):
        v = t.detach().numpy().ravel()
        assert v.min() >= -bound and v.max() <= bound
        if v.size >= 1000:  # the weights: spread over the whole range, uniformly
            assert v.max() > 0.99 * bound and v.min() < -0.99 * bound
            assert abs(v.mean()) < 0.05 * bound
            assert abs(v.std() - bound / math.sqrt(3)) < 0.05 * bound
    pf.manual_seed(1)
    again = make()
    np.testing.assert_array_equal(again.weight.detach().numpy(), m.weight.detach().numpy())
    np.testing.assert_array_equal(again.bias.detach().numpy(), m.bias.detach().numpy())
    pf.manual_seed(2)
    assert not np.array_equal(make().weight.detach().numpy(), m.weight.detach().numpy())


def test_default_init_of_embedding_and_norms():
    pf.manual_seed(3)
    e = nn.Embedding(400, 50, padding_idx=7)
    w = e.weight.detach().numpy()
    assert np.all(w[7] == 0)
    rest = np.delete(w, 7, axis=0).ravel()
    assert abs(rest.mean()) < 0.03 and abs(rest.std() - 1) < 0.03
    for m in (nn.BatchNorm2d(4), nn.LayerNorm(4), nn.GroupNorm(2, 4)):
        assert m.weight.tolist() == [1.0] * 4 and m.bias.tolist() == [0.0] * 4
    bn = nn.BatchNorm1d(3)
    assert bn.running_mean.tolist() == [0.0] * 3 and bn.running_var.tolist() == [1.0] * 3
    assert bn.num_batches_tracked.item() == 0
    assert nn.RMSNorm(3).weight.tolist() == [1.0] * 3
    assert nn.Linear(3, 2, dtype=pf.float64).weight.dtype == pf.float64


def test_init_functions():
    t = pf.empty(200, 300)
    assert nn.init.uniform_(t, -2, 3) is t
    v = t.detach().numpy()
    assert v.min() >= -2 and v.max() <= 3 and abs(v.mean() - 0.5) < 0.05
    nn.init.normal_(t, 1.0, 0.5)
    assert abs(t.detach().numpy().mean() - 1) < 0.01 and abs(t.detach().numpy().std() - 0.5) < 0.01
    a = math.sqrt(6 / 500)
    v = nn.init.xavier_uniform_(t).detach().numpy()
    assert v.min() >= -a and v.max() <= a and v.max() > 0.95 * a
    assert abs(nn.init.xavier_normal_(t, gain=2).detach().numpy().std() - 2 * math.sqrt(2 / 500)) < 0.003
    assert abs(nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu").detach().numpy().std()
               - math.sqrt(2 / 200)) < 0.003
    assert nn.init.zeros_(t).detach().numpy().max() == 0 and nn.init.ones_(t).detach().numpy().min() == 1
    assert nn.init.constant_(t, 2.5).detach().numpy().max() == 2.5
    for nl, param in (("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("tanh", None), ("linear", None),
                      ("conv2d", None), ("sigmoid", None), ("selu", None)):
        assert nn.init.calculate_gain(nl, param) == pytest.approx(tnn.init.calculate_gain(nl, param))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(pf.empty(3))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(TypeError, match="floating-point"):
        nn.init.uniform_(pf.zeros(3, dtype=pf.int64))
    half = nn.init.uniform_(pf.empty(100, dtype=pf.bfloat16), -1, 1)
    assert half.dtype == pf.bfloat16 and -1 <= half.to(pf.float32).detach().numpy().min()


# ----------------------------------------------------------------- functional


def test_functional_reexports_pf_ops():
    assert F.softmax is pf.softmax and F.linear is pf.linear
    assert {n for n in F.__all__ if n in F._OPS} <= set(dir(pf))
    with pytest.raises(AttributeError, match="no attribute 'conv9d'"):
        F.conv9d  # noqa: B018
    missing = [n for n in F._OPS if not hasattr(pf, n)]
    if missing:
        with pytest.raises(AttributeError, match=f"pf.{missing[0]} is not in this build"):
            getattr(F, missing[0])


# ----------------------------------------------------------------- linear op errors


def test_linear_errors():
    x = pf.ones(4, 3)
    with pytest.raises(ValueError, match="last dimension is 3.*in_features 5"):
        pf.linear(x, pf.ones(2, 5))
    with pytest.raises(ValueError, match=r"bias must have shape \(2\)"):
        pf.linear(x, pf.ones(2, 3), pf.ones(3))
    with pytest.raises(ValueError, match="0-d"):
        pf.linear(pf.ones(()), pf.ones(2, 1))
    with pytest.raises(ValueError, match="weight must be"):
        pf.linear(x, pf.ones(1, 2, 3))
    with pytest.raises(TypeError, match="one dtype"):
        pf.linear(x, pf.ones(2, 3, dtype=pf.float64))
    with pytest.raises(TypeError, match="floating-point"):
        pf.linear(pf.ones(4, 3, dtype=pf.int64), pf.ones(2, 3, dtype=pf.int64))
    with pytest.raises(ValueError, match="in_features"):
        nn.Linear(5, 2)(x)


# ----------------------------------------------------------------- layers vs torch


@pytest.mark.parametrize("shape,args,kwargs", [
    ((32, 784), (784, 10), {}),
    ((1, 7), (7, 3), {}),  # batch 1, odd sizes
    ((2, 3, 5), (5, 9), dict(bias=False)),
    ((0, 6), (6, 4), {}),  # empty batch
    ((5,), (5, 3), {}),  # no batch dim
])
def test_linear(rng, shape, args, kwargs):
    pmod, tmod = pair(nn.Linear, tnn.Linear, *args, **kwargs)
    run_both(pmod, tmod, randn(rng, *shape))


def test_linear_float64_and_noncontiguous_input(rng):
    tmod = tnn.Linear(6, 4).double()
    pmod = nn.Linear(6, 4, dtype=pf.float64)
    pmod.load_state_dict(to_pf_state(tmod))
    x = rng.standard_normal((6, 5))
    with torch.no_grad():
        expected = tmod(torch.from_numpy(x).T)
    check_output(pmod(pf.tensor(x).T), expected, 1e-12, 1e-12)


@pytest.mark.parametrize("pcls,tcls,kwargs", [
    (nn.ReLU, tnn.ReLU, {}), (nn.GELU, tnn.GELU, {}), (nn.GELU, tnn.GELU, dict(approximate="tanh")),
    (nn.SiLU, tnn.SiLU, {}), (nn.Sigmoid, tnn.Sigmoid, {}), (nn.Tanh, tnn.Tanh, {}),
    (nn.Softmax, tnn.Softmax, dict(dim=1)), (nn.Softmax, tnn.Softmax, dict(dim=-1)),
    (nn.LogSoftmax, tnn.LogSoftmax, dict(dim=0)), (nn.Flatten, tnn.Flatten, {}),
    (nn.Flatten, tnn.Flatten, dict(start_dim=0, end_dim=1)), (nn.Identity, tnn.Identity, {}),
])
def test_activations_and_shape_layers(rng, pcls, tcls, kwargs):
    for shape in ((3, 7, 5), (1, 3, 7, 7), (0, 4, 2)):
        run_both(pcls(**kwargs), tcls(**kwargs), randn(rng, *shape))


def test_softmax_without_dim_uses_torch_legacy_choice(rng):
    for shape in ((5,), (3, 4), (2, 3, 4), (2, 3, 4, 5)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_both(nn.Softmax(), tnn.Softmax(), randn(rng, *shape))
            run_both(nn.LogSoftmax(), tnn.LogSoftmax(), randn(rng, *shape))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        nn.Softmax()(pf.ones(2, 2))


@pytest.mark.parametrize("cls", [nn.ReLU, nn.SiLU])
def test_inplace_activation_writes_the_input(rng, cls):
    x = randn(rng, 4, 5)
    t = pf.tensor(x)
    out = cls(inplace=True)(t)
    assert out is t
    expected = getattr(torch.nn.functional, cls.__name__.lower())(torch.from_numpy(x))
    check_output(t, expected, 1e-6, 1e-6)


@pytest.mark.parametrize("kwargs", [{}, dict(negative_slope=0.2)])
def test_leaky_relu(rng, kwargs):
    run_both(nn.LeakyReLU(**kwargs), tnn.LeakyReLU(**kwargs), randn(rng, 3, 7, 5))
    x = randn(rng, 4, 3)
    t = pf.tensor(x)
    assert nn.LeakyReLU(0.1, inplace=True)(t) is t
    check_output(t, torch.nn.functional.leaky_relu(torch.from_numpy(x), 0.1), 1e-6, 1e-6)


def test_dropout_eval_is_identity(rng):
    d = nn.Dropout(0.4).eval()
    x = pf.tensor(randn(rng, 5, 6))
    assert d(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_dropout_train(rng):
    p = 0.3
    x = randn(rng, 400, 250, low=0.5, high=2.0)  # no zeros in the input
    d = nn.Dropout(p)
    pf.manual_seed(5)
    y = d(pf.tensor(x)).detach().numpy()
    dropped = y == 0
    assert abs(dropped.mean() - p) < 0.01
    np.testing.assert_allclose(y[~dropped], x[~dropped] / (1 - p), rtol=1e-6)
    pf.manual_seed(5)
    np.testing.assert_array_equal(d(pf.tensor(x)).detach().numpy(), y)  # reproducible
    assert not np.array_equal(d(pf.tensor(x)).detach().numpy(), y)  # and fresh on the next call
    np.testing.assert_array_equal(nn.Dropout(0.0)(pf.tensor(x)).detach().numpy(), x)
    assert np.all(nn.Dropout(1.0)(pf.tensor(x)).detach().numpy() == 0)
    t = pf.tensor(x)
    assert nn.Dropout(p, inplace=True)(t) is t and np.any(t.detach().numpy() == 0)


@pytest.mark.parametrize("shape,args,kwargs", [
    ((2, 3, 11), (3, 5, 3), dict(stride=2, padding=1)),
    ((1, 4, 9), (4, 6, 3), dict(dilation=2, groups=2, bias=False)),
    ((3, 10), (3, 4, 4), dict(padding="same")),  # unbatched, even kernel
    ((0, 3, 8), (3, 2, 3), {}),
])
def test_conv1d(rng, shape, args, kwargs):
    run_both(*pair(nn.Conv1d, tnn.Conv1d, *args, **kwargs), randn(rng, *shape), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,args,kwargs", [
    ((1, 3, 7, 7), (3, 4, 3), {}),
    ((2, 3, 9, 11), (3, 6, (3, 5)), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=3)),
    ((2, 3, 7, 7), (3, 5, 4), dict(padding="same", bias=False)),
    ((2, 3, 7, 7), (3, 5, 3), dict(padding="valid", stride=2)),
    ((3, 7, 7), (3, 2, 3), dict(padding=1)),  # unbatched
    ((0, 3, 7, 7), (3, 4, 3), {}),  # empty batch
])
def test_conv2d(rng, shape, args, kwargs):
    run_both(*pair(nn.Conv2d, tnn.Conv2d, *args, **kwargs), randn(rng, *shape), rtol=1e-4, atol=1e-5)


def test_conv2d_padding_modes(rng):
    for mode in ("reflect", "replicate", "circular"):
        pmod, tmod = pair(nn.Conv2d, tnn.Conv2d, 3, 4, 3, padding=1, padding_mode=mode)
        try:
            run_both(pmod, tmod, randn(rng, 2, 3, 7, 7), rtol=1e-4, atol=1e-5)
        except pf.NotSupportedError as e:  # pad's non-constant modes are listed as not supported
            assert mode in str(e) or "mode" in str(e)


def test_conv_constructor_errors():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv1d(4, 4, 3, groups=0)
    with pytest.raises(ValueError, match="Invalid padding string"):
        nn.Conv2d(3, 4, 3, padding="full")
    with pytest.raises(ValueError, match="strided convolutions"):
        nn.Conv2d(3, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")


@pytest.mark.parametrize("shape,args,kwargs", [
    ((1, 2, 5, 6, 7), (2, 3, 3), dict(padding=1)),
    ((2, 4, 5, 5, 5), (4, 2, (1, 3, 2)), dict(stride=(1, 2, 1), groups=2)),
    ((0, 2, 4, 4, 4), (2, 3, 3), {}),
])
def test_conv3d(rng, shape, args, kwargs):
    run_both(*pair(nn.Conv3d, tnn.Conv3d, *args, **kwargs), randn(rng, *shape), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,args,kwargs", [
    ((2, 3, 5, 5), (3, 4, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 7, 6), (4, 6, (3, 2)), dict(groups=2, dilation=2, bias=False)),
    ((3, 5, 5), (3, 2, 3), {}),  # unbatched
])
def test_conv_transpose2d(rng, shape, args, kwargs):
    run_both(*pair(nn.ConvTranspose2d, tnn.ConvTranspose2d, *args, **kwargs), randn(rng, *shape),
             rtol=1e-4, atol=1e-5)


def test_conv_transpose2d_output_size(rng):
    pmod, tmod = pair(nn.ConvTranspose2d, tnn.ConvTranspose2d, 3, 4, 3, stride=2, padding=1)
    x = randn(rng, 1, 3, 5, 5)
    for size in ((9, 10), (1, 4, 10, 9), [10, 10]):
        out, _ = run_both(pmod, tmod, x, rtol=1e-4, atol=1e-5, output_size=size)
        assert tuple(out.shape[-2:]) == tuple(size[-2:])


def test_conv_transpose2d_output_size_errors():
    m = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1)
    x = pf.ones(1, 3, 5, 5)
    with pytest.raises(ValueError, match="valid sizes range from"):
        m._output_padding(x, (12, 9))
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        m._output_padding(x, (9,))
    assert m._output_padding(x, (10, 9)) == (1, 0)


@pytest.mark.parametrize("pcls,tcls,shape,args,kwargs", [
    (nn.MaxPool2d, tnn.MaxPool2d, (2, 3, 7, 7), (3, 2, 1), {}),
    (nn.MaxPool2d, tnn.MaxPool2d, (1, 3, 7, 7), (2,), dict(ceil_mode=True)),
    (nn.MaxPool2d, tnn.MaxPool2d, (2, 2, 9, 8), ((3, 2),), dict(dilation=2, stride=1)),
    (nn.MaxPool2d, tnn.MaxPool2d, (3, 7, 7), (3,), {}),
    (nn.MaxPool1d, tnn.MaxPool1d, (2, 3, 11), (3, 2), {}),
    (nn.MaxPool3d, tnn.MaxPool3d, (1, 2, 5, 6, 7), (2,), {}),
])
def test_max_pool(rng, pcls, tcls, shape, args, kwargs):
    run_both(pcls(*args, **kwargs), tcls(*args, **kwargs), randn(rng, *shape))


@pytest.mark.parametrize("pcls,tcls,shape,args,kwargs", [
    (nn.AvgPool2d, tnn.AvgPool2d, (2, 3, 7, 7), (3, 2, 1), dict(count_include_pad=False)),
    (nn.AvgPool2d, tnn.AvgPool2d, (1, 3, 7, 7), (2,), dict(ceil_mode=True)),
    (nn.AvgPool2d, tnn.AvgPool2d, (2, 3, 7, 7), (3, 2, 1), {}),
    (nn.AvgPool1d, tnn.AvgPool1d, (2, 3, 11), (3,), {}),
    (nn.AvgPool3d, tnn.AvgPool3d, (1, 2, 5, 6, 7), (2,), dict(stride=1)),
    (nn.AdaptiveAvgPool2d, tnn.AdaptiveAvgPool2d, (2, 3, 7, 7), ((3, None),), {}),
    (nn.AdaptiveAvgPool2d, tnn.AdaptiveAvgPool2d, (2, 3, 7, 7), (4,), {}),
    (nn.AdaptiveAvgPool2d, tnn.AdaptiveAvgPool2d, (1, 3, 7, 7), (1,), {}),
])
def test_avg_pool(rng, pcls, tcls, shape, args, kwargs):
    run_both(pcls(*args, **kwargs), tcls(*args, **kwargs), randn(rng, *shape))


def test_pool_unsupported_options():
    with pytest.raises(pf.NotSupportedError, match="divisor_override"):
        nn.AvgPool2d(2, divisor_override=3)


@pytest.mark.parametrize("pcls,tcls,shape,kwargs", [
    (nn.BatchNorm2d, tnn.BatchNorm2d, (4, 3, 7, 7), {}),
    (nn.BatchNorm2d, tnn.BatchNorm2d, (2, 3, 5, 5), dict(momentum=None)),
    (nn.BatchNorm2d, tnn.BatchNorm2d, (2, 3, 5, 5), dict(affine=False, momentum=0.3)),
    (nn.BatchNorm2d, tnn.BatchNorm2d, (3, 3, 4, 4), dict(track_running_stats=False)),
    (nn.BatchNorm1d, tnn.BatchNorm1d, (8, 5), {}),
    (nn.BatchNorm1d, tnn.BatchNorm1d, (4, 5, 7), dict(eps=1e-3)),
])
def test_batch_norm_train_then_eval(rng, pcls, tcls, shape, kwargs):
    pmod, tmod = pair(pcls, tcls, shape[1], rng=rng, **kwargs)
    for step in range(3):  # training: batch statistics, running statistics updated in place
        run_both(pmod, tmod, randn(rng, *shape), rtol=1e-4, atol=1e-5)
    for k, v in tmod.state_dict().items():
        np.testing.assert_allclose(pmod.state_dict()[k].detach().numpy(), v.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    if pmod.track_running_stats:
        assert pmod.num_batches_tracked.item() == 3
    pmod.eval()
    tmod.eval()
    x = randn(rng, *shape)
    run_both(pmod, tmod, x, rtol=1e-4, atol=1e-5)
    before = {k: v.detach().numpy().copy() for k, v in pmod.state_dict().items()}
    run_both(pmod, tmod, x, rtol=1e-4, atol=1e-5)
    for k, v in pmod.state_dict().items():  # eval leaves the statistics alone
        np.testing.assert_array_equal(v.detach().numpy(), before[k], err_msg=k)


def test_batch_norm_input_rank_checks():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(pf.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.BatchNorm1d(3)(pf.ones(2, 3, 4, 4))


@pytest.mark.parametrize("shape,args,kwargs", [
    ((2, 3, 5), (5,), {}), ((4, 3, 5), ((3, 5),), dict(elementwise_affine=False)),
    ((7, 9), (9,), dict(bias=False, eps=1e-3)), ((0, 5), (5,), {}),
])
def test_layer_norm(rng, shape, args, kwargs):
    run_both(*pair(nn.LayerNorm, tnn.LayerNorm, *args, rng=rng, **kwargs), randn(rng, *shape), rtol=1e-4,
             atol=1e-5)


@pytest.mark.parametrize("shape,args,kwargs", [
    ((2, 6, 5, 5), (2, 6), {}), ((1, 3, 7), (3, 3), dict(affine=False)), ((3, 4, 7, 7), (1, 4), dict(eps=1e-3)),
])
def test_group_norm(rng, shape, args, kwargs):
    run_both(*pair(nn.GroupNorm, tnn.GroupNorm, *args, rng=rng, **kwargs), randn(rng, *shape), rtol=1e-4,
             atol=1e-5)


def test_group_norm_channels_must_divide():
    with pytest.raises(ValueError, match=r"num_channels \(5\) must be divisible by num_groups \(2\)"):
        nn.GroupNorm(2, 5)


@pytest.mark.parametrize("shape,args,kwargs", [
    ((2, 3, 5), (5,), {}), ((4, 3, 5), ((3, 5),), dict(eps=1e-3)), ((7, 9), (9,), dict(elementwise_affine=False)),
])
def test_rms_norm(rng, shape, args, kwargs):
    run_both(*pair(nn.RMSNorm, tnn.RMSNorm, *args, rng=rng, **kwargs), randn(rng, *shape), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, dict(padding_idx=0), dict(padding_idx=-2)])
def test_embedding(rng, kwargs):
    pmod, tmod = pair(nn.Embedding, tnn.Embedding, 10, 3, **kwargs)
    idx = rng.integers(0, 10, size=(2, 5))
    idx[0, 0] = 0
    with torch.no_grad():
        expected = tmod(torch.from_numpy(idx))
    check_output(pmod(pf.tensor(idx)), expected, 0, 0)
    check_output(pmod(pf.tensor(idx.astype(np.int32))), expected, 0, 0)


def test_embedding_options():
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings"):
        nn.Embedding(5, 2, padding_idx=5)
    with pytest.raises(pf.NotSupportedError, match="max_norm"):
        nn.Embedding(5, 2, max_norm=1.0)
    w = pf.randn(4, 3)
    e = nn.Embedding.from_pretrained(w, padding_idx=1)
    assert e.weight.data_ptr() == w.data_ptr() and e.padding_idx == 1
    assert repr(e) == repr(tnn.Embedding.from_pretrained(torch.zeros(4, 3), padding_idx=1))


def _class_targets(rng, n, c, shape=()):
    return rng.integers(0, c, size=(n,) + shape)


@pytest.mark.parametrize("kwargs", [{}, dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.1),
                                    dict(ignore_index=2), dict(weight=True)])
def test_cross_entropy_loss(rng, kwargs):
    c = 5
    if kwargs.pop("weight", False):
        w = make_values(rng, (c,), "float32", low=0.5, high=2)
        pl, tl = nn.CrossEntropyLoss(weight=pf.tensor(w)), tnn.CrossEntropyLoss(weight=torch.from_numpy(w))
        assert "weight" in pl.state_dict()
    else:
        pl, tl = nn.CrossEntropyLoss(**kwargs), tnn.CrossEntropyLoss(**kwargs)
    for shape, tshape in (((7, c), ()), ((3, c, 4), (4,))):
        x = randn(rng, *shape, low=-20, high=20)
        y = _class_targets(rng, shape[0], c, tshape)
        check_output(pl(pf.tensor(x), pf.tensor(y)), tl(torch.from_numpy(x), torch.from_numpy(y)), 1e-5, 1e-5)


@pytest.mark.parametrize("kwargs", [{}, dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=1)])
def test_nll_loss(rng, kwargs):
    x = torch.log_softmax(torch.from_numpy(randn(rng, 6, 4)), dim=1).detach().numpy()
    y = _class_targets(rng, 6, 4)
    check_output(nn.NLLLoss(**kwargs)(pf.tensor(x), pf.tensor(y)),
                 tnn.NLLLoss(**kwargs)(torch.from_numpy(x), torch.from_numpy(y)), 1e-5, 1e-6)
    w = make_values(rng, (4,), "float32", low=0.5, high=2)
    check_output(nn.NLLLoss(pf.tensor(w), **kwargs)(pf.tensor(x), pf.tensor(y)),
                 tnn.NLLLoss(torch.from_numpy(w), **kwargs)(torch.from_numpy(x), torch.from_numpy(y)), 1e-5, 1e-6)


@pytest.mark.parametrize("name,op", [("MSELoss", "mse_loss"), ("L1Loss", "l1_loss"), ("BCELoss", "binary_cross_entropy")])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_elementwise_losses(rng, name, op, reduction):
    if not hasattr(pf, op):
        pytest.skip(f"pf.{op} not in this build")
    lo, hi = (0.02, 0.98) if name == "BCELoss" else (-3, 3)
    x, y = randn(rng, 4, 7, low=lo, high=hi), randn(rng, 4, 7, low=lo, high=hi)
    check_output(getattr(nn, name)(reduction=reduction)(pf.tensor(x), pf.tensor(y)),
                 getattr(tnn, name)(reduction=reduction)(torch.from_numpy(x), torch.from_numpy(y)), 1e-5, 1e-6)
    if name == "BCELoss":
        w = make_values(rng, (7,), "float32", low=0.5, high=2)
        check_output(nn.BCELoss(pf.tensor(w), reduction=reduction)(pf.tensor(x), pf.tensor(y)),
                     tnn.BCELoss(torch.from_numpy(w), reduction=reduction)(torch.from_numpy(x), torch.from_numpy(y)),
                     1e-5, 1e-6)


def test_legacy_loss_arguments_map_to_reduction():
    for kwargs in (dict(size_average=False), dict(reduce=False), dict(size_average=True, reduce=True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert nn.MSELoss(**kwargs).reduction == tnn.MSELoss(**kwargs).reduction
            assert nn.CrossEntropyLoss(**kwargs).reduction == tnn.CrossEntropyLoss(**kwargs).reduction


# ----------------------------------------------------------------- the seed's example


def _seed_mlp():
    return nn.Sequential(
        nn.Linear(784, 256),
        nn.ReLU(),
        nn.Linear(256, 128),
        nn.ReLU(),
        nn.Linear(128, 10)
    )


def _torch_copy(model):
    t = tnn.Sequential(tnn.Linear(784, 256), tnn.ReLU(), tnn.Linear(256, 128), tnn.ReLU(), tnn.Linear(128, 10))
    t.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in model.state_dict().items()})
    return t


def test_seed_mlp_forward_matches_torch():
    pf.set_device("cpu")
    model = _seed_mlp()
    x = pf.randn(32, 784)  # Batch of 32
    logits = model(x)
    assert logits.shape == (32, 10)
    with torch.no_grad():
        expected = _torch_copy(model)(torch.from_numpy(x.detach().numpy().copy()))
    check_output(logits, expected, 1e-4, 1e-5)


def test_seed_running_neural_networks_example():
    # docs 001, "Running Neural Networks", as written but on the CPU
    pf.set_device("cpu")

    # Define a simple model
    model = nn.Sequential(
        nn.Linear(784, 256),
        nn.ReLU(),
        nn.Linear(256, 128),
        nn.ReLU(),
        nn.Linear(128, 10)
    )

    # Forward pass runs on AMD GPU
    x = pf.randn(32, 784)  # Batch of 32
    logits = model(x)

    # Compute loss
    targets = pf.randint(0, 10, (32,))
    loss = pf.cross_entropy(logits, targets)

    with torch.no_grad():
        t_logits = _torch_copy(model)(torch.from_numpy(x.detach().numpy().copy()))
        expected = torch.nn.functional.cross_entropy(t_logits, torch.from_numpy(targets.detach().numpy().copy()))
    check_output(loss, expected, 1e-5, 1e-6)


def test_forward_hooks_as_torch(rng):
    """Forward pre-hooks and hooks (plain, with_kwargs, prepend, a replaced input and output, remove) give the
    same calls and results as torch's on the same Linear."""
    w = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    x = rng.uniform(-1, 1, (2, 4)).astype(np.float32)

    def run(lib, nnmod):
        layer = nnmod.Linear(4, 3, bias=False)
        with lib.no_grad():
            layer.weight.copy_(lib.tensor(w))
        calls = []
        handles = [
            layer.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 2,)),
            layer.register_forward_pre_hook(lambda m, args: calls.append("pre-first"), prepend=True),
            layer.register_forward_pre_hook(lambda m, args, kwargs: calls.append("pre-kw") or ((args[0] + 1,), kwargs),
                                            with_kwargs=True),
            layer.register_forward_hook(lambda m, args, out: calls.append("post") or out * 3),
            layer.register_forward_hook(lambda m, args, kwargs, out: calls.append(f"post-kw {len(kwargs)}"),
                                        with_kwargs=True),
        ]
        first = layer(lib.tensor(x))
        handles[0].remove()
        with handles[3]:
            pass  # leaving the block removes the hook
        second = layer(lib.tensor(x))
        return calls, first.detach().numpy(), second.detach().numpy()

    got, want = run(pf, nn), run(torch, torch.nn)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6, atol=1e-6)


def _backward_hook_run(lib, device, inputs_require_grad, replace):
    """A two-layer model with full backward (pre-)hooks on its first layer, as a PyTorch script writes them:
    what the hooks saw and the resulting gradients."""
    lib.manual_seed(0)
    weights = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    first, second = lib.nn.Linear(3, 4), lib.nn.Linear(4, 2)
    with lib.no_grad():
        first.weight.copy_(lib.tensor(weights))
        first.bias.fill_(0.25)
        second.weight.copy_(lib.tensor(weights.T[:2] * 0.5))
        second.bias.fill_(-0.5)
    tdev = "cpu" if lib is torch else device
    first.to(tdev), second.to(tdev)
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append(("hook", [None if g is None else g.detach().cpu().detach().numpy().copy() for g in grad_input],
                     [g.detach().cpu().detach().numpy().copy() for g in grad_output]))
        return tuple(None if g is None else g * 3 for g in grad_input) if replace else None

    def pre_hook(module, grad_output):
        seen.append(("pre", [g.detach().cpu().detach().numpy().copy() for g in grad_output]))
        return (grad_output[0] - 1,) if replace else None

    handles = [first.register_full_backward_hook(hook), first.register_full_backward_pre_hook(pre_hook),
               first.register_forward_pre_hook(lambda module, args: (args[0] * 2,))]  # grad_input is the new input's
    x = lib.tensor(np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)).to(tdev)
    if inputs_require_grad:
        x.requires_grad_(True)
    second(lib.tanh(first(x))).pow(2).sum().backward()
    for h in handles:
        h.remove()
    grads = [first.weight.grad, first.bias.grad] + ([x.grad] if inputs_require_grad else [])
    return seen, [g.detach().cpu().detach().numpy() for g in grads]


@pytest.mark.parametrize("inputs_require_grad", [True, False])
@pytest.mark.parametrize("replace", [False, True])
def test_full_backward_hooks_as_torch(inputs_require_grad, replace, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns when no input requires grad
        want_seen, want = _backward_hook_run(torch, device, inputs_require_grad, replace)
    got_seen, got = _backward_hook_run(pf, device, inputs_require_grad, replace)
    assert [s[0] for s in got_seen] == [s[0] for s in want_seen]
    for g, w in zip(got_seen, want_seen):
        for a, b in zip(g[1:], w[1:]):
            for x, y in zip(a, b):
                assert (x is None) == (y is None)
                if x is not None:
                    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
