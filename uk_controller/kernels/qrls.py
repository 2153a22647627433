"""Compiled Householder QR least squares (numba) for the null-space term's fast path.

:func:`uk_controller.kernels.servo.null_space_step` solves ``min |Y z - d|`` (minimum norm) for a tall
Y = X Z of small size. The SVD (one-sided Jacobi) decides the rank by ``s_k > cut``; when a rank-revealing
QR *proves* which singular values pass that rule, the same minimum-norm solution comes from triangular
factors at a fraction of the cost (Golub & Van Loan, Matrix Computations, 4th ed., sections 5.2 and
5.4: Householder QR with column pivoting, the complete orthogonal decomposition). The proof:

    Y P = Q [R11 R12; 0 R22]         R11 (r x r) upper triangular, P a permutation
    s_r(Y)     >= s_min(R11) = 1 / |R11^{-1}|_2 >= 1 / |R11^{-1}|_F   (R11 is a block of R: its singular
                                                                      values interlace below R's)
    s_{r+1}(Y) <= |R22|_2 <= |R22|_F                                   (Weyl: [R11 R12; 0 0] has rank r)

so ``1 / |R11^{-1}|_F > cut >= |R22|_F`` (each with a round-off margin) means the SVD rule keeps exactly r.
Then ``z = P W^T [T^{-1} (Q^T d)_{1..r}; 0]`` with ``[R11 R12] = [T 0] W`` (W orthogonal, r Householder
reflections from the right) is the minimum-norm least-squares solution of the rank-r matrix
``Q [R11 R12; 0 0] P^T``, which is within |R22| of Y, as the SVD's truncated matrix is.

Layouts: a matrix A (m x k) is given as its transpose AT (k x m), so that a column of A is a contiguous row.
NumPy references in the tests: ``numpy.linalg.lstsq`` / ``svd`` and ``uk.redundancy_effort``
(test/test_null_space_qr.py).
"""

from __future__ import annotations

import numpy as np

from .jit import njit


@njit(cache=True, inline='always')
def householder(x0, ss):
    """The Householder reflector ``H = I - beta v v^T`` with ``H x = alpha e_1`` of a vector x with first
    entry x0 and squared norm ``ss > 0``: ``alpha = -sign(x_0) |x|`` (no cancellation in ``v_0 = x_0 -
    alpha``; v's other entries are x's), ``beta = 2 / v^T v = 1 / (|x| (|x| + |x_0|))``. Returns
    ``(alpha, v_0, beta)``. The one formula of this module."""
    nx = np.sqrt(ss)
    alpha = -nx if x0 >= 0.0 else nx
    return alpha, x0 - alpha, 1.0 / (nx * (nx + abs(x0)))


@njit(cache=True, inline='always')
def reflector_row(A, j, s):
    """:func:`householder` of x = ``A[j, s:]``, v written over x. Returns ``(alpha, beta)``; ``(0, 0)``
    (H = I) when x = 0. (Indices, not slices: a slice costs numba an atomic reference count increment
    and decrement.)"""
    ss = 0.0
    for i in range(s, A.shape[1]):
        ss += A[j, i] * A[j, i]
    if ss == 0.0:
        return 0.0, 0.0
    alpha, v0, beta = householder(A[j, s], ss)
    A[j, s] = v0
    return alpha, beta


@njit(cache=True, inline='always')
def reflect_row(V, j, s, beta, B, c):
    """``B[c, s:] <- (I - beta v v^T) B[c, s:]`` with ``v = V[j, s:]`` (B's row at least as long as V's)."""
    acc = 0.0
    for i in range(s, V.shape[1]):
        acc += V[j, i] * B[c, i]
    acc *= beta
    for i in range(s, V.shape[1]):
        B[c, i] -= acc * V[j, i]


@njit(cache=True, inline='always')
def reflect_vec(V, j, s, beta, y):
    """``y[s:] <- (I - beta v v^T) y[s:]`` with ``v = V[j, s:]`` (y at least as long as V's rows)."""
    acc = 0.0
    for i in range(s, V.shape[1]):
        acc += V[j, i] * y[i]
    acc *= beta
    for i in range(s, V.shape[1]):
        y[i] -= acc * V[j, i]


@njit(cache=True)
def qr_pivoted_rows(AT, d, rdiag, beta, perm, nrm, tiny):
    """Householder QR with column pivoting of A (m x k), given as AT = A^T (k x m): ``A P = Q R``.

    Step j moves the trailing column of largest norm to position j (Businger & Golub), reflects it onto
    ``R_jj e_j`` and applies the reflection to the later columns and to d (``d <- Q^T d``). It stops at the
    first step j whose trailing block ``R22`` (rows and columns >= j) has ``|R22|_F <= tiny``, or at
    min(m, k). On return, with r the step reached: ``rdiag[i] = R_ii`` and ``AT[c, i] = R_ic`` (c > i) for
    i < r, the reflector v_i in ``AT[i, i:]`` with ``beta[i]``, ``perm[j]`` the original index of the column
    at position j; the columns >= r of AT hold R22 in ``AT[c, r:]``. Returns ``(r, |R22|_F^2)``.

    The trailing norms (``nrm``, k) are summed afresh from the updated entries in the loop that applies
    each reflection (not downdated: the stopping test compares them with a round-off sized tiny), and
    the reflector of step j takes its norm from them."""
    k, m = AT.shape
    for c in range(k):
        perm[c] = c
        acc = 0.0
        for i in range(m):
            acc += AT[c, i] * AT[c, i]
        nrm[c] = acc
    for j in range(min(k, m)):
        total = 0.0
        best = j
        for c in range(j, k):
            total += nrm[c]
            if nrm[c] > nrm[best]:
                best = c
        if not total > tiny * tiny:
            return j, total
        if best != j:
            for i in range(m):
                t = AT[j, i]
                AT[j, i] = AT[best, i]
                AT[best, i] = t
            t = perm[j]
            perm[j] = perm[best]
            perm[best] = t
            t = nrm[j]
            nrm[j] = nrm[best]
            nrm[best] = t
        # the reflector of x = AT[j, j:], |x|^2 = nrm[j] > 0
        alpha, v0, b = householder(AT[j, j], nrm[j])
        AT[j, j] = v0
        rdiag[j] = alpha
        beta[j] = b
        for c in range(j + 1, k):
            acc = 0.0
            for i in range(j, m):
                acc += AT[j, i] * AT[c, i]
            acc *= b
            AT[c, j] -= acc * AT[j, j]
            sq = 0.0
            for i in range(j + 1, m):
                AT[c, i] -= acc * AT[j, i]
                sq += AT[c, i] * AT[c, i]
            nrm[c] = sq
        reflect_vec(AT, j, j, b, d)
    return min(k, m), 0.0


@njit(cache=True)
def inverse_frobenius(AT, rdiag, r, x):
    """``|R11^{-1}|_F`` for the r x r upper triangle R11 left by :func:`qr_pivoted_rows` (diagonal in
    rdiag, ``R_ic = AT[c, i]``): each column of R11^{-1} by back substitution into x (r^3 / 6 multiplies).
    ``1 / |R11^{-1}|_F <= 1 / |R11^{-1}|_2 = s_min(R11)``: a lower bound of the smallest singular value."""
    total = 0.0
    for j in range(r):
        x[j] = 1.0 / rdiag[j]
        total += x[j] * x[j]
        for i in range(j - 1, -1, -1):
            acc = 0.0
            for c in range(i + 1, j + 1):
                acc += AT[c, i] * x[c]
            x[i] = -acc / rdiag[i]
            total += x[i] * x[i]
    return np.sqrt(total)


@njit(cache=True)
def min_norm_solve(AT, rdiag, perm, r, d, T, g, w, z):
    """The minimum-norm solution z (k) of ``[R11 R12] P^T z = d[:r]`` from :func:`qr_pivoted_rows`' factors.

    ``T`` (r x k scratch) takes ``[R11 R12]``; for i = r-1 .. 0 a reflection from the right on the entries
    (i, r..k-1) of row i zeroes its R12 part (rows below i have none left, columns i+1..r-1 are untouched,
    so T stays upper triangular): ``[R11 R12] = [T 0] W``, ``W = H_0 ... H_{r-1}``; the reflector of row i
    is ``(g[i], T[i, r:])`` with beta (:func:`householder`) in w[i] (no extra storage when r = k). Then
    ``u = [T^{-1} d; 0]`` by back substitution, ``x = W^T u = H_{r-1} ... H_0 u`` and ``z[perm[c]] = x[c]``.
    Scratch: T, g (r), w (r); d (length >= k) is overwritten (u, then x)."""
    k = AT.shape[0]
    for i in range(r):
        for c in range(i):
            T[i, c] = 0.0
        T[i, i] = rdiag[i]
        for c in range(i + 1, k):
            T[i, c] = AT[c, i]
    if r < k:
        for i in range(r - 1, -1, -1):
            # x = (T[i, i], T[i, r:]): a reflector of k - r + 1 entries, v_0 in g[i], the rest over T[i, r:]
            x0 = T[i, i]
            ss = x0 * x0
            for c in range(r, k):
                ss += T[i, c] * T[i, c]
            if ss == 0.0:
                g[i] = 0.0
                w[i] = 0.0
                continue
            alpha, v0, b = householder(x0, ss)
            g[i] = v0
            w[i] = b
            T[i, i] = alpha
            for ii in range(i):  # rows above: columns i and r..k-1 mixed
                s = T[ii, i] * v0
                for c in range(r, k):
                    s += T[ii, c] * T[i, c]
                s *= b
                T[ii, i] -= s * v0
                for c in range(r, k):
                    T[ii, c] -= s * T[i, c]
    # u = T^{-1} d[:r] (in d), u_{r..k-1} = 0
    for i in range(r - 1, -1, -1):
        acc = d[i]
        for c in range(i + 1, r):
            acc -= T[i, c] * d[c]
        d[i] = acc / T[i, i]
    for c in range(r, k):
        d[c] = 0.0
    if r < k:
        for i in range(r):
            v0 = g[i]
            b = w[i]
            s = d[i] * v0
            for c in range(r, k):
                s += d[c] * T[i, c]
            s *= b
            d[i] -= s * v0
            for c in range(r, k):
                d[c] -= s * T[i, c]
    for c in range(k):
        z[int(perm[c])] = d[c]
