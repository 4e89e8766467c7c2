"""pf.save / pf.load: the safetensors format, both ways with PyTorch's safetensors package,
and nested checkpoints against torch.save / torch.load."""

import json
import math
import struct
from collections import Counter, OrderedDict

import numpy as np
import pytest
import torch

import pyflame as pf
import pyflame.nn as nn
from op_registry import ALL_DTYPES, PF_DTYPE, TORCH_DTYPE, make_values, pf_to_torch

try:  # PyTorch's reader and writer, the reference for the format
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
except ImportError:  # a machine that cannot install it (the GPU machine) runs the rest
    safe_open = load_file = save_file = None
needs_safetensors = pytest.mark.skipif(save_file is None, reason="the safetensors package is not installed")


def _values(rng, shape, dtype):
    return make_values(rng, shape, dtype, low=-100, high=100)


def _pf(values, dtype):
    return pf.tensor(values).to(PF_DTYPE[dtype])


def _assert_same(pf_tensor, torch_tensor, what=""):
    assert tuple(pf_tensor.shape) == tuple(torch_tensor.shape), what
    assert pf_to_torch(pf_tensor).dtype == torch_tensor.dtype, what
    assert torch.equal(pf_to_torch(pf_tensor), torch_tensor), what


def _sample_dict(rng):
    """Every dtype; odd, empty, 0-d and non-contiguous tensors."""
    out = {}
    for dt in ALL_DTYPES:
        out[f"{dt}.matrix"] = _pf(_values(rng, (3, 5), dt), dt)
        out[f"{dt}.scalar"] = _pf(_values(rng, (), dt), dt)
    out["empty"] = pf.zeros(0, 3)
    out["transposed"] = _pf(_values(rng, (4, 6), "float32"), "float32").T
    out["strided"] = _pf(_values(rng, (5, 8), "bfloat16"), "bfloat16")[:, ::3]
    out["big"] = pf.randn(1000, 37)
    return out


def test_round_trip_pyflame(tmp_path, rng):
    d = _sample_dict(rng)
    assert not d["transposed"].is_contiguous() and not d["strided"].is_contiguous()
    path = tmp_path / "m.safetensors"
    pf.save(d, path)
    back = pf.load(path)
    assert list(back) == list(d)
    for k, v in d.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape, k
        assert back[k].is_contiguous() and back[k].device == pf.get_device()
        torch.testing.assert_close(pf_to_torch(back[k]), pf_to_torch(v), rtol=0, atol=0, msg=k)
    back["big"].fill_(0)  # loaded tensors own their memory
    assert pf.load(path)["big"].detach().numpy().any()


@needs_safetensors
def test_pyflame_file_read_by_safetensors(tmp_path, rng):
    d = _sample_dict(rng)
    path = str(tmp_path / "pf.safetensors")
    pf.save(d, path, metadata={"format": "pt", "origin": "pyflame"})
    loaded = load_file(path)
    assert set(loaded) == set(d)
    for k, v in d.items():
        _assert_same(v, loaded[k], k)
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == {"format": "pt", "origin": "pyflame"}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    assert n % 8 == 0  # the data starts aligned, as the safetensors library writes it


@needs_safetensors
def test_safetensors_file_read_by_pyflame(tmp_path, rng):
    tensors = {}
    for dt in ALL_DTYPES:
        v = torch.from_numpy(np.array(_values(rng, (4, 3), dt))).to(TORCH_DTYPE[dt])
        tensors[dt] = v
        tensors[dt + ".0d"] = v[1, 2].clone()
    tensors["empty"] = torch.zeros(2, 0, 5)
    path = tmp_path / "t.safetensors"
    save_file(tensors, str(path), metadata={"k": "v"})
    loaded = pf.load(path)
    assert set(loaded) == set(tensors)
    for k, v in tensors.items():
        _assert_same(loaded[k], v, k)


@needs_safetensors
def test_model_weights_move_both_ways(tmp_path, rng):
    tm = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    save_file(tm.state_dict(), str(tmp_path / "torch.safetensors"))
    pm = nn.Sequential(nn.Linear(7, 5), nn.ReLU(), nn.Linear(5, 3))
    pm.load_state_dict(pf.load(tmp_path / "torch.safetensors"))
    x = make_values(rng, (4, 7), "float32")
    with torch.no_grad():
        expected = tm(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(pm(pf.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    # and back: a PyFlame model's state dict into a fresh torch model
    pm2 = nn.Sequential(nn.Linear(7, 5), nn.ReLU(), nn.Linear(5, 3))
    pf.save(pm2.state_dict(), tmp_path / "pf.safetensors")
    tm.load_state_dict(load_file(str(tmp_path / "pf.safetensors")))
    with torch.no_grad():
        expected = tm(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(pm2(pf.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


@needs_safetensors
def test_batchnorm_state_with_int_buffer(tmp_path):
    bn = nn.BatchNorm2d(3)
    bn.num_batches_tracked.fill_(7)
    pf.save(bn.state_dict(), tmp_path / "bn.safetensors")
    t = load_file(str(tmp_path / "bn.safetensors"))
    assert t["num_batches_tracked"].dtype == torch.int64 and t["num_batches_tracked"].item() == 7
    bn2 = nn.BatchNorm2d(3)
    bn2.load_state_dict(pf.load(tmp_path / "bn.safetensors"))
    assert bn2.num_batches_tracked.item() == 7


def test_load_device(tmp_path):
    pf.save({"a": pf.ones(2)}, tmp_path / "a.safetensors")
    assert pf.load(tmp_path / "a.safetensors", device="cpu")["a"].device == "cpu"
    if not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    t = pf.load(tmp_path / "a.safetensors", device="rocm")["a"]
    assert t.device.startswith("rocm") and t.tolist() == [1.0, 1.0]
    g = pf.tensor([[1.0, 2.0], [3.0, 4.0]], device="rocm").T  # a device view is saved from its host copy
    pf.save({"g": g}, tmp_path / "g.safetensors")
    assert pf.load(tmp_path / "g.safetensors", device="cpu")["g"].tolist() == [[1.0, 3.0], [2.0, 4.0]]
    pf.save({"g": [g], "step": 2}, tmp_path / "n.safetensors")
    back = pf.load(tmp_path / "n.safetensors", map_location="rocm")
    assert back["step"] == 2 and back["g"][0].device.startswith("rocm")
    assert back["g"][0].tolist() == [[1.0, 3.0], [2.0, 4.0]]


# ----------------------------------------------------------------- errors


def test_save_errors(tmp_path):
    path = tmp_path / "x.safetensors"
    cycle = [pf.ones(1)]
    cycle.append(cycle)
    for obj, error, match in [
        ({"a": pf.ones(1), "b": np.ones(1)}, TypeError, "pf.save: b is a numpy.ndarray"),
        ({"optimizer": {"state": {0: {"foo": {1, 2}}}}}, TypeError, r"pf.save: optimizer\.state\.0\.foo is a set"),
        ({"model": [pf.ones(1), torch.ones(1)]}, TypeError, r"model\.1 is a torch\.Tensor"),
        ({"m": nn.Linear(2, 2)}, TypeError, r"m is a pyflame\.nn\.linear\.Linear"),
        ({"a": b"bytes"}, TypeError, "a is a bytes"),
        ({1, 2}, TypeError, "the object is a set"),
        ({"a": {(1, 2): pf.ones(1)}}, TypeError, r"a has a key \(1, 2\) of type tuple"),
        ({"a": cycle}, ValueError, r"a\.1 contains itself"),
    ]:
        with pytest.raises(error, match=match):
            pf.save(obj, path)
    with pytest.raises(TypeError, match="metadata"):
        pf.save({"a": pf.ones(1)}, path, metadata={"a": 1})
    with pytest.raises(ValueError, match="reserved"):
        pf.save({"a": pf.ones(1)}, path, metadata={"pyflame.structure": "{}"})
    assert not path.exists()  # nothing written on a failed check


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        pf.load(tmp_path / "nope.safetensors")


def _write(path, header, data=b"", raw_header=None):
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_load_truncated_files(tmp_path, rng):
    path = tmp_path / "t.safetensors"
    pf.save({"a": pf.randn(10, 10), "b": pf.randn(3)}, path)
    whole = path.read_bytes()
    (n,) = struct.unpack("<Q", whole[:8])
    for cut in (0, 5, 8, 8 + n // 2, 8 + n, len(whole) - 1):
        path.write_bytes(whole[:cut])
        with pytest.raises(ValueError, match="not a valid safetensors file.*(truncated|exceeds)"):
            pf.load(path)


@pytest.mark.parametrize("header,data,match", [
    ({"a": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "dtype 'F99'"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4, "needs 8 bytes"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "non-negative"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, b"\0" * 4, "data_offsets"),
    ({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "exactly dtype, shape and data_offsets"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, "must be packed"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 6, "bytes after the last"),
    ({"__metadata__": {"a": 1}}, b"", "__metadata__"),
    ([1, 2], b"", "not a JSON object"),
])
def test_load_corrupt_headers(tmp_path, header, data, match):
    path = tmp_path / "c.safetensors"
    _write(path, header, data)
    with pytest.raises(ValueError, match=match):
        pf.load(path)


def test_load_garbage(tmp_path):
    path = tmp_path / "g.safetensors"
    _write(path, None, b"", raw_header=b"{not json")
    with pytest.raises(ValueError, match="not JSON"):
        pf.load(path)
    _write(path, None, b"", raw_header=b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not JSON"):
        pf.load(path)
    path.write_bytes(struct.pack("<Q", 2**40) + b"{}")
    with pytest.raises(ValueError, match="header length"):
        pf.load(path)


@pytest.mark.parametrize("root,match", [
    ("{not json", "not JSON"),
    ({"version": 2, "root": None}, "version 2"),
    ({"root": None}, "version"),
    ({"version": 1, "root": {"tensor": "b"}}, "tensor 'b' that the file does not hold"),
    ({"version": 1, "root": [{"tensor": "a"}, {"x": 1}]}, "unexpected node"),
    ({"version": 1, "root": [{"tensor": "a"}, {"float": "1.5"}]}, "unexpected node"),
    ({"version": 1, "root": {"dict": [[[1], {"tensor": "a"}]]}}, "dict key"),
    ({"version": 1, "root": {"dict": [[1]]}}, r"\[key, value\] pairs"),
    ({"version": 1, "root": {"dict": [], "type": "set"}}, "unexpected node"),
    ({"version": 1, "root": []}, "does not refer to: a"),
])
def test_load_corrupt_structure(tmp_path, root, match):
    path = tmp_path / "s.safetensors"
    text = root if isinstance(root, str) else json.dumps(root)
    _write(path, {"__metadata__": {"pyflame.structure": text},
                  "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(ValueError, match="invalid 'pyflame.structure' entry: .*" + match):
        pf.load(path)


@pytest.mark.parametrize("zip_format", [True, False])
def test_load_of_a_pytorch_checkpoint_says_what_it_is(tmp_path, zip_format):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(3)}, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(ValueError, match=r"PyTorch checkpoint.*save_file"):
        pf.load(path)


# ----------------------------------------------------------------- nested state


def _to_torch(obj):
    """The same structure with each pyflame tensor as a torch tensor; one tensor object stays one object."""
    memo = {}

    def convert(x):
        if isinstance(x, pf.Tensor):
            if id(x) not in memo:
                memo[id(x)] = pf_to_torch(x)
            return memo[id(x)]
        if isinstance(x, dict):
            out = type(x)()
            for k, v in x.items():
                out[k] = convert(v)
            return out
        if isinstance(x, (list, tuple)):
            return type(x)(convert(v) for v in x)
        return x

    return convert(obj)


def _assert_same_structure(got, want, path="root"):
    """`got` (PyFlame) has `want`'s (PyTorch) container types, key types and order, scalars and tensors."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, pf.Tensor) and not got.requires_grad, path
        _assert_same(got, want, path)
        return
    assert type(got) is type(want), (path, type(got), type(want))
    if isinstance(want, dict):
        assert [(type(k), repr(k)) for k in got] == [(type(k), repr(k)) for k in want], path
        for k in want:
            _assert_same_structure(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same_structure(g, w, f"{path}.{i}")
    else:
        assert repr(got) == repr(want), path  # exact: nan, -0.0, inf and every bit of a float


def _checkpoint(rng):
    """Nested state of every supported kind: what torch.save stores for a training checkpoint and more."""
    tensors = _sample_dict(rng)
    shared = pf.tensor(_values(rng, (3, 4), "float32"))
    return {
        "model": OrderedDict((k, tensors[k]) for k in list(tensors)[:6]),
        "optimizer": {
            "state": {0: {"step": pf.tensor(float(rng.integers(1, 100))), "exp_avg": tensors["transposed"]},
                      1: {"momentum_buffer": tensors["strided"], "list": [tensors["empty"], shared]}},
            "param_groups": [{"lr": float(rng.uniform(1e-4, 1e-1)), "betas": (0.9, 0.999), "amsgrad": True,
                              "weight_decay": 0, "params": [0, 1], "initial_lr": 1e-3, "nesterov": False,
                              "param_names": ["w", "b"], "extra": None}],
        },
        "scheduler": {"milestones": Counter([2, 5, 5]), "last_epoch": int(rng.integers(0, 50)),
                      "_last_lr": [float(rng.uniform()), float(rng.uniform())], "lr_lambdas": [None, {"n": 4}]},
        "epoch": 3,
        "floats": [math.inf, -math.inf, math.nan, -0.0, 0.1, 1e300, 5e-324, float(rng.standard_normal())],
        "ints": [0, -7, 2**70, -(2**63), int(rng.integers(-1000, 1000))],
        "bools": (True, False),
        "strings": ["", "μ-ß ✓ \"quoted\" \\ back", "a.b"],
        "empty": [{}, [], (), OrderedDict()],
        "keys": {1.5: "f", None: "n", -3: "i", True: "b", "s": "s", math.inf: "inf"},
        "nested": [[(shared, {"deep": [tensors["big"]]})]],
        "same": shared,  # the same tensor object reached twice
        "big": tensors["big"],
    }


def test_nested_round_trip_matches_torch_save(tmp_path, rng):
    obj = _checkpoint(rng)
    pf.save(obj, tmp_path / "ckpt.safetensors")
    got = pf.load(tmp_path / "ckpt.safetensors")
    torch.save(_to_torch(obj), tmp_path / "ckpt.pt")
    want = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    _assert_same_structure(got, want)
    assert got["same"] is got["nested"][0][0][0] and got["big"] is got["nested"][0][0][1]["deep"][0]
    assert want["same"] is want["nested"][0][0][0]  # as torch.load keeps them
    for t in (got["same"], got["optimizer"]["state"][0]["exp_avg"]):
        assert t.is_contiguous() and t.device == pf.get_device()


@needs_safetensors
def test_nested_file_read_by_safetensors(tmp_path, rng):
    obj = _checkpoint(rng)
    path = str(tmp_path / "ckpt.safetensors")
    pf.save(obj, path, metadata={"format": "pt"})
    loaded = load_file(path)
    # each tensor under its path of keys, one tensor object reached twice stored once
    assert set(loaded) == ({f"model.{k}" for k in obj["model"]} |
                           {"optimizer.state.0.step", "optimizer.state.0.exp_avg", "optimizer.state.1.momentum_buffer",
                            "optimizer.state.1.list.0", "optimizer.state.1.list.1", "nested.0.0.1.deep.0"})
    _assert_same(obj["optimizer"]["state"][1]["list"][1], loaded["optimizer.state.1.list.1"])
    _assert_same(obj["big"], loaded["nested.0.0.1.deep.0"])
    for k, v in obj["model"].items():
        _assert_same(v, loaded[f"model.{k}"], k)
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
    assert metadata["format"] == "pt" and json.loads(metadata["pyflame.structure"])["version"] == 1


@pytest.mark.parametrize("obj", [
    lambda t: t,
    lambda t: [t, t.T],
    lambda t: (t, 2.5),
    lambda t: {1: t, 0: t * 2},
    lambda t: {"__metadata__": t, "b": t + 1},
    lambda t: {"a.b": t, "a": {"b": t - 1}},
    lambda t: 7,
    lambda t: None,
], ids=["tensor", "list", "tuple", "int-keys", "metadata-key", "name-clash", "int", "none"])
def test_nested_roots_and_names(tmp_path, rng, obj):
    """Any supported root; names that clash (or would be the format's __metadata__) get unique ones."""
    obj = obj(pf.tensor(_values(rng, (2, 3), "float32")))
    pf.save(obj, tmp_path / "x.safetensors")
    _assert_same_structure(pf.load(tmp_path / "x.safetensors"), _to_torch(obj))


def test_tensors_sharing_storage_load_as_their_values(tmp_path, rng):
    base = pf.tensor(_values(rng, (4, 6), "float32"))
    obj = {"w": base, "views": [base.T, base[1:3, ::2], base.reshape(6, 4)], "step": 1}
    pf.save(obj, tmp_path / "v.safetensors")
    _assert_same_structure(pf.load(tmp_path / "v.safetensors"), _to_torch(obj))


def test_flat_state_dict_stays_plain_safetensors(tmp_path, rng):
    """A dict of str -> Tensor is written as before: no structure entry, the names as they are."""
    d = _sample_dict(rng)
    pf.save(d, tmp_path / "flat.safetensors")
    with open(tmp_path / "flat.safetensors", "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    assert list(header) == list(d)
    back = pf.load(tmp_path / "flat.safetensors")
    assert type(back) is dict and list(back) == list(d)
