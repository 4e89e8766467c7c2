"""pf.save / pf.load: tensors, and nested state holding them, in the safetensors format.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian
header length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets":
[begin, end]}, "__metadata__": {str: str}}, then the tensors' raw little-endian
bytes, packed without gaps (offsets are relative to the end of the header).
This module writes and reads it itself; files move both ways with PyTorch's
safetensors.torch.save_file / load_file. bfloat16 travels as its bit pattern:
a bfloat16 value widened to float32 is the same bits followed by 16 zeros.

A flat dict {str: Tensor} is written as a plain safetensors file. Anything else
(a checkpoint such as {"model": state_dict, "optimizer": opt.state_dict(),
"epoch": 3}) stores its tensors under generated names and its structure as
JSON in the metadata entry "pyflame.structure" ({"version": 1, "root": node}):
a node is null, a bool, an int, a finite float, a string, a list of nodes, or
an object with one tag: {"tensor": name}, {"tuple": [nodes]}, {"float":
"inf" | "-inf" | "nan"}, {"dict": [[key node, value node], ...]} (with "type":
"OrderedDict" or "Counter" for those). No pickle: loading runs no code.
"""

import json
import math
import os
from collections import Counter, OrderedDict
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
    t = t.detach()
    if t.dtype == _F.bfloat16:
        wide = np.ascontiguousarray(t.to(_F.float32).cpu().numpy())
        return (wide.view(np.uint32) >> 16).astype("<u2")
    arr = t.cpu().numpy()
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))


def _typename(obj):
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


_STRUCTURE_KEY = "pyflame.structure"
_STRUCTURE_VERSION = 1
_DICT_TYPES = {dict: "dict", OrderedDict: "OrderedDict", Counter: "Counter"}
_DICT_BY_NAME = {name: cls for cls, name in _DICT_TYPES.items()}
_KEY_TYPES = (str, int, float, type(None))  # (bool is an int)
_SUPPORTED = "dict, list, tuple, str, int, float, bool, None and pyflame Tensors"


def _is_flat(obj):
    """A state dict that plain safetensors holds as it is: tensors under string names."""
    return isinstance(obj, dict) and all(isinstance(k, str) and k != "__metadata__" and isinstance(v, _C.Tensor)
                                         for k, v in obj.items())


def _encode(obj):
    """(tensors {name: Tensor}, the structure's root node) of a nested object; raises before anything is written.

    A tensor is named by its path of keys joined by '.', made unique with '#2', '#3', ...;
    one tensor object reached twice is stored once (and loads as one object)."""
    tensors, names, open_containers = {}, {}, set()

    def where(path):
        return ".".join(path) or "the object"

    def tensor_name(path):
        base = ".".join(path) or "tensor"
        name, n = base, 1
        while name in tensors or name == "__metadata__":
            n += 1
            name = f"{base}#{n}"
        return name

    def scalar(x):  # subclasses (np.float64, IntEnum, ...) as their base type
        if x is None or isinstance(x, bool):
            return x
        if isinstance(x, str):
            return str(x)
        if isinstance(x, int):
            return int(x)
        x = float(x)
        return x if math.isfinite(x) else {"float": repr(x)}  # JSON has no inf or nan

    def node(x, path):
        if x is None or isinstance(x, (bool, int, float, str)):
            return scalar(x)
        if isinstance(x, _C.Tensor):
            if id(x) not in names:
                names[id(x)] = tensor_name(path)
                tensors[names[id(x)]] = x
            return {"tensor": names[id(x)]}
        if not isinstance(x, (dict, list, tuple)):
            raise TypeError(f"pf.save: {where(path)} is a {_typename(x)}, which pf.save cannot store "
                            f"(it stores {_SUPPORTED})")
        if id(x) in open_containers:
            raise ValueError(f"pf.save: {where(path)} contains itself")
        open_containers.add(id(x))
        if isinstance(x, dict):
            items = []
            for k, v in x.items():
                if not isinstance(k, _KEY_TYPES):
                    raise TypeError(f"pf.save: {where(path)} has a key {k!r} of type {_typename(k)}; "
                                    "keys must be str, int, float, bool or None")
                items.append([scalar(k), node(v, path + [str(k)])])
            out = {"dict": items}
            if type(x) in (OrderedDict, Counter):
                out["type"] = _DICT_TYPES[type(x)]
        else:
            values = [node(v, path + [str(i)]) for i, v in enumerate(x)]
            out = {"tuple": values} if isinstance(x, tuple) else values
        open_containers.discard(id(x))
        return out

    root = node(obj, [])
    return tensors, root


def save(obj, path, metadata=None):
    """Writes `obj` to `path` in the safetensors format.

    `obj` is a dict {name: Tensor} (a state dict: written as plain safetensors, the names
    as they are) or nested state: dicts (keys str, int, float, bool or None), lists,
    tuples, str, int, float, bool, None and Tensors at any depth. Tensors of any device
    and layout: device tensors are copied to the host, views are written as their
    elements. `metadata` is an optional dict of str -> str. Everything is checked before
    the file is opened (TypeError/ValueError naming the path of the bad value)."""
    if metadata is not None and (not isinstance(metadata, dict) or
                                 not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError("pf.save: metadata must be a dict of str -> str")
    if metadata is not None and _STRUCTURE_KEY in metadata:
        raise ValueError(f"pf.save: the metadata key {_STRUCTURE_KEY!r} is reserved for pf.save's structure")
    if _is_flat(obj):
        tensors = obj
    else:
        tensors, root = _encode(obj)
        metadata = dict(metadata or {})
        metadata[_STRUCTURE_KEY] = json.dumps({"version": _STRUCTURE_VERSION, "root": root},
                                              separators=(",", ":"), allow_nan=False)

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
    return entries, metadata or {}


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
    """Reads a file pf.save wrote, or any safetensors file.

    A flat file (a state dict, or one from another tool) gives a dict {name: Tensor} in
    the file's order; a file of nested state gives that state back, with its dict key
    types, tuples, ints, floats and bools. Tensors are created on `device` (default: the
    current device); `map_location` is torch.load's: a device, a dict {saved location:
    device} or a function (tensor, saved location) -> tensor. A safetensors file holds
    its tensors on the host, so the saved location of each is 'cpu'. FileNotFoundError
    for a missing file; ValueError naming the problem for a truncated or corrupt one."""
    if map_location is not None:
        if device is not None:
            raise TypeError("pf.load: give device= or map_location=, not both")
        if isinstance(map_location, dict):
            device = {str(k): v for k, v in map_location.items()}.get("cpu")
        elif callable(map_location):
            return _map_tensors(_load(path, "cpu"), lambda t: map_location(t, "cpu"))
        else:
            device = map_location
    return _load(path, device)


def _map_tensors(state, fn):
    """`state` with fn applied to each tensor in it (dicts, lists and tuples at any depth)."""
    if isinstance(state, _C.Tensor):
        return fn(state)
    if isinstance(state, dict):
        return type(state)((k, _map_tensors(v, fn)) for k, v in state.items())
    if isinstance(state, (list, tuple)):
        return type(state)(_map_tensors(v, fn) for v in state)
    return state


def _from_host(buf, dtype_name, shape, device):
    """A new tensor of safetensors dtype `dtype_name` from its little-endian bytes."""
    pf_dtype, np_dtype = _BY_NAME[dtype_name]
    arr = np.frombuffer(buf, dtype=np_dtype).reshape(shape)
    if pf_dtype == _F.bfloat16:
        wide = (arr.astype(np.uint32) << 16).view(np.float32)
        return _tensor(wide, dtype=pf_dtype, device=device)
    return _tensor(arr.astype(np_dtype.newbyteorder("="), copy=False), device=device)


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
        entries, metadata = _parse_header(f.read(n), size - 8 - n, where)
        out = {}
        for begin, stop, name, dtype, shape in entries:
            buf = bytearray(stop - begin)  # writable, so pf.tensor reads it without another copy
            f.readinto(buf)
            out[name] = _from_host(buf, dtype, shape, device)
    if _STRUCTURE_KEY not in metadata:
        return out
    return _decode(metadata[_STRUCTURE_KEY], out, where)


def _decode(text, tensors, where):
    """The nested state of a "pyflame.structure" metadata entry (the module docstring), over the loaded tensors."""
    def bad(why):
        return ValueError(f"pf.load: {where} has an invalid {_STRUCTURE_KEY!r} entry: {why}")

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise bad(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or set(doc) != {"version", "root"}:
        raise bad('expected {"version": ..., "root": ...}')
    if doc["version"] != _STRUCTURE_VERSION:
        raise bad(f"version {doc['version']!r}; this PyFlame reads version {_STRUCTURE_VERSION}")
    used = set()

    def value(node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [value(v) for v in node]
        if not isinstance(node, dict):
            raise bad(f"unexpected node {node!r}")
        keys = set(node)
        if keys == {"tensor"}:
            if node["tensor"] not in tensors:
                raise bad(f"it refers to a tensor {node['tensor']!r} that the file does not hold")
            used.add(node["tensor"])
            return tensors[node["tensor"]]
        if keys == {"tuple"} and isinstance(node["tuple"], list):
            return tuple(value(v) for v in node["tuple"])
        if keys == {"float"} and node["float"] in ("inf", "-inf", "nan"):
            return float(node["float"])
        if "dict" in keys and keys <= {"dict", "type"} and node.get("type", "dict") in _DICT_BY_NAME:
            if not isinstance(node["dict"], list):
                raise bad(f"a dict's items must be a list, got {node['dict']!r}")
            out = _DICT_BY_NAME[node.get("type", "dict")]()
            for item in node["dict"]:
                if not isinstance(item, list) or len(item) != 2:
                    raise bad(f"a dict's items must be [key, value] pairs, got {item!r}")
                key = value(item[0])
                if not isinstance(key, _KEY_TYPES):
                    raise bad(f"a dict key must be str, int, float, bool or None, got {item[0]!r}")
                out[key] = value(item[1])
            return out
        raise bad(f"unexpected node {node!r}")

    root = value(doc["root"])
    if used != set(tensors):
        raise bad(f"tensors the structure does not refer to: {', '.join(sorted(set(tensors) - used))}")
    return root
