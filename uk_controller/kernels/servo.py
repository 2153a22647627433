"""Compiled servo solve (numba): the UK equation with closures and Chen's servo control in one call.

One call computes, for ``M q'' = Q + B u + Qc_p`` with ``Q = tau - h``, passive rows ``A_p q'' = b_p`` and
servo rows ``A_s q'' = b_s`` (both right-hand sides Baumgarte-stabilized first, ``b <- b - (kd phi' + kp
phi)``, seed 000 eq 52)::

    L L^T = M                                   Cholesky (only M's LOWER triangle is read)
    N Q + r_p, N B                               seed 004 section V projected on the closures
    G_p = A_p M^{-1} A_p^T,  G_p^+ with  w > max(rcond^2, GRAM_FLOOR) w_max   (uk.gram_pinv)
    u = (A_s N B)^+ (b_s - A_s (N Q + r_p))      seed 004 eq 35, SVD rank rule of pinv_svd
    q'' = N Q + r_p + N B u,  passive force = M q'' - Q - B u

NumPy references (module :mod:`uk_controller.uk`): :func:`servo_solve` / :func:`servo_kernel` twin
``uk.servo_control`` and ``uk.ServoSolver`` with ``backend='numpy'`` (``ServoSolver(backend='numba')``
calls :func:`servo_kernel`); :func:`closure_accel` twins ``uk.constrained_acceleration`` (ServoSolver
with no efforts and no servo rows). Tests: ``test/test_uk_fast.py`` (``test_servo_solver_equals_servo_control``,
``test_solver_without_servo_is_the_uk_acceleration``, ``test_folded_baumgarte_equals_stabilized_rhs``).

Statuses and the ``info`` / ``params`` layouts are in :mod:`.codes`.
"""
from __future__ import annotations

import numpy as np

from .codes import (INFO_BBAR_NORM, INFO_CONDITION, INFO_CONSISTENT, INFO_N_SATURATED, INFO_PASSIVE_RANK, INFO_RANK,
                    INFO_RESIDUAL, INFO_STATUS, NOT_FINITE, NOT_PD, OK, PARAM_CONSISTENCY_TOL, PARAM_GRAM_FLOOR,
                    PARAM_MAX_SWEEPS, PARAM_RCOND)
from .jit import njit
from .linalg import (chol_solve_col, chol_solve_cols, cholesky_lower, column_norms, jacobi_columns, matmul,
                     scratch_row, scratch_rows)


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
    col, o = scratch_row(sc, o, n)
    MApT, o = scratch_rows(sc, o, n, mp)
    G, o = scratch_rows(sc, o, mp, mp)
    V, o = scratch_rows(sc, o, mp, mp)
    W, o = scratch_rows(sc, o, mp, mp)
    Gp, o = scratch_rows(sc, o, mp, mp)
    w, o = scratch_row(sc, o, mp)
    rp, o = scratch_row(sc, o, mp)
    y, o = scratch_row(sc, o, mp)
    APB, o = scratch_rows(sc, o, mp, p)
    Y, o = scratch_rows(sc, o, mp, p)
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
    wmax = column_norms(W, w)           # G is PSD: its singular values are its eigenvalues
    # residual of the passive rows with Q alone, and of each column of M^{-1} B
    row_residuals(Ap, a0, bp, phip, phidp, gains, 0, rp)
    rank_p = 0
    if wmax > 0.0:
        cut = max(rcond * rcond, floor) * wmax
        matmul(Ap, NB, APB)
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
        matmul(Gp, APB, Y)
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
    array. Returns the status (codes: OK, NOT_PD, NOT_FINITE q'')."""
    n = M.shape[0]
    L = sc[:n, :n]
    if not free_accel(M, tau, h, L, qdd):
        return NOT_PD
    passive_projection(L, Ap, bp, phip, phidp, gains, params[PARAM_RCOND], params[PARAM_GRAM_FLOOR],
                       int(params[PARAM_MAX_SWEEPS]), qdd, sc[:n, :0], sc, n)
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
    flags the clipped entries. Returns nothing; ``info[INFO_STATUS]`` is the status (codes.OK ...).
    No heap allocation: every intermediate lives in ``sc`` (a servo_scratch_shape(n, p, mp, ms) array).
    """
    n = M.shape[0]
    p = B.shape[1]
    ms = As.shape[0]
    mp = Ap.shape[0]
    rcond = params[PARAM_RCOND]
    tol = params[PARAM_CONSISTENCY_TOL]
    sweeps = int(params[PARAM_MAX_SWEEPS])
    for i in range(info.shape[0]):
        info[i] = 0.0
    L, o = scratch_rows(sc, 0, n, n)
    a0, o = scratch_row(sc, o, n)
    col, o = scratch_row(sc, o, n)
    NB, o = scratch_rows(sc, o, n, p)
    CB, o = scratch_rows(sc, o, ms, p)
    bbar, o = scratch_row(sc, o, ms)
    rs, o = scratch_row(sc, o, ms)
    Wsvd, o = scratch_rows(sc, o, max(p, ms), min(p, ms))
    Vs, o = scratch_rows(sc, o, min(p, ms), min(p, ms))
    s, o = scratch_row(sc, o, min(p, ms))
    # a0 = M^{-1} Q (Q = tau - h), NB = M^{-1} B (then projected on the closures)
    if not free_accel(M, tau, h, L, a0):
        info[INFO_STATUS] = NOT_PD
        return
    chol_solve_cols(L, B, NB, col)
    if mp > 0:
        info[INFO_PASSIVE_RANK] = passive_projection(L, Ap, bp, phip, phidp, gains, rcond, params[PARAM_GRAM_FLOOR],
                                                     sweeps, a0, NB, sc, o)
    # servo: CB u = bbar
    row_residuals(As, a0, bs, phis, phids, gains, mp, bbar)
    bnorm = 0.0
    for i in range(ms):
        bnorm += bbar[i] * bbar[i]
    bnorm = np.sqrt(bnorm)
    matmul(As, NB, CB)
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
        smax = column_norms(Ws, s)
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
    info[INFO_STATUS] = OK
    info[INFO_RANK] = rank
    info[INFO_CONDITION] = cond
    info[INFO_RESIDUAL] = res
    info[INFO_CONSISTENT] = 1.0 if res <= tol * max(1.0, bnorm) else 0.0
    info[INFO_BBAR_NORM] = bnorm
    for k in range(n):
        if not np.isfinite(qdd[k]):
            info[INFO_STATUS] = NOT_FINITE
    nsat = 0
    for j in range(p):
        if not np.isfinite(u[j]):
            info[INFO_STATUS] = NOT_FINITE
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
    info[INFO_N_SATURATED] = nsat


@njit(cache=True)
def servo_kernel(M, tau, h, B, As, bs, phis, phids, Ap, bp, phip, phidp, gains, params, limits,
                 u, qdd, pforce, effort, sat, info):
    """:func:`servo_solve` with its scratch array allocated here (one allocation per call; uk.ServoSolver's
    entry point)."""
    sc = np.empty(servo_scratch_shape(M.shape[0], B.shape[1], Ap.shape[0], As.shape[0]))
    servo_solve(M, tau, h, B, As, bs, phis, phids, Ap, bp, phip, phidp, gains, params, limits,
                u, qdd, pforce, effort, sat, info, sc)

