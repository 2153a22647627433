"""Compiled twins of the Moore–Penrose methods of seed 002: the same five methods as explicit loops, for numba.

Reference: `uk_controller.core.pinv.reference` (NumPy/LAPACK), method by method:

    twin                        reference                                seed 002
    _loop_pinv_svd              pinv_svd                                 SVD method
    _loop_pinv_varga            pinv_varga                               eqs 20-21
    _loop_pinv_greville         pinv_greville                            eq 22 ff.
    _loop_pinv_householder      pinv_householder (_ls_min_norm)          eqs 15-18
    _loop_pinv_mgs              pinv_mgs (_ls_min_norm)                  eqs 15-18

Tests that keep them equal: test/test_pinv.py (``test_compiled_twins_equal_the_reference``,
``test_svd_twin_equals_lapack_reference``, ``test_jacobi_kernel_is_an_svd``,
``test_svd_twin_exact_dependence_and_nonfinite``); the seed 002 parallelogram benchmark
(`bench.parallelogram_model`) calls them from compiled code, and
test/test_seed002_parallelogram.py (``test_compiled_rhs_is_eq32``) checks that right-hand side
against the NumPy one.

`compiled_pinv(name)` returns the twin (compiled on first use, ``cache=True``).
"""

from __future__ import annotations

from functools import cache
from types import FunctionType

import numpy as np

from ...kernels.linalg import column_norms, jacobi_columns, matmul

# ------------------------------------------------------------- compiled twins (loops)
#
# The same five Moore–Penrose methods written as explicit loops, for numba (see
# `compiled_pinv`). The NumPy/LAPACK functions of `reference.py` are the reference: the
# Moore–Penrose inverse is unique, so with the same rank decision a twin must equal
# its reference to round-off (test_pinv.py checks that on random and rank-deficient
# matrices). The Householder QR here is written out (LAPACK's geqp3 is not callable
# from numba); it pivots on exactly recomputed column norms, so on near-ties its pivot
# order may differ from geqp3's, which changes the factors but not A^+. The SVD is the
# one-sided Jacobi SVD of the compiled servo solve (kernels/linalg.py, `jacobi_columns`: one
# implementation for both), not LAPACK's bidiagonal one: np.linalg.svd inside numba costs
# ~60 us on a 12 x 12 (gesdd plus its copies and workspace); the singular values agree to
# round-off and the rank rule is the same, so A^+ does too. Products of two matrices are
# `kernels.linalg.matmul`.


def _loop_column_sq(X, c, start):
    """Squared norm of column c of X from row `start` down."""
    s = 0.0
    for i in range(start, X.shape[0]):
        s += X[i, c] * X[i, c]
    return s


def _loop_swap_columns(X, a, b, rows):
    """Swap columns a and b of X in its first `rows` rows."""
    for i in range(rows):
        X[i, a], X[i, b] = X[i, b], X[i, a]


def _loop_hh_qr(A, pivot):
    """Householder QR ``A[:, piv] = Q R`` (column pivoting if ``pivot``), Golub & Van Loan §5.2.

    Returns R (k x n upper trapezoidal, k = min(m, n)), the reflectors V (m x k, column j
    zero above row j), their factors tau (``H_j = I - tau_j v_j v_j^T``) and piv.
    At step j the remaining column of largest norm (rows j..m-1) is moved to column j.
    """
    m, n = A.shape
    k = min(m, n)
    R = A.copy()
    V = np.zeros((m, k))
    tau = np.zeros(k)
    piv = np.arange(n)
    for j in range(k):
        if pivot:
            best = j
            bestv = -1.0
            for c in range(j, n):
                sq = _loop_column_sq(R, c, j)
                if sq > bestv:
                    bestv = sq
                    best = c
            if best != j:
                _loop_swap_columns(R, j, best, m)
                piv[j], piv[best] = piv[best], piv[j]
        alpha = np.sqrt(_loop_column_sq(R, j, j))
        if alpha == 0.0:
            continue
        beta = -alpha if R[j, j] >= 0.0 else alpha
        for i in range(j, m):
            V[i, j] = R[i, j]
        V[j, j] -= beta
        vv = 0.0
        for i in range(j, m):
            vv += V[i, j] * V[i, j]
        tau[j] = 2.0 / vv
        R[j, j] = beta
        for i in range(j + 1, m):
            R[i, j] = 0.0
        for c in range(j + 1, n):
            d = 0.0
            for i in range(j, m):
                d += V[i, j] * R[i, c]
            d *= tau[j]
            for i in range(j, m):
                R[i, c] -= d * V[i, j]
    return R[:k], V, tau, piv


def _loop_hh_apply_qt(V, tau, B):
    """``Q^T B`` for Q = H_0 H_1 ... from `_loop_hh_qr` (B overwritten and returned)."""
    m, k = V.shape
    for j in range(k):
        if tau[j] == 0.0:
            continue
        for c in range(B.shape[1]):
            d = 0.0
            for i in range(j, m):
                d += V[i, j] * B[i, c]
            d *= tau[j]
            for i in range(j, m):
                B[i, c] -= d * V[i, j]
    return B


def _loop_hh_q1(V, tau, r):
    """The first r columns of Q = H_0 H_1 ... H_{k-1} (reflectors applied backwards to I[:, :r])."""
    m, k = V.shape
    Q = np.zeros((m, r))
    for i in range(r):
        Q[i, i] = 1.0
    for j in range(k - 1, -1, -1):
        if tau[j] == 0.0:
            continue
        for c in range(r):
            d = 0.0
            for i in range(j, m):
                d += V[i, j] * Q[i, c]
            d *= tau[j]
            for i in range(j, m):
                Q[i, c] -= d * V[i, j]
    return Q


def _loop_rank(R, rcond):
    """`_qr_rank` on the diagonal of R."""
    k = min(R.shape[0], R.shape[1])
    if k == 0:
        return 0
    d0 = abs(R[0, 0])
    if d0 == 0.0:
        return 0
    r = 0
    for i in range(k):
        if abs(R[i, i]) > rcond * d0:
            r += 1
    return r


def _loop_solve_upper(R, B, r):
    """``R[:r, :r]^{-1} B[:r]`` by back substitution (a new r x cols array)."""
    X = np.zeros((r, B.shape[1]))
    for c in range(B.shape[1]):
        for i in range(r - 1, -1, -1):
            s = B[i, c]
            for j in range(i + 1, r):
                s -= R[i, j] * X[j, c]
            X[i, c] = s / R[i, i]
    return X


def _loop_pinv_svd(A, rcond):
    """`pinv_svd` by the one-sided Jacobi SVD of the compiled servo solve
    (:func:`uk_controller.kernels.linalg.jacobi_columns`), with the same rank rule.

    Tall or square A (m >= n): the columns of ``W = A / c`` (c = max |a_ij|, so the Gram entries
    cannot overflow) are rotated until mutually orthogonal, ``A / c = W V^T`` with V orthogonal:
    column i of W is ``s_i u_i``, column i of V is v_i, and ``A^+ = V S^+ U^T / c =
    sum_i v_i u_i^T / (c s_i)`` over ``s_i > rcond * max s`` (seed 002, SVD method, as `pinv_svd`).
    Wide A: the same with ``W = A^T / c`` (an SVD of A^T; u and v swap roles). Only min(m, n)
    columns are rotated, until every pair is orthogonal to full precision (Hestenes 1958; Golub &
    Van Loan §8.6.4). A non-finite A gives an all-NaN result.
    """
    m, n = A.shape
    X = np.zeros((n, m))
    if m == 0 or n == 0:
        return X
    scale = 0.0
    for i in range(m):
        for j in range(n):
            if not np.isfinite(A[i, j]):
                X[:, :] = np.nan
                return X
            if abs(A[i, j]) > scale:
                scale = abs(A[i, j])
    if scale == 0.0:
        return X
    inv_scale = 1.0 / scale
    tall = m >= n
    c = n if tall else m  # columns rotated
    k = m if tall else n  # their length
    W = np.empty((k, c))
    for i in range(m):
        for j in range(n):
            if tall:
                W[i, j] = A[i, j] * inv_scale
            else:
                W[j, i] = A[i, j] * inv_scale
    V = np.empty((c, c))
    jacobi_columns(W, V, np.int64(60))  # int64, as the servo solve's sweeps: one compiled version
    s = np.empty(c)
    smax = column_norms(W, s)
    # X += v_i u_i^T / (c s_i): tall, v_i = V[:, i] and u_i = W[:, i] / s_i; wide (an SVD of
    # A^T = U' S V'^T), the roles swap: the n-side vector is W[:, i] / s_i, the m-side V[:, i]
    for i in range(c):
        if s[i] > rcond * smax:
            inv = 1.0 / s[i]
            for j in range(k):
                W[j, i] *= inv
            inv *= inv_scale  # 1 / (c s_i)
            for p in range(n):
                f = (V[p, i] if tall else W[p, i]) * inv
                for q in range(m):
                    X[p, q] += f * (W[q, i] if tall else V[q, i])
    return X


def _loop_pinv_varga(A, rcond):
    m, n = A.shape
    X = np.zeros((n, m))
    if m == 0 or n == 0:
        return X
    R1, V, tau, piv = _loop_hh_qr(A, True)
    r = _loop_rank(R1, rcond)
    if r == 0:
        return X
    U1 = _loop_hh_q1(V, tau, r)  # m x r
    G1T = np.zeros((n, r))  # G1 = R1[:r] P^T, transposed
    for i in range(r):
        for c in range(n):
            G1T[piv[c], i] = R1[i, c]
    G2T, V2, tau2, _ = _loop_hh_qr(G1T, False)  # G1^T = V1 G2^T (eq 20)
    V1 = _loop_hh_q1(V2, tau2, r)  # n x r
    # Z = G2^{-1} U1^T with G2 = (G2T)^T lower triangular: forward substitution
    Z = np.zeros((r, m))
    for c in range(m):
        for i in range(r):
            s = U1[c, i]
            for j in range(i):
                s -= G2T[j, i] * Z[j, c]
            Z[i, c] = s / G2T[i, i]
    matmul(V1, Z, X)
    return X


def _loop_pinv_greville(A, rcond):
    m, n = A.shape
    P = np.zeros((n, m))
    if m == 0 or n == 0:
        return P
    fro = 0.0
    for i in range(m):
        for j in range(n):
            fro += A[i, j] * A[i, j]
    tol = rcond * np.sqrt(fro)
    if tol == 0.0:
        return P
    na2 = 0.0
    for j in range(n):
        na2 += A[0, j] * A[0, j]
    if np.sqrt(na2) > tol:
        for j in range(n):
            P[j, 0] = A[0, j] / na2
    d = np.zeros(m)
    dd = np.zeros(m)
    c = np.zeros(n)
    b = np.zeros(n)
    for i in range(1, m):
        for k in range(i):  # d = a P_{i-1}
            s = 0.0
            for j in range(n):
                s += A[i, j] * P[j, k]
            d[k] = s
        for j in range(n):  # c = a - d A_{i-1}
            s = A[i, j]
            for k in range(i):
                s -= d[k] * A[k, j]
            c[j] = s
        for k in range(i):  # refinement: project c once more
            s = 0.0
            for j in range(n):
                s += c[j] * P[j, k]
            dd[k] = s
        for j in range(n):
            s = c[j]
            for k in range(i):
                s -= dd[k] * A[k, j]
            c[j] = s
        for k in range(i):
            d[k] += dd[k]
        cc = 0.0
        for j in range(n):
            cc += c[j] * c[j]
        if np.sqrt(cc) > tol:
            for j in range(n):
                b[j] = c[j] / cc
        else:
            den = 1.0
            for k in range(i):
                den += d[k] * d[k]
            for j in range(n):
                s = 0.0
                for k in range(i):
                    s += P[j, k] * d[k]
                b[j] = s / den
        for j in range(n):
            for k in range(i):
                P[j, k] -= b[j] * d[k]
            P[j, i] = b[j]
    return P


def _loop_mgs_qr(A, rcond):
    """`_mgs_pivoted` written out: returns Q (m x r), R (r x n), piv, r."""
    m, n = A.shape
    W = A.copy()
    piv = np.arange(n)
    kmax = min(m, n)
    Q = np.zeros((m, kmax))
    R = np.zeros((kmax, n))
    norms2 = np.zeros(n)
    for c in range(n):
        norms2[c] = _loop_column_sq(W, c, 0)
    first = -1.0
    r = 0
    for k in range(kmax):
        j = k
        for c in range(k + 1, n):
            if norms2[c] > norms2[j]:
                j = c
        if j != k:
            _loop_swap_columns(W, k, j, m)
            _loop_swap_columns(R, k, j, k)
            norms2[k], norms2[j] = norms2[j], norms2[k]
            piv[k], piv[j] = piv[j], piv[k]
        rkk = np.sqrt(_loop_column_sq(W, k, 0))
        if first < 0.0:
            first = rkk
        if rkk == 0.0 or rkk <= rcond * first:
            break
        for i in range(m):
            Q[i, k] = W[i, k] / rkk
        R[k, k] = rkk
        for c in range(k + 1, n):
            s = 0.0
            for i in range(m):
                s += Q[i, k] * W[i, c]
            R[k, c] = s
            s2 = 0.0
            for i in range(m):
                W[i, c] -= Q[i, k] * s
                s2 += W[i, c] * W[i, c]
            norms2[c] = s2
        r = k + 1
    return Q[:, :r].copy(), R[:r].copy(), piv, r


def _loop_mgs_project(Q, B):
    """`_mgs_project` written out (B overwritten): one q at a time, B updated in between."""
    m, r = Q.shape
    C = np.zeros((r, B.shape[1]))
    for k in range(r):
        for c in range(B.shape[1]):
            s = 0.0
            for i in range(m):
                s += Q[i, k] * B[i, c]
            C[k, c] = s
            for i in range(m):
                B[i, c] -= Q[i, k] * s
    return C


def _loop_factor_qt(X, rcond, mgs, B):
    """Column-pivoted QR of X (MGS or Householder) and ``Q1^T B``: returns (R, piv, r, Q1^T B)."""
    if mgs:
        Q, R, piv, r = _loop_mgs_qr(X, rcond)
        return R, piv, r, _loop_mgs_project(Q, B.copy())
    R, V, tau, piv = _loop_hh_qr(X, True)
    r = _loop_rank(R, rcond)
    return R, piv, r, _loop_hh_apply_qt(V, tau, B.copy())[:r]


def _loop_ls_min_norm(A, rcond, mgs):
    """`_ls_min_norm` written out (seed 002 eqs 15–18), Householder or MGS factor."""
    m, n = A.shape
    X = np.zeros((n, m))
    if m == 0 or n == 0:
        return X
    R, piv, r, QtI = _loop_factor_qt(A, rcond, mgs, np.eye(m))
    if r == 0:
        return X
    Y = _loop_solve_upper(R, QtI, r)
    for i in range(r):
        for c in range(m):
            X[piv[i], c] = Y[i, c]
    if r < n:
        W = np.zeros((n, n - r))
        T = _loop_solve_upper(R, R[:, r:], r)
        for i in range(r):
            for c in range(n - r):
                W[piv[i], c] = -T[i, c]
        for c in range(n - r):
            W[piv[r + c], c] = 1.0
        Rw, pw, rw, QtX = _loop_factor_qt(W, 0.0, mgs, X)
        Yw = _loop_solve_upper(Rw, QtX, rw)
        coef = np.zeros((n - r, m))
        for i in range(rw):
            for c in range(m):
                coef[pw[i], c] = Yw[i, c]
        Wc = np.empty((n, m))
        matmul(W, coef, Wc)
        for i in range(n):
            for c in range(m):
                X[i, c] -= Wc[i, c]
    return X


def _loop_pinv_householder(A, rcond):
    return _loop_ls_min_norm(A, rcond, False)


def _loop_pinv_mgs(A, rcond):
    return _loop_ls_min_norm(A, rcond, True)


#: kernel names in dependency order (callees first), compiled together by `compiled_pinv`
_LOOP_KERNELS = (
    '_loop_column_sq',
    '_loop_swap_columns',
    '_loop_hh_qr',
    '_loop_hh_apply_qt',
    '_loop_hh_q1',
    '_loop_rank',
    '_loop_solve_upper',
    '_loop_mgs_qr',
    '_loop_mgs_project',
    '_loop_factor_qt',
    '_loop_ls_min_norm',
    '_loop_pinv_svd',
    '_loop_pinv_varga',
    '_loop_pinv_greville',
    '_loop_pinv_householder',
    '_loop_pinv_mgs',
)
_LOOP_METHODS = {
    'svd': '_loop_pinv_svd',
    'varga': '_loop_pinv_varga',
    'greville': '_loop_pinv_greville',
    'householder': '_loop_pinv_householder',
    'mgs': '_loop_pinv_mgs',
}


@cache
def compiled_kernels():
    """The loop kernels compiled by numba (``cache=True``), by name; None without numba. Built once, on first use.

    Each kernel is compiled from a copy of its function whose globals are a private table: the module's
    names, with every loop kernel replaced by its compiled dispatcher, so compiled callers call compiled
    callees (numba resolves a callee's global name at compile time). The module's own functions stay
    plain Python (``compiled_pinv(name, jit=False)``)."""
    try:
        from numba import njit
    except ImportError:  # pragma: no cover - numba is optional
        return None
    table = dict(globals())
    for nm in _LOOP_KERNELS:  # callees first: each finds its callees compiled in `table`
        f = _LOOP_PYTHON[nm]
        twin = FunctionType(f.__code__, table, f.__name__, f.__defaults__, f.__closure__)
        twin.__qualname__, twin.__module__, twin.__doc__ = f.__qualname__, f.__module__, f.__doc__
        table[nm] = njit(cache=True)(twin)
    return {nm: table[nm] for nm in _LOOP_KERNELS}


def compiled_pinv(name, *, jit=True):
    """The compiled twin of Moore–Penrose method `name`: ``f(A, rcond) -> A^+`` (A float64, C order).

    With numba installed (and ``jit``) the loop kernels are compiled on first use
    (``cache=True``: later processes load them; see :func:`compiled_kernels`) and the returned dispatcher
    can also be passed as an argument to other numba functions. Without numba, or ``jit=False``, the
    same loops run as plain Python (slow; for tests of the arithmetic).
    """
    try:
        kernel = _LOOP_METHODS[name]
    except KeyError:
        raise ValueError(f'no compiled twin for {name!r}; choose one of {sorted(_LOOP_METHODS)}') from None
    compiled = compiled_kernels() if jit else None
    return compiled[kernel] if compiled is not None else _LOOP_PYTHON[kernel]


_LOOP_PYTHON = {nm: globals()[nm] for nm in _LOOP_KERNELS}
