"""repr(Tensor), str(Tensor) and format(Tensor, spec) as PyTorch 2.13 prints them.

The layout rules are PyTorch's (torch/_tensor_str.py): one formatter for the
whole tensor decides integer mode (floats that are all whole print as `1.`),
scientific mode (when the largest and smallest nonzero magnitudes are more
than 1000 apart, or beyond 1e8 / below 1e-4) and a common width; rows wrap at
`linewidth`; tensors of more than `threshold` elements show `edgeitems` at
each end of every dim with '...' between. Suffixes: device when not the CPU,
dtype when not float32/int64/bool (`dtype=pyflame.float16`: the module that
has the name), size for empty tensors, grad_fn=<...> or requires_grad=True.
"""

import math

import numpy as np

from . import _C


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


_OPTS = _PrintOptions()
_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """As torch.set_printoptions: a profile ('default', 'short', 'full') first, then the options given.

    sci_mode: True or False forces scientific notation on or off; None lets each tensor decide.
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        for key, value in _PROFILES[profile].items():
            setattr(_OPTS, key, value)
    for key, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                       ("linewidth", linewidth)):
        if value is not None:
            setattr(_OPTS, key, value)
    _OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options as a dict (torch._tensor_str.get_printoptions)."""
    return {key: getattr(_OPTS, key) for key in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}


class _Formatter:
    """One width and notation for every element shown, decided from those elements."""

    def __init__(self, values):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not self.floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
        else:
            finite = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
            if finite.size == 0:
                return
            magnitudes = np.abs(finite)
            lo, hi = float(magnitudes.min()), float(magnitudes.max())
            self.int_mode = bool(np.all(finite == np.ceil(finite)))
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4 if _OPTS.sci_mode is None else _OPTS.sci_mode
            p = _OPTS.precision
            if self.sci_mode:
                widths = (len(f"{v:.{p}e}") for v in finite.tolist())
            elif self.int_mode:
                widths = (len(f"{v:.0f}") + 1 for v in finite.tolist())
            else:
                widths = (len(f"{v:.{p}f}") for v in finite.tolist())
            self.max_width = max(self.max_width, *widths)

    def format(self, v):
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{_OPTS.precision}e}"
            elif self.int_mode:
                s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
            else:
                s = f"{v:.{_OPTS.precision}f}"
        else:
            s = f"{v}"
        return " " * (self.max_width - len(s)) + s


def _vector(values, full_len, indent, summarize, fmt):
    e = _OPTS.edgeitems
    items = values.tolist()
    if summarize and not e:
        data = ["..."]
    elif summarize and full_len > 2 * e:
        data = [fmt.format(v) for v in items[:e]] + [" ..."] + [fmt.format(v) for v in items[-e:]]
    else:
        data = [fmt.format(v) for v in items]
    per_line = max(1, int(math.floor((_OPTS.linewidth - indent) / (fmt.max_width + 2))))
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, shape, indent, summarize, fmt):
    """values: the shown elements (long dims cut to 2 * edgeitems); shape: the tensor's full shape."""
    if len(shape) == 0:
        return fmt.format(values.item())
    if len(shape) == 1:
        return _vector(values, shape[0], indent, summarize, fmt)
    e = _OPTS.edgeitems
    if summarize and shape[0] > 2 * e:
        rows = [_nested(values[i], shape[1:], indent + 1, summarize, fmt) for i in range(min(e, len(values)))]
        rows += ["..."]
        rows += [_nested(values[i], shape[1:], indent + 1, summarize, fmt) for i in range(len(values) - e, len(values))]
    else:
        rows = [_nested(values[i], shape[1:], indent + 1, summarize, fmt) for i in range(shape[0])]
    return "[" + ("," + "\n" * (len(shape) - 1) + " " * (indent + 1)).join(rows) + "]"


def _host_values(t, summarize):
    """The shown elements as a NumPy array, cut on the tensor's device first (a big GPU tensor is not copied)."""
    e = _OPTS.edgeitems
    if summarize:
        for d, n in enumerate(t.shape):
            if n > 2 * e:
                head = t[(slice(None),) * d + (slice(0, e),)]
                tail = t[(slice(None),) * d + (slice(n - e, n),)]
                t = _C.cat([head, tail], d) if e else head
    if t.dtype in (_C.dtype.float16, _C.dtype.bfloat16):
        t = t.to(_C.dtype.float32)
    return np.asarray(t.detach().cpu().numpy())


def _default_dtype():
    get = getattr(_C, "get_default_dtype", None)  # set_default_dtype changes what needs no suffix
    return get() if get is not None else _C.dtype.float32


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _tensor_repr(t):
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    device = str(t.device)
    if device != "cpu":
        suffixes.append(f"device='{device}'")
    default_dtype = _default_dtype()
    if t.numel() == 0:
        if t.dim() != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype != default_dtype:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "[]"
    else:
        if not _OPTS.edgeitems:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype not in (default_dtype, _C.dtype.int64, _C.dtype.bool):
            suffixes.append(f"dtype={t.dtype!r}")
        summarize = t.numel() > _OPTS.threshold
        shown = _host_values(t, summarize)
        body = _nested(shown, tuple(t.shape), indent, summarize, _Formatter(shown))
    grad_fn = t.grad_fn
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


def _tensor_format(t, spec):
    # As torch: a 0-d tensor formats as its number; other tensors only with an empty spec.
    if t.dim() == 0 and type(t) is _C.Tensor:
        return t.detach().item().__format__(spec)
    return object.__format__(t, spec)


_C.Tensor.__repr__ = _tensor_repr
_C.Tensor.__str__ = _tensor_repr
_C.Tensor.__format__ = _tensor_format
