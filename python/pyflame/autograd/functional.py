"""torch.autograd.functional over pf.autograd.grad: `vjp`, `jacobian`, and through higher-order
gradients (create_graph=True) `jvp`, `vhp`, `hvp` and `hessian`.

Each call differentiates `func` at leaves made from `inputs`: detached copies that require grad, so
the caller's tensors and their graphs are left as they are, and results come back detached. With
create_graph=True an input that requires grad is used with its history instead, and the results
keep theirs, so they can be differentiated again (as torch's). `jvp` is the double-vjp trick, as in
PyTorch: a vjp with a dummy cotangent that requires grad, differentiated with respect to it.
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


def _leaf(t, create_graph):
    """An input as func sees it: with its history where create_graph keeps it, else a fresh leaf."""
    if create_graph and t.requires_grad:
        return t.view(tuple(t.shape))
    return t.detach().requires_grad_(True)


def _result(t, create_graph):
    return t if create_graph else t.detach()


def _call(func, inputs, fn, create_graph=False):
    """func at leaves of `inputs`: (the leaves, whether func returned a tuple, its outputs as a tuple)."""
    leaves = tuple(_leaf(t, create_graph) for t in inputs)
    with enable_grad():
        out_was_tuple, outputs = _as_tuple(func(*leaves), "the outputs of func", fn)
    return leaves, out_was_tuple, outputs


def _gradients(outputs, leaves, grad_outputs, strict, fn, what, create_graph=False):
    """d(sum of outputs weighted by grad_outputs) / d(each leaf); zeros where an output does not depend on
    a leaf (strict=True raises there, as torch's). create_graph: the gradients keep their history."""
    wanted = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    grads = (_grad([o for o, _ in wanted], leaves, [g for _, g in wanted], retain_graph=True, allow_unused=True,
                   create_graph=create_graph)
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
    in_was_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    leaves, out_was_tuple, outputs = _call(func, inputs, "vjp", create_graph)
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
    grads = _gradients(outputs, leaves, vs, strict, "vjp", "the output", create_graph)
    return (_unpack(out_was_tuple, [_result(o, create_graph) for o in outputs]),
            _unpack(in_was_tuple, [_result(g, create_graph) for g in grads]))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at `inputs`, as torch.autograd.functional.jacobian: for output i and input j a
    tensor of shape output_i.shape + input_j.shape, nested in tuples as func's outputs and `inputs` are.
    One backward pass per output element (reverse mode; `vectorize` changes nothing but speed in torch
    and is accepted)."""
    if strategy != "reverse-mode":
        raise _C.NotSupportedError(f"jacobian(strategy={strategy!r}): forward-mode AD is not supported; use "
                                   "strategy='reverse-mode' (docs/autograd.md)")
    in_was_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    leaves, out_was_tuple, outputs = _call(func, inputs, "jacobian", create_graph)
    per_output = []
    for i, out in enumerate(outputs):
        flat = out.reshape(-1)
        rows = [[] for _ in leaves]
        for k in range(flat.numel()):
            element = flat[k]
            grads = _gradients((element,), leaves, (_C._full_like(element, 1, dtype=None, device=None),), strict,
                               "jacobian", f"output {i}", create_graph)
            for j, g in enumerate(grads):
                rows[j].append(g.reshape(-1))
        blocks = []
        for j, leaf in enumerate(leaves):
            shape = tuple(out.shape) + tuple(leaf.shape)
            if rows[j]:
                blocks.append(_result(_C.stack(rows[j], 0).reshape(shape), create_graph))
            else:
                blocks.append(_C._full(list(shape), 0, dtype=leaf.dtype, device=leaf.device))
        per_output.append(_unpack(in_was_tuple, blocks))
    return _unpack(out_was_tuple, per_output)


def _cotangents(v, outputs, fn, what):
    """v as a tuple matching `outputs` (None: func returns one value, then 1)."""
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(f"{fn}: v may be None only when {what} is a single value; give v with the shapes "
                               f"{[tuple(o.shape) for o in outputs]}")
        return (_C._full_like(outputs[0], 1, dtype=None, device=None),)
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(outputs) or any(tuple(a.shape) != tuple(o.shape) for a, o in zip(vs, outputs)):
        raise RuntimeError(f"{fn}: v has shapes {[tuple(a.shape) for a in vs]}, {what} "
                           f"{[tuple(o.shape) for o in outputs]}")
    return vs


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), J v): the Jacobian-vector product at `inputs`, as torch.autograd.functional.jvp (by
    the double-vjp trick: u^T J for a cotangent u that requires grad, differentiated with respect to u)."""
    in_was_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    leaves, out_was_tuple, outputs = _call(func, inputs, "jvp", create_graph)
    vs = _cotangents(v, leaves, "jvp", "the inputs")
    with enable_grad():
        dummies = tuple(_C._full_like(o, 0, dtype=None, device=None).requires_grad_(True) for o in outputs)
        grads = _gradients(outputs, leaves, dummies, strict, "jvp", "the output", create_graph=True)
        wanted = [(g, u) for g, u in zip(grads, vs) if g.requires_grad]
        if wanted:
            result = _grad([g for g, _ in wanted], dummies, [u for _, u in wanted], retain_graph=True,
                           allow_unused=True, create_graph=create_graph)
        else:
            result = (None,) * len(dummies)
    out = []
    for i, (r, o) in enumerate(zip(result, outputs)):
        if r is None:
            if strict:
                raise RuntimeError(f"jvp: output {i} does not depend on the inputs (strict=True)")
            r = _C._full_like(o, 0, dtype=None, device=None)
        out.append(_result(r, create_graph))
    return _unpack(out_was_tuple, [_result(o, create_graph) for o in outputs]), _unpack(out_was_tuple, out)


def _scalar_output(func, inputs, fn, create_graph):
    in_was_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    leaves, _, outputs = _call(func, inputs, fn, create_graph)
    if len(outputs) != 1 or outputs[0].numel() != 1:
        raise RuntimeError(f"{fn}: func must return a single value (a tensor of one element), got shapes "
                           f"{[tuple(o.shape) for o in outputs]}")
    return in_was_tuple, leaves, outputs[0]


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T H): the vector-Hessian product of a function of one value at `inputs`, as
    torch.autograd.functional.vhp."""
    in_was_tuple, leaves, out = _scalar_output(func, inputs, "vhp", create_graph)
    vs = _cotangents(v, leaves, "vhp", "the inputs")
    with enable_grad():
        grads = _gradients((out,), leaves, (_C._full_like(out, 1, dtype=None, device=None),), strict, "vhp",
                           "the output", create_graph=True)
        terms = [(g * u).sum() for g, u in zip(grads, vs) if g.requires_grad]
        if terms:
            product = terms[0]
            for t in terms[1:]:
                product = product + t
            second = _gradients((product,), leaves, (_C._full_like(product, 1, dtype=None, device=None),), strict,
                                "vhp", "the gradient", create_graph)
        else:
            second = [_C._full_like(leaf, 0, dtype=None, device=None) for leaf in leaves]
    return _result(out, create_graph), _unpack(in_was_tuple, [_result(g, create_graph) for g in second])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), H v), as torch.autograd.functional.hvp: for a twice-differentiable function the Hessian
    is symmetric, so H v = (v^T H)^T, which vhp computes."""
    return vhp(func, inputs, v, create_graph, strict)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function of one value at `inputs`, as torch.autograd.functional.hessian: for inputs
    i and j a tensor of shape input_i.shape + input_j.shape, nested in tuples where `inputs` is a tuple. The
    Jacobian of the gradient, one backward pass per gradient element."""
    in_was_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        _, leaves, out = _scalar_output(func, xs, "hessian", True)
        return tuple(_gradients((out,), leaves, (_C._full_like(out, 1, dtype=None, device=None),), strict,
                                "hessian", "the output", create_graph=True))

    blocks = jacobian(gradient, inputs, create_graph=create_graph, strict=strict, strategy=outer_jacobian_strategy)
    if in_was_tuple:
        return blocks
    return blocks[0][0]
