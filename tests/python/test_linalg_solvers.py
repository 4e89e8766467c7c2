"""pf.linalg's solvers (inv, solve, cholesky, det, slogdet, logdet and the _ex forms) against
torch.linalg on the same random matrices: values, gradients, info, LinAlgError and its messages,
broadcasting and the vector right-hand side of solve. On the GPU they have no kernel yet."""

import re

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import assert_matches

TOL = {"float32": 2e-4, "float64": 1e-10}
DTYPES = ["float32", "float64"]


def both(values, dtype, grad=False):
    """(pyflame, torch) tensors holding the same values."""
    p = pf.tensor(values).to(getattr(pf, dtype))
    t = torch.from_numpy(np.array(values, copy=True)).to(getattr(torch, dtype))
    if grad:
        p.requires_grad_(True), t.requires_grad_(True)
    return p, t


def well_conditioned(rng, shape):
    """Random matrices with a dominant diagonal (condition numbers of a few), any signs of det."""
    a = rng.uniform(-1, 1, shape)
    return a + shape[-1] * np.eye(shape[-1]) * rng.choice([-1.0, 1.0], size=shape[:-1])[..., None]


def spd(rng, shape):
    x = rng.uniform(-1, 1, shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def close(actual, expected, dtype, what):
    assert_matches(actual, expected.detach(), TOL[dtype], TOL[dtype], what=what)


def grads_agree(rng, p_out, t_out, p_in, t_in, what):
    up = rng.standard_normal(tuple(t_out.shape))
    t_out.backward(torch.from_numpy(up).to(t_out.dtype))
    p_out.backward(pf.tensor(up).to(p_out.dtype))
    for i, (p, t) in enumerate(zip(p_in, t_in)):
        assert p.grad is not None, f"{what}: no gradient for input {i}"
        close(p.grad, t.grad, "float64", f"{what}: gradient of input {i}")


SHAPES = [(1, 1), (3, 3), (2, 5, 5), (2, 1, 4, 4), (0, 3, 3), (2, 0, 0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_inv_det_slogdet_match_torch(rng, dtype, shape):
    p, t = both(well_conditioned(rng, shape), dtype)
    close(pf.linalg.inv(p), torch.linalg.inv(t), dtype, "inv")
    close(pf.inverse(p), torch.inverse(t), dtype, "pf.inverse")
    close(p.inverse(), t.inverse(), dtype, "Tensor.inverse")
    inverse, info = pf.linalg.inv_ex(p)
    close(inverse, torch.linalg.inv_ex(t).inverse, dtype, "inv_ex")
    assert info.dtype == pf.int32 and tuple(info.shape) == shape[:-2]
    close(pf.linalg.det(p), torch.linalg.det(t), dtype, "det")
    close(p.det(), t.det(), dtype, "Tensor.det")
    sign, logabsdet = pf.linalg.slogdet(p)
    want = torch.linalg.slogdet(t)
    close(sign, want.sign, dtype, "slogdet sign")
    close(logabsdet, want.logabsdet, dtype, "slogdet logabsdet")
    close(pf.logdet(p), torch.logdet(t), dtype, "logdet")  # nan where det < 0, as torch


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (0, 2, 2), (1, 1)])
def test_cholesky_matches_torch(rng, dtype, shape):
    p, t = both(spd(rng, shape), dtype)
    for upper in (False, True):
        close(pf.linalg.cholesky(p, upper=upper), torch.linalg.cholesky(t, upper=upper), dtype, f"upper={upper}")
        L, info = pf.linalg.cholesky_ex(p, upper=upper)
        close(L, torch.linalg.cholesky_ex(t, upper=upper).L, dtype, f"cholesky_ex upper={upper}")
        assert not bool(info.any())
    close(pf.cholesky(p), torch.linalg.cholesky(t), dtype, "pf.cholesky")


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_matches_torch(rng, dtype):
    """Matrix and vector right-hand sides, broadcast batch dims, left=False, as torch.linalg.solve."""
    cases = [((3, 3), (3, 2)), ((3, 3), (3,)), ((2, 4, 4), (2, 4)), ((2, 4, 4), (4, 1)), ((4, 4), (2, 3, 4, 2)),
             ((2, 1, 3, 3), (5, 3, 3)), ((0, 3, 3), (0, 3, 2)), ((3, 3), (3, 0))]
    for a_shape, b_shape in cases:
        pa, ta = both(well_conditioned(rng, a_shape), dtype)
        pb, tb = both(rng.uniform(-2, 2, b_shape), dtype)
        close(pf.linalg.solve(pa, pb), torch.linalg.solve(ta, tb), dtype, f"solve {a_shape} {b_shape}")
        x, info = pf.linalg.solve_ex(pa, pb)
        close(x, torch.linalg.solve_ex(ta, tb).result, dtype, f"solve_ex {a_shape} {b_shape}")
    pa, ta = both(well_conditioned(rng, (2, 3, 3)), dtype)
    pb, tb = both(rng.uniform(-2, 2, (2, 4, 3)), dtype)
    close(pf.linalg.solve(pa, pb, left=False), torch.linalg.solve(ta, tb, left=False), dtype, "left=False")


def test_gradients_match_torch(rng):
    """inv, solve (both operands), det, slogdet, cholesky (of a symmetric input; torch's gradient is
    symmetrised) in float64."""
    a = well_conditioned(rng, (2, 4, 4))
    for name, fn, tfn in [("inv", pf.linalg.inv, torch.linalg.inv), ("det", pf.linalg.det, torch.linalg.det),
                          ("logabsdet", lambda x: pf.linalg.slogdet(x)[1], lambda x: torch.linalg.slogdet(x)[1]),
                          ("matrix_power -2", lambda x: pf.linalg.matrix_power(x, -2),
                           lambda x: torch.linalg.matrix_power(x, -2))]:
        p, t = both(a, "float64", grad=True)
        grads_agree(rng, fn(p), tfn(t), [p], [t], name)
    pa, ta = both(a, "float64", grad=True)
    pb, tb = both(rng.uniform(-1, 1, (2, 4, 3)), "float64", grad=True)
    grads_agree(rng, pf.linalg.solve(pa, pb), torch.linalg.solve(ta, tb), [pa, pb], [ta, tb], "solve")
    for upper in (False, True):
        p, t = both(spd(rng, (3, 4, 4)), "float64", grad=True)
        grads_agree(rng, pf.linalg.cholesky(p, upper=upper), torch.linalg.cholesky(t, upper=upper), [p], [t],
                    f"cholesky upper={upper}")


def torch_message(fn):
    with pytest.raises(torch.linalg.LinAlgError) as info:
        fn()
    return str(info.value)


def test_singular_inputs_raise_linalg_error_as_torch():
    """LinAlgError (a RuntimeError) with torch's message, the batch element named; the _ex forms give
    torch's info instead, and raise with check_errors=True."""
    singular = np.array([[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [2.0, 4.0]]])
    p, t = both(singular, "float64")
    assert issubclass(pf.linalg.LinAlgError, RuntimeError)
    for name, fn, tfn in [("inv", pf.linalg.inv, torch.linalg.inv),
                          ("solve", lambda a: pf.linalg.solve(a, a), lambda a: torch.linalg.solve(a, a))]:
        with pytest.raises(pf.linalg.LinAlgError) as info:
            fn(p)
        assert str(info.value) == torch_message(lambda: tfn(t)), name
    assert pf.linalg.inv_ex(p).info.tolist() == torch.linalg.inv_ex(t).info.tolist()
    with pytest.raises(pf.linalg.LinAlgError, match="Batch element 1"):
        pf.linalg.inv_ex(p, check_errors=True)
    not_pd = np.array([[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # minor of order 2 is 0
    p, t = both(not_pd, "float64")
    with pytest.raises(pf.linalg.LinAlgError) as info:
        pf.linalg.cholesky(p)
    assert str(info.value) == torch_message(lambda: torch.linalg.cholesky(t))
    assert int(pf.linalg.cholesky_ex(p).info) == int(torch.linalg.cholesky_ex(t).info) == 2
    sign, logabsdet = pf.linalg.slogdet(both(singular[1], "float64")[0])
    assert float(sign) == 0.0 and float(logabsdet) == -np.inf
    assert float(pf.linalg.det(both(singular[1], "float64")[0])) == 0.0


def test_bad_arguments_raise_as_torch():
    with pytest.raises(TypeError, match="Expected a floating point"):
        pf.linalg.inv(pf.ones(3, 3, dtype=pf.int64))
    with pytest.raises(ValueError, match="must be batches of square matrices, but they are 2 by 3"):
        pf.linalg.det(pf.ones(2, 3))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        pf.linalg.cholesky(pf.ones(3))
    with pytest.raises(TypeError, match="same dtype"):
        pf.linalg.solve(pf.eye(3), pf.ones(3, 1, dtype=pf.float64))


def test_half_precision_runs_in_float32_under_autocast(rng):
    """The solvers are on autocast's float32 list: a bfloat16 input under autocast gives float32."""
    p, t = both(well_conditioned(rng, (3, 3)), "float32")
    with pf.autocast("cpu", dtype=pf.bfloat16):
        got = pf.linalg.inv(p.to(pf.bfloat16))
    assert got.dtype == pf.float32
    assert_matches(got, torch.linalg.inv(t.to(torch.bfloat16).float()), 1e-4, 1e-4, what="autocast inv")


def test_no_gpu_kernel_yet():
    if not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    a = pf.eye(3, device="rocm")
    for fn in (pf.linalg.inv, pf.linalg.det, pf.linalg.cholesky, lambda x: pf.linalg.solve(x, x)):
        with pytest.raises(pf.NotSupportedError, match=re.escape("rocm")):
            fn(a)


def symmetric(rng, shape):
    a = rng.uniform(-1, 1, shape)
    return (a + np.swapaxes(a, -1, -2)) / 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 5, 5), (0, 3, 3), (2, 0, 0)])
def test_eigh_matches_torch(rng, dtype, shape):
    """Eigenvalues as torch's; eigenvectors up to sign: A V = V diag(L), V orthogonal, |V| as torch's."""
    p, t = both(symmetric(rng, shape), dtype)
    for uplo in ("L", "U"):
        L, V = pf.linalg.eigh(p, UPLO=uplo)
        tL, tV = torch.linalg.eigh(t, UPLO=uplo)
        close(L, tL, dtype, f"eigenvalues {uplo}")
        close(pf.linalg.eigvalsh(p, UPLO=uplo), tL, dtype, f"eigvalsh {uplo}")
        close(V.abs(), tV.abs(), dtype, f"|eigenvectors| {uplo}")
        close(p @ V, torch.from_numpy((V * L.unsqueeze(-2)).detach().numpy()), dtype, "A V = V L")
    with pytest.raises(ValueError, match="UPLO"):
        pf.linalg.eigh(p, UPLO="X")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 6), (1, 1), (0, 3), (3, 0), (2, 0, 4)])
def test_svd_matches_torch(rng, dtype, shape):
    """Singular values as torch's; U and Vh up to sign (|U|, |Vh| as torch's where the values are
    distinct) and U diag(S) Vh = A; the reduced and the full factors; torch.svd's V; pinv and
    matrix_rank."""
    p, t = both(rng.uniform(-1, 1, shape), dtype)
    k = min(shape[-2:])
    for full in (False, True):
        U, S, Vh = pf.linalg.svd(p, full_matrices=full)
        tU, tS, tVh = torch.linalg.svd(t, full_matrices=full)
        assert tuple(U.shape) == tuple(tU.shape) and tuple(Vh.shape) == tuple(tVh.shape), (full, U.shape, tU.shape)
        close(S, tS, dtype, f"S full={full}")
        close(U[..., :k].abs(), tU[..., :k].abs(), dtype, "|U|")
        close(Vh[..., :k, :].abs(), tVh[..., :k, :].abs(), dtype, "|Vh|")
        close((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], t, dtype, "U S Vh = A")
        close(U.mT @ U, torch.eye(U.shape[-1], dtype=t.dtype).expand(U.shape[:-2] + (U.shape[-1],) * 2), dtype,
              "U orthogonal")
    close(pf.linalg.svdvals(p), torch.linalg.svdvals(t), dtype, "svdvals")
    U, S, V = pf.svd(p)
    tU, tS, tV = torch.svd(t)
    close(V.abs(), tV.abs(), dtype, "torch.svd's V")
    close(pf.linalg.pinv(p), torch.linalg.pinv(t), dtype, "pinv")
    close(pf.pinverse(p), torch.pinverse(t), dtype, "pinverse")
    low_rank = rng.uniform(-1, 1, shape[:-1] + (1,)) @ rng.uniform(-1, 1, shape[:-2] + (1, shape[-1]))
    p2, t2 = both(low_rank, dtype)
    assert pf.linalg.matrix_rank(p2).tolist() == torch.linalg.matrix_rank(t2).tolist()
    assert pf.linalg.matrix_rank(p).tolist() == torch.linalg.matrix_rank(t).tolist()


def test_decomposition_gradients_match_torch(rng):
    """eigh and svd gradients through sign-invariant functions of the vectors (and the values), as
    torch's formulas, on symmetric inputs for eigh; pinv's through the SVD."""
    w = rng.uniform(-1, 1, (4,))
    for name, fn, tfn, a in [
            ("eigvalsh", lambda x: pf.linalg.eigvalsh(x), lambda x: torch.linalg.eigvalsh(x), symmetric(rng, (2, 4, 4))),
            ("eigh vectors", lambda x: (pf.linalg.eigh(x)[1] ** 2 * pf.tensor(w)).sum(-1),
             lambda x: (torch.linalg.eigh(x)[1] ** 2 * torch.from_numpy(w)).sum(-1), symmetric(rng, (2, 4, 4))),
            ("svdvals", pf.linalg.svdvals, torch.linalg.svdvals, rng.uniform(-1, 1, (2, 5, 3))),
            ("svd U tall", lambda x: pf.linalg.svd(x, full_matrices=False)[0] ** 2,
             lambda x: torch.linalg.svd(x, full_matrices=False)[0] ** 2, rng.uniform(-1, 1, (5, 3))),
            ("svd Vh wide", lambda x: pf.linalg.svd(x, full_matrices=False)[2] ** 2,
             lambda x: torch.linalg.svd(x, full_matrices=False)[2] ** 2, rng.uniform(-1, 1, (3, 5))),
            ("svd full, square", lambda x: pf.linalg.svd(x)[0] ** 2 + pf.linalg.svd(x)[2] ** 2,
             lambda x: torch.linalg.svd(x)[0] ** 2 + torch.linalg.svd(x)[2] ** 2, rng.uniform(-1, 1, (4, 4))),
            ("pinv", pf.linalg.pinv, torch.linalg.pinv, rng.uniform(-1, 1, (5, 3)))]:
        p, t = both(a, "float64", grad=True)
        grads_agree(rng, fn(p), tfn(t), [p], [t], name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_triangular_matches_torch(rng, dtype):
    """Upper and lower, unitriangular, left and right, broadcast batch dims; only the triangle is read
    (the other holds noise); gradients (float64) as torch's."""
    for a_shape, b_shape in [((4, 4), (4, 3)), ((2, 3, 3), (3, 2)), ((3, 3), (2, 3, 1)), ((0, 2, 2), (0, 2, 2)),
                             ((3, 3), (3, 0))]:
        for upper in (False, True):
            for unit in (False, True):
                a = well_conditioned(rng, a_shape)
                pa, ta = both(a, dtype)
                pb, tb = both(rng.uniform(-2, 2, b_shape), dtype)
                close(pf.linalg.solve_triangular(pa, pb, upper=upper, unitriangular=unit),
                      torch.linalg.solve_triangular(ta, tb, upper=upper, unitriangular=unit), dtype,
                      f"{a_shape} {b_shape} upper={upper} unit={unit}")
        pb, tb = both(rng.uniform(-2, 2, b_shape[:-2] + (b_shape[-1], b_shape[-2])), dtype)
        close(pf.linalg.solve_triangular(pa, pb, upper=True, left=False),
              torch.linalg.solve_triangular(ta, tb, upper=True, left=False), dtype, f"left=False {a_shape}")
    for upper in (False, True):
        for unit in (False, True):
            pa, ta = both(well_conditioned(rng, (2, 4, 4)), "float64", grad=True)
            pb, tb = both(rng.uniform(-1, 1, (2, 4, 3)), "float64", grad=True)
            grads_agree(rng, pf.linalg.solve_triangular(pa, pb, upper=upper, unitriangular=unit),
                        torch.linalg.solve_triangular(ta, tb, upper=upper, unitriangular=unit), [pa, pb], [ta, tb],
                        f"solve_triangular upper={upper} unit={unit}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 2), (1, 1), (0, 3), (3, 0)])
def test_qr_matches_torch(rng, dtype, shape):
    """Q and R as torch's (LAPACK's Householder QR on both sides), every mode, torch.qr; Q R = A."""
    p, t = both(rng.uniform(-1, 1, shape), dtype)
    for mode in ("reduced", "complete", "r"):
        Q, R = pf.linalg.qr(p, mode)
        tQ, tR = torch.linalg.qr(t, mode)
        close(R, tR, dtype, f"R {mode}")
        close(Q, tQ, dtype, f"Q {mode}")
        if mode != "r":
            close(Q @ R, t, dtype, f"Q R {mode}")
    close(pf.qr(p)[0], torch.linalg.qr(t)[0], dtype, "torch.qr (some=True: reduced)")
    with pytest.raises(ValueError, match="unrecognized mode"):
        pf.linalg.qr(p, "full")


def test_qr_gradients_match_torch(rng):
    """Q's and R's gradients as torch's: tall, square complete, wide (A = [X | Y]); complete of a tall
    matrix is not differentiable, as torch's."""
    for shape, mode in [((5, 3), "reduced"), ((4, 4), "complete"), ((3, 5), "reduced"), ((2, 3, 5), "complete")]:
        p, t = both(rng.uniform(-1, 1, shape), "float64", grad=True)
        grads_agree(rng, pf.linalg.qr(p, mode)[0], torch.linalg.qr(t, mode)[0], [p], [t], f"qr Q {shape} {mode}")
        p, t = both(rng.uniform(-1, 1, shape), "float64", grad=True)
        grads_agree(rng, pf.linalg.qr(p, mode)[1], torch.linalg.qr(t, mode)[1], [p], [t], f"qr R {shape} {mode}")
    p = both(rng.uniform(-1, 1, (4, 2)), "float64", grad=True)[0]
    with pytest.raises(pf.NotSupportedError, match="not differentiable when mode='complete'"):
        pf.linalg.qr(p, "complete")[0].sum().backward()


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_matches_torch(rng, dtype):
    """Tall, wide, rank-deficient and batched systems, vector right-hand sides, every
    driver's results (solution, residuals, rank, singular values), rcond; gradients (float64)."""
    rank_one = rng.uniform(-1, 1, (6, 1)) @ rng.uniform(-1, 1, (1, 3))
    for a, b in [(rng.uniform(-1, 1, (5, 3)), rng.uniform(-1, 1, (5, 2))), (rng.uniform(-1, 1, (3, 5)), rng.uniform(-1, 1, (3, 2))),
                 (rank_one, rng.uniform(-1, 1, (6, 2))), (rng.uniform(-1, 1, (2, 4, 3)), rng.uniform(-1, 1, (2, 4, 1))),
                 (rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, (4,)))]:
        pa, ta = both(a, dtype)
        pb, tb = both(b, dtype)
        for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
            if driver == "gels" and a is rank_one:
                continue  # gels assumes full rank
            got, want = pf.linalg.lstsq(pa, pb, driver=driver), torch.linalg.lstsq(ta, tb, driver=driver)
            what = f"{a.shape} {b.shape} {driver}"
            close(got.solution, want.solution, dtype, what)
            close(got.residuals, want.residuals, dtype, what + " residuals")
            assert got.rank.tolist() == want.rank.tolist(), what
            close(got.singular_values, want.singular_values, dtype, what + " singular values")
    pa, ta = both(rank_one, dtype)
    pb, tb = both(rng.uniform(-1, 1, (6, 2)), dtype)
    assert pf.linalg.lstsq(pa, pb, rcond=0.5).rank.tolist() == torch.linalg.lstsq(ta, tb, rcond=0.5).rank.tolist()
    with pytest.raises(ValueError, match="driver"):
        pf.linalg.lstsq(pa, pb, driver="gesv")
    pa, ta = both(rng.uniform(-1, 1, (5, 3)), "float64", grad=True)
    pb, tb = both(rng.uniform(-1, 1, (5, 2)), "float64", grad=True)
    grads_agree(rng, pf.linalg.lstsq(pa, pb).solution, torch.linalg.lstsq(ta, tb).solution, [pa, pb], [ta, tb], "lstsq")


@pytest.mark.parametrize("dtype", DTYPES)
def test_cond_matches_torch(rng, dtype):
    """Every p torch takes, batched; a singular matrix's inf; a rectangular matrix's 2-norm condition."""
    p, t = both(rng.uniform(-1, 1, (2, 4, 4)), dtype)
    for order in (None, 2, -2, "fro", "nuc", 1, -1, float("inf"), -float("inf")):
        close(pf.linalg.cond(p, order), torch.linalg.cond(t, order), dtype, f"cond p={order}")
    p, t = both(np.array([[1.0, 2.0], [2.0, 4.0]]), dtype)
    assert float(pf.linalg.cond(p, 1)) == float(torch.linalg.cond(t, 1)) == float("inf")
    p, t = both(rng.uniform(-1, 1, (3, 5)), dtype)
    close(pf.linalg.cond(p), torch.linalg.cond(t), dtype, "cond 3x5")


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_matches_torch(rng, dtype):
    """lu_factor (LU and pivots), lu (P, L, U) of square, wide and tall matrices, and lu_solve with
    left and adjoint, as torch's; a zero pivot raises with torch's message; gradients (float64,
    square) of all three."""
    for shape in [(4, 4), (2, 3, 3), (3, 5), (5, 3), (1, 1), (0, 2, 2)]:
        p, t = both(rng.uniform(-1, 1, shape), dtype)
        LU, piv = pf.linalg.lu_factor(p)
        tLU, tpiv = torch.linalg.lu_factor(t)
        close(LU, tLU, dtype, f"LU {shape}")
        assert piv.dtype == pf.int32 and piv.tolist() == tpiv.tolist()
        for got, want, name in zip(pf.linalg.lu(p), torch.linalg.lu(t), "PLU"):
            close(got, want, dtype, f"lu {name} {shape}")
        if shape[-1] == shape[-2]:
            b = rng.uniform(-1, 1, shape[:-1] + (2,))
            for left in (True, False):
                for adjoint in (False, True):
                    pb, tb = both(b if left else np.swapaxes(b, -1, -2), dtype)
                    close(pf.linalg.lu_solve(LU, piv, pb, left=left, adjoint=adjoint),
                          torch.linalg.lu_solve(tLU, tpiv, tb, left=left, adjoint=adjoint), dtype,
                          f"lu_solve {shape} left={left} adjoint={adjoint}")
    p, t = both(np.array([[1.0, 2.0], [2.0, 4.0]]), dtype)
    with pytest.raises(pf.linalg.LinAlgError) as info:
        pf.linalg.lu_factor(p)
    with pytest.raises(RuntimeError) as torch_info:
        torch.linalg.lu_factor(t)
    assert str(info.value) == str(torch_info.value)
    assert pf.linalg.lu_factor_ex(p).info.tolist() == torch.linalg.lu_factor_ex(t).info.tolist()
    with pytest.raises(pf.NotSupportedError, match="without pivoting"):
        pf.linalg.lu(p, pivot=False)
    a, b = rng.uniform(-1, 1, (2, 4, 4)), rng.uniform(-1, 1, (2, 4, 3))
    p, t = both(a, "float64", grad=True)
    grads_agree(rng, pf.linalg.lu_factor(p).LU, torch.linalg.lu_factor(t).LU, [p], [t], "lu_factor")
    for i, name in enumerate("LU"):
        p, t = both(a, "float64", grad=True)
        grads_agree(rng, pf.linalg.lu(p)[i + 1], torch.linalg.lu(t)[i + 1], [p], [t], f"lu {name}")
    p, t = both(a, "float64", grad=True)
    pb, tb = both(b, "float64", grad=True)
    LU, piv = pf.linalg.lu_factor(p)
    tLU, tpiv = torch.linalg.lu_factor(t)
    grads_agree(rng, pf.linalg.lu_solve(LU, piv, pb), torch.linalg.lu_solve(tLU, tpiv, tb), [p, pb], [t, tb], "lu_solve")
