"""pf.save / pf.load: dicts of tensors in the safetensors format.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian
header length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets":
[begin, end]}, "__metadata__": {str: str}}, then the tensors' raw little-endian
bytes, packed without gaps (offsets are relative to the end of the header).
This module writes and reads it itself; files move both ways with PyTorch's
safetensors.torch.save_file / load_file. bfloat16 travels as its bit pattern:
a bfloat16 value widened to float32 is the same bits followed by 16 zeros.
"""

import json
import os
import struct

import numpy as np

from . import _C
from ._creation import tensor as _tensor

_F = _C.dtype
# pyflame dtype <-> safetensors name and the NumPy dtype of its stored bytes.
_FORMAT = {
    _F.float64: ("F64", "<f8"), _F.float32: ("F32", "<f4"), _F.float16: ("F16", "<f2"),
    _F.bfloat16: ("BF16", "<u2"), _F.int64: ("I64", "<i8"), _F.int32: ("I32", "<i4"),
    _F.int16: ("I16", "<i2"), _F.int8: ("I8", "i1"), _F.uint8: ("U8", "u1"), _F.bool: ("BOOL", "?"),
}
_BY_NAME = {name: (dtype, np.dtype(np_dtype)) for dtype, (name, np_dtype) in _FORMAT.items()}
_MAX_HEADER = 100_000_000  # the safetensors library's limit


def _host_array(t):
    """The tensor's elements as a C-contiguous little-endian NumPy array (bfloat16 as uint16 bits)."""
    if t.dtype == _F.bfloat16:
        wide = np.ascontiguousarray(t.to(_F.float32).cpu().numpy())
        return (wide.view(np.uint32) >> 16).astype("<u2")
    arr = t.cpu().numpy()
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))


def save(tensors, path, metadata=None):
    """Writes a dict {name: Tensor} (a state dict) to `path` in the safetensors format.

    Any device and layout: device tensors are copied to the host, views are
    written as their elements. `metadata` is an optional dict of str -> str.
    Everything is checked before the file is opened (TypeError/ValueError)."""
    if not isinstance(tensors, dict):
        raise TypeError(f"pf.save: expected a dict of name -> Tensor, got {type(tensors).__name__}")
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"pf.save: tensor names must be strings, got {name!r} ({type(name).__name__})")
        if name == "__metadata__":
            raise ValueError("pf.save: '__metadata__' is reserved by the format and cannot name a tensor")
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"pf.save: the value of '{name}' is a {type(t).__name__}, not a pyflame Tensor")
    if metadata is not None and (not isinstance(metadata, dict) or
                                 not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError("pf.save: metadata must be a dict of str -> str")

    header = {} if metadata is None else {"__metadata__": metadata}
    arrays = []
    offset = 0
    for name, t in tensors.items():
        arr = _host_array(t)
        header[name] = {"dtype": _FORMAT[t.dtype][0], "shape": list(t.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        arrays.append(arr)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the safetensors library writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for arr in arrays:
            f.write(memoryview(arr.reshape(-1)).cast("B"))


def _parse_header(raw, data_size, where):
    def bad(why):
        return ValueError(f"pf.load: {where} is not a valid safetensors file: {why}")

    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (not isinstance(metadata, dict) or
                                 not all(isinstance(v, str) for v in metadata.values())):
        raise bad("__metadata__ must map strings to strings")
    entries = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"the entry of '{name}' must have exactly dtype, shape and data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in _BY_NAME:
            raise bad(f"'{name}' has dtype {dtype!r}; supported: {', '.join(_BY_NAME)}")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise bad(f"'{name}' has shape {shape!r}; expected a list of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2 or
                not all(isinstance(o, int) for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
            raise bad(f"'{name}' has data_offsets {offsets!r}; expected [begin, end] with 0 <= begin <= end")
        nbytes = int(np.prod(shape, dtype=np.int64)) * _BY_NAME[dtype][1].itemsize
        if offsets[1] - offsets[0] != nbytes:
            raise bad(f"'{name}' ({dtype}, shape {shape}) needs {nbytes} bytes but data_offsets {offsets} "
                      f"hold {offsets[1] - offsets[0]}")
        entries.append((offsets[0], offsets[1], name, dtype, shape))
    entries.sort()
    end = 0
    for begin, stop, name, *_ in entries:
        if begin != end:
            raise bad(f"the data of '{name}' starts at byte {begin}, expected {end} (tensors must be packed)")
        end = stop
    if end > data_size:
        raise bad(f"truncated: the header describes {end} bytes of data but only {data_size} follow it")
    if end != data_size:
        raise bad(f"{data_size - end} bytes after the last tensor's data")
    return entries


def _refuse_pytorch_checkpoint(head, where):
    """A torch.save file (a zip archive, or a bare pickle in the legacy format) read as safetensors
    gives a nonsense header length: say what it is and how to convert it instead."""
    if head.startswith(b"PK\x03\x04") or head[:1] == b"\x80":
        raise ValueError(
            f"pf.load: {where} is a PyTorch checkpoint (torch.save's pickle format), not a safetensors file. "
            "PyFlame does not unpickle files (unpickling can run code). Convert it once with PyTorch: "
            "`from safetensors.torch import save_file; save_file(torch.load(path), 'model.safetensors')` "
            "(for a state_dict of tensors), then pf.load('model.safetensors')")


def load(path, device=None, map_location=None):
    """Reads a safetensors file into a dict {name: Tensor}, in the file's order.

    Tensors are created on `device` (default: the current device); `map_location`
    is torch.load's name for it (a device string or pf device; not a dict or function).
    FileNotFoundError for a missing file; ValueError naming the problem for a
    truncated or corrupt one."""
    if map_location is not None:
        if device is not None:
            raise TypeError("pf.load: give device= or map_location=, not both")
        if callable(map_location) or isinstance(map_location, dict):
            raise TypeError("pf.load: map_location must be a device (e.g. 'cpu' or 'rocm:0'); "
                            "a dict or a function is not supported")
        device = map_location
    return _load(path, device)


def _load(path, device):
    where = repr(os.fspath(path))
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise ValueError(f"pf.load: {where} is not a valid safetensors file: truncated: {size} bytes, "
                             "shorter than the 8-byte header length")
        head = f.read(8)
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, _MAX_HEADER):
            _refuse_pytorch_checkpoint(head, where)
            raise ValueError(f"pf.load: {where} is not a valid safetensors file: header length {n} exceeds "
                             f"the {size - 8} bytes after it" + (" (or the format's limit)" if n > _MAX_HEADER else ""))
        entries = _parse_header(f.read(n), size - 8 - n, where)
        out = {}
        for begin, stop, name, dtype, shape in entries:
            pf_dtype, np_dtype = _BY_NAME[dtype]
            buf = bytearray(stop - begin)  # writable, so pf.tensor reads it without another copy
            f.readinto(buf)
            arr = np.frombuffer(buf, dtype=np_dtype).reshape(shape)
            if pf_dtype == _F.bfloat16:
                wide = (arr.astype(np.uint32) << 16).view(np.float32)
                out[name] = _tensor(wide, dtype=pf_dtype, device=device)
            else:
                out[name] = _tensor(arr.astype(np_dtype.newbyteorder("="), copy=False), device=device)
    return out
