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
from scipy.linalg import cho_factor, cho_solve, eigh

from . import pinv as _pinv

DEFAULT_RCOND = 1e-10
#: Smallest relative eigenvalue of the Gram matrix treated as non-zero.
GRAM_FLOOR = 1e-14


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """The mass matrix is not symmetric positive definite."""


class ServoInfeasibleError(RuntimeError):
    """The servo constraint cannot be realised by the available actuators."""


# --------------------------------------------------------------------------- helpers


def symmetric_sqrt(M, *, inverse=False):
    """Return ``M^{1/2}`` (or ``M^{-1/2}``) of a symmetric positive definite M.

    Symmetric square root by eigen-decomposition, ``M = V diag(w) V^T``.
    Raises :class:`NotPositiveDefiniteError` if an eigenvalue is not positive.
    """
    w, V = eigh(np.asarray(M, dtype=float))
    if w[0] <= 0.0:
        raise NotPositiveDefiniteError(f'mass matrix not positive definite (eigenvalue {w[0]:.3e})')
    scale = w ** (-0.5 if inverse else 0.5)
    return (V * scale) @ V.T


class MassFactor:
    """Cholesky factor of M, reused for every ``M^{-1} x`` of one time step.

    Pinocchio's Model/Data idea on a small scale: factor once, solve many.
    """

    __slots__ = ('_factor',)

    def __init__(self, M):
        try:
            self._factor = cho_factor(M, lower=True, check_finite=False)
        except np.linalg.LinAlgError as exc:
            raise NotPositiveDefiniteError(f'mass matrix not positive definite: {exc}') from None

    def solve(self, x):
        """Return ``M^{-1} x`` (x a vector or a matrix of columns)."""
        return cho_solve(self._factor, x, check_finite=False)


def gram_pinv(G, rcond=DEFAULT_RCOND):
    """Pseudo-inverse and rank of a symmetric positive semi-definite Gram matrix.

    ``G = V diag(w) V^T``, ``G^+ = V diag(1/w_i for w_i > tol) V^T`` with
    ``tol = max(rcond**2, GRAM_FLOOR) * max(w)`` (see the module docstring).
    """
    w, V = eigh(G, check_finite=False)
    wmax = w[-1] if w.size else 0.0
    if wmax <= 0.0:
        return np.zeros_like(G), 0
    keep = w > max(rcond * rcond, GRAM_FLOOR) * wmax
    Vk = V[:, keep]
    return (Vk / w[keep]) @ Vk.T, int(keep.sum())


def _as_system(M, Q, A, b):
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

    `pinv` is any ``f(X, rcond) -> X^+`` from :mod:`uk_controller.pinv`
    (default: SVD). This is the reference the fast forms are tested against.
    """
    M, Q, A, b = _as_system(M, Q, A, b)
    pinv = pinv or _pinv.pinv_svd
    M_half = symmetric_sqrt(M)
    M_inv_half = symmetric_sqrt(M, inverse=True)
    B = A @ M_inv_half
    a = M_inv_half @ (M_inv_half @ Q)
    return M_half @ (pinv(B, rcond) @ (b - A @ a))


def constraint_force(M, Q, A, b, *, rcond=DEFAULT_RCOND, factor=None):
    """UK ideal constraint force, fast Gram form (equal to seed 000 eq 7).

    ``Qc = A^T (A M^{-1} A^T)^+ (b - A M^{-1} Q)``, one Cholesky of M (or the
    given :class:`MassFactor`) and an m x m symmetric pseudo-inverse.
    """
    M, Q, A, b = _as_system(M, Q, A, b)
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
    M, Q, A, b = _as_system(M, Q, A, b)
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
    M_half = symmetric_sqrt(M)
    M_inv_half = symmetric_sqrt(M, inverse=True)
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
    """

    u: np.ndarray
    qdd: np.ndarray
    passive_force: np.ndarray
    rank: int
    consistent: bool
    servo_residual: float
    passive_rank: int = 0
    condition: float = field(default=float('nan'))


def _check(result, on_infeasible, tol_msg):
    if on_infeasible == 'raise':
        if result.rank < 1:
            raise ServoInfeasibleError('servo constraint not controllable: rank(C B_bar) = 0 (seed 004 Theorem 1)')
        if not result.consistent:
            raise ServoInfeasibleError(
                f'servo constraint inconsistent (seed 004 Assumption 3): residual {result.servo_residual:.3e} {tol_msg}')
    elif on_infeasible != 'report':
        raise ValueError("on_infeasible must be 'raise' or 'report'")
    return result


def _solve_servo(CB, bbar, s, rcond, pinv):
    CB_pinv = pinv(CB, rcond)
    u = CB_pinv @ bbar
    if s is not None:
        u = u + s - CB_pinv @ (CB @ s)
    sv = np.linalg.svd(CB, compute_uv=False) if CB.size else np.zeros(0)
    rank = int(np.sum(sv > rcond * sv[0])) if sv.size and sv[0] > 0 else 0
    cond = float(sv[0] / sv[rank - 1]) if rank else float('inf')
    return u, rank, cond


def servo_control(M, Q, B, A_servo, b_servo, *, A_passive=None, b_passive=None, s=None,
                  rcond=DEFAULT_RCOND, pinv=None, consistency_tol=1e-8, on_infeasible='raise',
                  factor=None):
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

    Controllability (seed 004 Theorem 1: rank ``C B_bar >= 1``) and consistency
    (Assumption 3) are checked; with ``on_infeasible='raise'`` a failure raises
    :class:`ServoInfeasibleError`, with ``'report'`` the least-squares u is
    returned and the flags in :class:`ServoResult` say what went wrong.
    """
    M = np.asarray(M, dtype=float)
    Q = np.asarray(Q, dtype=float)
    B = np.atleast_2d(np.asarray(B, dtype=float))
    As = np.atleast_2d(np.asarray(A_servo, dtype=float))
    bs = np.atleast_1d(np.asarray(b_servo, dtype=float))
    pinv = pinv or _pinv.pinv_svd
    factor = factor or MassFactor(M)
    n, p = B.shape
    has_passive = A_passive is not None and np.size(A_passive) > 0
    if has_passive:
        Ap = np.atleast_2d(np.asarray(A_passive, dtype=float))
        bp = np.atleast_1d(np.asarray(b_passive, dtype=float))
        sol = factor.solve(np.column_stack((Q, B, Ap.T)))
        MinvQ, MinvB, MinvApT = sol[:, 0], sol[:, 1:1 + p], sol[:, 1 + p:]
        Gp_pinv, passive_rank = gram_pinv(Ap @ MinvApT, rcond)
        K = MinvApT @ Gp_pinv                       # M^{-1} A_p^T G_p^+
        a0 = MinvQ - K @ (Ap @ MinvQ) + K @ bp      # N Q + r_p
        NB = MinvB - K @ (Ap @ MinvB)               # N B
    else:
        sol = factor.solve(np.column_stack((Q, B)))
        a0, NB = sol[:, 0], sol[:, 1:]
        passive_rank = 0
    CB = As @ NB
    bbar = bs - As @ a0
    u, rank, cond = _solve_servo(CB, bbar, s, rcond, pinv)
    qdd = a0 + NB @ u
    residual = float(np.linalg.norm(As @ qdd - bs))
    consistent = residual <= consistency_tol * max(1.0, float(np.linalg.norm(bbar)))
    passive_force = M @ qdd - Q - B @ u
    result = ServoResult(u, qdd, passive_force, rank, consistent, residual, passive_rank, cond)
    return _check(result, on_infeasible, f'> {consistency_tol:g} * max(1, ||b_bar||)')


def servo_control_cascade(M, Q, B, A_servo, b_servo, *, A_passive=None, b_passive=None,
                          rcond=DEFAULT_RCOND, pinv=None):
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
