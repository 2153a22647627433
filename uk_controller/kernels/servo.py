"""Compiled servo solve (numba): the UK equation with closures and Chen's servo control in one call.

One call computes, for ``M q'' = Q + B u + Qc_p`` with ``Q = tau - h``, passive rows ``A_p q'' = b_p`` and
servo rows ``A_s q'' = b_s`` (both right-hand sides Baumgarte-stabilized first, ``b <- b - (kd phi' + kp
phi)``, seed 000 eq 52)::

    L L^T = M                                   Cholesky (only M's LOWER triangle is read)
    N Q + r_p, N B                               seed 004 section V projected on the closures
    G_p = A_p M^{-1} A_p^T,  G_p^+ with  w > max(rcond^2, GRAM_FLOOR) w_max   (uk.gram_pinv)
    u = (A_s N B)^+ (b_s - A_s (N Q + r_p))      seed 004 eq 35, SVD rank rule of pinv_svd
    u += P z  (+ P_int u_int)                    redundancy resolution (uk.redundancy_effort, DESIGN.md)
    q'' = N Q + r_p + N B u,  passive force = M q'' - Q - B u

Redundancy resolution (:func:`null_space_step`): the last ``params[PARAM_N_SECONDARY]`` servo rows are
posture rows (joint rows with their own gains; the last ``params[PARAM_N_ONE_SIDED]`` of them joint-limit
rows that act only where phi < 0), not tasks: with ``G = A_s N B`` on the task rows, ``P = I - G^+ G`` and
``M = L L^T``, ``z = (L^T N B P)^+ L^T (a_p - q''_task)`` (the M-norm least squares of seed 004 eq 35's
free term; DESIGN.md "Redundancy"), and an internal-force target u_int (params) adds its component in the
null space of N B. The pseudo-inverse comes from a pivoted Householder QR when its factors prove the rank
the SVD rule would give (:func:`null_space_qr`, kernels/qrls.py), from the one-sided Jacobi SVD otherwise
(:func:`null_space_jacobi`). Tests: test/test_null_space_qr.py.

NumPy references (module :mod:`uk_controller.core.uk`): :func:`servo_solve` / :func:`servo_kernel` twin
``uk.servo_control`` and ``uk.ServoSolver`` with ``backend='numpy'`` (:func:`null_space_step` twins
``uk.redundancy_effort``; test/test_redundancy.py) (``ServoSolver(backend='numba')``
calls :func:`servo_kernel`); :func:`closure_accel` twins ``uk.constrained_acceleration`` (ServoSolver
with no efforts and no servo rows). Tests: ``test/test_uk_fast.py`` (``test_servo_solver_equals_servo_control``,
``test_solver_without_servo_is_the_uk_acceleration``, ``test_folded_baumgarte_equals_stabilized_rhs``).

Statuses and the ``info`` / ``params`` layouts are in :mod:`.codes`.
"""

from __future__ import annotations

import numpy as np

from .codes import (
    INFO_BBAR_NORM,
    INFO_CONDITION,
    INFO_CONSISTENT,
    INFO_LIMIT_ITERATIONS,
    INFO_LIMIT_VIOLATION,
    INFO_LIMITED,
    INFO_N_SATURATED,
    INFO_NULL_INTERNAL,
    INFO_NULL_MOTION,
    INFO_PASSIVE_RANK,
    INFO_RANK,
    INFO_RESIDUAL,
    INFO_STATUS,
    NOT_FINITE,
    NOT_PD,
    OK,
    PARAM_CONSISTENCY_TOL,
    PARAM_GRAM_FLOOR,
    PARAM_INTERNAL,
    PARAM_INTERNAL_TARGET,
    PARAM_JOINT_METRIC,
    PARAM_LIMIT_EPS,
    PARAM_LIMIT_WEIGHT,
    PARAM_LIMITS_ON,
    PARAM_MAX_SWEEPS,
    PARAM_N_ONE_SIDED,
    PARAM_N_SECONDARY,
    PARAM_NULL_RCOND,
    PARAM_POSTURE_SPEED,
    PARAM_RCOND,
    PARAM_SINGULAR_DAMPING,
    PARAM_SINGULAR_THRESHOLD,
    PARAM_TASK_SPEED,
)
from .jit import njit
from .limits import beyond_limits, bounded_stage, singular_damping
from .linalg import (
    EPS,
    chol_solve_col,
    chol_solve_cols,
    cholesky_lower,
    column_norms,
    jacobi_columns,
    jacobi_columns_rhs,
    jacobi_rows,
    matmul,
    row_norms,
    scratch_row,
    scratch_rows,
)
from .qrls import inverse_frobenius, min_norm_solve, qr_pivoted_rows, reflect_row, reflect_vec, reflector_row


@njit(cache=True)
def correction(kd, kp, phi, phid, vmax):
    """The Baumgarte term ``kd phi' + kp phi`` (seed 000 eq 52) with its stiffness part saturated at the
    correction speed vmax: ``kd phi' + kd sat_vmax(kp phi / kd)`` (``kd > 0``), so that
    ``phi'' = -kd (phi' + sat(kp phi / kd))`` brings a far-off row back at most at speed vmax instead of
    asking for ``kp phi`` (a 3 rad error times w^2). ``V = phi'^2 / 2 + kd int sat`` decreases as
    ``-kd phi'^2``: the saturated law still converges (LaSalle). Inside the saturation (``|kp phi| <= kd
    vmax``) it is the linear term bit for bit; vmax = inf or kd <= 0 (first-order rows) is no cap."""
    c = kp * phi
    if kd > 0.0:
        cap = kd * vmax
        if c > cap:
            c = cap
        elif c < -cap:
            c = -cap
    return kd * phid + c


@njit(cache=True)
def row_residuals(A, x, b, phi, phid, gains, g0, vmax, out):
    """``out_i = (b_i - (kd_i phi'_i + kp_i phi_i)) - A_i . x``: the Baumgarte-stabilized right-hand side
    (seed 000 eq 52, the stiffness term saturated at the correction speed vmax, :func:`correction`) minus
    A x, with kd, kp = gains[0, g0 + i], gains[1, g0 + i]."""
    for i in range(A.shape[0]):
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[i, k] * x[k]
        bstab = b[i] - correction(gains[0, g0 + i], gains[1, g0 + i], phi[i], phid[i], vmax)
        out[i] = bstab - acc


@njit(cache=True)
def residual_norm(A, x, b, phi, phid, gains, g0, vmax, out):
    """``|out|`` after :func:`row_residuals` (the stabilized rows' residual at x)."""
    row_residuals(A, x, b, phi, phid, gains, g0, vmax, out)
    acc = 0.0
    for i in range(A.shape[0]):
        acc += out[i] * out[i]
    return np.sqrt(acc)


@njit(cache=True)
def accelerations(a0, NB, u, out):
    """``out = a0 + NB u`` (q'' of the closure-projected dynamics under the efforts u)."""
    for k in range(a0.shape[0]):
        acc = a0[k]
        for j in range(u.shape[0]):
            acc += NB[k, j] * u[j]
        out[k] = acc


@njit(cache=True)
def servo_scratch_shape(n, p, mp, ms):
    """Shape of the 2-D scratch array of :func:`servo_solve` for n coordinates, p efforts, mp passive and
    ms servo rows."""
    return 4 * n + 6 * mp + ms + max(p, ms) + min(ms, p) + 16 + p + null_scratch_rows(n, p), max(n, p, mp, ms, 1)


@njit(cache=True)
def null_scratch_rows(n, p):
    """Rows of scratch :func:`null_space_step` needs for n coordinates and p efforts: the larger of the
    Jacobi path's (:func:`null_space_jacobi`) and the QR path's (:func:`null_space_qr`)."""
    return n + 2 * p + max(max(n, p) + min(n, p) + 7, 11)


@njit(cache=True)
def posture_accel(As, bs, phis, phids, gains, g0, n_one_sided, vmax, ap):
    """``a_p = sum_i A_i^T rhs_i``, ``rhs_i = b_i - (kd_i phi'_i + kp_i phi_i)`` over the posture rows (gains
    from column g0; the stiffness term saturated at the speed vmax, :func:`correction`, except on the
    joint-limit rows); the last n_one_sided rows count only where phi < 0 (joint-limit rows)."""
    ns = As.shape[0]
    for i in range(ap.shape[0]):
        ap[i] = 0.0
    for i in range(ns):
        cap = vmax if i < ns - n_one_sided else np.inf
        r = bs[i] - correction(gains[0, g0 + i], gains[1, g0 + i], phis[i], phids[i], cap)
        if i >= ns - n_one_sided and not phis[i] < 0.0:
            r = 0.0
        for j in range(ap.shape[0]):
            ap[j] += As[i, j] * r


@njit(cache=True)
def mass_weighted(L, NB, qdd_task, ap, X, ltd):
    """``X = L^T N B`` (row i summed over m = i..n-1, all columns at once) and ``ltd = L^T (a_p - q''_task)``
    (M = L L^T: ``|x|_M = |L^T x|``); returns ``|X|_F``."""
    n = L.shape[0]
    p = NB.shape[1]
    for i in range(n):
        for j in range(p):
            X[i, j] = 0.0
        for m in range(i, n):
            lmi = L[m, i]
            for j in range(p):
                X[i, j] += lmi * NB[m, j]
    fro = 0.0
    for i in range(n):
        for j in range(p):
            fro += X[i, j] * X[i, j]
    for i in range(n):
        acc = 0.0
        for m in range(i, n):
            acc += L[m, i] * (ap[m] - qdd_task[m])
        ltd[i] = acc
    return np.sqrt(fro)


@njit(cache=True)
def null_space_step(
    L,
    NB,
    qdd_task,
    As,
    bs,
    phis,
    phids,
    gains,
    g0,
    n_one_sided,
    vmax,
    right_g,
    sg,
    rank_g,
    right_scaled,
    null_rcond,
    sweeps,
    internal,
    target,
    du,
    sc,
    o,
):
    """Redundancy resolution on the closure-projected dynamics (DESIGN.md "Redundancy"; twin of
    ``uk.redundancy_effort``): writes ``du = P z (+ P_int u_int)`` and returns the dimensions
    ``(motion, internal)`` of the null space of the task.

    ``As``, ``bs``, ``phis``, ``phids``: the posture rows (gains from column g0 of `gains`, stiffness terms
    saturated at the speed vmax: :func:`posture_accel`); the last n_one_sided of them count only where
    phi < 0 (joint-limit rows). ``L`` is the lower factor of the metric ``W = L L^T`` the posture is matched
    in: M's Cholesky factor (the M-norm) or the identity (every joint's acceleration weighted alike, so
    light joints are damped as much as heavy ones). With ``rhs_i = b_i - (kd_i phi'_i + kp_i phi_i)``::

        a_p  = sum_i A_i^T rhs_i                     posture acceleration (A = I: a_p = -Kp (q - q_ref) - Kd q')
        P    = I - V_G V_G^T = Z Z^T                 V_G: the kept right singular vectors of G = A_s N B;
                                                     Z (p, k): orthonormal basis of null(G), k = p - rank G
        X    = L^T N B,   Y = X Z                    M = L L^T: |x|_M = |L^T x|; Y's non-zero singular values
                                                     are those of X P
        z    = Z Y^+ L^T (a_p - q''_task),  du = z   rank of Y: s_k > cut = null_rcond |X|_F
        du  += Z (I - V_Y V_Y^T) Z^T u_int           only when `internal` (u_int = target; = P_int u_int)

    ``right_g`` (p, c): G's right singular vectors, scaled by s_k when right_scaled; ``rank_g`` of them are
    kept (``sg[k] > 0``, chosen by the caller's rank rule). Scratch from row o of sc.

    Two ways to ``Y^+``, the same minimum-norm least squares (du does not depend on which orthonormal basis
    Z of null(G) is used: ``Z Y^+ = (X P)^+``):

    - :func:`null_space_qr` (no internal target, Y tall: k <= n): Z from Householder reflections of V_G,
      Y by pivoted Householder QR, ``Y P = Q [R11 R12; 0 R22]``; taken only when the factors PROVE the SVD
      rule's rank r: ``1 / |R11^{-1}|_F - margin > cut`` (a lower bound of s_r(Y), R11 being a block of R)
      and ``|R22|_F <= margin`` (an upper bound of s_{r+1}(Y), Weyl), margin = 16 (n + p) eps |X|_F for the
      round-off of the factorizations and ``2 margin < cut``; then z is the complete orthogonal
      decomposition's minimum-norm solution (kernels/qrls.py).
    - otherwise (or when the proof fails) :func:`null_space_jacobi`: Z by pivoted Gram-Schmidt on P, the
      one-sided Jacobi SVD of Y and the SVD rule itself.

    Both return the same dimensions; their du agree to round-off."""
    n = L.shape[0]
    p = NB.shape[1]
    k = p - rank_g
    ap, o = scratch_row(sc, o, n)
    posture_accel(As, bs, phis, phids, gains, g0, n_one_sided, vmax, ap)
    if not internal and k <= n:
        ok, rank_y = null_space_qr(L, NB, qdd_task, ap, right_g, sg, rank_g, right_scaled, null_rcond, du, sc, o)
        if ok:
            return rank_y, p - rank_g - rank_y
    return null_space_jacobi(
        L, NB, qdd_task, ap, right_g, sg, rank_g, right_scaled, null_rcond, sweeps, internal, target, du, sc, o
    )


@njit(cache=True)
def null_space_qr(L, NB, qdd_task, ap, right_g, sg, rank_g, right_scaled, null_rcond, du, sc, o):
    """The fast path of :func:`null_space_step` (tall Y, no internal target): ``(True, rank of Y)`` with du
    written, or ``(False, 0)`` when the factors do not prove the rank the SVD rule would give.

    ``V_G`` (p x g, g = rank_g; the kept columns of right_g, normalized) ``= H_1 ... H_g [R_G; 0]`` by
    Householder reflections; ``Z = H_1 ... H_g [0; I_k]`` is an orthonormal basis of null(G), so
    ``Y^T = (H_g ... H_1 X^T)[g:, :]`` (the reflections applied to X^T from the left, no p x p projector)
    and ``du = H_1 ... H_g [0; z]``. Then :func:`.qrls.qr_pivoted_rows` on Y (stopping where the trailing
    block is below margin), :func:`.qrls.inverse_frobenius` for the bound ``s_r(Y) >= 1 / |R11^{-1}|_F``
    and :func:`.qrls.min_norm_solve` for ``z = Y_r^+ L^T (a_p - q''_task)`` (see :func:`null_space_step`
    for the rule). Scratch from row o of sc: 2 p + 10 rows."""
    n = L.shape[0]
    p = NB.shape[1]
    k = p - rank_g
    VT, o = scratch_rows(sc, o, rank_g, p)
    XT, o = scratch_rows(sc, o, p, n)
    T, o = scratch_rows(sc, o, k, k)
    bg, o = scratch_row(sc, o, p)
    ltd, o = scratch_row(sc, o, n)
    rdiag, o = scratch_row(sc, o, k)
    by, o = scratch_row(sc, o, k)
    perm, o = scratch_row(sc, o, k)
    nrm, o = scratch_row(sc, o, k)
    g, o = scratch_row(sc, o, k)
    w, o = scratch_row(sc, o, max(n, k))
    zr, o = scratch_row(sc, o, k)
    wv, o = scratch_row(sc, o, p)
    # V_G's kept columns, normalized, as the rows of VT; their Householder QR (orthonormal columns: |R_jj| = 1)
    j = 0
    for c in range(sg.shape[0]):
        if sg[c] > 0.0 and c < right_g.shape[1]:
            if j >= rank_g:
                return False, 0
            scale = 1.0 / sg[c] if right_scaled else 1.0
            for i in range(p):
                VT[j, i] = right_g[i, c] * scale
            j += 1
    if j != rank_g:
        return False, 0
    for j in range(rank_g):
        alpha, b = reflector_row(VT, j, j)
        if not abs(alpha) > 0.5:
            return False, 0
        bg[j] = b
        for c in range(j + 1, rank_g):
            reflect_row(VT, j, j, b, VT, c)
    # X^T = (L^T N B)^T (entry (j, i) summed over m = i..n-1 in that order, as X's), |X|_F, L^T (a_p - q''_task)
    for j in range(p):
        for i in range(n):
            XT[j, i] = 0.0
    for m in range(n):
        for j in range(p):
            nbmj = NB[m, j]
            for i in range(m + 1):
                XT[j, i] += L[m, i] * nbmj
    fro = 0.0
    for j in range(p):
        for i in range(n):
            fro += XT[j, i] * XT[j, i]
    fro = np.sqrt(fro)
    for i in range(n):
        acc = 0.0
        for m in range(i, n):
            acc += L[m, i] * (ap[m] - qdd_task[m])
        ltd[i] = acc
    cut = null_rcond * fro
    margin = 16.0 * (n + p) * EPS * fro
    if not 2.0 * margin < cut:
        return False, 0
    # Y^T = rows g.. of H_g ... H_1 X^T (each reflection on all n columns of X^T at once, w_i = sum_m v_m X^T_mi;
    # row j of the result is never read again: the later reflections act on rows > j, Y^T is rows >= g)
    for j in range(rank_g):
        for i in range(n):
            w[i] = 0.0
        for m in range(j, p):
            vm = VT[j, m]
            for i in range(n):
                w[i] += vm * XT[m, i]
        b = bg[j]
        for m in range(j + 1, p):
            vm = VT[j, m] * b
            for i in range(n):
                XT[m, i] -= vm * w[i]
    YT = XT[rank_g:]
    r, _ = qr_pivoted_rows(YT, ltd, rdiag, by, perm, nrm, margin)
    if r > 0 and not 1.0 / inverse_frobenius(YT, rdiag, r, w) - margin > cut:
        return False, 0
    min_norm_solve(YT, rdiag, perm, r, ltd, T, g, w, zr)
    # du = H_1 ... H_g [0; z]
    for j in range(rank_g):
        wv[j] = 0.0
    for j in range(k):
        wv[rank_g + j] = zr[j]
    for j in range(rank_g - 1, -1, -1):
        reflect_vec(VT, j, j, bg[j], wv)
    for i in range(p):
        du[i] = wv[i]
    return True, r


@njit(cache=True)
def null_space_jacobi(
    L, NB, qdd_task, ap, right_g, sg, rank_g, right_scaled, null_rcond, sweeps, internal, target, du, sc, o
):
    """:func:`null_space_step` by the SVD: ``P = I - V_G V_G^T``, Z by pivoted Gram-Schmidt on the columns of
    P, the one-sided Jacobi SVD of Y = X Z (k columns wide instead of p: the null space only) and its rank
    rule ``s_k > null_rcond |X|_F``; the only path with an internal-force target, and the fall-back of
    :func:`null_space_qr`. Returns ``(motion, internal)``."""
    n = L.shape[0]
    p = NB.shape[1]
    k = p - rank_g
    # transposed layouts (PT = P^T, ZT = Z^T, WyT / VyT = the Jacobi pair's W^T / V^T): every loop below runs
    # over contiguous rows; each entry sees the operations of the column-wise formulation, in its order
    PT, o = scratch_rows(sc, o, p, p)
    X, o = scratch_rows(sc, o, n, p)
    ZT, o = scratch_rows(sc, o, k, p)
    WyT, o = scratch_rows(sc, o, min(n, k), max(n, k))
    VyT, o = scratch_rows(sc, o, min(n, k), min(n, k))
    sy, o = scratch_row(sc, o, min(n, k))
    ltd, o = scratch_row(sc, o, n)
    vk, o = scratch_row(sc, o, p)
    nrm, o = scratch_row(sc, o, p)
    # P = I - V_G V_G^T  (stored as PT[j, i] = P[i, j])
    for i in range(p):
        for j in range(p):
            PT[i, j] = 1.0 if i == j else 0.0
    for c in range(sg.shape[0]):
        if sg[c] > 0.0 and c < right_g.shape[1]:
            scale = 1.0 / (sg[c] * sg[c]) if right_scaled else 1.0
            for i in range(p):
                vi = right_g[i, c] * scale
                for j in range(p):
                    PT[j, i] -= vi * right_g[j, c]
    # Z: pivoted Gram-Schmidt on P's columns (a rank-k projector: the pivots stay >= (k - j) / p)
    for c in range(p):
        acc = 0.0
        for i in range(p):
            acc += PT[c, i] * PT[c, i]
        nrm[c] = acc
    for j in range(k):
        best = 0
        for c in range(1, p):
            if nrm[c] > nrm[best]:
                best = c
        inv = 1.0 / np.sqrt(nrm[best])
        for i in range(p):
            ZT[j, i] = PT[best, i] * inv
        nrm[best] = -1.0
        for c in range(p):
            if nrm[c] >= 0.0:
                dot = 0.0
                for i in range(p):
                    dot += ZT[j, i] * PT[c, i]
                acc = 0.0
                for i in range(p):
                    PT[c, i] -= dot * ZT[j, i]
                    acc += PT[c, i] * PT[c, i]
                nrm[c] = acc
    # X = L^T N B, |X|_F, ltd = L^T (a_p - q''_task)
    fro = mass_weighted(L, NB, qdd_task, ap, X, ltd)
    # Y = X Z: the Jacobi pair's W is Y (k <= n: WyT = Y^T) or Y^T (k > n: WyT = Y)
    tall = k <= n
    for i in range(n):
        for j in range(k):
            acc = 0.0
            for m in range(p):
                acc += X[i, m] * ZT[j, m]
            if tall:
                WyT[j, i] = acc
            else:
                WyT[i, j] = acc
    jacobi_rows(WyT, VyT, sweeps)
    row_norms(WyT, sy)
    # reduced z (k) in vk, then du = Z z
    for j in range(k):
        vk[j] = 0.0
    cut = null_rcond * fro
    rank_y = 0
    c = min(n, k)
    for kk in range(c):
        if fro > 0.0 and sy[kk] > cut:
            rank_y += 1
            s2 = 1.0 / (sy[kk] * sy[kk])
            coef = 0.0
            if tall:  # Y = W V^T: z += V_k (W_k . ltd) / s_k^2
                for i in range(n):
                    coef += WyT[kk, i] * ltd[i]
                coef *= s2
                for j in range(k):
                    vk[j] += VyT[kk, j] * coef
            else:  # Y^T = W V^T, Y = V W^T: z += W_k (V_k . ltd) / s_k^2
                for i in range(n):
                    coef += VyT[kk, i] * ltd[i]
                coef *= s2
                for j in range(k):
                    vk[j] += WyT[kk, j] * coef
        else:
            sy[kk] = 0.0
    if internal:
        # + (I - V_Y V_Y^T) Z^T u_int in reduced coordinates (nrm: Z^T u_int)
        for j in range(k):
            acc = 0.0
            for i in range(p):
                acc += ZT[j, i] * target[i]
            nrm[j] = acc
        for kk in range(c):
            if sy[kk] > 0.0:
                coef = 0.0
                for j in range(k):
                    vj = VyT[kk, j] if tall else WyT[kk, j] / sy[kk]
                    coef += vj * nrm[j]
                for j in range(k):
                    vj = VyT[kk, j] if tall else WyT[kk, j] / sy[kk]
                    nrm[j] -= vj * coef
        for j in range(k):
            vk[j] += nrm[j]
    for i in range(p):
        acc = 0.0
        for j in range(k):
            acc += ZT[j, i] * vk[j]
        du[i] = acc
    return rank_y, p - rank_g - rank_y


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
    of M; scratch from row o of the 2-D array sc (n + 6 mp + 3 rows). Returns the rank of G."""
    n = L.shape[0]
    p = NB.shape[1]
    mp = Ap.shape[0]
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
    chol_solve_cols(L, Ap.T, MApT)
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
    # G is symmetric, so W holds G^T too: rotating its (contiguous) rows is the one-sided Jacobi of its
    # columns, operation for operation (the same bits), with V returned transposed
    VT = V
    jacobi_rows(W, VT, sweeps)
    wmax = row_norms(W, w)  # G is PSD: its singular values are its eigenvalues
    # residual of the passive rows with Q alone, and of each column of M^{-1} B
    row_residuals(Ap, a0, bp, phip, phidp, gains, 0, np.inf, rp)
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
                    vi = VT[kk, i] * inv
                    for j in range(mp):
                        Gp[i, j] += vi * VT[kk, j]
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
    passive_projection(
        L,
        Ap,
        bp,
        phip,
        phidp,
        gains,
        params[PARAM_RCOND],
        params[PARAM_GRAM_FLOOR],
        int(params[PARAM_MAX_SWEEPS]),
        qdd,
        sc[:n, :0],
        sc,
        n,
    )
    for k in range(n):
        if not np.isfinite(qdd[k]):
            return NOT_FINITE
    return OK


@njit(cache=True)
def servo_solve(
    M,
    tau,
    h,
    B,
    As,
    bs,
    phis,
    phids,
    Ap,
    bp,
    phip,
    phidp,
    gains,
    params,
    limits,
    alo,
    ahi,
    u,
    qdd,
    pforce,
    effort,
    sat,
    info,
    sc,
):
    """Servo control of seed 004 with closures (see module docstring); writes u, qdd, pforce, info.

    :func:`free_accel`, ``NB = M^{-1} B``, the passive rows by :func:`passive_projection` (N Q + r_p in a0,
    N B in NB), then the servo rows by seed 004 eq 35, ``u = (A_s N B)^+ (b_s - A_s (N Q + r_p))``
    (SVD rank rule of pinv_svd), and ``q'' = N Q + r_p + N B u``.

    ``gains`` (2, mp + ms): kd and kp per row, passive rows first (order-1 rows
    carry kd = 0, kp = k1). ``effort`` is u clipped to ``+-limits`` and ``sat``
    flags the clipped entries. With the joint-limit stage on (``params[PARAM_LIMITS_ON]``) an effort
    beyond ``+-limits`` or a joint acceleration outside ``[alo, ahi]`` (kernels/limits.py) makes u the
    bounded least squares of the task rows instead (:func:`.limits.bounded_stage`; the task exact
    whenever nothing is beyond a bound, since then this branch is not taken), and ``sat`` flags the
    efforts held at their limit. Returns nothing; ``info[INFO_STATUS]`` is the status (codes.OK ...).
    No heap allocation: every intermediate lives in ``sc`` (a servo_scratch_shape(n, p, mp, ms) array).
    """
    n = M.shape[0]
    p = B.shape[1]
    mp = Ap.shape[0]
    nsec = int(params[PARAM_N_SECONDARY])
    internal = params[PARAM_INTERNAL] != 0.0
    mall = As.shape[0]
    ms = mall - nsec  # task rows; the nsec rows after them are posture rows
    rcond = params[PARAM_RCOND]
    tol = params[PARAM_CONSISTENCY_TOL]
    sweeps = int(params[PARAM_MAX_SWEEPS])
    for i in range(info.shape[0]):
        info[i] = 0.0
    L, o = scratch_rows(sc, 0, n, n)
    a0, o = scratch_row(sc, o, n)
    NB, o = scratch_rows(sc, o, n, p)
    CB, o = scratch_rows(sc, o, ms, p)
    bbar, o = scratch_row(sc, o, ms)
    rs, o = scratch_row(sc, o, ms)
    Wsvd, o = scratch_rows(sc, o, max(p, ms), min(p, ms))
    Vs, o = scratch_rows(sc, o, min(p, ms), min(p, ms))
    s, o = scratch_row(sc, o, min(p, ms))
    start, o = scratch_row(sc, o, p)
    rb, o = scratch_row(sc, o, ms)  # near a singularity: the commanded part of bbar (the drift's complement)
    ug, o = scratch_row(sc, o, p)  # near a singularity: the drift part of u
    limited = params[PARAM_LIMITS_ON] != 0.0
    if limited:  # the previous step's effort: the joint-limit stage's warm start
        for j in range(p):
            start[j] = u[j]
    # a0 = M^{-1} Q (Q = tau - h), NB = M^{-1} B (then projected on the closures)
    if not free_accel(M, tau, h, L, a0):
        info[INFO_STATUS] = NOT_PD
        return
    chol_solve_cols(L, B, NB)
    if mp > 0:
        info[INFO_PASSIVE_RANK] = passive_projection(
            L, Ap, bp, phip, phidp, gains, rcond, params[PARAM_GRAM_FLOOR], sweeps, a0, NB, sc, o
        )
    # servo: CB u = bbar
    row_residuals(
        As[:ms], a0, bs, phis, phids, gains, mp, params[PARAM_TASK_SPEED], bbar
    )  # the task rows (posture rows: below)
    bnorm = 0.0
    for i in range(ms):
        bnorm += bbar[i] * bbar[i]
    bnorm = np.sqrt(bnorm)
    matmul(As[:ms], NB, CB)
    for j in range(p):
        u[j] = 0.0
    rank = np.int64(0)  # not the literal 0: numba would compile null_space_step for Literal[int](0) too
    cond = np.inf
    lam2 = 0.0
    c = min(ms, p)
    left, right = Vs, Wsvd[:p, :c]
    if ms > 0 and p > 0:
        wide = ms <= p
        if wide:  # columns of CB^T (p x ms): CB = V S U^T; V only as V^T bbar (in rs)
            Ws = Wsvd[:p, :ms]
            for i in range(ms):
                rs[i] = bbar[i]
                for j in range(p):
                    Ws[j, i] = CB[i, j]
            jacobi_columns_rhs(Ws, rs, sweeps)
        else:  # columns of CB (ms x p): CB = U S V^T
            Ws = Wsvd[:ms, :p]
            for i in range(ms):
                for j in range(p):
                    Ws[i, j] = CB[i, j]
            jacobi_columns(Ws, Vs, sweeps)
        smax = column_norms(Ws, s)
        # singular vectors in the row space of bbar (ms x c) and in the effort space (p x c), scaled by s_k:
        # ms <= p: CB = V S U^T with W = U S;  else CB = U S V^T with W = U S
        left, right = (Vs, Ws) if ms <= p else (Ws, Vs)  # left: read only when ms > p
        if smax > 0.0:
            smin = smax
            sleast = smax  # the smallest singular value, kept or not: the damping's argument
            for k in range(c):
                if s[k] > rcond * smax:
                    rank += 1
                    if s[k] < smin:
                        smin = s[k]
                if s[k] < sleast:
                    sleast = s[k]
            if limited:  # the task rows' damping near a singularity (0: the exact law)
                lam2 = singular_damping(sleast, smax, params[PARAM_SINGULAR_THRESHOLD], params[PARAM_SINGULAR_DAMPING])
            if lam2 > 0.0:
                # damped: bbar = b + d with the drift d = -A_s a0 solved exactly (its coefficients stay bounded:
                # d = CB u_c for the effort u_c that cancels a0) and the commanded b = bbar - d damped,
                # s / (s^2 + lambda^2); ug keeps the drift part (the centre of the stage's damping)
                for i in range(ms):
                    acc = 0.0
                    for k in range(n):
                        acc += As[i, k] * a0[k]
                    rb[i] = bbar[i] + acc
                if wide:  # the same rotations again, now on b (V^T b in rb)
                    for i in range(ms):
                        for j in range(p):
                            Ws[j, i] = CB[i, j]
                    jacobi_columns_rhs(Ws, rb, sweeps)
                    column_norms(Ws, s)
                for j in range(p):
                    ug[j] = 0.0
            for k in range(c):
                if lam2 > 0.0:
                    if wide:  # (V^T b)_k and (V^T d)_k = (V^T bbar)_k - (V^T b)_k
                        cb = rb[k]
                        cd = rs[k] - rb[k]
                    else:
                        cb = 0.0
                        cd = 0.0
                        for i in range(ms):
                            cb += left[i, k] * rb[i]
                            cd += left[i, k] * (bbar[i] - rb[i])
                    cb /= s[k] * s[k] + lam2
                    cd = cd / (s[k] * s[k]) if s[k] > rcond * smax else 0.0
                    for j in range(p):
                        u[j] += right[j, k] * (cb + cd)
                        ug[j] += right[j, k] * cd
                elif s[k] > rcond * smax:
                    s2 = 1.0 / (s[k] * s[k])
                    if wide:  # u += W_k (V^T bbar)_k / s_k^2
                        coef = rs[k]
                    else:  # u += right_k (left_k . bbar) / s_k^2
                        coef = 0.0
                        for i in range(ms):
                            coef += left[i, k] * bbar[i]
                    coef *= s2
                    for j in range(p):
                        u[j] += right[j, k] * coef
                if not s[k] > rcond * smax:
                    s[k] = 0.0  # dropped: not in G's row space for null_space_step
            cond = smax / smin
        else:
            for k in range(c):
                s[k] = 0.0
    du, on = scratch_row(sc, o, p)  # the null-space term (the centre of the stage's damping: zero without)
    for j in range(p):
        du[j] = 0.0
    if nsec > 0 or internal:
        # q''_task, then the null-space term u += P z (+ P_int u_int); scratch after s (the passive
        # projection's rows are free again)
        qt, on = scratch_row(sc, on, n)
        accelerations(a0, NB, u, qt)
        Lw = L
        if params[PARAM_JOINT_METRIC] != 0.0:  # the identity metric: |x| on joint accelerations
            Lw, on = scratch_rows(sc, on, n, n)
            for i in range(n):
                for k in range(n):
                    Lw[i, k] = 1.0 if i == k else 0.0
        nm, ni = null_space_step(
            Lw,
            NB,
            qt,
            As[ms:],
            bs[ms:],
            phis[ms:],
            phids[ms:],
            gains,
            mp + ms,
            int(params[PARAM_N_ONE_SIDED]),
            params[PARAM_POSTURE_SPEED],
            right,
            s[:c] if ms > 0 else s[:0],
            rank,
            ms <= p,
            params[PARAM_NULL_RCOND],
            sweeps,
            internal,
            params[PARAM_INTERNAL_TARGET : PARAM_INTERNAL_TARGET + p],
            du,
            sc,
            on,
        )
        for j in range(p):
            u[j] += du[j]
        info[INFO_NULL_MOTION] = nm
        info[INFO_NULL_INTERNAL] = ni
    if lam2 > 0.0:  # the centre of the stage's damping: u but its damped commanded part
        for j in range(p):
            du[j] += ug[j]
    # q'' = a0 + NB u, residual of the (stabilized) servo rows, passive force
    accelerations(a0, NB, u, qdd)
    if limited and beyond_limits(u, limits, qdd, alo, ahi):
        # the joint-limit stage: bounded least squares on the task rows (CB u = bbar) with the joint
        # acceleration bounds alo <= a0 + NB u <= ahi and the effort box (kernels/limits.py). The step is
        # LIMITED when the unbounded effort met the task (an under-actuated task stays SERVO_INCONSISTENT)
        # (damped near a singularity: the undamped law meets independent task rows)
        if (lam2 > 0.0 and rank == ms) or residual_norm(
            As[:ms], qdd, bs, phis, phids, gains, mp, params[PARAM_TASK_SPEED], rs
        ) <= tol * max(1.0, bnorm):
            info[INFO_LIMITED] = 1.0
        it, viol = bounded_stage(
            CB,
            bbar,
            NB,
            a0,
            alo,
            ahi,
            limits,
            params[PARAM_LIMIT_WEIGHT],
            params[PARAM_LIMIT_EPS],
            u,
            start,
            sc,
            o + 1,
            lam2,
            du,
        )
        info[INFO_LIMIT_ITERATIONS] = it
        info[INFO_LIMIT_VIOLATION] = viol
        accelerations(a0, NB, u, qdd)
    res = residual_norm(As[:ms], qdd, bs, phis, phids, gains, mp, params[PARAM_TASK_SPEED], rs)
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
        elif limited and abs(e) >= lim * (1.0 - 1e-12):  # held at its limit by the bounded stage
            sat[j] = True
        if sat[j]:
            nsat += 1
        effort[j] = e
    info[INFO_N_SATURATED] = nsat


@njit(cache=True)
def servo_kernel(
    M,
    tau,
    h,
    B,
    As,
    bs,
    phis,
    phids,
    Ap,
    bp,
    phip,
    phidp,
    gains,
    params,
    limits,
    alo,
    ahi,
    u,
    qdd,
    pforce,
    effort,
    sat,
    info,
):
    """:func:`servo_solve` with its scratch array allocated here (one allocation per call; uk.ServoSolver's
    entry point). M goes on as a view of any layout (``M[:, :]``), the type the controllers' packed step
    gives it: one compiled servo solve serves both, where a row-major M made numba compile it (with the
    joint-limit stage and the null-space step it calls) a second time."""
    sc = np.empty(servo_scratch_shape(M.shape[0], B.shape[1], Ap.shape[0], As.shape[0]))
    servo_solve(
        M[:, :],
        tau,
        h,
        B,
        As,
        bs,
        phis,
        phids,
        Ap,
        bp,
        phip,
        phidp,
        gains,
        params,
        limits,
        alo,
        ahi,
        u,
        qdd,
        pforce,
        effort,
        sat,
        info,
        sc,
    )
