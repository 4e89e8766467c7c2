"""repr(Tensor): the values, as PyTorch prints them, plus dtype and device when not the defaults."""

import numpy as np

from . import _C

_DEFAULT_DTYPES = {_C.dtype.float32, _C.dtype.int64, _C.dtype.bool}


def _tensor_repr(t):
    shown = t.to(_C.dtype.float32) if t.dtype == _C.dtype.bfloat16 else t
    values = np.asarray(shown.cpu().numpy())
    body = np.array2string(values, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)
    extras = []
    if t.device != "cpu":
        extras.append(f"device='{t.device}'")
    if t.dtype not in _DEFAULT_DTYPES or t.numel() == 0:
        extras.append(f"dtype={t.dtype!r}")
    if t.numel() == 0:
        body = f"[], size={t.shape}"
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


_C.Tensor.__repr__ = _tensor_repr
_C.Tensor.__str__ = _tensor_repr
