"""Documented errors: the right Python class and a message that says what went wrong.

After every error the library keeps working and the inputs are intact
(DESIGN.md, principle 3).
"""

import re

import numpy as np
import pytest

import pyflame as pf


def _shape_re(shape):
    """A shape as the message may print it: (2, 3) or [2, 3]."""
    return r"[\[(]" + r",\s*".join(str(s) for s in shape) + r",?[\])]"


def assert_alive():
    """The library still computes correctly after an error."""
    r = pf.add(pf.tensor([1.0, 2.0]), 1)
    assert r.tolist() == [2.0, 3.0]
    m = pf.matmul(pf.ones(2, 3), pf.ones(3, 2))
    assert m.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert pf.sum(pf.arange(5)).item() == 10


def expect(exc, fn, *inputs, match=None):
    """fn() raises exc (message matching `match`); inputs unchanged; library alive."""
    before = [np.array(t.to(pf.float64).detach().numpy(), copy=True) for t in inputs]
    with pytest.raises(exc) as info:
        fn()
    if match is not None:
        for pattern in [match] if isinstance(match, str) else match:
            assert re.search(pattern, str(info.value)), f"message {str(info.value)!r} does not match {pattern!r}"
    for t, b in zip(inputs, before):
        np.testing.assert_array_equal(t.to(pf.float64).detach().numpy(), b, err_msg="an input changed after the error")
    assert_alive()
    return info.value


# ----------------------------------------------------------------- shapes


@pytest.mark.parametrize(
    "name,fn,sa,sb",
    [
        ("add", lambda a, b: pf.add(a, b), (2, 3), (4, 3)),
        ("add", lambda a, b: a + b, (2, 3), (3, 2)),
        ("sub", lambda a, b: a - b, (5,), (4,)),
        ("mul", lambda a, b: pf.mul(a, b), (2, 1, 3), (4, 2)),
        ("div", lambda a, b: a / b, (3, 4), (2, 4)),
        ("pow", lambda a, b: a ** b, (3,), (2,)),
        ("maximum", lambda a, b: pf.maximum(a, b), (2, 3), (3, 3)),
        ("eq", lambda a, b: a == b, (2, 3), (4,)),
        ("lt", lambda a, b: pf.lt(a, b), (2,), (3,)),
        ("matmul", lambda a, b: a @ b, (2, 3), (4, 5)),
        ("matmul", lambda a, b: pf.matmul(a, b), (3,), (4,)),
        ("matmul", lambda a, b: pf.matmul(a, b), (2, 2, 3), (3, 3, 4)),
        ("batch_matmul", lambda a, b: pf.batch_matmul(a, b), (2, 2, 3), (2, 4, 5)),
        ("batch_matmul", lambda a, b: pf.batch_matmul(a, b), (2, 2, 3), (3, 3, 2)),
        ("where", lambda a, b: pf.where(pf.ones(2, 3) > 0, a, b), (2, 3), (5, 1, 4)),
    ],
)
def test_shape_mismatch_names_op_and_shapes(name, fn, sa, sb):
    a, b = pf.rand(*sa), pf.rand(*sb)
    err = expect(ValueError, lambda: fn(a, b), a, b, match=[re.escape(name)])
    msg = str(err)
    assert re.search(_shape_re(sa), msg) and re.search(_shape_re(sb), msg), \
        f"the operands' shapes {sa} and {sb} are not named: {msg}"


def test_batch_matmul_needs_3d():
    a, b = pf.rand(2, 3), pf.rand(3, 2)
    expect(ValueError, lambda: pf.batch_matmul(a, b), a, b, match="batch_matmul")
    c = pf.rand(2, 2, 3)
    expect(ValueError, lambda: pf.batch_matmul(c, b), c, b, match="batch_matmul")


def test_matmul_0d_raises():
    a, b = pf.rand(3), pf.zeros(())
    with pytest.raises((ValueError, IndexError)):
        pf.matmul(a, b)
    assert_alive()


def test_inplace_broadcast_to_bigger_shape():
    x = pf.ones(2, 3)
    y = pf.ones(4, 2, 3)
    expect(ValueError, lambda: x.add_(y), x, y, match="add")
    z = pf.ones(3, 1)

    def iadd():
        nonlocal z
        z += pf.ones(3, 4)

    expect(ValueError, iadd, z)
    assert z.shape == (3, 1)


# ----------------------------------------------------------------- dtypes


def test_matmul_float32_float64():
    a, b = pf.rand(2, 3), pf.rand(3, 2, dtype=pf.float64)
    expect(TypeError, lambda: pf.matmul(a, b), a, b, match=["matmul", "float32", "float64"])
    expect(TypeError, lambda: a @ b, a, b)
    c, d = pf.rand(2, 2, 3), pf.rand(2, 3, 2, dtype=pf.float16)
    expect(TypeError, lambda: pf.batch_matmul(c, d), c, d, match="batch_matmul")


@pytest.mark.parametrize("cond_dtype", [pf.float32, pf.int32, pf.uint8, pf.int64])
def test_where_needs_bool_condition(cond_dtype):
    c = pf.ones(2, 3, dtype=cond_dtype)
    a, b = pf.rand(2, 3), pf.rand(2, 3)
    expect(TypeError, lambda: pf.where(c, a, b), c, a, b, match="where")


@pytest.mark.parametrize("dtype", [pf.int32, pf.int64, pf.uint8, pf.bool])
def test_mean_of_int(dtype):
    x = pf.ones(2, 3, dtype=dtype)
    expect(TypeError, lambda: pf.mean(x), x, match="mean")
    expect(TypeError, lambda: x.mean(dim=0), x)


def test_sub_of_bools():
    a = pf.tensor([True, False])
    b = pf.tensor([True, True])
    expect(TypeError, lambda: pf.sub(a, b), a, b, match="sub")
    expect(TypeError, lambda: a - b, a, b)
    expect(TypeError, lambda: a - True, a)
    expect(TypeError, lambda: False - a, a)

    def isub():
        a.sub_(b)

    expect(TypeError, isub, a, b)
    assert (a.to(pf.int32) - b.to(pf.int32)).tolist() == [0, -1]


def test_integer_to_negative_integer_power():
    """torch: 'Integers to negative integer powers are not allowed.'"""
    x = pf.tensor([1, 2, 3])
    expect((ValueError, TypeError, RuntimeError), lambda: x ** -1, x)
    expect((ValueError, TypeError, RuntimeError), lambda: pf.pow(x.to(pf.int32), -2), x)


def test_neg_of_bool_and_softmax_of_int():
    a = pf.tensor([True, False])
    expect(TypeError, lambda: -a, a)
    i = pf.tensor([1, 2, 3])
    expect(TypeError, lambda: pf.softmax(i), i, match="softmax")
    expect(TypeError, lambda: pf.log_softmax(i, dim=0), i)


@pytest.mark.parametrize(
    "make,op",
    [
        (lambda: pf.tensor([1, 2, 3]), lambda t: t.__iadd__(1.5)),
        (lambda: pf.tensor([1, 2, 3], dtype=pf.int32), lambda t: t.__itruediv__(2)),
        (lambda: pf.tensor([1, 2, 3], dtype=pf.int32), lambda t: t.mul_(pf.tensor([0.5, 0.5, 0.5]))),
        (lambda: pf.tensor([True, False]), lambda t: t.__iadd__(1)),
        (lambda: pf.tensor([1, 2], dtype=pf.int32), lambda t: t.sqrt_()),
        (lambda: pf.tensor([1.0, 2.0], dtype=pf.float16), lambda t: t.add_(1j)),
    ],
    ids=["int64+=1.5", "int32/=2", "int32*=float", "bool+=1", "int32.sqrt_", "f16+=complex"],
)
def test_inplace_result_type_cannot_be_stored(make, op):
    t = make()
    expect(TypeError, lambda: op(t), t)


# ----------------------------------------------------------------- dims and indices


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: pf.sum(x, dim=2),
        lambda x: pf.sum(x, dim=-3),
        lambda x: pf.mean(x, dim=(0, 5)),
        lambda x: pf.max(x, dim=7),
        lambda x: pf.prod(x, dim=-4, keepdim=True),
        lambda x: pf.argmax(x, dim=2),
        lambda x: pf.argmin(x, dim=-3),
        lambda x: pf.softmax(x, dim=2),
        lambda x: pf.log_softmax(x, dim=-3),
        lambda x: pf.transpose(x, 0, 2),
        lambda x: x.transpose(-3, 1),
        lambda x: x.unsqueeze(3),
        lambda x: x.unsqueeze(-4),
        lambda x: x.squeeze(2),
        lambda x: x.permute(0, 2),
        lambda x: x.flatten(0, 5),
        lambda x: x.size(2),
    ],
    ids=["sum", "sum-neg", "mean-tuple", "max", "prod", "argmax", "argmin", "softmax", "log_softmax",
         "transpose", "transpose-method", "unsqueeze", "unsqueeze-neg", "squeeze", "permute", "flatten", "size"],
)
def test_invalid_dims_raise_index_error(fn):
    x = pf.rand(2, 3)
    expect(IndexError, lambda: fn(x), x)


def test_invalid_dims_of_0d():
    x = pf.zeros(())
    expect(IndexError, lambda: pf.sum(x, dim=1), x)
    expect(IndexError, lambda: pf.softmax(x, dim=1), x)


def test_duplicate_reduce_dims():
    x = pf.rand(2, 3)
    with pytest.raises((ValueError, IndexError), match="sum"):
        pf.sum(x, dim=(0, 0))
    with pytest.raises((ValueError, IndexError)):
        pf.sum(x, dim=(1, -1))
    assert_alive()


def test_permute_not_a_permutation():
    x = pf.rand(2, 3)
    with pytest.raises((ValueError, IndexError)):
        x.permute(0, 0)
    assert_alive()


def test_too_many_indices():
    x = pf.rand(2, 3)
    expect(IndexError, lambda: x[0, 0, 0], x, match="too many indices")
    expect(IndexError, lambda: x[0, ..., 1, 2], x)
    expect(IndexError, lambda: pf.zeros(())[0], )

    def setit():
        x[0, 1, 2] = 1.0

    expect(IndexError, setit, x)


def test_index_out_of_range():
    x = pf.rand(2, 3)
    expect(IndexError, lambda: x[2], x)
    expect(IndexError, lambda: x[-3], x)
    expect(IndexError, lambda: x[:, 3], x)
    expect(IndexError, lambda: x[0, -4], x)
    expect(IndexError, lambda: x[..., ..., 0], x)


def test_negative_slice_step():
    x = pf.rand(4)
    expect(ValueError, lambda: x[::-1], x)


@pytest.mark.parametrize("key", [lambda x: "a", lambda x: 1.5], ids=["str", "float"])
def test_unsupported_index_types(key):
    """Indexing with other objects than ints, slices, None, '...' and tensors (test_shape.py) is refused."""
    x = pf.rand(4)
    k = key(x)
    expect((pf.NotSupportedError, TypeError, IndexError), lambda: x[k], x)


def test_one_element_index_tensor():
    """In torch x[tensor([2])] is an index list (shape (1,)); refuse it or do the same, never a 0-d result."""
    x = pf.arange(5)
    try:
        r = x[pf.tensor([2])]
    except (pf.NotSupportedError, TypeError, IndexError):
        return
    assert r.shape == (1,), f"x[tensor([2])] gave shape {r.shape}; torch gives (1,)"


# ----------------------------------------------------------------- views and shapes


def test_view_with_incompatible_shape():
    x = pf.rand(3, 4)
    expect(ValueError, lambda: x.view(5, 3), x, match="view")
    expect(ValueError, lambda: x.view(-1, 5), x)
    expect(ValueError, lambda: x.view(-1, -1), x)
    expect(ValueError, lambda: x.reshape(7), x, match="reshape")
    expect(ValueError, lambda: x.reshape(-1, -1), x)
    expect(ValueError, lambda: x.T.view(12), x)  # strides do not allow a view
    expect(ValueError, lambda: x.view(2, -3), x)
    assert x.T.reshape(12).shape == (12,)


def test_expand_errors():
    x = pf.rand(3, 2)
    expect(ValueError, lambda: x.expand(3, 4), x)
    expect(ValueError, lambda: x.expand(2), x)


# ----------------------------------------------------------------- arguments


def test_bad_operands_and_arguments():
    x = pf.rand(3)
    expect(TypeError, lambda: x + [1, 2, 3], x, match="pf.tensor")
    expect(TypeError, lambda: pf.add(x, "a"), x)
    expect(TypeError, lambda: x @ 2, x)
    expect(TypeError, lambda: pf.clamp(x, min="a"), x)  # tensor bounds are fine; strings are not
    expect(ValueError, lambda: pf.clamp(x, min=pf.rand(4)), x)
    expect(ValueError, lambda: pf.clamp(x), x, match="clamp")
    expect(ValueError, lambda: pf.gelu(x, approximate="bogus"), x, match="gelu")
    expect(ValueError, lambda: pf.add(x, 2**70), x)
    expect(ValueError, lambda: bool(x), x)
    expect(TypeError, lambda: len(pf.zeros(())))
    expect(TypeError, lambda: iter(pf.zeros(())))


def test_bad_creation_arguments():
    expect(ValueError, lambda: pf.tensor([[1, 2], [3]]), match="tensor")
    expect(TypeError, lambda: pf.tensor(["a", "b"]))
    expect(TypeError, lambda: pf.tensor(np.array([1, 2], dtype=np.uint16)))
    expect(pf.NotSupportedError, lambda: pf.tensor(np.array([1 + 2j])), match="complex")  # not TypeError: issue 13
    expect(ValueError, lambda: pf.from_numpy(np.arange(4.0)[::-1]))
    expect(ValueError, lambda: pf.randint(5, 2, (3,)), match="randint")
    expect(TypeError, lambda: pf.zeros(2, "a"))
    expect((ValueError, TypeError), lambda: pf.zeros(2, dtype="float128"))
    expect(ValueError, lambda: pf.zeros(-1, 2))
    expect(ValueError, lambda: pf.arange(0, 10, 0))
    b = pf.rand(2).to(pf.bfloat16)
    expect(TypeError, lambda: b.detach().numpy(), match="bfloat16")


def test_bad_dtype_names():
    x = pf.rand(2)
    expect(ValueError, lambda: x.to("float128"), x)
    expect(TypeError, lambda: x.to(3.5), x)
    expect((ValueError, TypeError), lambda: pf.promote_types("float32", "nope"))
