"""Pseudo-inverse methods (seed 002) against the four Penrose conditions (seed 002 eqs 1a–1d).

Every Moore–Penrose method must satisfy, for X = A^+,

    (A X)^T = A X,   (X A)^T = X A,   A X A = A,   X A X = X

on full-rank and rank-deficient, tall, wide and square matrices. Test
matrices are built as ``U diag(s) V^T`` with known singular values so the
round-off allowance can be stated in terms of the condition number.
"""

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uk_controller.core.pinv import PINV_METHODS, compiled_pinv, get_pinv, pinv_damped, pinv_svd

MP_METHODS = ['svd', 'varga', 'greville', 'householder', 'mgs']
EPS = np.finfo(float).eps


def make_matrix(rng, m, n, rank, smin=0.1, smax=10.0):
    """m x n matrix of the given rank, singular values in [smin, smax]."""
    U, _ = np.linalg.qr(rng.standard_normal((m, m)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.zeros(min(m, n))
    if rank:
        s[:rank] = np.sort(np.exp(rng.uniform(np.log(smin), np.log(smax), rank)))[::-1]
        s[0], s[rank - 1] = smax, (smin if rank > 1 else smax)
    S = np.zeros((m, n))
    S[np.arange(s.size), np.arange(s.size)] = s
    return U @ S @ V.T, s


def penrose_residuals(A, X):
    """The four Penrose residuals, each relative to the size of the term it checks."""
    nA, nX = np.linalg.norm(A, 2) or 1.0, np.linalg.norm(X, 2) or 1.0
    AX, XA = A @ X, X @ A
    return (
        np.linalg.norm(AX - AX.T, 2),  # eq 1a
        np.linalg.norm(XA - XA.T, 2),  # eq 1b
        np.linalg.norm(A @ X @ A - A, 2) / nA,  # eq 1c
        np.linalg.norm(X @ A @ X - X, 2) / nX,
    )  # eq 1d


def assert_penrose(A, X, cond, label):
    res = penrose_residuals(A, X)
    if label.startswith('greville'):
        tol = 1e2 * EPS * cond**2 * max(A.shape)  # the recursion is not backward stable: O(eps cond^2)
    else:
        tol = 1e3 * EPS * cond * max(A.shape)  # QR/SVD based: O(eps * cond)
    assert max(res) < tol, f'{label}: Penrose residuals {res} > {tol:.1e}'


SHAPES = [(8, 5), (5, 8), (6, 6), (12, 12), (1, 4), (4, 1), (3, 3)]


@pytest.mark.parametrize('name', MP_METHODS)
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('deficient', [False, True], ids=['full', 'deficient'])
def test_penrose_conditions(name, shape, deficient):
    rng = np.random.default_rng(zlib.crc32(repr((name, shape, deficient)).encode()))  # stable across runs
    m, n = shape
    k = min(m, n)
    rank = max(k - 2, 0) if deficient else k
    if deficient and k == 1:
        rank = 0
    A, s = make_matrix(rng, m, n, rank)
    X = get_pinv(name)(A, 1e-10)
    assert X.shape == (n, m)
    cond = s[0] / s[rank - 1] if rank else 1.0
    assert_penrose(A, X, cond, f'{name} {shape} rank {rank}')
    # the Moore–Penrose inverse is unique: every method equals the SVD one
    ref = np.linalg.pinv(A, rcond=1e-10)
    growth = cond**2 if name == 'greville' else cond
    assert np.linalg.norm(X - ref, 2) <= 1e3 * EPS * growth * (np.linalg.norm(ref, 2) + 1) * max(m, n)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 9),
    n=st.integers(1, 9),
    drop=st.integers(0, 9),
    seed=st.integers(0, 2**32 - 1),
    scale=st.floats(1e-3, 1e3),
    name=st.sampled_from(MP_METHODS),
)
def test_penrose_property(m, n, drop, seed, scale, name):
    rng = np.random.default_rng(seed)
    rank = max(min(m, n) - drop, 0)
    A, s = make_matrix(rng, m, n, rank, smin=0.05, smax=20.0)
    A *= scale  # rcond is relative: scaling must not matter
    X = get_pinv(name)(A, 1e-9)
    cond = s[0] / s[rank - 1] if rank else 1.0
    assert_penrose(A, X, cond, f'{name} {m}x{n} rank {rank} scale {scale:g}')
    # rank of the result equals the rank of A (nothing spurious inverted)
    if rank:
        sx = np.linalg.svd(X, compute_uv=False)
        assert int(np.sum(sx > 1e-6 * sx[0])) == rank


@pytest.mark.parametrize('name', MP_METHODS)
def test_small_rcond_on_ill_conditioned_rank_deficient(name):
    """rcond = 1e-12 with cond = 1e3 on the non-zero singular values: exact dependences must
    still be recognised (round-off in the rank test must stay far below 1e-12 * ||A||)."""
    rng = np.random.default_rng(21)
    for m, n, rank in [(9, 7, 4), (6, 9, 5), (8, 8, 6), (9, 9, 2)]:
        A, s = make_matrix(rng, m, n, rank, smin=np.sqrt(1e-3), smax=np.sqrt(1e3))
        X = get_pinv(name)(A, 1e-12)
        sx = np.linalg.svd(X, compute_uv=False)
        assert int(np.sum(sx > 1e-8 * sx[0])) == rank
        assert_penrose(A, X, 1e3, f'{name} {m}x{n} rank {rank}')


@pytest.mark.parametrize('name', MP_METHODS)
def test_rank_tolerance_truncates(name):
    """Singular values below rcond * s_max are treated as zero (the explicit rank tolerance)."""
    rng = np.random.default_rng(7)
    U, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    V, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    s = np.array([3.0, 1.0, 0.5, 1e-3, 1e-13])
    A = U[:, :5] @ np.diag(s) @ V.T
    f = get_pinv(name)
    # rcond 1e-8: the 1e-13 direction is dropped, 1e-3 kept
    X = f(A, 1e-8)
    keep = s > 1e-8 * s[0]
    ref = V[:, keep] @ np.diag(1 / s[keep]) @ U[:, :5][:, keep].T
    assert np.linalg.norm(X - ref) < 1e-9 * np.linalg.norm(ref)
    # rcond 1e-2: the 1e-3 direction is dropped as well. QR pivots and Greville's
    # row residuals truncate a nearby rank-3 matrix, not the SVD-optimal one, so
    # the agreement is O(dropped / kept singular value), not round-off.
    if name == 'greville':
        return  # row-by-row residuals are not rank revealing (see pinv_greville docstring)
    X = f(A, 1e-2)
    keep = s > 1e-2 * s[0]
    ref = V[:, keep] @ np.diag(1 / s[keep]) @ U[:, :5][:, keep].T
    sx = np.linalg.svd(X, compute_uv=False)
    assert int(np.sum(sx > 1e-8 * sx[0])) == 3
    assert np.linalg.norm(X - ref) < 20 * (s[3] / s[2]) * np.linalg.norm(ref)


@pytest.mark.parametrize('name', MP_METHODS + ['damped'])
def test_zero_and_square_invertible(name):
    f = get_pinv(name)
    assert np.array_equal(f(np.zeros((3, 4)), 1e-10), np.zeros((4, 3)))
    rng = np.random.default_rng(3)
    A, _ = make_matrix(rng, 5, 5, 5, smin=0.5, smax=2.0)
    tol = 1e-5 if name == 'damped' else 1e-12  # damping 1e-6 of s_max biases by ~(lam/s)^2
    assert np.allclose(f(A, 1e-10) @ A, np.eye(5), atol=tol)


def test_damped_least_squares():
    """``A^T (A A^T + lambda^2 I)^{-1}``: bounded near singularity, pinv as lambda -> 0."""
    rng = np.random.default_rng(11)
    A, s = make_matrix(rng, 4, 6, 3, smin=1e-9, smax=1.0)
    lam = 1e-3
    X = pinv_damped(A, 1e-10, damping=lam)
    # closed form (normal equations, fine at this conditioning)
    ref = A.T @ np.linalg.solve(A @ A.T + lam**2 * np.eye(4), np.eye(4))
    assert np.allclose(X, ref, atol=1e-9)
    assert np.linalg.norm(X, 2) <= 1.0 / (2 * lam) * (1 + 1e-12)  # max of s/(s^2+lam^2)
    B, _ = make_matrix(rng, 4, 6, 4, smin=0.5, smax=2.0)
    assert np.allclose(pinv_damped(B, 1e-10, damping=1e-9), pinv_svd(B, 1e-10), atol=1e-12)


def test_registry():
    assert set(PINV_METHODS) >= {'svd', 'damped', 'varga', 'greville', 'householder', 'mgs'}
    with pytest.raises(ValueError, match='unknown pseudo-inverse'):
        get_pinv('cholesky')


@pytest.mark.parametrize('name', MP_METHODS)
@pytest.mark.slow
def test_compiled_twins_equal_the_reference(name):
    """The loop twins (compiled with numba when installed) equal the NumPy/LAPACK reference: the
    Moore–Penrose inverse is unique, so with the same rank decision they agree to round-off, on
    full-rank and rank-deficient, tall, wide and square matrices and on exact dependences."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    fast, ref = compiled_pinv(name), get_pinv(name)
    cases = [(12, 12, 11), (12, 12, 12), (8, 5, 5), (5, 8, 5), (9, 7, 4), (6, 9, 3), (1, 4, 1), (4, 1, 1), (3, 3, 0)]
    for m, n, rank in cases:
        for rcond in (1e-10, 1e-5):
            A, s = make_matrix(rng, m, n, rank)
            A = np.ascontiguousarray(A)
            X, Xr = fast(A, rcond), ref(A, rcond)
            assert X.shape == (n, m)
            cond = s[0] / s[rank - 1] if rank else 1.0
            growth = cond**2 if name == 'greville' else cond
            assert np.linalg.norm(X - Xr, 2) <= 1e3 * EPS * growth * (np.linalg.norm(Xr, 2) + 1) * max(m, n), (
                name,
                m,
                n,
                rank,
                rcond,
            )
            assert_penrose(A, X, cond, f'compiled {name} {m}x{n} rank {rank}')
    # an exact dependence (row 3 = row 1 + row 2) with tied column norms, as in seed 002's Jacobian
    B = np.array([[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5], [1.0, 1.0, 0.5, 0.5]])
    assert np.allclose(fast(B, 1e-10), np.linalg.pinv(B), atol=1e-13)
    # and the uncompiled loops are the same arithmetic
    A, _ = make_matrix(rng, 7, 6, 5)
    assert np.allclose(compiled_pinv(name, jit=False)(A, 1e-10), fast(A, 1e-10), atol=1e-13)


def test_compiled_pinv_unknown_name():
    with pytest.raises(ValueError, match='no compiled twin'):
        compiled_pinv('damped')


# ------------------------------------------- the compiled SVD twin (one-sided Jacobi SVD)


def _spectrum_matrix(rng, m, n, s):
    """m x n matrix ``U diag(s) V^T`` with the given singular values (len(s) = min(m, n))."""
    U, _ = np.linalg.qr(rng.standard_normal((m, m)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    S = np.zeros((m, n))
    S[np.arange(len(s)), np.arange(len(s))] = s
    return np.ascontiguousarray(U @ S @ V.T)


@pytest.mark.parametrize('shape', [(12, 12), (12, 7), (7, 12), (9, 1), (1, 9), (2, 2), (30, 11), (11, 30)])
@pytest.mark.slow
def test_svd_twin_equals_lapack_reference(shape):
    """The Jacobi-SVD twin equals `pinv_svd` (LAPACK) to round-off: full rank, exact rank deficiency
    (zero singular values, round-off level in A), singular values below rcond * s_max but far from
    it (dropped by both), graded spectra down to 1e-7, and any scale of A (rcond is relative)."""
    rng = np.random.default_rng(zlib.crc32(repr(('svd-twin', shape)).encode()))
    fast = compiled_pinv('svd')
    m, n = shape
    k = min(m, n)
    spectra = {
        'full': np.sort(rng.uniform(0.5, 3.0, k))[::-1],
        'graded': np.logspace(0, -7, k),
        'deficient': np.concatenate([np.sort(rng.uniform(0.1, 5.0, (k + 1) // 2))[::-1], np.zeros(k // 2)]),
        'below-threshold': np.concatenate([np.sort(rng.uniform(0.1, 5.0, (k + 1) // 2))[::-1], np.full(k // 2, 1e-14)]),
    }
    for label, s in spectra.items():
        for scale in (1.0, 1e-150, 1e150):
            A = _spectrum_matrix(rng, m, n, s) * scale
            for rcond in (1e-10, 1e-5):
                keep = s > rcond * s[0]
                if label == 'graded':
                    if np.any(np.abs(s / s[0] / rcond - 1.0) < 0.5):
                        continue  # a singular value near the threshold: no unique answer
                X, Xr = fast(A, rcond), pinv_svd(A, rcond)
                assert X.shape == (n, m)
                cond = s[0] / s[keep][-1]
                err = np.linalg.norm(X - Xr, 2) / np.linalg.norm(Xr, 2)
                assert err <= 50 * EPS * cond * max(m, n), (label, scale, rcond, err)
                # the rank the twin kept is the rank the rule gives
                sx = np.linalg.svd(X, compute_uv=False)
                assert int(np.sum(sx > 1e-3 * sx[0] / cond)) == int(keep.sum()), (label, scale, rcond)
                if label in ('full', 'deficient'):
                    assert_penrose(A / scale, X * scale, cond, f'svd twin {label} {shape} rcond {rcond}')


def test_jacobi_kernel_is_an_svd():
    """`kernels.linalg.jacobi_columns` (the one Jacobi SVD: the servo solve's and the SVD twin's) on
    ``W = B``: rotated columns, mutually orthogonal, whose norms are the singular values of B (LAPACK's),
    an orthogonal accumulated rotation V, and ``W V^T = B`` reproduced; tall and square (its callers rotate
    min(m, n) columns), full rank and rank deficient."""
    from uk_controller.kernels.linalg import jacobi_columns

    rng = np.random.default_rng(5)
    for r, c, rank in [(12, 12, 12), (12, 12, 11), (9, 5, 5), (7, 7, 3), (4, 1, 1), (30, 11, 6)]:
        B = make_matrix(rng, r, c, rank)[0]
        W = B.copy()
        V = np.empty((c, c))
        sweeps = jacobi_columns(W, V, 60)
        assert sweeps < 60
        s = np.linalg.norm(W, axis=0)
        ref = np.linalg.svd(B, compute_uv=False)
        assert np.allclose(np.sort(s)[::-1][: ref.size], ref, rtol=0, atol=20 * EPS * s.max())
        assert np.allclose(V.T @ V, np.eye(c), rtol=0, atol=20 * EPS * c)
        assert np.allclose(W @ V.T, B, rtol=0, atol=20 * EPS * s.max() * c)
        off = np.abs(W.T @ W - np.diag(s * s))
        assert off.max() <= 20 * EPS * s.max() ** 2 * r


@pytest.mark.slow
def test_svd_twin_exact_dependence_and_nonfinite():
    """Seed 002's situation: a redundant row (row 3 = row 1 + row 2) is dropped, as by LAPACK; a
    matrix with NaN or inf has no SVD and the twin says so with an all-NaN result."""
    fast = compiled_pinv('svd')
    B = np.array([[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5], [1.0, 1.0, 0.5, 0.5]])
    for M in (B, np.ascontiguousarray(B.T)):
        assert np.allclose(fast(M, 1e-10), pinv_svd(M, 1e-10), rtol=0, atol=1e-14)
    for bad in (np.nan, np.inf):
        A = np.eye(3)
        A[1, 2] = bad
        assert np.isnan(fast(A, 1e-10)).all()
