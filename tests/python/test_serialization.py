"""pf.save / pf.load: the safetensors format, both ways with PyTorch's safetensors package."""

import json
import struct

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
    assert pf.load(path)["big"].numpy().any()


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
        expected = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(pm(pf.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)
    # and back: a PyFlame model's state dict into a fresh torch model
    pm2 = nn.Sequential(nn.Linear(7, 5), nn.ReLU(), nn.Linear(5, 3))
    pf.save(pm2.state_dict(), tmp_path / "pf.safetensors")
    tm.load_state_dict(load_file(str(tmp_path / "pf.safetensors")))
    with torch.no_grad():
        expected = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(pm2(pf.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)


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


# ----------------------------------------------------------------- errors


def test_save_errors(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="'b' is a ndarray"):
        pf.save({"a": pf.ones(1), "b": np.ones(1)}, path)
    with pytest.raises(TypeError, match="names must be strings"):
        pf.save({1: pf.ones(1)}, path)
    with pytest.raises(TypeError, match="dict of name -> Tensor"):
        pf.save([pf.ones(1)], path)
    with pytest.raises(ValueError, match="reserved"):
        pf.save({"__metadata__": pf.ones(1)}, path)
    with pytest.raises(TypeError, match="metadata"):
        pf.save({"a": pf.ones(1)}, path, metadata={"a": 1})
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


@pytest.mark.parametrize("zip_format", [True, False])
def test_load_of_a_pytorch_checkpoint_says_what_it_is(tmp_path, zip_format):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(3)}, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(ValueError, match=r"PyTorch checkpoint.*save_file"):
        pf.load(path)
