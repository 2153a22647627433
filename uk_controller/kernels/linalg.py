"""Compiled dense linear algebra for the small matrices of a robot (numba): Cholesky, one-sided Jacobi, views.

NumPy/LAPACK references: ``numpy.linalg.cholesky`` / LAPACK ``posv`` (as used by
:class:`uk_controller.core.uk.ServoSolver`'s NumPy backend) for :func:`cholesky_lower` and the solves, and
``numpy.linalg.svd`` / ``eigh`` for :func:`jacobi_columns` (Hestenes' one-sided Jacobi: exact to round-off
and cheap for the few rows a robot has; LAPACK's ``gesdd``/``syevd`` cost microseconds of set-up on 4 x 4
matrices; the one Jacobi SVD of the package: the servo solve's and the pseudo-inverse SVD twin's,
:mod:`uk_controller.core.pinv.compiled`; :func:`jacobi_rows` runs its rotations on the transpose, bit for bit, for
the null-space term; :func:`jacobi_columns_rhs` is its variant without V, the rotations applied to a
right-hand side, for the servo solve's ``(C B)^+ b`` when C B is wide). Tests:
``test/test_uk_fast.py::test_jacobi_svd_matches_lapack``, ``test/test_uk_fast.py::test_jacobi_rhs_is_an_svd_solve``,
``test/test_uk_fast.py::test_jacobi_rows_and_blocked_solves_match_their_column_forms``,
``test/test_pinv.py::test_jacobi_kernel_is_an_svd`` and, through the servo solve,
``test_servo_solver_equals_servo_control``.

The ``scratch_*`` helpers carve views out of one preallocated scratch array, so the kernels above them
allocate nothing per call.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .jit import contiguous, njit

EPS = np.finfo(float).eps


@njit(cache=True, fastmath=False)
def cholesky_lower(M, L):
    """``L L^T = M`` (L lower) from the lower triangle of M. False if M is not positive definite."""
    n = M.shape[0]
    for j in range(n):
        s = M[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:
            return False
        d = np.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, n):
            s = M[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / d
        for i in range(j):
            L[i, j] = 0.0
    return True


@njit(cache=True)
def chol_solve_col(L, x):
    """In place ``x <- (L L^T)^{-1} x`` for a vector x."""
    n = L.shape[0]
    for i in range(n):
        s = x[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]


@njit(cache=True)
def chol_solve_cols(L, X, out):
    """``out <- (L L^T)^{-1} X`` (out must not overlap X): :func:`chol_solve_col` on every column at once.

    Each entry sees the same operations in the same order as chol_solve_col on its column (so the same bits);
    running over the columns innermost gives the CPU p independent chains (and contiguous rows of out) instead
    of one chain of 2 n^2 dependent steps per column."""
    n = L.shape[0]
    p = X.shape[1]
    for i in range(n):
        for j in range(p):
            out[i, j] = X[i, j]
    for i in range(n):
        for k in range(i):
            lik = L[i, k]
            for j in range(p):
                out[i, j] -= lik * out[k, j]
        d = L[i, i]
        for j in range(p):
            out[i, j] = out[i, j] / d
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            lki = L[k, i]
            for j in range(p):
                out[i, j] -= lki * out[k, j]
        d = L[i, i]
        for j in range(p):
            out[i, j] = out[i, j] / d


@njit(cache=True, inline='always')
def jacobi_rotation(alpha, beta, gamma):
    """``(rotate, cos, sin)``: the plane rotation of one Hestenes pair with squared norms alpha, beta and inner
    product gamma, ``zeta = (beta - alpha) / 2 gamma``, ``t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2))``,
    ``cos = 1 / sqrt(1 + t^2)``, ``sin = cos t`` (Rutishauser's formula); rotate is False (and the rotation
    the identity) when the pair is already orthogonal to working precision, ``|gamma| <= eps sqrt(alpha beta)``.
    The one formula of :func:`jacobi_columns` and :func:`jacobi_rows` (inlined: their rotations are the same
    bits)."""
    if gamma == 0.0 or abs(gamma) <= EPS * np.sqrt(alpha * beta):
        return False, 1.0, 0.0
    zeta = (beta - alpha) / (2.0 * gamma)
    t = (1.0 if zeta >= 0.0 else -1.0) / (abs(zeta) + np.sqrt(1.0 + zeta * zeta))
    cs = 1.0 / np.sqrt(1.0 + t * t)
    return True, cs, cs * t


@njit(cache=True)
def jacobi_columns(W, V, max_sweeps):
    """One-sided Jacobi: rotate the columns of W (r x c) until mutually orthogonal.

    On return ``W_in = W V^T`` with V (c x c) orthogonal; the singular values
    of W_in are the column norms of W, the right singular vectors the columns
    of V (Hestenes' method; relative accuracy of a few eps). Callers rotate
    ``c <= r`` columns (the servo solve, :func:`uk_controller.core.pinv.compiled_pinv`'s
    SVD twin, which transposes a wide matrix): with more columns than rows the
    round-off columns of a rank-deficient W may rotate until max_sweeps.
    Returns the number of sweeps.
    """
    # the sweeps of jacobi_rows on the transposed views: the same operations on the same entries in the same
    # order (so the same bits), with one copy of the loops
    return jacobi_rows(W.T, V.T, max_sweeps)


@njit(cache=True, inline='always')
def pair_products(WT, i, j):
    """``(alpha, beta, gamma) = (|w_i|^2, |w_j|^2, w_i . w_j)`` of the rows i and j of WT, summed in index
    order: the pair of one Hestenes rotation (:func:`jacobi_rows`, :func:`jacobi_rows_rhs`)."""
    alpha = 0.0
    beta = 0.0
    gamma = 0.0
    for k in range(WT.shape[1]):
        wi = WT[i, k]
        wj = WT[j, k]
        alpha += wi * wi
        beta += wj * wj
        gamma += wi * wj
    return alpha, beta, gamma


@njit(cache=True, inline='always')
def rotate_pair(WT, i, j, cs, sn):
    """Rows i and j of WT <- ``(cs w_i - sn w_j, sn w_i + cs w_j)``: one plane rotation applied."""
    for k in range(WT.shape[1]):
        wi = WT[i, k]
        wj = WT[j, k]
        WT[i, k] = cs * wi - sn * wj
        WT[j, k] = sn * wi + cs * wj


@njit(cache=True)
def jacobi_columns_rhs(W, y, max_sweeps):
    """:func:`jacobi_columns` without V: the same Hestenes sweeps on the columns of W (r x c), each rotation
    applied to the c-vector y instead of accumulated into V, so that on return ``y <- V^T y_in``.

    For a least-squares solve that needs V only through ``V^T b`` (the servo solve's ``(C B)^+ b`` when
    C B has no more rows than columns: W = (C B)^T, ``u = sum_k W_k (V^T b)_k / s_k^2``, seed 004 eq 35):
    4 flops per rotation instead of 4 c. The pair test ``|gamma| <= eps sqrt(alpha beta)`` is taken
    squared (no square root) and the rotation from ``d = beta - alpha`` and ``g = 2 gamma`` (Rutishauser's
    ``t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2))``, ``zeta = d / g``; with ``w = |zeta| + sqrt(1 + zeta^2)``
    and ``h = sqrt(1 + zeta^2)``: ``1 + t^2 = 2 h / w``, so ``cos = sqrt(w / (2 h))``,
    ``sin = sign(zeta) / sqrt(2 h w)``, the two square roots independent). Same rotations as jacobi_columns
    up to round-off (not the same bits). Test: ``test/test_uk_fast.py::test_jacobi_rhs_is_an_svd_solve``.
    Returns the number of sweeps."""
    # the sweeps of jacobi_rows_rhs on the transposed view: the same operations in the same order (same bits)
    return jacobi_rows_rhs(W.T, y, max_sweeps)


@njit(cache=True)
def jacobi_rows_rhs(WT, y, max_sweeps):
    """:func:`jacobi_columns_rhs` on the transpose: the rows of WT (c x r) rotated, each rotation applied to
    the c-vector y (see there for the rotation formula). Returns the number of sweeps."""
    c = WT.shape[0]
    eps2 = EPS * EPS
    for sweep in range(max_sweeps):
        rotated = False
        for i in range(c - 1):
            for j in range(i + 1, c):
                alpha, beta, gamma = pair_products(WT, i, j)
                if gamma == 0.0 or gamma * gamma <= eps2 * (alpha * beta):
                    continue
                rotated = True
                zeta = (beta - alpha) / (2.0 * gamma)
                sg = 1.0 if zeta >= 0.0 else -1.0
                if abs(zeta) < 1e100:
                    h = np.sqrt(1.0 + zeta * zeta)
                    w = abs(zeta) + h
                    cs = np.sqrt(w / (2.0 * h))
                    sn = sg / np.sqrt(2.0 * h * w)
                else:  # 2 h w would overflow: t = 1 / (2 |zeta|) to working precision
                    cs = 1.0
                    sn = sg * (0.5 / abs(zeta))
                rotate_pair(WT, i, j, cs, sn)
                yi = y[i]
                yj = y[j]
                y[i] = cs * yi - sn * yj
                y[j] = sn * yi + cs * yj
        if not rotated:
            return sweep + 1
    return max_sweeps


@njit(cache=True)
def jacobi_rows(WT, VT, max_sweeps):
    """:func:`jacobi_columns` on the transpose: rotate the ROWS of WT (c x r) until mutually orthogonal.

    WT holds W^T (row i = column i of W) and VT returns V^T; the same rotations in the same order, each
    entry computed by the same operations, so ``jacobi_rows(W.T.copy(), VT)`` gives exactly the bits of
    ``jacobi_columns(W, V)`` with ``VT = V.T``. Rows are contiguous: the dot products and rotations read
    and write consecutive memory (the null-space SVD of :func:`uk_controller.kernels.servo.null_space_step`).
    Returns the number of sweeps."""
    c = WT.shape[0]
    for i in range(c):
        for j in range(c):
            VT[i, j] = 1.0 if i == j else 0.0
    for sweep in range(max_sweeps):
        rotated = False
        for i in range(c - 1):
            for j in range(i + 1, c):
                alpha, beta, gamma = pair_products(WT, i, j)
                rotate, cs, sn = jacobi_rotation(alpha, beta, gamma)
                if not rotate:
                    continue
                rotated = True
                rotate_pair(WT, i, j, cs, sn)
                rotate_pair(VT, i, j, cs, sn)
        if not rotated:
            return sweep + 1
    return max_sweeps


@njit(cache=True)
def row_norms(WT, s):
    """The row norms of WT (c x r) into s (the column norms of W = WT^T); returns the largest."""
    c, r = WT.shape
    smax = 0.0
    for j in range(c):
        acc = 0.0
        for k in range(r):
            acc += WT[j, k] * WT[j, k]
        s[j] = np.sqrt(acc)
        if s[j] > smax:
            smax = s[j]
    return smax


@njit(cache=True)
def column_norms(W, s):
    """The column norms of W (r x c) into s; returns the largest. :func:`row_norms` on the transposed view
    (the same sums in the same order)."""
    return row_norms(W.T, s)


@njit(cache=True)
def scratch_vec(sc, o, k):
    """The k entries of the scratch array sc from offset o, and the offset after them."""
    return sc[o : o + k], o + k


@njit(cache=True)
def scratch_mat(sc, o, r, c):
    """An (r, c) view of the scratch array sc from offset o, and the offset after it."""
    return sc[o : o + r * c].reshape((r, c)), o + r * c


@njit(cache=True)
def matmul(A, B, C):
    """``C = A B`` (each entry summed in index order)."""
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            acc = 0.0
            for k in range(A.shape[1]):
                acc += A[i, k] * B[k, j]
            C[i, j] = acc


@njit(cache=True)
def scratch_rows(sc, o, r, c):
    """The (r, c) block of the 2-D scratch array sc from row o, and the row after it (a slice: no reshape,
    which costs ~60 ns per call in numba)."""
    return sc[o : o + r, :c], o + r


@njit(cache=True)
def scratch_row(sc, o, k):
    """The first k entries of row o of the 2-D scratch array sc, and the row after it."""
    return sc[o, :k], o + 1


@njit(cache=True)
def view2(a, o, r, c):
    """The (r, c) row-major view of the 1-D contiguous float64 array a from offset o: what
    ``a[o:o + r * c].reshape((r, c))`` gives, without reshape's run-time helper call (~15 ns each in numba),
    typed C-contiguous like the arrays callers pass (:func:`.jit.contiguous`: one compiled version of the
    kernels it is passed to)."""
    return contiguous(as_strided(a[o : o + r * c], shape=(r, c), strides=(8 * c, 8)))


@njit(cache=True)
def view3(a, o, k, r, c):
    """The (k, r, c) row-major view of a from offset o (``a[o:o + k * r * c].reshape((k, r, c))``, see view2)."""
    return contiguous(as_strided(a[o : o + k * r * c], shape=(k, r, c), strides=(8 * r * c, 8 * c, 8)))
