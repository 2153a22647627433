"""Moore–Penrose pseudo-inverse methods of seed 002 in NumPy/LAPACK: the reference implementations.

Every method has the signature ``pinv_xxx(A, rcond) -> A^+`` where ``rcond``
is relative to the largest singular value (or the largest pivot / column norm
for the QR-based methods, as each docstring says). `PINV_METHODS` maps the
names used in config files (``control.pinv``) to the functions.

    method         reference (seed 002)                                   compiled twin (pinv.compiled)
    svd            SVD method, A^+ = V S^+ U^T                            _loop_pinv_svd (one-sided Jacobi)
    damped         damped least squares (not Moore-Penrose)               none
    varga          two QR factorizations, eqs 20-21                       _loop_pinv_varga
    greville       row recursion, eq 22 ff.                               _loop_pinv_greville
    householder    least squares, Householder QR, eqs 15-18               _loop_pinv_householder
    mgs            least squares, modified Gram-Schmidt QR, eqs 15-18     _loop_pinv_mgs

Checked by test/test_pinv.py against the four Penrose conditions (seed 002 eqs 1a–1d).
"""

from __future__ import annotations

import numpy as np

# scipy.linalg is imported by the three functions that call it: listing the methods (the settings'
# choices, `uk-controller --help`) then imports no SciPy.

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
    from scipy.linalg import solve_triangular

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
        rkk = float(np.linalg.norm(W[:, k]))  # recomputed: the running norms only pick the pivot
        if first is None:
            first = rkk
        if rkk == 0.0 or rkk <= rcond * first:
            break
        q = W[:, k] / rkk
        Q[:, k] = q
        R[k, k] = rkk
        if k + 1 < n:
            row = q @ W[:, k + 1 :]
            R[k, k + 1 :] = row
            W[:, k + 1 :] -= np.outer(q, row)
            norms2[k + 1 :] = np.einsum('ij,ij->j', W[:, k + 1 :], W[:, k + 1 :])
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
    Y = _solve_upper(R11, Qt(np.eye(m)))  # r x m
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
    from scipy.linalg import qr

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
    from scipy.linalg import qr, solve_triangular

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
    V1, G2T = qr(G1.T, mode='economic', check_finite=False)  # n x r, r x r upper
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
        d = a @ Pi  # 1 x i
        c = a - d @ A[:i]  # 1 x n
        dd = c @ Pi  # refinement: project the residual once more
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


#: The one table of pseudo-inverse methods (``control.pinv``): the settings schema, the
#: ``--pinv`` choices of ``uk-controller simulate`` and docs/config.md read their names from here.
PINV_METHODS = {
    'svd': pinv_svd,
    'varga': pinv_varga,
    'greville': pinv_greville,
    'householder': pinv_householder,
    'mgs': pinv_mgs,
    'damped': pinv_damped,
}


def get_pinv(name):
    """Return the pseudo-inverse function registered under `name`."""
    try:
        return PINV_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown pseudo-inverse method {name!r}; choose one of {sorted(PINV_METHODS)}") from None
