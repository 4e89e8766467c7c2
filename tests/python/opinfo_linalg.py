"""OpInfos of torch.linalg's solvers and decompositions (linalg_inv_ex, linalg_solve_ex, linalg_cholesky_ex,
linalg_slogdet, linalg_solve_triangular, linalg_lu_factor_ex, linalg_qr, linalg_eigh, linalg_svd: their Python forms and LinAlgError are tested in test_linalg_solvers.py), norms and cross product, logsumexp, nansum, nanmean, count_nonzero, aminmax, kron,
tensordot, einsum and addmm & co. (composite ops): linalg_vector_norm, linalg_matrix_norm, linalg_cross, logsumexp, nansum,
nanmean, count_nonzero, aminmax, kron, tensordot, einsum, addmm, addmv, addr, baddbmm and addbmm against torch's, values and gradients.

linalg.norm, norm and dist, which choose between the norms, the errors and logsumexp's infinities are tested in
test_linalg_reductions.py."""

import math

import torch

import numpy as np

from op_registry import (ALL_DTYPES, FLOAT_DTYPES, MATMUL_CLASSES, NONBOOL_DTYPES, REDUCE_CLASSES, TORCH_DTYPE, Arg,
                         OpInfo, Sample, _x)

# Away from 0, where the gradients of |x|^p with p < 1 and of the negative ords grow without bound.
_DOM = dict(low=-2, high=2, nonzero=True)
_VECTOR_ORDS = (2, 1, 3.5, 0.5, 0, -1, -2.5, math.inf, -math.inf)
_MATRIX_ORDS = ("fro", 1, -1, math.inf, -math.inf)


def _torch_dtype(kwargs):
    """The sample's dtype= (a name, which pf takes too) as torch's."""
    return {k: TORCH_DTYPE[v] if k == "dtype" else v for k, v in kwargs.items()}


def _vector_norm_samples(rng, dtype, cls):
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, _DOM, layout)

    wider = "float32" if dtype in ("float16", "bfloat16") else "float64"  # torch refuses a narrowing dtype=
    if cls == "plain":
        out = []
        for i, ord in enumerate(_VECTOR_ORDS):
            for dim in (None, 1, (0, 2), -1, ()):
                out.append(Sample((x((3, 4, 5)), ord, dim, i % 2 == 1)))
        out.append(Sample((x((3, 4)),), dict(dim=0, dtype=wider)))
        out.append(Sample((x((3, 4)), 3.5), dict(dim=(-1, 0), keepdim=True, dtype=wider)))
        out.append(Sample((x((7,)), 0), dict(dtype=wider)))
        return out
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), ord), dict(dim=dim)) for ord in (2, 1, 3.5, math.inf) for dim in (None, 0)] + \
               [Sample((x((3, 4), "strided"), -1), dict(dim=1, keepdim=True))]
    if cls == "empty":
        # The ords without an identity (inf, negative ones) reduce only non-empty dims.
        return [Sample((x((0, 3)), ord), dict(dim=dim)) for ord in (2, 1, 0, 3.5) for dim in (None, 0, 1)] + \
               [Sample((x((0, 3)), ord), dict(dim=1)) for ord in (math.inf, -math.inf, -1)]
    if cls == "size1":
        return [Sample((x((1, 5, 1)), ord), dict(dim=dim)) for ord in (2, 0, math.inf) for dim in (None, 0, (0, 2))]
    if cls == "scalar0d":
        return [Sample((x(()), ord), dict(dim=dim, keepdim=keepdim))
                for ord in (2, 1, -1, math.inf, 0) for dim in (None, 0, -1) for keepdim in (False, True)]
    return []


def _vector_norm_ref(x, ord=2, dim=None, keepdim=False, **kwargs):
    return torch.linalg.vector_norm(x, ord, dim, keepdim, **_torch_dtype(kwargs))


def _matrix_norm_samples(rng, dtype, cls):
    def a(shape, layout="contig"):
        return _x(rng, shape, dtype, _DOM, layout)

    if cls == "plain":
        out = []
        for ord in _MATRIX_ORDS:
            out.append(Sample((a((4, 6)), ord)))
            for dim, keepdim in (((2, 0), True), ((0, 1), False), ((-1, -2), False)):
                out.append(Sample((a((3, 4, 5)), ord, dim, keepdim)))
        out.append(Sample((a((2, 3, 4)),), dict(dtype="float64")))
        out.append(Sample((a((3, 4)), -1), dict(dtype="float64")))
        return out
    if cls == "noncontig":
        return [Sample((a((4, 5), "T"), ord)) for ord in _MATRIX_ORDS] + \
               [Sample((a((2, 3, 4), "strided"), math.inf), dict(dim=(0, 2)))]
    if cls == "empty":
        # 1 and -1 take the extreme column sum, inf and -inf the extreme row sum: of matrices that have some.
        return [Sample((a((0, 3)), ord)) for ord in ("fro", 1, -1)] + \
               [Sample((a((3, 0)), ord)) for ord in ("fro", math.inf, -math.inf)] + \
               [Sample((a((0, 2, 3)), 1), dict(keepdim=True))]
    if cls == "size1":
        return [Sample((a((1, 1)), ord)) for ord in _MATRIX_ORDS] + [Sample((a((1, 5, 1)), 1), dict(dim=(0, 2)))]
    return []


def _matrix_norm_ref(A, ord="fro", dim=(-2, -1), keepdim=False, **kwargs):
    return torch.linalg.matrix_norm(A, ord, dim, keepdim, **_torch_dtype(kwargs))


def _logsumexp_samples(rng, dtype, cls):
    def x(shape, layout="contig", **dom):
        return _x(rng, shape, dtype, dom or dict(low=-5, high=5), layout)

    if cls == "plain":
        out = [Sample((x((3, 4, 5)), dim, keepdim)) for dim in (0, -1, (0, 2), (2, 0, 1)) for keepdim in (False, True)]
        if dtype in FLOAT_DTYPES:  # large logits: exp overflows unless the maximum is taken out first
            out.append(Sample((x((4, 6), low=50, high=100), 1)))
            out.append(Sample((x((4, 6), low=-100, high=-50), (0, 1)), dict(keepdim=True)))
        return out
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), 0)), Sample((x((3, 4), "strided"), 1, True)), Sample((x((2, 3, 4), "T"), (1, 2)))]
    if cls == "empty":
        # The sum over an empty dim is 0: -inf.
        return [Sample((x((0, 3)), dim)) for dim in (0, 1, (0, 1))]
    if cls == "size1":
        return [Sample((x((1, 5, 1)), dim)) for dim in (0, (0, 2), 1)]
    if cls == "scalar0d":
        return [Sample((x(()), dim, keepdim)) for dim in (0, -1) for keepdim in (False, True)]
    return []


def _nan_reduce_samples(takes_integers):
    """Floats with NaNs scattered in (no row of NaNs only: there torch's nanmean gradient is NaN, a
    case test_linalg_reductions.py covers for values); dtype= to float64, and for nansum integers to
    float32."""
    def gen(rng, dtype, cls):
        def x(shape, layout="contig"):
            arg = _x(rng, shape, dtype, dict(low=-3, high=3), layout)
            if dtype in FLOAT_DTYPES and arg.values.ndim >= 2 and arg.values.size:
                nans = rng.random(arg.values.shape) < 0.25
                for axis in range(nans.ndim):  # every slice over any dims holds an element with a 0 index
                    nans[(slice(None),) * axis + (0,)] = False
                arg.values[nans] = math.nan
            return arg

        if cls == "plain":
            out = [Sample((x((3, 4, 5)), dim, keepdim)) for dim in (None, 0, -1, (0, 2)) for keepdim in (False, True)]
            if dtype in FLOAT_DTYPES:
                out.append(Sample((x((4, 6)), 1), dict(dtype="float64")))
            elif takes_integers:
                out.append(Sample((x((4, 6)), 0), dict(dtype="float32")))
            return out
        if cls == "noncontig":
            return [Sample((x((4, 5), "T"), 0)), Sample((x((3, 4), "strided"), 1, True)),
                    Sample((x((2, 3, 4), "T"), (1, 2)))]
        if cls == "empty":
            return [Sample((x((0, 3)), dim)) for dim in (0, 1, (0, 1))]
        if cls == "size1":
            return [Sample((x((1, 5, 1)), dim)) for dim in (0, (0, 2), 1)]
        if cls == "scalar0d":
            return [Sample((x(()), dim, keepdim)) for dim in (None, 0, -1) for keepdim in (False, True)]
        return []

    return gen


def _with_torch_dtype(fn):
    """fn with the sample's dtype= (a name, which pf takes too) as torch's."""
    return lambda *args, **kwargs: fn(*args, **_torch_dtype(kwargs))


# (input, first, second) shapes of the add-product ops by shape class: the input as the product's shape
# first, then broadcast to it.
_ADD_PRODUCT_SHAPES = {
    "addmm": {"plain": [((3, 5), (3, 4), (4, 5))], "broadcast": [((5,), (3, 4), (4, 5)), ((), (3, 4), (4, 5)),
                                                                   ((3, 1), (3, 4), (4, 5))],
              "empty": [((0, 5), (0, 4), (4, 5)), ((3, 5), (3, 0), (0, 5))], "size1": [((1, 1), (1, 1), (1, 1))]},
    "addmv": {"plain": [((3,), (3, 4), (4,))], "broadcast": [((), (3, 4), (4,)), ((1,), (3, 4), (4,))],
              "empty": [((0,), (0, 4), (4,)), ((3,), (3, 0), (0,))], "size1": [((1,), (1, 1), (1,))]},
    "addr": {"plain": [((3, 5), (3,), (5,))], "broadcast": [((5,), (3,), (5,)), ((3, 1), (3,), (5,))],
             "empty": [((0, 5), (0,), (5,))], "size1": [((1, 1), (1,), (1,))]},
    "baddbmm": {"plain": [((2, 3, 5), (2, 3, 4), (2, 4, 5))],
                "broadcast": [((3, 5), (2, 3, 4), (2, 4, 5)), ((1, 1, 5), (2, 3, 4), (2, 4, 5))],
                "empty": [((0, 3, 5), (0, 3, 4), (0, 4, 5)), ((2, 3, 5), (2, 3, 0), (2, 0, 5))],
                "size1": [((1, 1, 1), (1, 1, 1), (1, 1, 1))]},
    "addbmm": {"plain": [((3, 5), (2, 3, 4), (2, 4, 5))], "broadcast": [((5,), (2, 3, 4), (2, 4, 5))],
               "empty": [((3, 5), (0, 3, 4), (0, 4, 5)), ((3, 5), (2, 3, 0), (2, 0, 5))],
               "size1": [((1, 1), (1, 1, 1), (1, 1, 1))]},
}


def _add_product_samples(name):
    """beta and alpha as torch takes them: numbers of the operands' kind (addr refuses floats for integers; the
    others truncate them, as torch), 0 for beta (the input ignored); small values keep int8 products in range."""
    def gen(rng, dtype, cls):
        def x(shape, layout="contig"):
            return _x(rng, shape, dtype, dict(low=-1, high=1, ilow=0, ihigh=3), layout)

        if dtype in FLOAT_DTYPES:
            scalars = ({}, dict(beta=0.5, alpha=-1.5), dict(beta=0))
        else:
            scalars = ({}, dict(beta=2, alpha=3), dict(beta=0)) + (() if name == "addr" else (dict(beta=1.5, alpha=2.7),))
        shapes = _ADD_PRODUCT_SHAPES[name]
        if cls == "plain":
            return [Sample(tuple(x(s) for s in shapes["plain"][0]), kw) for kw in scalars]
        if cls == "noncontig":
            layouts = ("T" if len(shape) >= 2 else "strided" for shape in shapes["plain"][0])
            return [Sample(tuple(x(s, layout) for s, layout in zip(shapes["plain"][0], layouts)), scalars[1])]
        return [Sample(tuple(x(s) for s in args), scalars[i % len(scalars)])
                for i, args in enumerate(shapes.get(cls, []))]

    return gen


def _count_nonzero_samples(rng, dtype, cls):
    """Values with zeros among them (and NaNs for floats: nonzero, as torch), over dim None, an int or a tuple."""
    def x(shape, layout="contig"):
        arg = _x(rng, shape, dtype, dict(low=-1, high=1, ilow=0, ihigh=2, discrete=True), layout)
        if dtype in FLOAT_DTYPES and arg.values.size:
            arg.values.flat[0] = math.nan
        return arg

    table = {
        "plain": [Sample((x((3, 4, 5)), dim)) for dim in (None, 0, -1, (0, 2))],
        "noncontig": [Sample((x((4, 5), "T"), 0)), Sample((x((3, 4), "strided"), (0, 1)))],
        "empty": [Sample((x((0, 3)), dim)) for dim in (None, 0, 1)],
        "size1": [Sample((x((1, 5, 1)), dim)) for dim in (0, (0, 2))],
        "scalar0d": [Sample((x(()), dim)) for dim in (None, 0)],
    }
    return table.get(cls, [])


def _aminmax_samples(rng, dtype, cls):
    """Over every element (dim None) or one dim; an empty tensor only over a non-empty dim, as torch."""
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, _DOM, layout)

    table = {
        "plain": [Sample((x((3, 4, 5)),), dict(dim=dim, keepdim=k)) for dim in (None, 0, -1) for k in (False, True)],
        "noncontig": [Sample((x((4, 5), "T"),), dict(dim=0)), Sample((x((3, 4), "strided"),))],
        "empty": [Sample((x((0, 3)),), dict(dim=1)), Sample((x((2, 0, 3)),), dict(dim=2, keepdim=True))],
        "size1": [Sample((x((1, 5, 1)),), dict(dim=0)), Sample((x((1, 1)),))],
        "scalar0d": [Sample((x(()),)), Sample((x(()),), dict(dim=0, keepdim=True))],
    }
    return table.get(cls, [])


def _tensordot_samples(rng, dtype, cls):
    """dims as an int and as a pair of lists (in any order), an outer product (dims=0), empty sums."""
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dict(low=-2, high=2, ilow=-3, ihigh=3), layout)

    table = {
        "plain": [Sample((x((2, 3, 4)), x((3, 4, 5)))), Sample((x((3, 4)), x((4, 5)), 1)),
                  Sample((x((2, 3, 4)), x((4, 3, 2)), ([1, 0], [1, 2]))), Sample((x((4,)), x((4,)), 1)),
                  Sample((x((2, 3)), x((4,)), 0)), Sample((x((3, 5)), x((5, 2)), ([-1], [0])))],
        "noncontig": [Sample((x((4, 3), "T"), x((3, 5), "strided"), 1)),
                      Sample((x((3, 4), "T"), x((2, 3), "T"), ([0], [1])))],
        "empty": [Sample((x((0, 3)), x((3, 2)), 1)), Sample((x((2, 0)), x((0, 3)), 1))],
        "size1": [Sample((x((1, 3)), x((3, 1)), 1))],
        "scalar0d": [Sample((x(()), x((3,)), 0))],
    }
    return table.get(cls, [])


def _einsum_samples(rng, dtype, cls):
    """Products, batches, attention's scores, traces and diagonals ("ii"), implicit outputs, three
    operands, ellipses with broadcasting, size-1 subscripts broadcasting, sums and permutations."""
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dict(low=-2, high=2, ilow=-3, ihigh=3), layout)

    table = {
        "plain": [Sample(("ij,jk->ik", x((3, 4)), x((4, 5)))), Sample(("bij,bjk->bik", x((2, 3, 4)), x((2, 4, 2)))),
                  Sample(("bhqd,bhkd->bhqk", x((2, 2, 3, 4)), x((2, 2, 5, 4)))), Sample(("ii->", x((4, 4)))),
                  Sample(("ii->i", x((3, 3)))), Sample(("bii->bi", x((2, 3, 3)))), Sample(("ij,jk", x((2, 3)), x((3, 2)))),
                  Sample(("i,j->ij", x((3,)), x((4,)))), Sample(("ij,jk,kl->il", x((2, 3)), x((3, 4)), x((4, 2)))),
                  Sample(("...ij,...jk->...ik", x((2, 1, 3, 4)), x((5, 4, 2)))), Sample(("ij->ji", x((2, 3)))),
                  Sample(("ijk->", x((2, 3, 4)))), Sample(("i,i->", x((5,)), x((5,)))),
                  Sample(("ij,ij->ij", x((1, 3)), x((2, 3)))), Sample(("iij,jk->ik", x((3, 3, 2)), x((2, 4)))),
                  Sample(("ba,a", x((3, 4)), x((4,))))],
        "noncontig": [Sample(("ij,jk->ik", x((3, 4), "T"), x((4, 5), "strided"))),
                      Sample(("ii->i", x((3, 3), "T")))],
        "empty": [Sample(("ij,jk->ik", x((0, 3)), x((3, 2)))), Sample(("ij,jk->ik", x((2, 0)), x((0, 3))))],
        "scalar0d": [Sample((",i->i", x(()), x((3,)))), Sample(("->", x(())))],
    }
    return table.get(cls, [])


def _kron_samples(rng, dtype, cls):
    """Operands of one rank and of two (the smaller padded with leading 1s); small values keep int8 in range."""
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dict(low=-2, high=2, ilow=0, ihigh=3), layout)

    table = {
        "plain": [Sample((x((2, 3)), x((4, 5)))), Sample((x((3,)), x((2,)))), Sample((x((2, 1, 3)), x((1, 2, 2))))],
        "broadcast": [Sample((x((2, 3)), x((4,)))), Sample((x((3,)), x((2, 2, 2))))],
        "noncontig": [Sample((x((3, 4), "T"), x((2, 3), "strided")))],
        "empty": [Sample((x((0, 3)), x((2, 2)))), Sample((x((2, 2)), x((3, 0))))],
        "size1": [Sample((x((1, 1)), x((1, 3))))],
        "scalar0d": [Sample((x(()), x((3,)))), Sample((x(()), x(())))],
    }
    return table.get(cls, [])


def _cross_samples(rng, dtype, cls):
    """(input, other) of 3-vectors along dim= (torch.linalg.cross broadcasts operands of one rank); small
    values keep int8 products in range."""
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dict(low=-2, high=2, ilow=0, ihigh=3), layout)

    def pair(a, b, dim, la="contig", lb="contig"):
        return Sample((x(a, la), x(b, lb)), dict(dim=dim))

    table = {
        "plain": [pair((4, 3), (4, 3), -1), pair((3, 5), (3, 5), 0), pair((2, 3, 4), (2, 3, 4), 1)],
        "broadcast": [pair((2, 1, 3), (1, 4, 3), -1), pair((1, 3), (5, 3), 1)],
        "noncontig": [pair((4, 3), (4, 3), 1, "T", "strided"), pair((3, 4), (3, 4), 0, "strided", "T")],
        "empty": [pair((0, 3), (0, 3), 1)],
        "size1": [pair((1, 3), (1, 3), -1)],
    }
    return table.get(cls, [])


def _solver_samples(kind):
    """Square matrices with a dominant diagonal of either sign (det of both signs), symmetric
    positive-definite ones for cholesky; solve's right-hand sides (..., n, 2)."""
    def gen(rng, dtype, cls):
        def A(shape, layout="contig"):
            a = rng.uniform(-1, 1, shape)
            n = shape[-1]
            if kind == "cholesky":
                a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
            else:
                a = a + n * np.eye(n) * rng.choice([-1.0, 1.0], size=shape[:-1])[..., None]
            return Arg(a, layout)

        shapes = {"plain": [((3, 3), "contig"), ((2, 4, 4), "contig")], "noncontig": [((4, 4), "T"), ((3, 3), "strided")],
                  "empty": [((0, 3, 3), "contig"), ((2, 0, 0), "contig")], "size1": [((1, 1), "contig")]}.get(cls, [])
        if kind == "solve":
            return [Sample((A(s, lay), Arg(rng.uniform(-2, 2, s[:-1] + (2,)), lay))) for s, lay in shapes]
        return [Sample((A(s, lay),)) for s, lay in shapes]

    return gen


def _decomposition_samples(kind):
    """Symmetric matrices for eigh (distinct eigenvalues, almost surely); for svd and qr tall, wide
    and square ones, reduced, and full (complete) where square (a non-square matrix's extra singular vectors have
    no gradient, as torch's: test_linalg_solvers.py compares its full factors)."""
    def gen(rng, dtype, cls):
        def A(shape, layout="contig"):
            a = rng.uniform(-1, 1, shape)
            return Arg((a + np.swapaxes(a, -1, -2)) / 2 if kind == "eigh" else a, layout)

        if kind == "eigh":
            shapes = {"plain": [((4, 4), "contig"), ((2, 3, 3), "contig")], "noncontig": [((4, 4), "strided")],
                      "empty": [((0, 3, 3), "contig"), ((2, 0, 0), "contig")], "size1": [((1, 1), "contig")]}
            return [Sample((A(s, lay),)) for s, lay in shapes.get(cls, [])]
        shapes = {"plain": [((4, 3), False), ((3, 5), False), ((2, 4, 4), True)],
                  "noncontig": [((4, 3), False)], "empty": [((0, 3), False), ((2, 0, 4), False)],
                  "size1": [((1, 1), True)]}
        return [Sample((A(s, "T" if cls == "noncontig" else "contig"), full)) for s, full in shapes.get(cls, [])]

    return gen


def _triangular_samples(rng, dtype, cls):
    """(A, B, upper[, unitriangular]): A with a dominant diagonal (its other triangle noise, unread)."""
    solve = _solver_samples("solve")(rng, dtype, cls)
    return [Sample(s.args + (upper,), dict(unitriangular=unit)) for s in solve
            for upper, unit in ((False, False), (True, False), (True, True))]


def _lu_factor_ref(A):
    """torch's (LU, pivots, info) and the row order of its P (L U = A[rows])."""
    LU, pivots, info = torch.linalg.lu_factor_ex(A)
    rows = torch.linalg.lu(A).P.argmax(-2) if A.shape[-1] else torch.zeros(A.shape[:-1], dtype=torch.int64)
    return LU, pivots, rows, info


def _positive(v, dim):
    """Vectors along `dim` negated where their entry of largest magnitude (the first) is negative: the
    sign PyFlame's eigh and svd choose (src/cpu/linalg.cpp). Returns them and the signs."""
    if v.shape[dim] == 0:
        return v, torch.ones(v.shape[:dim] + v.shape[dim + 1:] if dim != -1 else v.shape[:-1], dtype=v.dtype)
    at = v.abs().argmax(dim, keepdim=True)
    sign = torch.where(torch.gather(v, dim, at) < 0, -1.0, 1.0).to(v.dtype)
    return v * sign, sign.squeeze(dim)


def _eigh_ref(A):
    L, V = torch.linalg.eigh(A)
    return L, _positive(V, -2)[0], torch.zeros(A.shape[:-2], dtype=torch.int32)


def _svd_ref(A, full_matrices=False):
    U, S, Vh = torch.linalg.svd(A, full_matrices=full_matrices)
    k = S.shape[-1]
    U, sign = _positive(U, -2)
    Vh = torch.cat([Vh[..., :k, :] * sign[..., :k, None], _positive(Vh[..., k:, :], -1)[0]], -2)
    return U, S, Vh, torch.zeros(A.shape[:-2], dtype=torch.int32)


_SOLVER_CLASSES = ("plain", "noncontig", "empty", "size1")
_SOLVER_TOL = {"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10)}

_ADD_PRODUCT_TOL = {"float16": (2e-3, 4e-3), "bfloat16": (1.6e-2, 3e-2)}

OP_INFOS = [
    OpInfo("linalg_inv_ex", "CUSTOM", ("float32", "float64"), _solver_samples("inv"), torch.linalg.inv_ex,
           _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_solve_ex", "CUSTOM", ("float32", "float64"), _solver_samples("solve"), torch.linalg.solve_ex,
           _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_cholesky_ex", "CUSTOM", ("float32", "float64"), _solver_samples("cholesky"),
           torch.linalg.cholesky_ex, _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_slogdet", "CUSTOM", ("float32", "float64"), _solver_samples("slogdet"), torch.linalg.slogdet,
           _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_solve_triangular", "CUSTOM", ("float32", "float64"), _triangular_samples,
           lambda A, B, upper, unitriangular=False: torch.linalg.solve_triangular(A, B, upper=upper,
                                                                                  unitriangular=unitriangular),
           _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_lu_factor_ex", "CUSTOM", ("float32", "float64"), _solver_samples("lu"), _lu_factor_ref,
           _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_qr", "CUSTOM", ("float32", "float64"), _decomposition_samples("qr"),
           lambda A, complete=False: torch.linalg.qr(A, "complete" if complete else "reduced"), _SOLVER_CLASSES,
           tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_eigh", "CUSTOM", ("float32", "float64"), _decomposition_samples("eigh"), _eigh_ref,
           _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("linalg_svd", "CUSTOM", ("float32", "float64"), _decomposition_samples("svd"), _svd_ref,
           _SOLVER_CLASSES, tol=_SOLVER_TOL, method=False),
    OpInfo("logsumexp", "CUSTOM", ALL_DTYPES, _logsumexp_samples, torch.logsumexp, REDUCE_CLASSES),
    OpInfo("nansum", "CUSTOM", ALL_DTYPES, _nan_reduce_samples(True), _with_torch_dtype(torch.nansum), REDUCE_CLASSES),
    OpInfo("nanmean", "CUSTOM", FLOAT_DTYPES, _nan_reduce_samples(False), _with_torch_dtype(torch.nanmean), REDUCE_CLASSES),

    OpInfo("linalg_vector_norm", "CUSTOM", FLOAT_DTYPES, _vector_norm_samples, _vector_norm_ref, REDUCE_CLASSES,
           method=False),
    OpInfo("linalg_matrix_norm", "CUSTOM", FLOAT_DTYPES, _matrix_norm_samples, _matrix_norm_ref,
           ("plain", "noncontig", "empty", "size1"), method=False),
    OpInfo("linalg_cross", "CUSTOM", NONBOOL_DTYPES, _cross_samples, torch.linalg.cross, MATMUL_CLASSES,
           method=False),
    OpInfo("count_nonzero", "CUSTOM", ALL_DTYPES, _count_nonzero_samples, torch.count_nonzero, REDUCE_CLASSES),
    OpInfo("aminmax", "CUSTOM", ALL_DTYPES, _aminmax_samples, torch.aminmax, REDUCE_CLASSES, exact_float=True),
    OpInfo("kron", "CUSTOM", NONBOOL_DTYPES, _kron_samples, torch.kron, ("broadcast",) + REDUCE_CLASSES),
    OpInfo("tensordot", "CUSTOM", NONBOOL_DTYPES, _tensordot_samples, torch.tensordot, REDUCE_CLASSES, method=False),
    # Three operands round their first product to float16/bfloat16 before the second: torch's own result
    # there is up to 1.65x the default tolerance off the exact value (float64 of the same inputs, 30 seeds).
    OpInfo("einsum", "CUSTOM", NONBOOL_DTYPES, _einsum_samples, torch.einsum, ("plain", "noncontig", "empty", "scalar0d"),
           tol={"float16": (4e-3, 4e-3), "bfloat16": (3.2e-2, 3.2e-2)}, method=False),
] + [OpInfo(name, "CUSTOM", NONBOOL_DTYPES, _add_product_samples(name), getattr(torch, name), MATMUL_CLASSES,
            tol=_ADD_PRODUCT_TOL) for name in _ADD_PRODUCT_SHAPES]
