"""torch.autograd.functional's reverse-mode tools over pf.autograd.grad: `vjp` and `jacobian`.

Each call differentiates `func` at fresh leaves made from `inputs` (detached copies that require
grad), so the caller's tensors and their graphs are left as they are, and returns results
detached. `jvp`, `vhp`, `hvp` and `hessian` differentiate a gradient again (PyTorch computes
`jvp` by the double-vjp trick), which needs `create_graph=True`: PyFlame has no higher-order
gradients yet, so they raise NotSupportedError (docs/autograd.md), as does `create_graph=True`
here.
"""

from .. import _C
from . import grad as _grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jacobian", "jvp", "vhp", "hvp", "hessian"]


def _as_tuple(x, what, fn):
    """(whether x was a tuple or list, x as a tuple of tensors)."""
    if isinstance(x, _C.Tensor):
        return False, (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, _C.Tensor) for t in x):
        return True, tuple(x)
    raise TypeError(f"{fn}: {what} must be a Tensor or a tuple of Tensors, got {type(x).__name__}")


def _unpack(was_tuple, values):
    return tuple(values) if was_tuple else values[0]


def _check_first_order(create_graph, fn):
    if create_graph:
        raise _C.NotSupportedError(f"{fn}(create_graph=True): higher-order gradients are not supported yet "
                                   "(docs/autograd.md)")


def _call(func, inputs, fn):
    """func at fresh leaves: (inputs as leaves, whether func returned a tuple, its outputs as a tuple)."""
    leaves = tuple(t.detach().requires_grad_(True) for t in inputs)
    with enable_grad():
        out_was_tuple, outputs = _as_tuple(func(*leaves), "the outputs of func", fn)
    return leaves, out_was_tuple, outputs


def _gradients(outputs, leaves, grad_outputs, strict, fn, what):
    """d(sum of outputs weighted by grad_outputs) / d(each leaf); zeros where an output does not depend on
    a leaf (strict=True raises there, as torch's)."""
    wanted = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    grads = (_grad([o for o, _ in wanted], leaves, [g for _, g in wanted], retain_graph=True, allow_unused=True)
             if wanted else (None,) * len(leaves))
    result = []
    for i, (g, leaf) in enumerate(zip(grads, leaves)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn}: {what} does not depend on input {i} (strict=True)")
            g = _C._full_like(leaf, 0, dtype=None, device=None)
        result.append(g)
    return result


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T J): the vector-Jacobian product at `inputs`, as torch.autograd.functional.vjp. `v`
    has the outputs' shapes (a tensor or a tuple as func returns); None where func returns one value."""
    _check_first_order(create_graph, "vjp")
    in_was_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    leaves, out_was_tuple, outputs = _call(func, inputs, "vjp")
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("vjp: v may be None only when func returns a single value; give v with the outputs' "
                               f"shapes {[tuple(o.shape) for o in outputs]}")
        vs = (_C._full_like(outputs[0], 1, dtype=None, device=None),)
    else:
        _, vs = _as_tuple(v, "v", "vjp")
        if len(vs) != len(outputs) or any(tuple(a.shape) != tuple(o.shape) for a, o in zip(vs, outputs)):
            raise RuntimeError(f"vjp: v has shapes {[tuple(a.shape) for a in vs]}, the outputs "
                               f"{[tuple(o.shape) for o in outputs]}")
    grads = _gradients(outputs, leaves, vs, strict, "vjp", "the output")
    return _unpack(out_was_tuple, [o.detach() for o in outputs]), _unpack(in_was_tuple, grads)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at `inputs`, as torch.autograd.functional.jacobian: for output i and input j a
    tensor of shape output_i.shape + input_j.shape, nested in tuples as func's outputs and `inputs` are.
    One backward pass per output element (reverse mode; `vectorize` changes nothing but speed in torch
    and is accepted)."""
    _check_first_order(create_graph, "jacobian")
    if strategy != "reverse-mode":
        raise _C.NotSupportedError(f"jacobian(strategy={strategy!r}): forward-mode AD is not supported; use "
                                   "strategy='reverse-mode' (docs/autograd.md)")
    in_was_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    leaves, out_was_tuple, outputs = _call(func, inputs, "jacobian")
    per_output = []
    for i, out in enumerate(outputs):
        flat = out.reshape(-1)
        rows = [[] for _ in leaves]
        for k in range(flat.numel()):
            element = flat[k]
            grads = _gradients((element,), leaves, (_C._full_like(element, 1, dtype=None, device=None),), strict,
                               "jacobian", f"output {i}")
            for j, g in enumerate(grads):
                rows[j].append(g.reshape(-1))
        blocks = []
        for j, leaf in enumerate(leaves):
            shape = tuple(out.shape) + tuple(leaf.shape)
            if rows[j]:
                blocks.append(_C.stack(rows[j], 0).reshape(shape))
            else:
                blocks.append(_C._full(list(shape), 0, dtype=leaf.dtype, device=leaf.device))
        per_output.append(_unpack(in_was_tuple, blocks))
    return _unpack(out_was_tuple, per_output)


def _needs_second_order(fn):
    def unsupported(*args, **kwargs):
        raise _C.NotSupportedError(f"autograd.functional.{fn}: differentiates a gradient again, and higher-order "
                                   "gradients (create_graph=True) are not supported yet (docs/autograd.md); vjp and "
                                   "jacobian are there")

    unsupported.__name__ = unsupported.__qualname__ = fn
    return unsupported


jvp = _needs_second_order("jvp")
vhp = _needs_second_order("vhp")
hvp = _needs_second_order("hvp")
hessian = _needs_second_order("hessian")
