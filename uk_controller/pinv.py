"""Moore–Penrose pseudo-inverse methods (seed 002), each with an explicit rank tolerance.

Every method has the signature ``pinv_xxx(A, rcond) -> A^+`` where ``rcond``
is relative to the largest singular value (or the largest pivot / column norm
for the QR-based methods, as each docstring says). `PINV_METHODS` maps the
names used in config files (``control.pinv``) to the functions.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import qr, solve_triangular

DEFAULT_RCOND = 1e-10


def pinv_svd(A, rcond=DEFAULT_RCOND):
    """Pseudo-inverse by singular value decomposition (seed 002, SVD method).

    ``A = U S V^T``, ``A^+ = V S^+ U^T`` with singular values below
    ``rcond * s_max`` treated as zero.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    if A.size == 0:
        return np.zeros(A.T.shape)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    keep = s > rcond * s[0] if s[0] > 0 else np.zeros_like(s, dtype=bool)
    return (Vt[keep].T / s[keep]) @ U[:, keep].T


def pinv_damped(A, rcond=DEFAULT_RCOND, damping=1e-6):
    """Damped least-squares inverse ``A^T (A A^T + lambda^2 I)^{-1}``.

    Not a Moore–Penrose inverse: it trades exactness for bounded output near
    singular configurations (control use). ``damping`` is lambda relative to
    the largest singular value; ``rcond`` is accepted for a uniform signature.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return np.zeros(A.T.shape)
    lam2 = (damping * s[0]) ** 2
    return (Vt.T * (s / (s * s + lam2))) @ U.T


# ------------------------------------------------------------------ helpers (QR based)


def _qr_rank(R_diag, rcond):
    """Numerical rank from the diagonal of a column-pivoted triangular factor.

    Pivoting makes ``|R_00| >= |R_11| >= ...``; ``|R_kk|`` is taken as zero when
    it is at most ``rcond * |R_00|`` (the pivot analogue of ``rcond * s_max``).
    """
    d = np.abs(R_diag)
    if d.size == 0 or d[0] == 0.0:
        return 0
    return int(np.sum(d > rcond * d[0]))


def _solve_upper(R, B):
    return solve_triangular(R, B, lower=False, check_finite=False)


def _mgs_pivoted(A, rcond):
    """Modified Gram–Schmidt QR with column pivoting, ``A[:, piv] = Q R``.

    Returns ``Q`` (m x r, orthonormal columns), ``R`` (r x n, upper
    trapezoidal in pivoted order), ``piv`` and the rank r. At step k the
    remaining column of largest norm becomes column k; the step stops when
    that norm is at most ``rcond`` times the first pivot (Golub & Van Loan
    §5.2.8 and §5.4.1). Modified (not classical) Gram–Schmidt: each new q_k
    is removed from all remaining columns at once.
    """
    W = np.array(A, dtype=float, copy=True)
    m, n = W.shape
    piv = np.arange(n)
    kmax = min(m, n)
    Q = np.zeros((m, kmax))
    R = np.zeros((kmax, n))
    norms2 = np.einsum('ij,ij->j', W, W)
    first = None
    r = 0
    for k in range(kmax):
        j = k + int(np.argmax(norms2[k:]))
        if j != k:
            W[:, [k, j]] = W[:, [j, k]]
            R[:k, [k, j]] = R[:k, [j, k]]
            norms2[[k, j]] = norms2[[j, k]]
            piv[[k, j]] = piv[[j, k]]
        rkk = float(np.linalg.norm(W[:, k]))     # recomputed: the running norms only pick the pivot
        if first is None:
            first = rkk
        if rkk == 0.0 or rkk <= rcond * first:
            break
        q = W[:, k] / rkk
        Q[:, k] = q
        R[k, k] = rkk
        if k + 1 < n:
            row = q @ W[:, k + 1:]
            R[k, k + 1:] = row
            W[:, k + 1:] -= np.outer(q, row)
            norms2[k + 1:] = np.einsum('ij,ij->j', W[:, k + 1:], W[:, k + 1:])
        r = k + 1
    return Q[:, :r], R[:r], piv, r


def _mgs_project(Q, B):
    """``Q^T B`` the modified Gram–Schmidt way: one q at a time, B updated in between.

    This is Björck's stable use of MGS for least squares (the right-hand side
    is treated as an extra column), not the classical ``Q.T @ B``.
    """
    B = np.array(B, dtype=float, copy=True)
    C = np.empty((Q.shape[1], B.shape[1]))
    for k in range(Q.shape[1]):
        q = Q[:, k]
        C[k] = q @ B
        B -= np.outer(q, C[k])
    return C


def _ls_min_norm(A, rcond, factor):
    """Minimum-norm least-squares solutions of ``A x_j = e_j`` for j = 1..m (seed 002 eqs 15–18).

    ``factor(X, rcond) -> (Qfun, R, piv, r)`` is a column-pivoted QR of X where
    ``Qfun(B)`` returns ``Q1^T B`` for the first r orthonormal columns.

    1. Basic solutions (Golub & Van Loan §5.5.5): with ``A P = Q [R11 R12; 0 0]``,
       ``x_B = P [R11^{-1} Q1^T e_j; 0]`` minimises ``||A x - e_j||``.
    2. If r < n the basic solution is not the shortest one: its component in
       null(A), spanned by the columns of ``W = P [-R11^{-1} R12; I]``, is
       removed by a second least-squares problem ``min ||W y - x_B||``
       (W has full column rank, same QR kind), ``x = x_B - W y``.

    The columns x_j form ``A^+`` (seed 002 eq 17). For full-column-rank tall A
    step 1 is the QR solution of the normal equations eq 16 without forming
    ``A^T A``; for wide A step 2 gives the minimum-norm solution that eq 18
    defines.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    m, n = A.shape
    if A.size == 0:
        return np.zeros((n, m))
    Qt, R, piv, r = factor(A, rcond)
    X = np.zeros((n, m))
    if r == 0:
        return X
    R11 = R[:r, :r]
    Y = _solve_upper(R11, Qt(np.eye(m)))          # r x m
    X[piv[:r]] = Y
    if r < n:
        W = np.zeros((n, n - r))
        W[piv[:r]] = -_solve_upper(R11, R[:r, r:])
        W[piv[r:]] = np.eye(n - r)
        Qw, Rw, pw, rw = factor(W, 0.0)
        coef = np.zeros((n - r, m))
        coef[pw[:rw]] = _solve_upper(Rw[:rw, :rw], Qw(X))
        X -= W @ coef
    return X


def _householder_factor(A, rcond):
    Q, R, piv = qr(A, mode='economic', pivoting=True, check_finite=False)
    r = _qr_rank(np.diag(R), rcond)
    Q1 = Q[:, :r]
    return (lambda B: Q1.T @ B), R, piv, r


def _mgs_factor(A, rcond):
    Q, R, piv, r = _mgs_pivoted(A, rcond)
    return (lambda B: _mgs_project(Q, B)), R, piv, r


# ------------------------------------------------------------------------ methods


def pinv_varga(A, rcond=DEFAULT_RCOND):
    """Pseudo-inverse by Varga's method: two QR factorizations (seed 002 eqs 20–21).

    1. Householder QR of A with column pivoting, ``A P = U [R1; 0]``; the rank
       r is the number of pivots ``|R1_kk| > rcond * |R1_00|``, and
       ``G1 = R1[:r] P^T`` (r x n, full row rank) gives ``A = U1 G1``.
    2. QR of ``G1^T = V1 G2^T`` (seed 002 eq 20; ``G2^T`` r x r invertible).
    3. ``A = U1 G2 V1^T`` so ``A^+ = V1 G2^{-1} U1^T`` (seed 002 eq 21), with
       ``G2 = (G2^T)^T`` lower triangular: one triangular solve.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    m, n = A.shape
    if A.size == 0:
        return np.zeros((n, m))
    U, R1, piv = qr(A, mode='economic', pivoting=True, check_finite=False)
    r = _qr_rank(np.diag(R1), rcond)
    if r == 0:
        return np.zeros((n, m))
    G1 = np.empty((r, n))
    G1[:, piv] = R1[:r]
    V1, G2T = qr(G1.T, mode='economic', check_finite=False)     # n x r, r x r upper
    # A^+ = V1 (G2T^T)^{-1} U1^T = V1 (G2T^{-T} U1^T) : solve G2T^T Z = U1^T
    Z = solve_triangular(G2T, U[:, :r].T, trans='T', lower=False, check_finite=False)
    return V1 @ Z


def pinv_greville(A, rcond=DEFAULT_RCOND):
    """Pseudo-inverse by Greville's recursion, one row at a time (seed 002 eq 22 ff.).

    With ``A_i = [A_{i-1}; a_i]`` (eq 22), ``d_i = a_i A_{i-1}^+``,
    ``c_i = a_i - d_i A_{i-1}`` (the part of row a_i outside the row space so far),

        b_i = c_i / (c_i c_i^T)                         if ||c_i|| != 0
        b_i = d_i (A_{i-1}^+)^T / (1 + d_i d_i^T)         if ||c_i|| == 0
        A_i^+ = [A_{i-1}^+ - b_i^T d_i ,  b_i^T]

    starting from ``A_1^+ = a_1^T / (a_1 a_1^T)`` (or 0 for a zero row). The
    seed prints the second case as ``d_i A_{i-1}^+``; the transpose written
    here is what makes the dimensions (1 x n) agree (Greville's column form
    applied to A^T). ``d_i`` and ``c_i`` are computed with one refinement step (the
    projection applied to the residual a second time, "twice is enough"): the formulas
    as printed leave round-off of order ``eps * cond(A_{i-1})^2`` in ``c_i``, and a dependent
    row is then taken as independent (its tiny c_i inverted) once cond(A) exceeds about
    100 at rcond = 1e-12; with the step the Penrose residuals stay near ``eps * cond^2``.
    Rank decision: ``||c_i||`` (and ``||a_1||``) count as zero
    when at most ``rcond * ||A||_F`` (the Frobenius norm bounds ``s_max`` within
    a factor sqrt(rank)). The recursion has no pivoting, so this test is not
    rank revealing: a row whose residual exceeds the tolerance is kept even
    when A is close to a matrix of lower rank. It separates exact (round-off
    level) dependence reliably; do not use it to truncate moderate singular values.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    m, n = A.shape
    P = np.zeros((n, m))
    if A.size == 0:
        return P
    tol = rcond * np.linalg.norm(A)
    if tol == 0.0:
        return P
    a = A[0]
    na2 = float(a @ a)
    if np.sqrt(na2) > tol:
        P[:, 0] = a / na2
    for i in range(1, m):
        a = A[i]
        Pi = P[:, :i]
        d = a @ Pi                                  # 1 x i
        c = a - d @ A[:i]                           # 1 x n
        dd = c @ Pi                                 # refinement: project the residual once more
        c -= dd @ A[:i]
        d += dd
        cc = float(c @ c)
        if np.sqrt(cc) > tol:
            b = c / cc
        else:
            b = (Pi @ d) / (1.0 + float(d @ d))
        P[:, :i] = Pi - np.outer(b, d)
        P[:, i] = b
    return P


def pinv_householder(A, rcond=DEFAULT_RCOND):
    """Pseudo-inverse by least squares with Householder QR (seed 002 eqs 15–18).

    Column j of ``A^+`` is the minimum-norm least-squares solution of
    ``A x = e_j`` (eq 17). Each is found from one Householder QR of A with
    column pivoting (LAPACK ``geqp3``), rank from the pivots
    (``|R_kk| > rcond * |R_00|``), basic solution plus a null-space
    correction (see :func:`_ls_min_norm`).
    """
    return _ls_min_norm(A, rcond, _householder_factor)


def pinv_mgs(A, rcond=DEFAULT_RCOND):
    """Pseudo-inverse by least squares with modified Gram–Schmidt QR (seed 002 eqs 15–18).

    As :func:`pinv_householder`, with the QR factor computed by modified
    Gram–Schmidt with column pivoting (written out here) and the right-hand
    sides reduced the MGS way, one orthogonal direction at a time. The rank
    tolerance is the same pivot criterion, ``|R_kk| > rcond * |R_00|``.
    """
    return _ls_min_norm(A, rcond, _mgs_factor)


# ------------------------------------------------------------- compiled twins (loops)
#
# The same five Moore–Penrose methods written as explicit loops, for numba (see
# `compiled_pinv`). The NumPy/LAPACK functions above are the reference: the
# Moore–Penrose inverse is unique, so with the same rank decision a twin must equal
# its reference to round-off (test_pinv.py checks that on random and rank-deficient
# matrices). The Householder QR here is written out (LAPACK's geqp3 is not callable
# from numba); it pivots on exactly recomputed column norms, so on near-ties its pivot
# order may differ from geqp3's, which changes the factors but not A^+. The SVD is a
# one-sided Jacobi SVD, not LAPACK's bidiagonal one: np.linalg.svd inside numba costs
# ~60 us on a 12 x 12 (gesdd plus its copies and workspace), the Jacobi loops ~20 us; the
# singular values agree to round-off and the rank rule is the same, so A^+ does too.


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


def _loop_jacobi_rows(W, k, tol, max_sweeps):
    """One-sided (Hestenes) Jacobi SVD: rotate pairs of rows of W until their first k entries are orthogonal.

    W is c x L (L >= k); whole rows are rotated, orthogonality is judged on ``W[:, :k]``, so
    entries k.. carry the accumulated rotation along (start them as I to get it). On return
    ``W = G W_in`` with G orthogonal and the rows of ``W[:, :k]`` mutually orthogonal: writing
    ``B = W_in[:, :k]``, ``B^T = W[:, :k]^T G`` is an SVD of the c columns of B^T (Hestenes 1958;
    Golub & Van Loan §8.6.4): the singular values are the row norms ``s_i`` of ``W[:, :k]``,
    the left singular vectors its rows divided by s_i, the right ones the rows of G.

    Each pair (i, j), cyclic by rows, with ``a = w_i.w_i``, ``b = w_j.w_j``, ``g = w_i.w_j``, is
    rotated by the angle that makes it orthogonal (the symmetric Schur 2 x 2 of
    ``[[a, g], [g, b]]``, ``t = tan theta = 2 g sign(b - a) / (|b - a| + sqrt((b - a)^2 + 4 g^2))``,
    ``cos theta = 1 / sqrt(1 + t^2)``, here with one division) unless ``|g| <= tol sqrt(a b)``
    already. Sweeps until one rotates nothing (all pairs orthogonal to ``tol``) or ``max_sweeps``;
    returns the number of sweeps. Rows are contiguous, so the kernel works on a transpose
    when it decomposes columns.
    """
    c, L = W.shape
    k2 = k - (k % 2)
    for sweep in range(max_sweeps):
        rotated = False
        for i in range(c - 1):
            wi = W[i]
            for j in range(i + 1, c):
                wj = W[j]
                a0 = 0.0                         # two partial sums each: shorter dependency chains
                a1 = 0.0
                b0 = 0.0
                b1 = 0.0
                g0 = 0.0
                g1 = 0.0
                for p in range(0, k2, 2):
                    x0 = wi[p]
                    y0 = wj[p]
                    x1 = wi[p + 1]
                    y1 = wj[p + 1]
                    a0 += x0 * x0
                    a1 += x1 * x1
                    b0 += y0 * y0
                    b1 += y1 * y1
                    g0 += x0 * y0
                    g1 += x1 * y1
                if k2 < k:
                    x0 = wi[k2]
                    y0 = wj[k2]
                    a0 += x0 * x0
                    b0 += y0 * y0
                    g0 += x0 * y0
                a = a0 + a1
                b = b0 + b1
                g = g0 + g1
                if g == 0.0 or abs(g) <= tol * np.sqrt(a * b):
                    continue
                rotated = True
                d = b - a
                den = abs(d) + np.sqrt(d * d + 4.0 * g * g)     # |b - a| + sqrt((b - a)^2 + 4 g^2)
                if den == 0.0:                                  # a == b and g^2 underflowed: 45 degrees
                    cs = 0.7071067811865476
                    sn = cs if g > 0.0 else -cs
                else:
                    inv = 1.0 / np.sqrt(den * den + 4.0 * g * g)
                    cs = den * inv                              # 1 / sqrt(1 + t^2), t = 2 g sign(d) / den
                    sn = 2.0 * g * inv if d >= 0.0 else -2.0 * g * inv
                for p in range(L):
                    x = wi[p]
                    y = wj[p]
                    wi[p] = cs * x - sn * y
                    wj[p] = sn * x + cs * y
        if not rotated:
            return sweep + 1
    return max_sweeps


def _loop_pinv_svd(A, rcond):
    """`pinv_svd` by a one-sided Jacobi SVD (`_loop_jacobi_rows`), with the same rank rule.

    Tall or square A (m >= n): the rows of ``[(A / c)^T | I_n]`` (c = max |a_ij|, so the Gram
    entries cannot overflow) are rotated until the first m columns have orthogonal rows,
    ``[V^T (A / c)^T | V^T]``: row i is ``[s_i u_i^T | v_i^T]`` with ``A / c = U S V^T``, and
    ``A^+ = V S^+ U^T / c = sum_i v_i u_i^T / (c s_i)`` over ``s_i > rcond * max s`` (seed 002,
    SVD method, as `pinv_svd`). Wide A: the same with the rows of A itself (an SVD of A^T;
    u and v swap roles). Only min(m, n) vectors are rotated; sweeps run until every pair is
    orthogonal to ``sqrt(k) eps`` relative (k = max(m, n)), i.e. to full precision.
    A non-finite A gives an all-NaN result.
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
    c = n if tall else m                         # vectors rotated
    k = m if tall else n                         # their length
    W = np.zeros((c, k + c))
    for i in range(m):
        for j in range(n):
            if tall:
                W[j, i] = A[i, j] * inv_scale
            else:
                W[i, j] = A[i, j] * inv_scale
    for i in range(c):
        W[i, k + i] = 1.0
    _loop_jacobi_rows(W, k, np.sqrt(k) * 2.220446049250313e-16, 60)
    s = np.empty(c)
    smax = 0.0
    for i in range(c):
        acc = 0.0
        for j in range(k):
            acc += W[i, j] * W[i, j]
        s[i] = np.sqrt(acc)
        if s[i] > smax:
            smax = s[i]
    # X += v_i u_i^T / (c s_i): tall, v_i = W[i, k:] and u_i = W[i, :k] / s_i; wide (an SVD of
    # A^T = U' S V'^T), the roles swap: the n-side vector is W[i, :k] / s_i, the m-side W[i, k:]
    n_at, m_at = (k, 0) if tall else (0, k)
    for i in range(c):
        if s[i] > rcond * smax:
            inv = 1.0 / s[i]
            for j in range(k):
                W[i, j] *= inv
            inv *= inv_scale                     # 1 / (c s_i)
            for p in range(n):
                f = W[i, n_at + p] * inv
                for q in range(m):
                    X[p, q] += f * W[i, m_at + q]
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
    U1 = _loop_hh_q1(V, tau, r)                              # m x r
    G1T = np.zeros((n, r))                                   # G1 = R1[:r] P^T, transposed
    for i in range(r):
        for c in range(n):
            G1T[piv[c], i] = R1[i, c]
    G2T, V2, tau2, _ = _loop_hh_qr(G1T, False)               # G1^T = V1 G2^T (eq 20)
    V1 = _loop_hh_q1(V2, tau2, r)                            # n x r
    # Z = G2^{-1} U1^T with G2 = (G2T)^T lower triangular: forward substitution
    Z = np.zeros((r, m))
    for c in range(m):
        for i in range(r):
            s = U1[c, i]
            for j in range(i):
                s -= G2T[j, i] * Z[j, c]
            Z[i, c] = s / G2T[i, i]
    for i in range(n):
        for c in range(m):
            s = 0.0
            for j in range(r):
                s += V1[i, j] * Z[j, c]
            X[i, c] = s
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
        for k in range(i):                                   # d = a P_{i-1}
            s = 0.0
            for j in range(n):
                s += A[i, j] * P[j, k]
            d[k] = s
        for j in range(n):                                   # c = a - d A_{i-1}
            s = A[i, j]
            for k in range(i):
                s -= d[k] * A[k, j]
            c[j] = s
        for k in range(i):                                   # refinement: project c once more
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
        for i in range(n):
            for c in range(m):
                s = 0.0
                for k in range(n - r):
                    s += W[i, k] * coef[k, c]
                X[i, c] -= s
    return X


def _loop_pinv_householder(A, rcond):
    return _loop_ls_min_norm(A, rcond, False)


def _loop_pinv_mgs(A, rcond):
    return _loop_ls_min_norm(A, rcond, True)


#: kernel names in dependency order (callees first), compiled together by `compiled_pinv`
_LOOP_KERNELS = ('_loop_column_sq', '_loop_swap_columns', '_loop_hh_qr', '_loop_hh_apply_qt', '_loop_hh_q1', '_loop_rank', '_loop_solve_upper',
                 '_loop_mgs_qr', '_loop_mgs_project', '_loop_factor_qt', '_loop_ls_min_norm',
                 '_loop_jacobi_rows', '_loop_pinv_svd', '_loop_pinv_varga', '_loop_pinv_greville',
                 '_loop_pinv_householder', '_loop_pinv_mgs')
_LOOP_METHODS = {'svd': '_loop_pinv_svd', 'varga': '_loop_pinv_varga', 'greville': '_loop_pinv_greville',
                 'householder': '_loop_pinv_householder', 'mgs': '_loop_pinv_mgs'}
#: per-kernel numba options: FMA contraction (a*b + c rounded once; no reassociation, NaN/inf
#: semantics kept) in the Jacobi SVD, whose rotations are latency bound: ~20 % faster
_LOOP_OPTIONS = {'_loop_jacobi_rows': {'fastmath': {'contract'}}, '_loop_pinv_svd': {'fastmath': {'contract'}}}
_COMPILED = []


def compiled_pinv(name, *, jit=True):
    """The compiled twin of Moore–Penrose method `name`: ``f(A, rcond) -> A^+`` (A float64, C order).

    With numba installed (and ``jit``) the loop kernels are compiled on first use
    (``cache=True``: later processes load them) and the returned dispatcher can also be
    passed as an argument to other numba functions. Without numba, or ``jit=False``, the
    same loops run as plain Python (slow; for tests of the arithmetic).
    """
    try:
        kernel = _LOOP_METHODS[name]
    except KeyError:
        raise ValueError(f'no compiled twin for {name!r}; choose one of {sorted(_LOOP_METHODS)}') from None
    if not jit:
        return _LOOP_PYTHON[kernel]
    if not _COMPILED:
        try:
            from numba import njit
        except ImportError:                     # pragma: no cover - numba is optional
            _COMPILED.append(False)
        else:
            g = globals()
            for nm in _LOOP_KERNELS:            # replace the globals so compiled callers find compiled callees
                g[nm] = njit(cache=True, **_LOOP_OPTIONS.get(nm, {}))(_LOOP_PYTHON[nm])
            _COMPILED.append(True)
    return globals()[kernel] if _COMPILED[0] else _LOOP_PYTHON[kernel]


_LOOP_PYTHON = {nm: globals()[nm] for nm in _LOOP_KERNELS}


PINV_METHODS = {
    'svd': pinv_svd,
    'damped': pinv_damped,
    'varga': pinv_varga,
    'greville': pinv_greville,
    'householder': pinv_householder,
    'mgs': pinv_mgs,
}


def get_pinv(name):
    """Return the pseudo-inverse function registered under `name`."""
    try:
        return PINV_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown pseudo-inverse method {name!r}; choose one of {sorted(PINV_METHODS)}") from None
