"""Optional compiled kernel (numba) for the hot path of :class:`uk_controller.uk.ServoSolver`.

Plain numeric code, no robot knowledge; the NumPy path in :mod:`uk_controller.uk`
is the reference and tests check that both agree to round-off
(``test/test_uk_fast.py``). If numba is not installed, or the environment sets
``UK_CONTROLLER_NUMBA=0``, ``AVAILABLE`` is False and nothing here is used.
Compiled code is cached next to this file (or in ``NUMBA_CACHE_DIR``): the
first run on a machine compiles for up to a minute, later runs load in < 1 s.

One call computes, for ``M q'' = Q + B u + Qc_p`` with ``Q = tau - h``,
passive rows ``A_p q'' = b_p`` and servo rows ``A_s q'' = b_s`` (both
right-hand sides Baumgarte-stabilized first, ``b <- b - (kd phi' + kp phi)``,
seed 000 eq 52)::

    L L^T = M                                   Cholesky (only M's LOWER triangle is read)
    N Q + r_p, N B                               seed 004 section V projected on the closures
    G_p = A_p M^{-1} A_p^T,  G_p^+ with  w > max(rcond^2, GRAM_FLOOR) w_max   (uk.gram_pinv)
    u = (A_s N B)^+ (b_s - A_s (N Q + r_p))      seed 004 eq 35, SVD rank rule of pinv_svd
    q'' = N Q + r_p + N B u,  passive force = M q'' - Q - B u

The small symmetric eigenproblem and the SVD are one-sided (Hestenes) Jacobi
iterations, exact to round-off and cheap for the few rows a robot has; LAPACK's
``gesdd``/``syevd`` cost microseconds of set-up on 4 x 4 matrices.
"""
from __future__ import annotations

import numpy as np

import os

try:  # pragma: no cover - exercised only where numba is installed
    if os.environ.get('UK_CONTROLLER_NUMBA', '1').strip().lower() in ('0', 'false', 'no', 'off'):
        raise ImportError('disabled by UK_CONTROLLER_NUMBA')
    from numba import njit
    AVAILABLE = True
except ImportError:  # pragma: no cover
    AVAILABLE = False

    def njit(*args, **kwargs):
        def wrap(f):
            return f
        return wrap(args[0]) if args and callable(args[0]) else wrap

#: status codes written to ``info[0]``
OK, NOT_PD, NOT_FINITE = 0.0, 1.0, 2.0
#: layout of the ``info`` array
INFO_SIZE = 8          # status, rank, condition, passive_rank, residual, consistent, bbar_norm, n_saturated
#: layout of ``params``
PARAMS_SIZE = 4        # rcond, gram_floor, consistency_tol, max_sweeps
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
def chol_solve_cols(L, X, out, col):
    """``out <- (L L^T)^{-1} X`` column by column (col: an n-vector of scratch)."""
    n = L.shape[0]
    for j in range(X.shape[1]):
        for i in range(n):
            col[i] = X[i, j]
        chol_solve_col(L, col)
        for i in range(n):
            out[i, j] = col[i]


@njit(cache=True)
def jacobi_columns(W, V, max_sweeps):
    """One-sided Jacobi: rotate the columns of W (r x c) until mutually orthogonal.

    On return ``W_in = W V^T`` with V (c x c) orthogonal; the singular values
    of W_in are the column norms of W, the right singular vectors the columns
    of V (Hestenes' method; relative accuracy of a few eps).
    """
    r, c = W.shape
    for i in range(c):
        for j in range(c):
            V[i, j] = 1.0 if i == j else 0.0
    for sweep in range(max_sweeps):
        rotated = False
        for i in range(c - 1):
            for j in range(i + 1, c):
                alpha = 0.0
                beta = 0.0
                gamma = 0.0
                for k in range(r):
                    wi = W[k, i]
                    wj = W[k, j]
                    alpha += wi * wi
                    beta += wj * wj
                    gamma += wi * wj
                if gamma == 0.0 or abs(gamma) <= EPS * np.sqrt(alpha * beta):
                    continue
                rotated = True
                zeta = (beta - alpha) / (2.0 * gamma)
                t = (1.0 if zeta >= 0.0 else -1.0) / (abs(zeta) + np.sqrt(1.0 + zeta * zeta))
                cs = 1.0 / np.sqrt(1.0 + t * t)
                sn = cs * t
                for k in range(r):
                    wi = W[k, i]
                    wj = W[k, j]
                    W[k, i] = cs * wi - sn * wj
                    W[k, j] = sn * wi + cs * wj
                for k in range(c):
                    vi = V[k, i]
                    vj = V[k, j]
                    V[k, i] = cs * vi - sn * vj
                    V[k, j] = sn * vi + cs * vj
        if not rotated:
            return sweep + 1
    return max_sweeps


@njit(cache=True)
def _norms(W, s):
    r, c = W.shape
    smax = 0.0
    for j in range(c):
        acc = 0.0
        for k in range(r):
            acc += W[k, j] * W[k, j]
        s[j] = np.sqrt(acc)
        if s[j] > smax:
            smax = s[j]
    return smax


@njit(cache=True)
def _vec(sc, o, k):
    """The k entries of the scratch array sc from offset o, and the offset after them."""
    return sc[o:o + k], o + k


@njit(cache=True)
def _mat(sc, o, r, c):
    """An (r, c) view of the scratch array sc from offset o, and the offset after it."""
    return sc[o:o + r * c].reshape((r, c)), o + r * c


@njit(cache=True)
def _matmul(A, B, C):
    """``C = A B`` (each entry summed in index order)."""
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            acc = 0.0
            for k in range(A.shape[1]):
                acc += A[i, k] * B[k, j]
            C[i, j] = acc


@njit(cache=True)
def row_residuals(A, x, b, phi, phid, gains, g0, out):
    """``out_i = (b_i - (kd_i phi'_i + kp_i phi_i)) - A_i . x``: the Baumgarte-stabilized right-hand side
    (seed 000 eq 52) minus A x, with kd, kp = gains[0, g0 + i], gains[1, g0 + i]."""
    for i in range(A.shape[0]):
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * x[k]
        bstab = b[i] - (gains[0, g0 + i] * phid[i] + gains[1, g0 + i] * phi[i])
        out[i] = bstab - acc


@njit(cache=True)
def _rows(sc, o, r, c):
    """The (r, c) block of the 2-D scratch array sc from row o, and the row after it (a slice: no reshape,
    which costs ~60 ns per call in numba)."""
    return sc[o:o + r, :c], o + r


@njit(cache=True)
def _row(sc, o, k):
    """The first k entries of row o of the 2-D scratch array sc, and the row after it."""
    return sc[o, :k], o + 1


@njit(cache=True)
def servo_scratch_shape(n, p, mp, ms):
    """Shape of the 2-D scratch array of :func:`servo_solve` for n coordinates, p efforts, mp passive and
    ms servo rows."""
    return 3 * n + 6 * mp + ms + max(p, ms) + min(ms, p) + 9, max(n, p, mp, ms, 1)


@njit(cache=True)
def free_accel(M, tau, h, L, a0):
    """``L L^T = M`` (lower triangle of M) and the unconstrained acceleration ``a0 = M^{-1} (tau - h)``
    (seed 000 eq 9 without constraint force). False (a0 untouched) if M is not positive definite."""
    if not cholesky_lower(M, L):
        return False
    for i in range(a0.shape[0]):
        a0[i] = tau[i] - h[i]
    chol_solve_col(L, a0)
    return True


@njit(cache=True)
def passive_projection(L, Ap, bp, phip, phidp, gains, rcond, floor, sweeps, a0, NB, sc, o):
    """The passive rows (closures) of seed 001 eq 36 / seed 000 eq 9, Baumgarte-stabilized (seed 000 eq 52),
    applied in place to ``a0 = M^{-1}(tau - h)`` and to the columns ``NB = M^{-1} B``::

        G = A_p M^{-1} A_p^T,  r_p = b_p - (kd phi' + kp phi) - A_p a0
        a0 <- a0 + M^{-1} A_p^T G^+ r_p,   NB <- NB - M^{-1} A_p^T G^+ A_p NB

    with G^+ on the eigenvalues w > max(rcond^2, floor) w_max (uk.gram_pinv). ``L``: the Cholesky factor
    of M; scratch from row o of the 2-D array sc (n + 6 mp + 4 rows). Returns the rank of G."""
    n = L.shape[0]
    p = NB.shape[1]
    mp = Ap.shape[0]
    col, o = _row(sc, o, n)
    MApT, o = _rows(sc, o, n, mp)
    G, o = _rows(sc, o, mp, mp)
    V, o = _rows(sc, o, mp, mp)
    W, o = _rows(sc, o, mp, mp)
    Gp, o = _rows(sc, o, mp, mp)
    w, o = _row(sc, o, mp)
    rp, o = _row(sc, o, mp)
    y, o = _row(sc, o, mp)
    APB, o = _rows(sc, o, mp, p)
    Y, o = _rows(sc, o, mp, p)
    chol_solve_cols(L, Ap.T, MApT, col)
    for i in range(mp):
        for j in range(i, mp):
            acc = 0.0
            for k in range(n):
                acc += Ap[i, k] * MApT[k, j]
            G[i, j] = acc
            G[j, i] = acc
    for i in range(mp):
        for j in range(mp):
            W[i, j] = G[i, j]
    jacobi_columns(W, V, sweeps)
    wmax = _norms(W, w)           # G is PSD: its singular values are its eigenvalues
    # residual of the passive rows with Q alone, and of each column of M^{-1} B
    row_residuals(Ap, a0, bp, phip, phidp, gains, 0, rp)
    rank_p = 0
    if wmax > 0.0:
        cut = max(rcond * rcond, floor) * wmax
        _matmul(Ap, NB, APB)
        # K = M^{-1} A_p^T G^+ ;  G^+ = sum_keep v v^T / w
        Gp[:] = 0.0
        for kk in range(mp):
            if w[kk] > cut:
                rank_p += 1
                inv = 1.0 / w[kk]
                for i in range(mp):
                    vi = V[i, kk] * inv
                    for j in range(mp):
                        Gp[i, j] += vi * V[j, kk]
        # y = G^+ rp  ; Y = G^+ APB
        for i in range(mp):
            acc = 0.0
            for j in range(mp):
                acc += Gp[i, j] * rp[j]
            y[i] = acc
        _matmul(Gp, APB, Y)
        for k in range(n):
            acc = 0.0
            for i in range(mp):
                acc += MApT[k, i] * y[i]
            a0[k] += acc
            for c in range(p):
                acc = 0.0
                for i in range(mp):
                    acc += MApT[k, i] * Y[i, c]
                NB[k, c] -= acc
    return rank_p


@njit(cache=True)
def closure_accel(M, tau, h, Ap, bp, phip, phidp, gains, params, sc, qdd):
    """q'' of a plant under its passive rows alone (no efforts to solve for; seed 000 eq 9, seed 001 eq 36):
    :func:`free_accel` then :func:`passive_projection` into ``qdd``; sc: a servo_scratch_shape(n, 0, mp, 0)
    array. Returns the status (0 ok, 1 M not positive definite, 2 non-finite q'')."""
    n = M.shape[0]
    L = sc[:n, :n]
    if not free_accel(M, tau, h, L, qdd):
        return NOT_PD
    passive_projection(L, Ap, bp, phip, phidp, gains, params[0], params[1], int(params[3]), qdd, sc[:n, :0], sc, n)
    for k in range(n):
        if not np.isfinite(qdd[k]):
            return NOT_FINITE
    return OK


@njit(cache=True)
def servo_solve(M, tau, h, B, As, bs, phis, phids, Ap, bp, phip, phidp, gains, params, limits,
                u, qdd, pforce, effort, sat, info, sc):
    """Servo control of seed 004 with closures (see module docstring); writes u, qdd, pforce, info.

    :func:`free_accel`, ``NB = M^{-1} B``, the passive rows by :func:`passive_projection` (N Q + r_p in a0,
    N B in NB), then the servo rows by seed 004 eq 35, ``u = (A_s N B)^+ (b_s - A_s (N Q + r_p))``
    (SVD rank rule of pinv_svd), and ``q'' = N Q + r_p + N B u``.

    ``gains`` (2, mp + ms): kd and kp per row, passive rows first (order-1 rows
    carry kd = 0, kp = k1). ``effort`` is u clipped to ``+-limits`` and ``sat``
    flags the clipped entries. Returns nothing; ``info[0]`` is the status.
    No heap allocation: every intermediate lives in ``sc`` (a servo_scratch_shape(n, p, mp, ms) array).
    """
    n = M.shape[0]
    p = B.shape[1]
    ms = As.shape[0]
    mp = Ap.shape[0]
    rcond = params[0]
    tol = params[2]
    sweeps = int(params[3])
    for i in range(info.shape[0]):
        info[i] = 0.0
    L, o = _rows(sc, 0, n, n)
    a0, o = _row(sc, o, n)
    col, o = _row(sc, o, n)
    NB, o = _rows(sc, o, n, p)
    CB, o = _rows(sc, o, ms, p)
    bbar, o = _row(sc, o, ms)
    rs, o = _row(sc, o, ms)
    Wsvd, o = _rows(sc, o, max(p, ms), min(p, ms))
    Vs, o = _rows(sc, o, min(p, ms), min(p, ms))
    s, o = _row(sc, o, min(p, ms))
    # a0 = M^{-1} Q (Q = tau - h), NB = M^{-1} B (then projected on the closures)
    if not free_accel(M, tau, h, L, a0):
        info[0] = NOT_PD
        return
    chol_solve_cols(L, B, NB, col)
    if mp > 0:
        info[3] = passive_projection(L, Ap, bp, phip, phidp, gains, rcond, params[1], sweeps, a0, NB, sc, o)
    # servo: CB u = bbar
    row_residuals(As, a0, bs, phis, phids, gains, mp, bbar)
    bnorm = 0.0
    for i in range(ms):
        bnorm += bbar[i] * bbar[i]
    bnorm = np.sqrt(bnorm)
    _matmul(As, NB, CB)
    for j in range(p):
        u[j] = 0.0
    rank = 0
    cond = np.inf
    if ms > 0 and p > 0:
        c = min(ms, p)
        if ms <= p:                  # columns of CB^T (p x ms): CB = V S U^T
            Ws = Wsvd[:p, :ms]
            for i in range(ms):
                for j in range(p):
                    Ws[j, i] = CB[i, j]
        else:                        # columns of CB (ms x p): CB = U S V^T
            Ws = Wsvd[:ms, :p]
            for i in range(ms):
                for j in range(p):
                    Ws[i, j] = CB[i, j]
        jacobi_columns(Ws, Vs, sweeps)
        smax = _norms(Ws, s)
        # singular vectors in the row space of bbar (ms x c) and in the effort space (p x c), scaled by s_k:
        # ms <= p: CB = V S U^T with W = U S;  else CB = U S V^T with W = U S
        left, right = (Vs, Ws) if ms <= p else (Ws, Vs)
        if smax > 0.0:
            smin = smax
            for k in range(c):
                if s[k] > rcond * smax:
                    rank += 1
                    if s[k] < smin:
                        smin = s[k]
                    s2 = 1.0 / (s[k] * s[k])
                    coef = 0.0           # u += right_k (left_k . bbar) / s_k^2
                    for i in range(ms):
                        coef += left[i, k] * bbar[i]
                    coef *= s2
                    for j in range(p):
                        u[j] += right[j, k] * coef
            cond = smax / smin
    # q'' = a0 + NB u, residual of the (stabilized) servo rows, passive force
    for k in range(n):
        acc = a0[k]
        for j in range(p):
            acc += NB[k, j] * u[j]
        qdd[k] = acc
    row_residuals(As, qdd, bs, phis, phids, gains, mp, rs)
    res = 0.0
    for i in range(ms):
        res += rs[i] * rs[i]
    res = np.sqrt(res)
    for i in range(n):
        acc = -(tau[i] - h[i])
        for k in range(n):
            acc += (M[i, k] if i >= k else M[k, i]) * qdd[k]
        for j in range(p):
            acc -= B[i, j] * u[j]
        pforce[i] = acc
    info[0] = OK
    info[1] = rank
    info[2] = cond
    info[4] = res
    info[5] = 1.0 if res <= tol * max(1.0, bnorm) else 0.0
    info[6] = bnorm
    for k in range(n):
        if not np.isfinite(qdd[k]):
            info[0] = NOT_FINITE
    nsat = 0
    for j in range(p):
        if not np.isfinite(u[j]):
            info[0] = NOT_FINITE
        e = u[j]
        lim = limits[j]
        sat[j] = False
        if e > lim:
            e = lim
            sat[j] = True
        elif e < -lim:
            e = -lim
            sat[j] = True
        if sat[j]:
            nsat += 1
        effort[j] = e
    info[7] = nsat


@njit(cache=True)
def servo_kernel(M, tau, h, B, As, bs, phis, phids, Ap, bp, phip, phidp, gains, params, limits,
                 u, qdd, pforce, effort, sat, info):
    """:func:`servo_solve` with its scratch array allocated here (one allocation per call; uk.ServoSolver's
    entry point)."""
    sc = np.empty(servo_scratch_shape(M.shape[0], B.shape[1], Ap.shape[0], As.shape[0]))
    servo_solve(M, tau, h, B, As, bs, phis, phids, Ap, bp, phip, phidp, gains, params, limits,
                u, qdd, pforce, effort, sat, info, sc)


# ----------------------------------------------------------------------------- constraint-row kernels
# Compiled twins of the small 3-vector computations in uk_controller.constraints (the NumPy/Python
# versions there are the reference; test/test_uk_fast.py checks equality).


@njit(cache=True)
def position_rows(J, trans, drift, idx, comp, P, V, Acc, qd, phi, phidot, A, b):
    """Frame position rows (seed 000 eqs 47-49 for S = (x, y, z)): ``phi = S (p - p_d)``,
    ``phi' = S J_lin q' - v_d``, ``A = S J_lin``, ``b = a_d - S drift`` (S: rows idx of the frame's
    Jacobian, translation and drift). Row r's desired values are entry ``comp[r]`` of P, V, Acc (entry r
    when comp is empty)."""
    n = J.shape[1]
    for r in range(idx.shape[0]):
        k = idx[r]
        c = comp[r] if comp.shape[0] > 0 else r
        acc = 0.0
        for j in range(n):
            A[r, j] = J[k, j]
            acc += J[k, j] * qd[j]
        phi[r] = trans[k] - P[c]
        phidot[r] = acc - V[c]
        b[r] = Acc[c] - drift[k]


@njit(cache=True)
def frame_position_rows(J, trans, drift, idx, p_d, v_d, a_d, qd, phi, phidot, A, b):
    """:func:`position_rows` with the desired p_d, v_d, a_d given row by row (FramePosition.fill)."""
    position_rows(J, trans, drift, idx, idx[:0], p_d, v_d, a_d, qd, phi, phidot, A, b)


@njit(cache=True)
def closure_position_rows(JA, JB, tA, tB, dA, dB, idx, qd, phi, phidot, A, b):
    """Loop-closure position rows (the five-bar's E1 = E2, seed 003): ``phi = S (p_A - p_B)``,
    ``A = S (J_A - J_B)_lin``, ``phi' = A q'``, ``b = S (drift_B - drift_A)`` (LoopClosure.fill, fused_rows)."""
    n = JA.shape[1]
    for r in range(idx.shape[0]):
        k = idx[r]
        acc = 0.0
        for j in range(n):
            a = JA[k, j] - JB[k, j]
            A[r, j] = a
            acc += a * qd[j]
        phi[r] = tA[k] - tB[k]
        phidot[r] = acc
        b[r] = dB[k] - dA[k]


@njit(cache=True)
def planar_angle(R, J, drift, qd, axis, e1, reference, row):
    """Angle of a frame about a world axis and its derivatives (see constraints.planar_angle).

    ``J`` (6, n) and ``drift`` (6,) are the full frame Jacobian and drift (angular part rows 3..5).
    Writes ``row`` (n,) with ``theta'' = row . q'' + gamma``; returns ``(theta, theta', gamma)``.
    """
    n = J.shape[1]
    e2 = np.empty(3)
    e2[0] = axis[1] * e1[2] - axis[2] * e1[1]
    e2[1] = axis[2] * e1[0] - axis[0] * e1[2]
    e2[2] = axis[0] * e1[1] - axis[1] * e1[0]
    v = np.empty(3)
    w = np.empty(3)
    for i in range(3):
        acc = 0.0
        for j in range(3):
            acc += R[i, j] * reference[j]
        v[i] = acc
        acc = 0.0
        for j in range(n):
            acc += J[3 + i, j] * qd[j]
        w[i] = acc
    u0 = w[1] * v[2] - w[2] * v[1]
    u1 = w[2] * v[0] - w[0] * v[2]
    u2 = w[0] * v[1] - w[1] * v[0]
    vx = e1[0] * v[0] + e1[1] * v[1] + e1[2] * v[2]
    vy = e2[0] * v[0] + e2[1] * v[1] + e2[2] * v[2]
    vxd = e1[0] * u0 + e1[1] * u1 + e1[2] * u2
    vyd = e2[0] * u0 + e2[1] * u1 + e2[2] * u2
    rho2 = vx * vx + vy * vy
    g0 = (vx * e2[0] - vy * e1[0]) / rho2
    g1 = (vx * e2[1] - vy * e1[1]) / rho2
    g2 = (vx * e2[2] - vy * e1[2]) / rho2
    c = 2.0 * (vx * vxd + vy * vyd) / rho2
    gd0 = (vxd * e2[0] - vyd * e1[0]) / rho2 - c * g0
    gd1 = (vxd * e2[1] - vyd * e1[1]) / rho2 - c * g1
    gd2 = (vxd * e2[2] - vyd * e1[2]) / rho2 - c * g2
    k0 = v[1] * g2 - v[2] * g1
    k1 = v[2] * g0 - v[0] * g2
    k2 = v[0] * g1 - v[1] * g0
    kd0 = (u1 * g2 - u2 * g1) + (v[1] * gd2 - v[2] * gd1)
    kd1 = (u2 * g0 - u0 * g2) + (v[2] * gd0 - v[0] * gd2)
    kd2 = (u0 * g1 - u1 * g0) + (v[0] * gd1 - v[1] * gd0)
    for j in range(n):
        row[j] = k0 * J[3, j] + k1 * J[4, j] + k2 * J[5, j]
    theta = np.arctan2(vy, vx)
    thetad = k0 * w[0] + k1 * w[1] + k2 * w[2]
    gamma = k0 * drift[3] + k1 * drift[4] + k2 * drift[5] + kd0 * w[0] + kd1 * w[1] + kd2 * w[2]
    return theta, thetad, gamma


# ----------------------------------------------------------------------------- RK4 bookkeeping


@njit(cache=True)
def rk4_accept(x, k, i, h, xt, qdd):
    """Classical RK4 on x = (q, q'), x' = (q', q''), one stage at a time: store stage i's acceleration,
    ``k[i][n:] = qdd``, then for i < 3 the next stage's state ``xt = x + h k[i]`` and its velocity slope
    ``k[i+1][:n] = xt[n:]`` (h = dt/2, dt/2, dt); for i = 3 the update ``x += h/6 (k0 + 2 k1 + 2 k2 + k3)``
    and ``k[0][:n] = x[n:]`` for the next step (h = dt). ``qdd`` may be the view ``k[i, n:]`` itself."""
    n = qdd.shape[0]
    for j in range(n):
        k[i, n + j] = qdd[j]
    if i < 3:
        for j in range(x.shape[0]):
            xt[j] = x[j] + h * k[i, j]
        for j in range(n):
            k[i + 1, j] = xt[n + j]
    else:
        c = h / 6.0
        for j in range(x.shape[0]):
            x[j] += c * (k[0, j] + 2.0 * (k[1, j] + k[2, j]) + k[3, j])
        for j in range(n):
            k[0, j] = x[n + j]


# ----------------------------------------------------------------------------- fused rows + servo solve
# One compiled call per control step (or plant right-hand side): frame Jacobians and drifts from
# Pinocchio's joint Jacobian, desired trajectories, every constraint row, Baumgarte, the servo solve
# and effort clipping. The program arrays are built by uk_controller.constraints.CompiledRows; the
# Python code in constraints.py / trajectories.py / robots.actuators stays the reference and
# test/test_uk_fast.py checks that both agree to round-off.

#: header of the integer program (offsets into iprog, into fprog and into the workspace ws)
(IH_N, IH_P, IH_MP, IH_MS, IH_F, IH_NT, IH_NTR, IH_NB, IH_TERMS, IH_TRAJ, IH_CHAIN, IH_BETW,
 IH_PHI, IH_PHID, IH_A, IH_BV, IH_FJ, IH_FD, IH_BMAT, IH_TAU, IH_U, IH_QDD, IH_PF, IH_EFF, IH_SAT, IH_INFO,
 IH_SCR, IH_GAINS, IH_PARAMS, IH_LIMITS) = range(30)
HEADER = 32
TERM_WIDTH = 12          # op, row0, m, frameA, frameB, traj, nax, ax0, ax1, ax2, fofs, planar
TRAJ_WIDTH = 12          # kind, dim, fofs, ncomp, comp0..comp7
MAX_TRAJ_DIM = 8
BETWEEN_WIDTH = 4        # column, frameA, frameB, fofs (axis)
OP_FRAME_POSITION, OP_PLANAR, OP_JOINT_LINEAR, OP_CLOSURE = 1, 2, 3, 4
#: info[0] when the state itself is not finite (nothing else computed)
NOT_FINITE_STATE = 3.0
_TWO_PI = 2.0 * np.pi


@njit(cache=True)
def trajectory_eval(kind, d, fp, o, t, P, V, Acc):
    """p, v, a (first d entries of P, V, Acc) of a trajectory spec (see trajectories.Trajectory.spec).

    Kinds: 0 hold, 1 helix (seed 000 eq 40), 2 line (seed 003 eq 26), 3 cosine rise (seed 004 eq 64),
    4 circle; ``fp[o]`` is the start time."""
    tau = t - fp[o]
    if kind == 0:
        for i in range(d):
            P[i] = fp[o + 1 + i]
            V[i] = 0.0
            Acc[i] = 0.0
    elif kind == 1:
        r = fp[o + 1]
        w = fp[o + 2]
        s = np.sin(w * tau + fp[o + 3])
        c = np.cos(w * tau + fp[o + 3])
        rate = fp[o + 4]
        P[0] = fp[o + 5] + r * s
        P[1] = fp[o + 6] + r * c
        P[2] = fp[o + 7] + rate * tau
        V[0] = r * w * c
        V[1] = -r * w * s
        V[2] = rate
        Acc[0] = -r * w * w * s
        Acc[1] = -r * w * w * c
        Acc[2] = 0.0
    else:
        amp = fp[o + 1]
        w = fp[o + 2]
        c = np.cos(w * tau + fp[o + 3])
        s = np.sin(w * tau + fp[o + 3])
        b = o + 4
        for i in range(d):
            if kind == 2:
                di = fp[b + d + i]
                P[i] = fp[b + i] + amp * c * di
                V[i] = -amp * w * s * di
                Acc[i] = -amp * w * w * c * di
            elif kind == 3:
                ai = fp[b + d + i]
                P[i] = fp[b + i] + ai * (1.0 - c)
                V[i] = ai * w * s
                Acc[i] = ai * w * w * c
            else:
                ui = fp[b + d + i]
                vi = fp[b + 2 * d + i]
                P[i] = fp[b + i] + amp * (c * ui + s * vi)
                V[i] = amp * w * (-s * ui + c * vi)
                Acc[i] = -amp * w * w * (c * ui + s * vi)


@njit(cache=True)
def frame_kinematics(Jw, qd, chain, c0, trans, Jf, df):
    """LOCAL_WORLD_ALIGNED Jacobian Jf (6, n) and drift ``df = J' q'`` (6,) of a frame at world point p.

    Jw is Pinocchio's joint Jacobian in the WORLD frame (``data.J``: column i is the spatial motion
    axis S_i of coordinate i at the world origin), ``chain[c0]`` the number of coordinates supporting
    the frame and ``chain[c0 + 1:]`` their indices root first. Then::

        Jf_lin[:, i] = v_i + w_i x p,   Jf_ang[:, i] = w_i            (velocity of the point p)
        a0 = sum_i q'_i (V_i x S_i),   V_i = sum_{k <= i} S_k q'_k    (dS_i/dt = V_i x S_i, q'' = 0)
        df_lin = a0_lin + a0_ang x p + w x v_p,   df_ang = a0_ang      (classical acceleration of p)
    """
    n = Jf.shape[1]
    for r in range(6):
        for j in range(n):
            Jf[r, j] = 0.0
    px = trans[0]
    py = trans[1]
    pz = trans[2]
    Vv0 = Vv1 = Vv2 = Vw0 = Vw1 = Vw2 = 0.0
    al0 = al1 = al2 = aw0 = aw1 = aw2 = 0.0
    for r in range(chain[c0]):
        i = chain[c0 + 1 + r]
        sv0 = Jw[0, i]
        sv1 = Jw[1, i]
        sv2 = Jw[2, i]
        sw0 = Jw[3, i]
        sw1 = Jw[4, i]
        sw2 = Jw[5, i]
        qi = qd[i]
        Vv0 += sv0 * qi
        Vv1 += sv1 * qi
        Vv2 += sv2 * qi
        Vw0 += sw0 * qi
        Vw1 += sw1 * qi
        Vw2 += sw2 * qi
        # V x S (spatial motion cross product): (w_V x v_S + v_V x w_S, w_V x w_S)
        al0 += qi * ((Vw1 * sv2 - Vw2 * sv1) + (Vv1 * sw2 - Vv2 * sw1))
        al1 += qi * ((Vw2 * sv0 - Vw0 * sv2) + (Vv2 * sw0 - Vv0 * sw2))
        al2 += qi * ((Vw0 * sv1 - Vw1 * sv0) + (Vv0 * sw1 - Vv1 * sw0))
        aw0 += qi * (Vw1 * sw2 - Vw2 * sw1)
        aw1 += qi * (Vw2 * sw0 - Vw0 * sw2)
        aw2 += qi * (Vw0 * sw1 - Vw1 * sw0)
        Jf[0, i] = sv0 + (sw1 * pz - sw2 * py)
        Jf[1, i] = sv1 + (sw2 * px - sw0 * pz)
        Jf[2, i] = sv2 + (sw0 * py - sw1 * px)
        Jf[3, i] = sw0
        Jf[4, i] = sw1
        Jf[5, i] = sw2
    vp0 = Vv0 + (Vw1 * pz - Vw2 * py)
    vp1 = Vv1 + (Vw2 * px - Vw0 * pz)
    vp2 = Vv2 + (Vw0 * py - Vw1 * px)
    df[0] = al0 + (aw1 * pz - aw2 * py) + (Vw1 * vp2 - Vw2 * vp1)
    df[1] = al1 + (aw2 * px - aw0 * pz) + (Vw2 * vp0 - Vw0 * vp2)
    df[2] = al2 + (aw0 * py - aw1 * px) + (Vw0 * vp1 - Vw1 * vp0)
    df[3] = aw0
    df[4] = aw1
    df[5] = aw2


@njit(cache=True)
def _wrap_angle(a):
    return (a + np.pi) % _TWO_PI - np.pi


@njit(cache=True)
def fused_rows(Jw, trans, rots, q, qd, t, ip, fp, ws):
    """Frame kinematics, actuator columns and every constraint row of the program (ws views filled).

    Returns False (nothing computed) when q, q' or t is not finite."""
    n = ip[IH_N]
    p = ip[IH_P]
    m = ip[IH_MP] + ip[IH_MS]
    ok = np.isfinite(t)
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(qd[i])):
            ok = False
    if not ok:
        return False
    nf = ip[IH_F]
    FJ = ws[ip[IH_FJ]:ip[IH_FJ] + nf * 6 * n].reshape((nf, 6, n))
    FD = ws[ip[IH_FD]:ip[IH_FD] + nf * 6].reshape((nf, 6))
    for f in range(nf):
        frame_kinematics(Jw, qd, ip, ip[IH_CHAIN] + f * (n + 1), trans[f], FJ[f], FD[f])
    phi = ws[ip[IH_PHI]:ip[IH_PHI] + m]
    phid = ws[ip[IH_PHID]:ip[IH_PHID] + m]
    A = ws[ip[IH_A]:ip[IH_A] + m * n].reshape((m, n))
    b = ws[ip[IH_BV]:ip[IH_BV] + m]
    scr = ws[ip[IH_SCR]:ip[IH_SCR] + 3 * MAX_TRAJ_DIM + 2 * n]
    P = scr[0:MAX_TRAJ_DIM]
    V = scr[MAX_TRAJ_DIM:2 * MAX_TRAJ_DIM]
    Acc = scr[2 * MAX_TRAJ_DIM:3 * MAX_TRAJ_DIM]
    ra = scr[3 * MAX_TRAJ_DIM:3 * MAX_TRAJ_DIM + n]
    rb = scr[3 * MAX_TRAJ_DIM + n:3 * MAX_TRAJ_DIM + 2 * n]
    for k in range(ip[IH_NT]):
        o = ip[IH_TERMS] + k * TERM_WIDTH
        op = ip[o]
        r0 = ip[o + 1]
        tr = ip[o + 5]
        ncomp = 0
        to = 0
        if tr >= 0:
            to = ip[IH_TRAJ] + tr * TRAJ_WIDTH
            trajectory_eval(ip[to], ip[to + 1], fp, ip[to + 2], t, P, V, Acc)
            ncomp = ip[to + 3]
        if op == OP_FRAME_POSITION:
            f = ip[o + 3]
            position_rows(FJ[f], trans[f], FD[f], ip[o + 7:o + 7 + ip[o + 6]], ip[to + 4:to + 4 + ncomp], P, V, Acc,
                          qd, phi[r0:], phid[r0:], A[r0:], b[r0:])
        elif op == OP_PLANAR:
            f = ip[o + 3]
            fo = ip[o + 10]
            c = ip[to + 4] if ncomp > 0 else 0
            th, thd, gam = planar_angle(rots[f], FJ[f], FD[f], qd, fp[fo:fo + 3], fp[fo + 3:fo + 6],
                                        fp[fo + 6:fo + 9], A[r0])
            phi[r0] = _wrap_angle(th - P[c])
            phid[r0] = thd - V[c]
            b[r0] = Acc[c] - gam
        elif op == OP_JOINT_LINEAR:
            fo = ip[o + 10]
            c = ip[to + 4] if ncomp > 0 else 0
            s0 = 0.0
            s1 = 0.0
            for j in range(n):
                cj = fp[fo + j]
                A[r0, j] = cj
                s0 += cj * q[j]
                s1 += cj * qd[j]
            phi[r0] = s0 - P[c]
            phid[r0] = s1 - V[c]
            b[r0] = Acc[c]
        else:                                   # OP_CLOSURE
            fa = ip[o + 3]
            fb = ip[o + 4]
            nax = ip[o + 6]
            closure_position_rows(FJ[fa], FJ[fb], trans[fa], trans[fb], FD[fa], FD[fb], ip[o + 7:o + 7 + nax], qd,
                                  phi[r0:], phid[r0:], A[r0:], b[r0:])
            if ip[o + 11]:
                fo = ip[o + 10]
                rl = r0 + nax
                ta, tad, ga = planar_angle(rots[fa], FJ[fa], FD[fa], qd, fp[fo:fo + 3], fp[fo + 3:fo + 6],
                                           fp[fo + 6:fo + 9], ra)
                tb, tbd, gb = planar_angle(rots[fb], FJ[fb], FD[fb], qd, fp[fo:fo + 3], fp[fo + 3:fo + 6],
                                           fp[fo + 6:fo + 9], rb)
                phi[rl] = _wrap_angle(ta - tb)
                phid[rl] = tad - tbd
                for j in range(n):
                    A[rl, j] = ra[j] - rb[j]
                b[rl] = gb - ga
    # actuator columns that act between bodies: B[:, col] = axis . (J_ang(a) - J_ang(b))
    if ip[IH_NB] > 0:
        B = ws[ip[IH_BMAT]:ip[IH_BMAT] + n * p].reshape((n, p))
        for k in range(ip[IH_NB]):
            o = ip[IH_BETW] + k * BETWEEN_WIDTH
            col = ip[o]
            fa = ip[o + 1]
            fb = ip[o + 2]
            fo = ip[o + 3]
            for j in range(n):
                acc = 0.0
                for i in range(3):
                    wa = FJ[fa, 3 + i, j] if fa >= 0 else 0.0
                    wb = FJ[fb, 3 + i, j] if fb >= 0 else 0.0
                    acc += fp[fo + i] * (wa - wb)
                B[j, col] = acc
    return True


@njit(cache=True)
def program_scratch_shape(ip):
    """Shape of the scratch array of :func:`fused_step_ws` for the program ip."""
    return servo_scratch_shape(ip[IH_N], ip[IH_P], ip[IH_MP], ip[IH_MS])


@njit(cache=True)
def program_rows(ip, fp, ws, m):
    """Views of the first m rows fused_rows leaves in ws (passive rows first, then servo): phi, phi', A, b,
    and the program's gains (2, mp + ms) and solver parameters."""
    n = ip[IH_N]
    mg = ip[IH_MP] + ip[IH_MS]
    return (ws[ip[IH_PHI]:ip[IH_PHI] + m], ws[ip[IH_PHID]:ip[IH_PHID] + m],
            ws[ip[IH_A]:ip[IH_A] + m * n].reshape((m, n)), ws[ip[IH_BV]:ip[IH_BV] + m],
            fp[ip[IH_GAINS]:ip[IH_GAINS] + 2 * mg].reshape((2, mg)), fp[ip[IH_PARAMS]:ip[IH_PARAMS] + PARAMS_SIZE])


@njit(cache=True)
def fused_step_ws(Mlow, h, Jw, trans, rots, q, qd, t, ip, fp, ws, sat, sc):
    """:func:`fused_rows` then :func:`servo_solve` on the rows (passive rows first, then servo) with the
    program's gains, parameters and limits; no heap allocation.

    ``Mlow``: an (n, n) array whose lower triangle is M; ``h = C q' + G``; the efforts' generalized
    force ``tau`` and the outputs (u, q'', passive force, effort, info) live in ws (offsets in the header
    of ip); ``sat`` (p, bool) flags clipped efforts; ``sc``: a program_scratch_shape(ip) array. info[0] is
    the status (0 ok, 1 M not positive definite, 2 non-finite result, 3 non-finite state)."""
    n = ip[IH_N]
    p = ip[IH_P]
    mp = ip[IH_MP]
    info = ws[ip[IH_INFO]:ip[IH_INFO] + INFO_SIZE]
    if not fused_rows(Jw, trans, rots, q, qd, t, ip, fp, ws):
        for i in range(INFO_SIZE):
            info[i] = 0.0
        info[0] = NOT_FINITE_STATE
        return
    phi, phid, A, b, gains, params = program_rows(ip, fp, ws, mp + ip[IH_MS])
    B = ws[ip[IH_BMAT]:ip[IH_BMAT] + n * p].reshape((n, p))
    servo_solve(Mlow, ws[ip[IH_TAU]:ip[IH_TAU] + n], h, B, A[mp:], b[mp:], phi[mp:], phid[mp:], A[:mp], b[:mp],
                phi[:mp], phid[:mp], gains, params, fp[ip[IH_LIMITS]:ip[IH_LIMITS] + p], ws[ip[IH_U]:ip[IH_U] + p],
                ws[ip[IH_QDD]:ip[IH_QDD] + n], ws[ip[IH_PF]:ip[IH_PF] + n], ws[ip[IH_EFF]:ip[IH_EFF] + p], sat,
                info, sc)


@njit(cache=True)
def fused_step(Mlow, h, Jw, trans, rots, q, qd, t, ip, fp, ws, sat):
    """:func:`fused_step_ws` with its scratch array allocated here (one allocation per call;
    CompiledRows' entry point)."""
    fused_step_ws(Mlow, h, Jw, trans, rots, q, qd, t, ip, fp, ws, sat, np.empty(program_scratch_shape(ip)))


# ----------------------------------------------------------------------------- compiled plant
# Rigid-body dynamics of a tree of 1-DOF revolute/prismatic joints in world-frame spatial algebra
# (Featherstone, "Rigid Body Dynamics Algorithms", ch. 5-6: RNEA and CRBA), so that a whole RK4
# period of the simulated plant is ONE compiled call. Pinocchio stays the reference:
# test/test_fused_step.py checks M, h, frame placements, Jacobians and the plant trajectory.
#: per-joint float layout of the model array mf (joint i at i * JOINT_WIDTH; joint 0 = universe unused)
JOINT_WIDTH = 28          # R0 (9, row-major), p0 (3), axis (3), mass, lever (3), I_c (9, row-major)
TREE_SCRATCH_PER_JOINT = 64   # tree_terms scratch: V, A, F (6 each), composite inertia (36), + 9 + 6 + 6 + 12
FRAME_WIDTH = 12          # R (9, row-major), p (3) of a frame in its parent joint's frame


@njit(cache=True)
def tree_terms(q, qd, parents, jtype, mf, grav, oR, op, S, M, h, tw=None):
    """World placements (oR, op), world motion axes S (6, n; = Pinocchio's data.J), M and h = C q' + G.

    Joint i (1..nj-1, coordinate i-1, parent parents[i] < i): placement R0, p0 in the parent's frame,
    then a rotation by q about `axis` (jtype 0) or a translation q axis (jtype 1). Spatial vectors are
    (linear, angular) at the world origin: S_i = (-w x p, w) or (R a, 0); V_i = V_parent + S_i q'_i;
    bias acceleration A_i = A_parent + (V_i x S_i) q'_i with A_0 = (-g, 0) (gravity as base acceleration);
    h_i = S_i . f_i, f_i = I_i A_i + V_i x* (I_i V_i) summed from the leaves (RNEA); M by the composite
    rigid-body algorithm in the same world frame."""
    nj = parents.shape[0]
    n = nj - 1
    if tw is None:
        tw = np.empty(TREE_SCRATCH_PER_JOINT * nj + 12)
    V = tw[0:6 * nj].reshape((nj, 6))
    Acc = tw[6 * nj:12 * nj].reshape((nj, 6))
    F = tw[12 * nj:18 * nj].reshape((nj, 6))
    Ic = tw[18 * nj:54 * nj].reshape((nj, 6, 6))
    Rl = tw[54 * nj:54 * nj + 9].reshape((3, 3))
    IV = tw[TREE_SCRATCH_PER_JOINT * nj:TREE_SCRATCH_PER_JOINT * nj + 6]
    Fs = tw[TREE_SCRATCH_PER_JOINT * nj + 6:TREE_SCRATCH_PER_JOINT * nj + 12]
    for r in range(6):
        V[0, r] = 0.0
        Acc[0, r] = 0.0
        for i in range(1, nj):
            F[i, r] = 0.0
            for cc in range(6):
                Ic[i, r, cc] = 0.0
    Acc[0, 0] = -grav[0]
    Acc[0, 1] = -grav[1]
    Acc[0, 2] = -grav[2]
    for r in range(3):                     # the universe (frames fixed to the world hang on it)
        op[0, r] = 0.0
        for cc in range(3):
            oR[0, r, cc] = 1.0 if r == cc else 0.0
    for i in range(1, nj):
        o = i * JOINT_WIDTH
        par = parents[i]
        qi = q[i - 1]
        ax0 = mf[o + 12]
        ax1 = mf[o + 13]
        ax2 = mf[o + 14]
        # local transform R0 * Rj, p0 + R0 pj
        if jtype[i] == 0:
            s = np.sin(qi)
            c1 = 1.0 - np.cos(qi)
            Rj00 = 1.0 - c1 * (ax1 * ax1 + ax2 * ax2)
            Rj11 = 1.0 - c1 * (ax0 * ax0 + ax2 * ax2)
            Rj22 = 1.0 - c1 * (ax0 * ax0 + ax1 * ax1)
            Rj01 = -s * ax2 + c1 * ax0 * ax1
            Rj10 = s * ax2 + c1 * ax0 * ax1
            Rj02 = s * ax1 + c1 * ax0 * ax2
            Rj20 = -s * ax1 + c1 * ax0 * ax2
            Rj12 = -s * ax0 + c1 * ax1 * ax2
            Rj21 = s * ax0 + c1 * ax1 * ax2
            pj0 = pj1 = pj2 = 0.0
        else:
            Rj00 = Rj11 = Rj22 = 1.0
            Rj01 = Rj10 = Rj02 = Rj20 = Rj12 = Rj21 = 0.0
            pj0 = ax0 * qi
            pj1 = ax1 * qi
            pj2 = ax2 * qi
        for r in range(3):
            a0 = mf[o + 3 * r]
            a1 = mf[o + 3 * r + 1]
            a2 = mf[o + 3 * r + 2]
            Rl[r, 0] = a0 * Rj00 + a1 * Rj10 + a2 * Rj20
            Rl[r, 1] = a0 * Rj01 + a1 * Rj11 + a2 * Rj21
            Rl[r, 2] = a0 * Rj02 + a1 * Rj12 + a2 * Rj22
        pl0 = mf[o + 9] + mf[o + 0] * pj0 + mf[o + 1] * pj1 + mf[o + 2] * pj2
        pl1 = mf[o + 10] + mf[o + 3] * pj0 + mf[o + 4] * pj1 + mf[o + 5] * pj2
        pl2 = mf[o + 11] + mf[o + 6] * pj0 + mf[o + 7] * pj1 + mf[o + 8] * pj2
        if par == 0:
            for r in range(3):
                for cc in range(3):
                    oR[i, r, cc] = Rl[r, cc]
            op[i, 0] = pl0
            op[i, 1] = pl1
            op[i, 2] = pl2
        else:
            for r in range(3):
                for cc in range(3):
                    oR[i, r, cc] = oR[par, r, 0] * Rl[0, cc] + oR[par, r, 1] * Rl[1, cc] + oR[par, r, 2] * Rl[2, cc]
                op[i, r] = op[par, r] + oR[par, r, 0] * pl0 + oR[par, r, 1] * pl1 + oR[par, r, 2] * pl2
        # world axis (direction R a, a expressed in the joint frame = after Rj, unchanged by it)
        wa0 = oR[i, 0, 0] * ax0 + oR[i, 0, 1] * ax1 + oR[i, 0, 2] * ax2
        wa1 = oR[i, 1, 0] * ax0 + oR[i, 1, 1] * ax1 + oR[i, 1, 2] * ax2
        wa2 = oR[i, 2, 0] * ax0 + oR[i, 2, 1] * ax1 + oR[i, 2, 2] * ax2
        k = i - 1
        if jtype[i] == 0:
            px = op[i, 0]
            py = op[i, 1]
            pz = op[i, 2]
            S[0, k] = -(wa1 * pz - wa2 * py)
            S[1, k] = -(wa2 * px - wa0 * pz)
            S[2, k] = -(wa0 * py - wa1 * px)
            S[3, k] = wa0
            S[4, k] = wa1
            S[5, k] = wa2
        else:
            S[0, k] = wa0
            S[1, k] = wa1
            S[2, k] = wa2
            S[3, k] = 0.0
            S[4, k] = 0.0
            S[5, k] = 0.0
        qdi = qd[k]
        for r in range(6):
            V[i, r] = V[par, r] + S[r, k] * qdi
        # V x S: (w x s_v + v x s_w, w x s_w)
        vv0, vv1, vv2, vw0, vw1, vw2 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
        sv0, sv1, sv2, sw0, sw1, sw2 = S[0, k], S[1, k], S[2, k], S[3, k], S[4, k], S[5, k]
        Acc[i, 0] = Acc[par, 0] + qdi * ((vw1 * sv2 - vw2 * sv1) + (vv1 * sw2 - vv2 * sw1))
        Acc[i, 1] = Acc[par, 1] + qdi * ((vw2 * sv0 - vw0 * sv2) + (vv2 * sw0 - vv0 * sw2))
        Acc[i, 2] = Acc[par, 2] + qdi * ((vw0 * sv1 - vw1 * sv0) + (vv0 * sw1 - vv1 * sw0))
        Acc[i, 3] = Acc[par, 3] + qdi * (vw1 * sw2 - vw2 * sw1)
        Acc[i, 4] = Acc[par, 4] + qdi * (vw2 * sw0 - vw0 * sw2)
        Acc[i, 5] = Acc[par, 5] + qdi * (vw0 * sw1 - vw1 * sw0)
        # spatial inertia at the world origin: [[m 1, -m [c]], [m [c], I_w - m [c][c]]]
        m = mf[o + 15]
        lc0 = mf[o + 16]
        lc1 = mf[o + 17]
        lc2 = mf[o + 18]
        c0 = op[i, 0] + oR[i, 0, 0] * lc0 + oR[i, 0, 1] * lc1 + oR[i, 0, 2] * lc2
        c1_ = op[i, 1] + oR[i, 1, 0] * lc0 + oR[i, 1, 1] * lc1 + oR[i, 1, 2] * lc2
        c2 = op[i, 2] + oR[i, 2, 0] * lc0 + oR[i, 2, 1] * lc1 + oR[i, 2, 2] * lc2
        I6 = Ic[i]
        for r in range(3):
            for cc in range(3):
                acc = 0.0
                for a in range(3):
                    for b in range(3):
                        acc += oR[i, r, a] * mf[o + 19 + 3 * a + b] * oR[i, cc, b]
                I6[3 + r, 3 + cc] = acc
            I6[r, r] = m
        # [c]
        C = ((0.0, -c2, c1_), (c2, 0.0, -c0), (-c1_, c0, 0.0))
        for r in range(3):
            for cc in range(3):
                I6[r, 3 + cc] = -m * C[r][cc]
                I6[3 + r, cc] = m * C[r][cc]
                acc = 0.0
                for a in range(3):
                    acc += C[r][a] * C[a][cc]
                I6[3 + r, 3 + cc] -= m * acc
        # f = I A + V x* (I V);  V x* f = (w x f_l, w x f_a + v x f_l)
        for r in range(6):
            acc = 0.0
            acc2 = 0.0
            for cc in range(6):
                acc += I6[r, cc] * V[i, cc]
                acc2 += I6[r, cc] * Acc[i, cc]
            IV[r] = acc
            F[i, r] = acc2
        F[i, 0] += vw1 * IV[2] - vw2 * IV[1]
        F[i, 1] += vw2 * IV[0] - vw0 * IV[2]
        F[i, 2] += vw0 * IV[1] - vw1 * IV[0]
        F[i, 3] += (vw1 * IV[5] - vw2 * IV[4]) + (vv1 * IV[2] - vv2 * IV[1])
        F[i, 4] += (vw2 * IV[3] - vw0 * IV[5]) + (vv2 * IV[0] - vv0 * IV[2])
        F[i, 5] += (vw0 * IV[4] - vw1 * IV[3]) + (vv0 * IV[1] - vv1 * IV[0])
    # backward pass: h and composite inertias, then M (CRBA)
    for i in range(nj - 1, 0, -1):
        k = i - 1
        acc = 0.0
        for r in range(6):
            acc += S[r, k] * F[i, r]
        h[k] = acc
        par = parents[i]
        if par > 0:
            for r in range(6):
                F[par, r] += F[i, r]
                for cc in range(6):
                    Ic[par, r, cc] += Ic[i, r, cc]
    for i in range(nj - 1, 0, -1):
        k = i - 1
        for r in range(6):
            acc = 0.0
            for cc in range(6):
                acc += Ic[i, r, cc] * S[cc, k]
            Fs[r] = acc
        j = i
        while j > 0:
            kj = j - 1
            acc = 0.0
            for r in range(6):
                acc += S[r, kj] * Fs[r]
            M[k, kj] = acc
            M[kj, k] = acc
            j = parents[j]


@njit(cache=True)
def frame_placements(oR, op, fparents, fm, trans, rots):
    """World placement of each frame: ``R = oR[parent] R_pl``, ``p = op[parent] + oR[parent] p_pl``."""
    for f in range(fparents.shape[0]):
        i = fparents[f]
        o = f * FRAME_WIDTH
        for r in range(3):
            for cc in range(3):
                rots[f, r, cc] = oR[i, r, 0] * fm[o + cc] + oR[i, r, 1] * fm[o + 3 + cc] + oR[i, r, 2] * fm[o + 6 + cc]
            trans[f, r] = op[i, r] + oR[i, r, 0] * fm[o + 9] + oR[i, r, 1] * fm[o + 10] + oR[i, r, 2] * fm[o + 11]


@njit(cache=True)
def plant_accel(q, qd, t, tree_ready, parents, jtype, mf, grav, fparents, fm, tau, ip, fp, ws, sc, oR, op, S,
                M, h, trans, rots, qdd, tw, u, qdep):
    """q'' of the plant (seed 000 eq 9): ``M^{-1}(tau - h)`` for a tree (ip[IH_MP] == 0), else the UK
    acceleration under the compiled closure rows alone (:func:`closure_accel`, seed 001 eq 36). Returns the
    status (0 ok, 1 M not PD, 2 non-finite q'', 3 non-finite state).

    ``tree_ready``: tree_terms(q, q') is already in (oR, op, S, M, h). ``qdep``: the actuator columns depend
    on q (``between`` actuators): the program's rows also fill B(q) (fused_rows) and ``tau = B(q) u`` is
    formed here, as UKPlant._accel does with ActuatorMap.matrix; otherwise tau is the caller's ``B u``
    (u unused). ``sc``: a servo_scratch_shape(n, 0, ip[IH_MP], 0) array (its head also serves the tree's
    Cholesky factor); no heap allocation."""
    n = q.shape[0]
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(qd[i])):
            return NOT_FINITE_STATE
    if not tree_ready:
        tree_terms(q, qd, parents, jtype, mf, grav, oR, op, S, M, h, tw)
    if qdep:
        frame_placements(oR, op, fparents, fm, trans, rots)
        if not fused_rows(S, trans, rots, q, qd, t, ip, fp, ws):
            return NOT_FINITE_STATE
        p = ip[IH_P]
        Bq = ws[ip[IH_BMAT]:ip[IH_BMAT] + n * p].reshape((n, p))
        for i in range(n):
            acc = 0.0
            for j in range(p):
                acc += Bq[i, j] * u[j]
            tau[i] = acc
    if ip[IH_MP] == 0:
        if not free_accel(M, tau, h, sc[:n, :n], qdd):
            return NOT_PD
        for i in range(n):
            if not np.isfinite(qdd[i]):
                return NOT_FINITE
        return OK
    if not qdep:
        frame_placements(oR, op, fparents, fm, trans, rots)
        if not fused_rows(S, trans, rots, q, qd, t, ip, fp, ws):
            return NOT_FINITE_STATE
    phi, phid, A, b, gains, params = program_rows(ip, fp, ws, ip[IH_MP])    # the passive rows only
    return closure_accel(M, tau, h, A, b, phi, phid, gains, params, sc, qdd)


@njit(cache=True)
def plant_period(x, tau, t, dt, substeps, tree_ready, parents, jtype, mf, grav, fparents, fm, ip, fp, ws, sc,
                 oR, op, S, M, h, trans, rots, tw, kk, xt, u, qdep):
    """``substeps`` classical RK4 steps (:func:`rk4_accept`) of x = (q, q') over dt with the efforts held,
    accelerations by :func:`plant_accel` (``tree_ready``: the tree pass at x is already in the work arrays;
    ``u``, ``qdep``: see there). Returns the first non-zero status (x then partly advanced) or 0."""
    n = x.shape[0] // 2
    hstep = dt / substeps
    half = 0.5 * hstep
    for j in range(n):
        kk[0, j] = x[n + j]
    for sub in range(substeps):
        for stage in range(4):
            src = x if stage == 0 else xt
            ts = t if stage == 0 else (t + half if stage < 3 else t + hstep)
            qdd = kk[stage, n:]
            st = plant_accel(src[:n], src[n:], ts, tree_ready and sub == 0 and stage == 0, parents, jtype, mf, grav,
                             fparents, fm, tau, ip, fp, ws, sc, oR, op, S, M, h, trans, rots, qdd, tw, u, qdep)
            if st != 0.0:
                return st
            rk4_accept(x, kk, stage, half if stage < 2 else hstep, xt, qdd)
        t += hstep
    return 0.0


@njit(cache=True)
def plant_rk4(x, tau, t, dt, substeps, pi, pf, ip, fp, ws, pw):
    """:func:`plant_period` (tau held, no tree pass ready) on a packed model, for UKPlant.step.

    Packed model (few arguments: each costs dispatch time): ``pi = (nj, nf, parents, jtype, frame
    parents)``, ``pf = (gravity, joints (JOINT_WIDTH each), frames (FRAME_WIDTH each))``; ``pw`` is the
    work array (placements, S, M, h, frames, RK4 slopes, tree scratch, solve scratch), sized by
    plant_work_size."""
    n = x.shape[0] // 2
    nj = pi[0]
    nf = pi[1]
    mf1 = max(nf, 1)
    oR, o = _mat(pw, 0, nj, 9)
    op, o = _mat(pw, o, nj, 3)
    S, o = _mat(pw, o, 6, n)
    M, o = _mat(pw, o, n, n)
    h, o = _vec(pw, o, n)
    trans, o = _mat(pw, o, mf1, 3)
    rots, o = _mat(pw, o, mf1, 9)
    kk, o = _mat(pw, o, 4, 2 * n)
    xt, o = _vec(pw, o, 2 * n)
    tw, o = _vec(pw, o, TREE_SCRATCH_PER_JOINT * nj + 12)
    rows, cols = servo_scratch_shape(n, 0, ip[IH_MP], 0)
    sc, o = _mat(pw, o, rows, cols)
    return plant_period(x, tau, t, dt, substeps, False, pi[2:2 + nj], pi[2 + nj:2 + 2 * nj],
                        pf[3:3 + nj * JOINT_WIDTH], pf[0:3], pi[2 + 2 * nj:2 + 2 * nj + nf], pf[3 + nj * JOINT_WIDTH:],
                        ip, fp, ws, sc, oR.reshape((nj, 3, 3)), op, S, M, h, trans, rots.reshape((mf1, 3, 3)),
                        tw, kk, xt, tau[:0], False)


def plant_work_size(nj, n, nf, mp=0):
    """Length of plant_rk4's work array (mp: passive rows of the plant's program)."""
    mf1 = max(nf, 1)
    rows, cols = servo_scratch_shape(n, 0, mp, 0)
    return 12 * nj + 6 * n + n * n + n + 12 * mf1 + 10 * n + TREE_SCRATCH_PER_JOINT * nj + 12 + rows * cols
