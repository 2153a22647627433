"""The Udwadia–Kalaba equation and Chen's constraint-following servo control.

Plain NumPy/SciPy in, NumPy out: nothing here knows about robots, Pinocchio or
ROS. Notation follows the seeds:

    M q'' = Q + Qc                        unconstrained dynamics plus constraint force
    A q'' = b                             constraints in second-order form (m rows)

Reference (square-root) form, seed 000 eq 7 / seed 004 eq 11 / seed 001 eq 36::

    Qc = M^{1/2} (A M^{-1/2})^+ (b - A M^{-1} Q)

Fast form. Because ``B^+ = B^T (B B^T)^+`` for every matrix B, with
``B = A M^{-1/2}``::

    Qc = A^T (A M^{-1} A^T)^+ (b - A M^{-1} Q)

which needs one Cholesky factor of M and the pseudo-inverse of the small
symmetric m x m Gram matrix ``G = A M^{-1} A^T``; no matrix square root.

Rank tolerance. ``rcond`` is always relative to the largest singular value of
``B = A M^{-1/2}``. The Gram matrix squares singular values, so the fast form
applies ``max(rcond**2, GRAM_FLOOR)`` relative to the largest eigenvalue of G;
it therefore separates rank only down to about ``sqrt(GRAM_FLOOR) = 1e-7`` of
``sigma_max(B)``. Constraint sets whose meaningful singular values lie below
that (badly scaled rows) should use the reference form or rescale rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import get_lapack_funcs

from ..kernels.codes import (
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
)
from . import pinv as _pinv
from .baumgarte import correction

DEFAULT_RCOND = 1e-10
#: Smallest relative eigenvalue of the Gram matrix treated as non-zero.
GRAM_FLOOR = 1e-14
#: relative residual of Chen's servo equation below which it counts as consistent (solved exactly)
CONSISTENCY_TOL = 1e-8
#: rank cut of the null-space solve (:func:`redundancy_effort`), relative to ``|L^T N B|_F``: a direction
#: of the task's null space moves the robot when its singular value is above this fraction
NULL_RCOND = 1e-6


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """The mass matrix is not symmetric positive definite."""


class ServoInfeasibleError(RuntimeError):
    """The servo constraint cannot be realised by the available actuators."""


# --------------------------------------------------------------------------- helpers


# LAPACK routines fetched once (scipy's cho_factor/eigh wrappers validate and copy on every call,
# which costs more than the factorisation of a robot-sized matrix).
_SYEVD, _POTRF, _POTRS, _POSV, _GESDD = get_lapack_funcs(
    ('syevd', 'potrf', 'potrs', 'posv', 'gesdd'), (np.zeros((1, 1)),)
)


def _eig_spd(M):
    """``M = V diag(w) V^T`` by LAPACK ``dsyevd`` (direct call; scipy's eigh wrapper costs more than
    the work for robot-sized M). Raises :class:`NotPositiveDefiniteError` if ``w_min <= 0``."""
    w, V, info = _SYEVD(np.asarray(M, dtype=float), compute_v=1, lower=0)
    if info != 0:
        raise np.linalg.LinAlgError(f'eigen-decomposition failed (syevd info {info})')
    if w.size and w[0] <= 0.0:
        raise NotPositiveDefiniteError(f'mass matrix not positive definite (eigenvalue {w[0]:.3e})')
    return w, V


def symmetric_sqrt(M, *, inverse=False):
    """Return ``M^{1/2}`` (or ``M^{-1/2}``) of a symmetric positive definite M.

    Symmetric square root by eigen-decomposition, ``M = V diag(w) V^T``.
    Raises :class:`NotPositiveDefiniteError` if an eigenvalue is not positive.
    """
    w, V = _eig_spd(M)
    scale = w ** (-0.5 if inverse else 0.5)
    return (V * scale) @ V.T


def symmetric_sqrt_pair(M):
    """``(M^{1/2}, M^{-1/2})`` from ONE eigen-decomposition of the SPD matrix M."""
    w, V = _eig_spd(M)
    r = np.sqrt(w)
    return (V * r) @ V.T, (V / r) @ V.T


class MassFactor:
    """Cholesky factor of M, reused for every ``M^{-1} x`` of one time step.

    Pinocchio's Model/Data idea on a small scale: factor once, solve many.
    """

    __slots__ = ('_c',)

    def __init__(self, M):
        c, info = _POTRF(np.asarray(M, dtype=float), lower=1, clean=0)
        if info != 0:
            raise NotPositiveDefiniteError(f'mass matrix not positive definite (potrf info {info})')
        self._c = c

    def solve(self, x):
        """Return ``M^{-1} x`` (x a vector or a matrix of columns)."""
        sol, info = _POTRS(self._c, np.asarray(x, dtype=float), lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f'potrs info {info}')
        return sol


def gram_pinv(G, rcond=DEFAULT_RCOND):
    """Pseudo-inverse and rank of a symmetric positive semi-definite Gram matrix.

    ``G = V diag(w) V^T``, ``G^+ = V diag(1/w_i for w_i > tol) V^T`` with
    ``tol = max(rcond**2, GRAM_FLOOR) * max(w)`` (see the module docstring).
    """
    if G.size == 0:
        return np.zeros_like(G), 0
    w, V, info = _SYEVD(G, compute_v=1, lower=0)
    if info != 0:
        raise np.linalg.LinAlgError(f'eigen-decomposition failed (syevd info {info})')
    wmax = w[-1]
    if wmax <= 0.0:
        return np.zeros_like(G), 0
    keep = w > max(rcond * rcond, GRAM_FLOOR) * wmax
    Vk = V[:, keep]
    return (Vk / w[keep]) @ Vk.T, int(keep.sum())


def as_system(M, Q, A, b):
    """(M, Q, A, b) as float arrays of consistent shapes (n x n, n, m x n, m), else ValueError."""
    M = np.asarray(M, dtype=float)
    Q = np.asarray(Q, dtype=float)
    A = np.atleast_2d(np.asarray(A, dtype=float))
    b = np.atleast_1d(np.asarray(b, dtype=float))
    n = M.shape[0]
    if M.shape != (n, n) or Q.shape != (n,) or A.shape[1] != n or b.shape != (A.shape[0],):
        raise ValueError(f'inconsistent shapes: M {M.shape}, Q {Q.shape}, A {A.shape}, b {b.shape}')
    return M, Q, A, b


# --------------------------------------------------------------- ideal constraint force


def constraint_force_reference(M, Q, A, b, *, pinv=None, rcond=DEFAULT_RCOND):
    """UK ideal constraint force in the square-root form (seed 000 eq 7).

    ``Qc = M^{1/2} (A M^{-1/2})^+ (b - A M^{-1} Q)``.

    `pinv` is any ``f(X, rcond) -> X^+`` from :mod:`uk_controller.core.pinv`
    (default: SVD). This is the reference the fast forms are tested against.
    """
    M, Q, A, b = as_system(M, Q, A, b)
    pinv = pinv or _pinv.pinv_svd
    M_half, M_inv_half = symmetric_sqrt_pair(M)
    B = A @ M_inv_half
    a = M_inv_half @ (M_inv_half @ Q)
    return M_half @ (pinv(B, rcond) @ (b - A @ a))


def constraint_force(M, Q, A, b, *, rcond=DEFAULT_RCOND, factor=None):
    """UK ideal constraint force, fast Gram form (equal to seed 000 eq 7).

    ``Qc = A^T (A M^{-1} A^T)^+ (b - A M^{-1} Q)``, one Cholesky of M (or the
    given :class:`MassFactor`) and an m x m symmetric pseudo-inverse.
    """
    M, Q, A, b = as_system(M, Q, A, b)
    factor = factor or MassFactor(M)
    rhs = np.column_stack((Q, A.T))
    sol = factor.solve(rhs)
    a, Minv_AT = sol[:, 0], sol[:, 1:]
    G_pinv, _ = gram_pinv(A @ Minv_AT, rcond)
    return A.T @ (G_pinv @ (b - A @ a))


def constrained_acceleration(M, Q, A, b, *, rcond=DEFAULT_RCOND, factor=None):
    """Acceleration of the constrained system (seed 000 eq 9, seed 001 eq 36).

    ``q'' = a + M^{-1} A^T (A M^{-1} A^T)^+ (b - A a)``, ``a = M^{-1} Q``.
    """
    M, Q, A, b = as_system(M, Q, A, b)
    factor = factor or MassFactor(M)
    sol = factor.solve(np.column_stack((Q, A.T)))
    a, Minv_AT = sol[:, 0], sol[:, 1:]
    G_pinv, _ = gram_pinv(A @ Minv_AT, rcond)
    return a + Minv_AT @ (G_pinv @ (b - A @ a))


def nonideal_constraint_force(M, A, c, *, rcond=DEFAULT_RCOND, factor=None):
    """Non-ideal constraint force for a user-given c (seed 004 eq 12).

    Reference form ``M^{1/2} (I - B^+ B) M^{-1/2} c`` with ``B = A M^{-1/2}``
    equals ``c - A^T (A M^{-1} A^T)^+ A M^{-1} c``, which is what is computed.
    It does work ``v^T c`` on every virtual displacement v (``A v = 0``).
    """
    M = np.asarray(M, dtype=float)
    A = np.atleast_2d(np.asarray(A, dtype=float))
    c = np.asarray(c, dtype=float)
    factor = factor or MassFactor(M)
    sol = factor.solve(np.column_stack((c, A.T)))
    Minv_c, Minv_AT = sol[:, 0], sol[:, 1:]
    G_pinv, _ = gram_pinv(A @ Minv_AT, rcond)
    return c - A.T @ (G_pinv @ (A @ Minv_c))


def nonideal_constraint_force_reference(M, A, c, *, pinv=None, rcond=DEFAULT_RCOND):
    """Seed 004 eq 12 literally: ``M^{1/2} (I - B^+ B) M^{-1/2} c``."""
    pinv = pinv or _pinv.pinv_svd
    M_half, M_inv_half = symmetric_sqrt_pair(M)
    B = np.atleast_2d(A) @ M_inv_half
    P = np.eye(M_half.shape[0]) - pinv(B, rcond) @ B
    return M_half @ (P @ (M_inv_half @ np.asarray(c, dtype=float)))


# -------------------------------------------------------------------- servo control


@dataclass
class ServoResult:
    """Outcome of one servo-control solve.

    u             actuator efforts (p,)
    qdd           resulting acceleration (n,)
    passive_force the closure (passive) constraint force, ``M q'' - Q - B u``
    rank          rank of the servo matrix ``C B_bar`` (controllable iff >= 1)
    consistent    seed 004 Assumption 3: ``(C B_bar)(C B_bar)^+ b_bar = b_bar``
    servo_residual ``||A_s q'' - b_s||`` (0 when the servo constraint is met)
    passive_rank  rank of the passive Gram matrix (0 without closures)
    null_motion   dimension of the task's null space that moves the robot (rank of ``N B P``; -1: not computed)
    null_internal dimension of the efforts that move nothing (internal forces, ``p - rank G - null_motion``)
    limited       None, or ``(iterations, largest bound violation left, whether the unbounded effort met the
                  task)`` when the joint-limit stage replaced the unbounded effort (:func:`servo_solve`'s `bounded`)
    """

    u: np.ndarray
    qdd: np.ndarray
    passive_force: np.ndarray
    rank: int
    consistent: bool
    servo_residual: float
    passive_rank: int = 0
    condition: float = field(default=float('nan'))
    null_motion: int = -1
    null_internal: int = -1
    limited: tuple | None = None


def _check(result, on_infeasible, tol_msg):
    if on_infeasible == 'raise':
        if result.rank < 1:
            raise ServoInfeasibleError('servo constraint not controllable: rank(C B_bar) = 0 (seed 004 Theorem 1)')
        if not result.consistent:
            raise ServoInfeasibleError(
                f'servo constraint inconsistent (seed 004 Assumption 3): residual {result.servo_residual:.3e} {tol_msg}'
            )
    elif on_infeasible != 'report':
        raise ValueError("on_infeasible must be 'raise' or 'report'")
    return result


def _right_rows(G, rcond):
    """Orthonormal basis (p, r) of the row space of G under the servo rank rule (``s > rcond s_max``,
    as :func:`uk_controller.core.pinv.pinv_svd`)."""
    if G.size == 0:
        return np.zeros((G.shape[1], 0))
    _, sv, Vt = np.linalg.svd(G, full_matrices=False)
    if not sv.size or sv[0] <= 0.0:
        return np.zeros((G.shape[1], 0))
    return Vt[sv > rcond * sv[0]].T


def redundancy_effort(
    M,
    NB,
    G,
    qdd_task,
    posture_accel=None,
    internal_effort=None,
    *,
    rcond=DEFAULT_RCOND,
    null_rcond=NULL_RCOND,
    metric='mass',
):
    """The null-space term of Chen's servo control (seed 004 eq 35) on the closure-projected dynamics.

    DESIGN.md "Redundancy": with ``q'' = N (Q + B u) + r_p`` and ``G = A_s N B``, every effort meeting the
    servo rows is ``u = G^+ r + P z``, ``P = I - G^+ G`` (seed 004 eq 35 with its free vector z). Chen's
    choice z = 0 leaves the free directions to the natural dynamics. Here, with ``M = L L^T``
    (``|x|_M = |L^T x|``) and the posture acceleration ``a_p`` (e.g. ``-Kp (q - q_ref) - Kd q'``)::

        z   = argmin |N B P z - (a_p - q''_task)|_M  (minimum norm)  =  (L^T N B P)^+ L^T (a_p - q''_task)
        du  = P z = z                                 (the row space of L^T N B P lies in the range of P)

    so ``A_s N B du = G P z = 0`` (the task rows never feel it) and the closures hold because q'' stays
    of the form ``N (Q + B u) + r_p``. Singular values of ``L^T N B P`` count when above
    ``null_rcond |L^T N B|_F``; their number is the dimension of the task's null space that MOVES the robot.
    The efforts left, ``null(N B)`` (dimension ``p - rank G - that``), move nothing: with redundant
    actuation (a three-branch five-bar, two arms holding one object) they only change internal forces.
    There the minimum-norm distribution is kept unless an internal-force target u_int is given::

        du += P_int u_int,   P_int = I - V_G V_G^T - V_Y V_Y^T   (projector on null(N B))

    (V_G, V_Y: the kept right singular vectors of G and of ``L^T N B P``), the effort closest to
    ``u + u_int`` among those producing the same motion. Returns ``(du, null_motion, null_internal)``.

    ``metric='joint'`` matches the posture in the identity metric instead (``L = I``: every joint's
    acceleration error weighs alike). The M-norm weighs a joint by its inertia, so a light wrist's
    posture acceleration is hardly asked for and its null-space motion goes undamped; the identity damps
    light joints as much as heavy ones. The task rows and closures are untouched in either metric
    (``du`` stays in the range of P).
    """
    M = np.asarray(M, dtype=float)
    NB = np.atleast_2d(np.asarray(NB, dtype=float))
    n, p = NB.shape
    G = np.asarray(G, dtype=float).reshape(-1, p)
    Vg = _right_rows(G, rcond)
    P = np.eye(p) - Vg @ Vg.T
    if metric not in ('mass', 'joint'):
        raise ValueError(f"metric must be 'mass' or 'joint', got {metric!r}")
    Lt = np.linalg.cholesky(M).T if metric == 'mass' else np.eye(n)
    X = Lt @ NB
    U, sv, Vt = np.linalg.svd(X @ P, full_matrices=False)
    keep = sv > null_rcond * np.linalg.norm(X) if np.linalg.norm(X) > 0.0 else np.zeros(sv.size, dtype=bool)
    Vy = Vt[keep].T
    du = np.zeros(p)
    if posture_accel is not None:
        d = Lt @ (np.asarray(posture_accel, dtype=float) - np.asarray(qdd_task, dtype=float))
        du = Vy @ ((U[:, keep].T @ d) / sv[keep])
    if internal_effort is not None:
        du = du + (P - Vy @ Vy.T) @ np.asarray(internal_effort, dtype=float)
    motion = int(keep.sum())
    return du, motion, p - Vg.shape[1] - motion


def servo_solve(
    M,
    Q,
    B,
    As,
    bs,
    Ap,
    bp,
    u,
    qdd,
    passive_force,
    *,
    rcond=DEFAULT_RCOND,
    pinv=None,
    s=None,
    posture_accel=None,
    internal_effort=None,
    null_rcond=NULL_RCOND,
    work=None,
    metric='mass',
    bounded=None,
):
    """The NumPy servo solve of :func:`servo_control` and of :class:`ServoSolver`'s NumPy backend (one
    implementation; its compiled twin is :func:`uk_controller.kernels.servo.servo_solve`).

    With ``M = L L^T`` (LAPACK ``posv`` on the lower triangle of M; NotPositiveDefiniteError otherwise)::

        [a0 | M^{-1} B | M^{-1} A_p^T] = M^{-1} [Q | B | A_p^T]
        G_p = A_p M^{-1} A_p^T = V diag(w) V^T,  G_p^+ on  w > max(rcond^2, GRAM_FLOOR) w_max   (gram_pinv)
        K = M^{-1} A_p^T G_p^+,   a0 <- a0 + K (b_p - A_p a0)  (= N Q + r_p),   NB = M^{-1} B - K A_p M^{-1} B
        C B_bar = A_s NB = U S V^T (LAPACK gesdd),  b_bar = b_s - A_s a0
        u = (C B_bar)^+ b_bar  (+ [I - (C B_bar)^+ (C B_bar)] s)                       seed 004 eq 35

    with the SVD pseudo-inverse on ``s_i > rcond s_1`` (as :func:`uk_controller.pinv.pinv_svd`), or
    ``pinv(C B_bar, rcond)`` when a pseudo-inverse method is given (rank and condition still from the
    SVD); then the null-space term of :func:`redundancy_effort` when `posture_accel` or
    `internal_effort` is given, ``q'' = a0 + NB u`` and the closure force ``M q'' - Q - B u``.
    Writes u (p), qdd (n), passive_force (n); `work`: an optional (n, 1 + p + m_p) Fortran-ordered
    scratch. Returns ``(rank, condition, passive_rank, ||A_s q'' - b_s||, ||b_bar||, null_motion,
    null_internal)`` (null dimensions -1 when no null-space term ran).

    `bounded` = ``(limits, alo, ahi, weight, eps[, singular_threshold, singular_damping])``: the joint-limit
    stage (:mod:`uk_controller.core.joint_limits`): when an effort is beyond ``+-limits`` or a joint
    acceleration ``a0 + NB u`` outside ``[alo, ahi]``, u becomes the bounded least squares of
    :func:`uk_controller.core.joint_limits.bounded_stage`; the result then has an 8th entry, None when
    the stage did not run, else ``(iterations, largest bound violation left, whether the unbounded effort
    met the task)``. Near a singularity of ``C B_bar`` (SVD method, lambda^2 of
    :func:`uk_controller.core.joint_limits.singular_damping` > 0; 0, the exact law, away from
    singularities) ``b_bar = b_s + d`` is split into the drift ``d = -A_s a0`` (gravity, velocity terms),
    solved exactly (its coefficients ``U_k^T d / s_k`` stay bounded: d is the image of the effort that
    cancels a0), and the commanded ``b_s``, solved as the damped least squares of Nakamura & Hanafusa::

        u = V_r diag(1 / s_r) U_r^T d  +  V diag(s / (s^2 + lambda^2)) U^T b_s

    and the stage damps the task rows around the part of u that is not the damped ``b_s`` term.
    """
    n, p = B.shape
    mp, ms = Ap.shape[0], As.shape[0]
    W = np.empty((n, 1 + p + mp), order='F') if work is None else work
    W[:, 0] = Q
    W[:, 1 : 1 + p] = B
    if mp:
        W[:, 1 + p :] = Ap.T
    _, X, status = _POSV(M, W, lower=1, overwrite_a=0, overwrite_b=0)
    if status != 0:
        raise NotPositiveDefiniteError(f'mass matrix not positive definite (posv info {status})')
    a0, NB = X[:, 0], X[:, 1 : 1 + p]
    passive_rank = 0
    if mp:
        MApT = X[:, 1 + p :]
        w, V, status = _SYEVD(Ap @ MApT, compute_v=1, lower=0)
        wmax = w[-1]
        if wmax > 0.0:
            keep = w > max(rcond * rcond, GRAM_FLOOR) * wmax
            passive_rank = int(keep.sum())
            Vk = V[:, keep]
            K = MApT @ ((Vk / w[keep]) @ Vk.T)
            a0 = a0 + K @ (bp - Ap @ a0)
            NB = NB - K @ (Ap @ NB)
    bbar = bs - As @ a0
    rank, cond = 0, float('inf')
    start = u.copy() if bounded is not None else None  # the previous step's effort: the stage's warm start
    u[:] = 0.0
    Vr = None
    lam2, u_task = 0.0, None  # the task rows' damping near a singularity (joint-limit stage, SVD method)
    if ms and p:
        CB = As @ NB
        U, sv, Vt, status = _GESDD(CB, compute_uv=1, full_matrices=0)
        if sv[0] > 0.0:
            rank = int(np.count_nonzero(sv > rcond * sv[0]))
            cond = float(sv[0] / sv[rank - 1])
            Vr = Vt[:rank]
            if pinv is None and bounded is not None and len(bounded) > 5:
                from .joint_limits import singular_damping

                lam2 = singular_damping(sv[-1], sv[0], *bounded[5:7])
            if pinv is None and lam2 > 0.0:  # damped least squares (joint_limits.singular_damping)
                # bbar = b_s + d: the drift d = -A_s a0 solved exactly (bounded: d = CB u_c for the effort u_c
                # cancelling a0), the commanded b_s damped along every singular direction
                u_task = Vt.T @ ((U.T @ bs) * (sv / (sv * sv + lam2)))
                u[:] = Vr.T @ ((U[:, :rank].T @ (bbar - bs)) / sv[:rank]) + u_task
            elif pinv is None:
                u[:] = Vr.T @ ((U[:, :rank].T @ bbar) / sv[:rank])
        if pinv is not None:
            X_cb = pinv(CB, rcond)
            u[:] = X_cb @ bbar
            if s is not None:
                u += np.asarray(s, dtype=float) - X_cb @ (CB @ s)
        elif s is not None:
            u += np.asarray(s, dtype=float) - (Vr.T @ (Vr @ s) if Vr is not None else 0.0)
    elif s is not None:
        u += np.asarray(s, dtype=float)
    Ms = np.tril(M) + np.tril(M, -1).T  # only the lower triangle of M is read
    null_motion = null_internal = -1
    if posture_accel is not None or internal_effort is not None:
        du, null_motion, null_internal = redundancy_effort(
            Ms,
            NB,
            As @ NB,
            a0 + NB @ u,
            posture_accel,
            internal_effort,
            rcond=rcond,
            null_rcond=null_rcond,
            metric=metric,
        )
        u += du
    limited = None
    if bounded is not None:
        from .joint_limits import beyond_limits, bounded_stage

        limits, alo, ahi, weight, eps = bounded[:5]
        qdd_free = a0 + NB @ u
        if beyond_limits(u, limits, qdd_free, alo, ahi):
            CB = As @ NB if ms else np.zeros((0, p))
            # the task would be met without the limits: exactly, or by the undamped law (independent rows)
            exact = (
                not ms
                or (lam2 > 0.0 and rank == ms)
                or np.linalg.norm(As @ qdd_free - bs) <= CONSISTENCY_TOL * max(1.0, np.linalg.norm(bbar))
            )
            center = u - u_task if lam2 > 0.0 else None
            iterations, violation = bounded_stage(
                CB, bbar, NB, a0, alo, ahi, limits, weight, eps, u, start, damping=lam2, center=center
            )
            limited = (iterations, violation, exact)
    np.add(a0, NB @ u, out=qdd)
    residual = float(np.linalg.norm(As @ qdd - bs)) if ms else 0.0
    np.subtract(Ms @ qdd - Q, B @ u, out=passive_force)
    bnorm = float(np.linalg.norm(bbar)) if ms else 0.0
    if bounded is not None:
        return rank, cond, passive_rank, residual, bnorm, null_motion, null_internal, limited
    return rank, cond, passive_rank, residual, bnorm, null_motion, null_internal


def servo_control(
    M,
    Q,
    B,
    A_servo,
    b_servo,
    *,
    A_passive=None,
    b_passive=None,
    s=None,
    rcond=DEFAULT_RCOND,
    pinv=None,
    consistency_tol=CONSISTENCY_TOL,
    on_infeasible='raise',
    posture_accel=None,
    internal_effort=None,
    null_rcond=NULL_RCOND,
    metric='mass',
    bounded=None,
):
    """Chen's constraint-following servo control with passive closures accounted for.

    System ``M q'' = Q + B u + Qc_p`` with passive constraints
    ``A_p q'' = b_p`` (realised by the mechanism, force Qc_p given by UK) and
    servo constraints ``A_s q'' = b_s`` (realised by u).

    For a given u the passive UK equation gives ``q'' = N (Q + B u) + r_p`` with
    the closure-projected mobility and the closure acceleration

        N   = M^{-1} - M^{-1} A_p^T G_p^+ A_p M^{-1},   G_p = A_p M^{-1} A_p^T
        r_p = M^{-1} A_p^T G_p^+ b_p

    (``N = M^{-1/2} (I - B_p^+ B_p) M^{-1/2}``: the closure force reacts to u).
    The servo constraint then reads ``(A_s N B) u = b_s - A_s (N Q + r_p)``, a
    linear equation ``(C B_bar) u = b_bar`` solved as in seed 004 eq 35::

        u = (C B_bar)^+ b_bar + [I - (C B_bar)^+ (C B_bar)] s

    Without passive constraints ``N = M^{-1}`` and this is exactly seed 004
    section II (``C B_bar = A M^{-1} B``, ``b_bar = b - A M^{-1} Q``).

    `bounded`: the joint-limit stage of :func:`servo_solve` (``result.limited`` says when it ran).

    With `posture_accel` (a_p, n) and/or `internal_effort` (u_int, p) the free vector s is not used:
    the null-space term of :func:`redundancy_effort` is added (DESIGN.md "Redundancy": the task first,
    the closures always, the posture only in what is left) and ``null_motion``, ``null_internal`` of the
    result give the dimensions of the task's null space.

    Controllability (seed 004 Theorem 1: rank ``C B_bar >= 1``) and consistency
    (Assumption 3) are checked; with ``on_infeasible='raise'`` a failure raises
    :class:`ServoInfeasibleError`, with ``'report'`` the least-squares u is
    returned and the flags in :class:`ServoResult` say what went wrong.

    The arithmetic is :func:`servo_solve`'s (one NumPy servo solve; :class:`ServoSolver`'s NumPy backend
    runs the same function on its preallocated arrays). Only the lower triangle of M is read.
    """
    M = np.asarray(M, dtype=float)
    Q = np.asarray(Q, dtype=float)
    B = np.atleast_2d(np.asarray(B, dtype=float))
    As = np.atleast_2d(np.asarray(A_servo, dtype=float))
    bs = np.atleast_1d(np.asarray(b_servo, dtype=float))
    n, p = B.shape
    if pinv is _pinv.pinv_svd:  # the SVD method is the solve's own SVD (same rank rule)
        pinv = None
    if A_passive is not None and np.size(A_passive) > 0:
        Ap = np.atleast_2d(np.asarray(A_passive, dtype=float))
        bp = np.atleast_1d(np.asarray(b_passive, dtype=float))
    else:
        Ap, bp = np.zeros((0, n)), np.zeros(0)
    u, qdd, passive_force = np.zeros(p), np.zeros(n), np.zeros(n)
    rank, cond, passive_rank, residual, bnorm, null_motion, null_internal, *limited = servo_solve(
        M,
        Q,
        B,
        As,
        bs,
        Ap,
        bp,
        u,
        qdd,
        passive_force,
        rcond=rcond,
        pinv=pinv,
        s=s,
        posture_accel=posture_accel,
        internal_effort=internal_effort,
        null_rcond=null_rcond,
        metric=metric,
        bounded=bounded,
    )
    consistent = residual <= consistency_tol * max(1.0, bnorm)
    result = ServoResult(
        u,
        qdd,
        passive_force,
        rank,
        consistent,
        residual,
        passive_rank,
        cond,
        null_motion,
        null_internal,
        limited[0] if limited else None,
    )
    return _check(result, on_infeasible, f'> {consistency_tol:g} * max(1, ||b_bar||)')


def servo_control_cascade(M, Q, B, A_servo, b_servo, *, A_passive=None, b_passive=None, rcond=DEFAULT_RCOND, pinv=None):
    """The cascade as seed 004 section V writes it, kept for comparison only.

    First the passive UK force from Q alone, ``Qc = constraint_force(M, Q, A_p, b_p)``,
    then ``u = (A_s M^{-1} B)^+ (b_s - A_s M^{-1} (Q + Qc))`` (seed 004 eq 35 with
    step 4 of its procedure). When B u is not M-orthogonal to the closure rows
    the closure force changes with u and the servo constraint is violated; use
    :func:`servo_control`. Returns ``(u, qdd_actual)`` where ``qdd_actual`` is
    what the closed chain really does under that u.
    """
    M = np.asarray(M, dtype=float)
    Q = np.asarray(Q, dtype=float)
    B = np.atleast_2d(np.asarray(B, dtype=float))
    As = np.atleast_2d(np.asarray(A_servo, dtype=float))
    pinv = pinv or _pinv.pinv_svd
    factor = MassFactor(M)
    Qc = np.zeros_like(Q)
    if A_passive is not None and np.size(A_passive) > 0:
        Qc = constraint_force(M, Q, A_passive, b_passive, rcond=rcond, factor=factor)
    MinvB = factor.solve(B)
    u = pinv(As @ MinvB, rcond) @ (np.atleast_1d(b_servo) - As @ factor.solve(Q + Qc))
    if A_passive is not None and np.size(A_passive) > 0:
        qdd = constrained_acceleration(M, Q + B @ u, A_passive, b_passive, rcond=rcond, factor=factor)
    else:
        qdd = factor.solve(Q + B @ u)
    return u, qdd


# ------------------------------------------------------------ preallocated hot path


def row_gains(stabilization, *stacks_or_orders):
    """Per-row Baumgarte gains ``(2, m)`` (kd; kp) for the rows of several row sets in order.

    Holonomic (order 2) rows get ``kd, kp``; first-order rows ``kd = 0, kp = k1``, so that for
    every row ``b_stab = b - (kd phi' + kp phi)`` equals
    :meth:`uk_controller.core.baumgarte.Baumgarte.stabilized_rhs` (seed 000 eq 52).
    Each argument is an ``order`` array (or anything with an ``order`` attribute).
    """
    parts = []
    for item in stacks_or_orders:
        order = np.asarray(getattr(item, 'order', item))
        m = order.size
        first = order == 1
        # gains broadcast per row set, exactly as stabilized_rhs does for each set
        kd = np.broadcast_to(np.asarray(stabilization.kd, dtype=float), (m,))
        kp = np.broadcast_to(np.asarray(stabilization.kp, dtype=float), (m,))
        k1 = np.broadcast_to(np.asarray(stabilization.k1, dtype=float), (m,))
        parts.append(np.vstack((np.where(first, 0.0, kd), np.where(first, k1, kp))))
    return np.hstack(parts) if parts else np.zeros((2, 0))


def solver_params(
    rcond=DEFAULT_RCOND,
    gram_floor=GRAM_FLOOR,
    consistency_tol=CONSISTENCY_TOL,
    max_sweeps=60,
    *,
    secondary=0,
    one_sided=0,
    null_rcond=NULL_RCOND,
    internal_effort=None,
    p=0,
    task_speed=np.inf,
    posture_speed=np.inf,
    joint_metric=False,
    limits=None,
):
    """The ``params`` array of the compiled servo solve (layout ``kernels.codes.PARAM_*``): tolerances,
    the number of posture (secondary) rows and of one-sided rows among them, the null-space rank cut,
    the internal-force target (ValueError when it has more than ``MAX_INTERNAL_TARGET`` entries), the
    correction speeds of the saturated Baumgarte term (:func:`stabilized_rhs`), the null-space metric
    (:func:`redundancy_effort`) and the joint-limit stage (a
    :class:`uk_controller.core.joint_limits.JointLimitStage`; None: effort clipping only)."""
    from ..kernels import codes

    params = np.zeros(codes.PARAMS_SIZE)
    params[:4] = rcond, gram_floor, consistency_tol, float(max_sweeps)
    params[codes.PARAM_N_SECONDARY], params[codes.PARAM_N_ONE_SIDED] = secondary, one_sided
    params[codes.PARAM_NULL_RCOND] = null_rcond
    params[codes.PARAM_TASK_SPEED], params[codes.PARAM_POSTURE_SPEED] = task_speed, posture_speed
    params[codes.PARAM_JOINT_METRIC] = 1.0 if joint_metric else 0.0
    if limits is not None:
        params[codes.PARAM_LIMITS_ON] = 1.0
        params[codes.PARAM_LIMIT_WEIGHT], params[codes.PARAM_LIMIT_EPS] = limits.weight, limits.eps
        params[codes.PARAM_BRAKE], params[codes.PARAM_LIMIT_TC] = limits.brake, limits.time_constant
        params[codes.PARAM_SINGULAR_THRESHOLD], params[codes.PARAM_SINGULAR_DAMPING] = limits.singular
    if one_sided > secondary:
        raise ValueError(f'one_sided ({one_sided}) cannot exceed secondary ({secondary})')
    if internal_effort is not None:
        target = np.broadcast_to(np.asarray(internal_effort, dtype=float), (p,))
        if p > codes.MAX_INTERNAL_TARGET:
            raise ValueError(f'an internal-force target holds at most {codes.MAX_INTERNAL_TARGET} efforts, got {p}')
        params[codes.PARAM_INTERNAL] = 1.0
        params[codes.PARAM_INTERNAL_TARGET : codes.PARAM_INTERNAL_TARGET + p] = target
    return params


class ServoSolver:
    """:func:`servo_control` for fixed sizes with a preallocated workspace (the control hot path).

    ``ServoSolver(n, p, m_passive, m_servo)`` solves, for ``Q = tau - h``,

        u = (A_s N B)^+ (b_s - A_s (N Q + r_p)),   q'' = N Q + r_p + N B u

    exactly as :func:`servo_control` (same equations, same rank rules: the
    passive Gram matrix keeps eigenvalues above ``max(rcond^2, GRAM_FLOOR) w_max``,
    the servo matrix ``C B_bar`` singular values above ``rcond s_max`` as
    :func:`uk_controller.core.pinv.pinv_svd`). With ``p = m_servo = 0`` it is the
    UK constrained acceleration of the closures (:func:`constrained_acceleration`).

    Backends: ``'numba'`` (one compiled call, :func:`uk_controller.kernels.servo.servo_kernel`,
    used by default when numba is installed) or ``'numpy'`` (:func:`servo_solve`, the NumPy servo
    solve :func:`servo_control` runs too, on the solver's preallocated work array). The compiled one
    is tested equal to :func:`servo_control`. Only the lower triangle of M is read (pass
    :attr:`uk_controller.model.robot_model.RobotModel.M_lower`). Results are written into ``u``, ``qdd``,
    ``passive_force`` (arrays owned by the solver, overwritten by the next
    call) and the attributes ``rank``, ``condition``, ``passive_rank``,
    ``servo_residual``, ``consistent``.

    Redundancy resolution (:func:`redundancy_effort`): the last `secondary` of the m_servo rows are
    posture rows, not tasks (their stabilized right-hand sides give the posture acceleration
    ``a_p = sum_i A_i^T (b_i - kd_i phi'_i - kp_i phi_i)``; the last `one_sided` of them count only where
    ``phi_i < 0``: joint-limit rows); `internal_effort` (p,) is an internal-force target. Then ``info``
    also holds the null-space dimensions (``INFO_NULL_MOTION``, ``INFO_NULL_INTERNAL``).
    """

    def __init__(
        self,
        n,
        p,
        m_passive,
        m_servo,
        *,
        rcond=DEFAULT_RCOND,
        consistency_tol=CONSISTENCY_TOL,
        backend='auto',
        max_sweeps=60,
        secondary=0,
        one_sided=0,
        internal_effort=None,
        null_rcond=NULL_RCOND,
        task_speed=np.inf,
        posture_speed=np.inf,
        joint_metric=False,
        joint_limits=None,
    ):
        from ..kernels import codes, jit, servo

        if backend == 'auto':
            backend = 'numba' if jit.AVAILABLE else 'numpy'
        if backend not in ('numba', 'numpy'):
            raise ValueError(f"backend must be 'auto', 'numba' or 'numpy', got {backend!r}")
        if backend == 'numba' and not jit.AVAILABLE:
            raise ValueError('backend numba requested but numba is not installed')
        self.backend = backend
        self.n, self.p, self.mp, self.ms = int(n), int(p), int(m_passive), int(m_servo)
        n, p, mp, ms = self.n, self.p, self.mp, self.ms
        self.rcond = float(rcond)
        self.consistency_tol = float(consistency_tol)
        self.secondary, self.one_sided = int(secondary), int(one_sided)
        self.internal_effort = None if internal_effort is None else np.array(internal_effort, dtype=float)
        self.null_rcond = float(null_rcond)
        self.params = solver_params(
            self.rcond,
            GRAM_FLOOR,
            self.consistency_tol,
            max_sweeps,
            secondary=secondary,
            one_sided=one_sided,
            null_rcond=null_rcond,
            internal_effort=internal_effort,
            p=p,
            task_speed=task_speed,
            posture_speed=posture_speed,
            joint_metric=joint_metric,
            limits=joint_limits,
        )
        self.joint_limits = joint_limits
        self.metric = 'joint' if joint_metric else 'mass'
        # the correction speed of each servo row (task rows, posture rows, joint-limit rows: no cap)
        self._speeds = np.full(ms, float(task_speed))
        self._speeds[ms - self.secondary :] = posture_speed
        if self.one_sided:
            self._speeds[ms - self.one_sided :] = np.inf
        self.u = np.zeros(p)
        self.qdd = np.zeros(n)
        self.passive_force = np.zeros(n)
        self.info = np.zeros(codes.INFO_SIZE)
        self.effort = np.zeros(p)  # u clipped to the limits given to solve_rows
        self.saturated = np.zeros(p, dtype=bool)
        self._no_limits = np.full(p, np.inf)
        self._no_lo, self._no_hi = np.full(n, -np.inf), np.full(n, np.inf)
        self._zero_n = np.zeros(n)
        self._zero_gains = np.zeros((2, mp + ms))
        self._zero_s = np.zeros(ms)
        self._zero_p = np.zeros(mp)
        self._empty_p = (np.zeros((0, n)), np.zeros(0))
        self._kernel = servo.servo_kernel if backend == 'numba' else None
        # numpy backend work arrays
        self._W = np.zeros((n, 1 + p + mp), order='F')
        self._bs = np.zeros(ms)
        self._bp = np.zeros(mp)
        self._Q = np.zeros(n)
        if backend == 'numba':  # compile (or load the cache) now, not in the first control step
            self._warm_up()

    # ------------------------------------------------------------ results
    @property
    def status(self):
        return int(self.info[INFO_STATUS])

    @property
    def rank(self):
        return int(self.info[INFO_RANK])

    @property
    def condition(self):
        return float(self.info[INFO_CONDITION])

    @property
    def passive_rank(self):
        return int(self.info[INFO_PASSIVE_RANK])

    @property
    def servo_residual(self):
        return float(self.info[INFO_RESIDUAL])

    @property
    def consistent(self):
        return bool(self.info[INFO_CONSISTENT])

    def result(self):
        """A :class:`ServoResult` with copies of the current solution."""
        active = self.secondary or self.internal_effort is not None
        null = (int(self.info[INFO_NULL_MOTION]), int(self.info[INFO_NULL_INTERNAL])) if active else (-1, -1)
        return ServoResult(
            self.u.copy(),
            self.qdd.copy(),
            self.passive_force.copy(),
            self.rank,
            self.consistent,
            self.servo_residual,
            self.passive_rank,
            self.condition,
            *null,
        )

    # ------------------------------------------------------------ solving
    def _warm_up(self):
        n, p, mp, ms = self.n, self.p, self.mp, self.ms
        M = np.eye(n)
        self._kernel(
            M,
            self._zero_n,
            self._zero_n,
            np.zeros((n, p)),
            np.zeros((ms, n)),
            self._zero_s,
            self._zero_s,
            self._zero_s,
            np.zeros((mp, n)),
            self._zero_p,
            self._zero_p,
            self._zero_p,
            self._zero_gains,
            self.params,
            self._no_limits,
            self._no_lo,
            self._no_hi,
            self.u,
            self.qdd,
            self.passive_force,
            self.effort,
            self.saturated,
            self.info,
        )

    def solve(self, M, Q, B, A_servo, b_servo, A_passive=None, b_passive=None):
        """Solve for given Q and right-hand sides (no stabilization); returns self."""
        if A_passive is None:
            A_passive, b_passive = self._empty_p if self.mp == 0 else (None, None)
        return self.solve_rows(
            M,
            Q,
            self._zero_n,
            B,
            A_servo,
            b_servo,
            self._zero_s,
            self._zero_s,
            A_passive,
            b_passive,
            self._zero_p,
            self._zero_p,
            self._zero_gains,
            self._no_limits,
        )

    def solve_rows(self, M, tau, h, B, As, bs, phis, phids, Ap, bp, phip, phidp, gains, limits=None, bounds=None):
        """Hot-path entry: ``Q = tau - h``; ``b <- b - (kd phi' + kp phi)`` per row (:func:`row_gains`; the
        stiffness term saturated at the rows' correction speeds, :func:`correction`).

        ``effort`` receives u clipped to ``+-limits`` (``saturated`` flags the
        clipped entries; ``info[INFO_N_SATURATED]`` counts them). With the joint-limit stage
        (``joint_limits``), ``bounds = (lo, hi)`` are the joint acceleration bounds of this state
        (:meth:`uk_controller.core.joint_limits.JointLimitStage.bounds`) and an effort beyond its limit or
        an acceleration beyond a bound makes u the stage's bounded least squares. Raises
        :class:`NotPositiveDefiniteError` if M is not positive definite.
        """
        if limits is None:
            limits = self._no_limits
        alo, ahi = (self._no_lo, self._no_hi) if bounds is None else bounds
        if self._kernel is not None:
            self._kernel(
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
                self.params,
                limits,
                alo,
                ahi,
                self.u,
                self.qdd,
                self.passive_force,
                self.effort,
                self.saturated,
                self.info,
            )
            if self.info[INFO_STATUS] == NOT_PD:
                raise NotPositiveDefiniteError('mass matrix not positive definite')
            return self
        mp = self.mp
        np.subtract(tau, h, out=self._Q)
        bs = np.subtract(bs, correction(gains[0, mp:], gains[1, mp:], phis, phids, self._speeds), out=self._bs)
        if mp:
            bp = np.subtract(bp, gains[0, :mp] * phidp + gains[1, :mp] * phip, out=self._bp)
        self._numpy_core(M, self._Q, B, As, bs, Ap, bp, phis, limits, alo, ahi)
        np.greater(np.abs(self.u), limits, out=self.saturated)
        if self.joint_limits is not None:  # held at its limit by the bounded stage
            self.saturated |= np.abs(self.u) >= limits * (1.0 - 1e-12)
        np.clip(self.u, -limits, limits, out=self.effort)
        self.info[INFO_N_SATURATED] = np.count_nonzero(self.saturated)
        return self

    def _numpy_core(self, M, Q, B, As, bs, Ap, bp, phis, limits=None, alo=None, ahi=None):
        """:func:`servo_solve` on the task rows, the posture rows' acceleration as its posture term."""
        ms = self.ms - self.secondary
        ap = None
        if self.secondary:
            Asec, bsec, phisec = As[ms:], bs[ms:], phis[ms:]
            As, bs = As[:ms], bs[:ms]
            active = np.ones(self.secondary, dtype=bool)
            if self.one_sided:
                active[self.secondary - self.one_sided :] = phisec[self.secondary - self.one_sided :] < 0.0
            ap = Asec[active].T @ bsec[active]
        info = self.info
        stage = self.joint_limits
        bounded = None if stage is None else (limits, alo, ahi, stage.weight, stage.eps, *stage.singular)
        try:
            rank, cond, passive_rank, residual, bnorm, nm, ni, *limited = servo_solve(
                M,
                Q,
                B,
                As,
                bs,
                Ap if self.mp else self._empty_p[0],
                bp,
                self.u,
                self.qdd,
                self.passive_force,
                rcond=self.rcond,
                posture_accel=ap,
                internal_effort=self.internal_effort,
                null_rcond=self.null_rcond,
                work=self._W,
                metric=self.metric,
                bounded=bounded,
            )
        except NotPositiveDefiniteError:
            info[INFO_STATUS] = NOT_PD
            raise
        if self.secondary or self.internal_effort is not None:
            info[INFO_NULL_MOTION], info[INFO_NULL_INTERNAL] = nm, ni
        u, qdd = self.u, self.qdd
        info[INFO_STATUS] = OK if np.isfinite(qdd).all() and np.isfinite(u).all() else NOT_FINITE
        info[INFO_RANK], info[INFO_CONDITION] = rank, cond
        info[INFO_PASSIVE_RANK], info[INFO_RESIDUAL] = passive_rank, residual
        info[INFO_CONSISTENT] = 1.0 if residual <= self.consistency_tol * max(1.0, bnorm) else 0.0
        info[INFO_BBAR_NORM] = bnorm
        info[INFO_LIMITED] = info[INFO_LIMIT_ITERATIONS] = info[INFO_LIMIT_VIOLATION] = 0.0
        if limited and limited[0] is not None:
            info[INFO_LIMIT_ITERATIONS], info[INFO_LIMIT_VIOLATION], exact = limited[0]
            info[INFO_LIMITED] = 1.0 if exact else 0.0
