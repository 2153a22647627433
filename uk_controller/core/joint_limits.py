"""Joint position and velocity limits as bounds on the joint accelerations (plain NumPy).

A joint limit is an inequality ``q_lo <= q <= q_hi``, ``|q'| <= v_max``. The control law holds it by
bounding the acceleration it may command, from the state, so that the bound is a continuous function of
(q, q') and the joint can always brake in time (the viability form of Del Prete, "Joint position and
velocity bounds in discrete-time acceleration/torque control of robot manipulators", IEEE RA-L 2018,
sections III-IV: the position limit turned into a state-dependent velocity limit through a maximum
deceleration). Per coordinate, with the braking deceleration ``a_b`` and the time constant ``T``::

    v_hi(q) = min(v_max,  s(q_hi - q) sqrt(2 a_b |q_hi - q|))     s(x) = sign of x (+ at 0)
    v_lo(q) = max(-v_max, -s(q - q_lo) sqrt(2 a_b |q - q_lo|))
    (v_lo - q') / T  <=  q''  <=  (v_hi - q') / T

so q' follows the velocity envelope from inside with time constant T: at most ``v_max``, and near a
position limit at most the speed from which ``a_b`` stops the joint at the limit; past a limit (a start
outside it, a disturbance) the envelope turns negative and pulls the joint back in. Both sides are
continuous in (q, q'). The limits handed in are already the effective ones (the URDF's, tightened by the
hardware section's and shrunk by ``limits.margin`` of the range; the speed scaled by
``limits.velocity_scale``: :func:`limit_table`).

The servo solve keeps the task exact while every bound holds and otherwise trades the task for the
bounds by the bounded least squares of :mod:`uk_controller.core.bounded_lsq` (the bounds weighted
``limits.weight`` against the task rows). The compiled twin is
:func:`uk_controller.kernels.limits.acceleration_bounds`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class JointLimitStage:
    """The joint-limit stage of a controller: ``table`` (3, n) = effective lower and upper position
    limits and speed limits; ``brake`` the braking deceleration a_b, ``time_constant`` T, ``weight`` of
    the bounds against the task rows and ``eps``, the tie-break weight toward the unbounded effort
    (relative; :mod:`uk_controller.core.bounded_lsq`); ``singular_threshold`` and ``singular_damping``
    (both relative to the largest singular value of the task matrix) the variable damping of the task
    rows near a singularity (:func:`singular_damping`; 0: none)."""

    table: np.ndarray
    brake: float
    time_constant: float
    weight: float
    eps: float = 1e-9
    singular_threshold: float = 0.0
    singular_damping: float = 0.0

    @property
    def singular(self):
        """``(singular_threshold, singular_damping)``: the arguments of :func:`singular_damping`."""
        return self.singular_threshold, self.singular_damping

    def bounds(self, q, qd, lo=None, hi=None):
        """:func:`acceleration_bounds` of this stage at (q, q')."""
        return acceleration_bounds(q, qd, self.table, self.brake, self.time_constant, lo, hi)


def acceleration_bounds(q, qd, table, brake, tc, lo=None, hi=None):
    """``(lo, hi)`` with ``lo <= q'' <= hi`` per coordinate (module docstring)."""
    q = np.asarray(q, dtype=float)
    qd = np.asarray(qd, dtype=float)
    lower, upper, vmax = table
    with np.errstate(invalid='ignore'):
        room_hi = upper - q
        room_lo = q - lower
        env_hi = np.where(room_hi < 0.0, -1.0, 1.0) * np.sqrt(2.0 * brake * np.abs(room_hi))
        env_lo = np.where(room_lo >= 0.0, -1.0, 1.0) * np.sqrt(2.0 * brake * np.abs(room_lo))
    vhi = np.where(np.isfinite(upper) & (env_hi < vmax), env_hi, vmax)
    vlo = np.where(np.isfinite(lower) & (env_lo > -vmax), env_lo, -vmax)
    crossed = vlo > vhi
    if crossed.any():
        mid = 0.5 * (vlo + vhi)
        vlo = np.where(crossed, mid, vlo)
        vhi = np.where(crossed, mid, vhi)
    lo = np.empty_like(qd) if lo is None else lo
    hi = np.empty_like(qd) if hi is None else hi
    np.divide(vlo - qd, tc, out=lo)
    np.divide(vhi - qd, tc, out=hi)
    return lo, hi


def singular_damping(smin, smax, threshold, damping):
    """The squared damping factor of the task rows' damped least squares near a singularity::

        lambda^2 = (1 - (s_min / (e s_1))^2) (l s_1)^2    where s_min < e s_1,   else 0

    (e = `threshold`, l = `damping`, s_1 = `smax` and s_min = `smin` the largest and smallest kept singular
    values of the task matrix ``C B_bar = A_s N B``). This is the variable damping factor of the
    singularity-robust inverse (Y. Nakamura, H. Hanafusa, "Inverse kinematic solutions with singularity
    robustness for robot manipulator control", ASME J. Dyn. Syst. Meas. Control 108(3), 1986; in this form
    S. Chiaverini, B. Siciliano, O. Egeland, "Review of the damped least-squares inverse kinematics with
    experiments on an industrial robot manipulator", IEEE Trans. Control Syst. Technol. 2(2), 1994, section
    IV), with e and l relative to s_1 so that it does not depend on the units of the rows and efforts.
    It is exactly 0 while ``s_min >= e s_1`` (the exact servo law of seed 004 eq 35 is kept bit for bit),
    grows continuously to ``(l s_1)^2`` as s_min falls to 0, and bounds the damped effort along a
    singular direction, ``s beta / (s^2 + lambda^2) <= |beta| / (2 lambda)``, where the exact one,
    ``beta / s``, changes sign through infinity when the arm crosses the singularity. The compiled twin is
    :func:`uk_controller.kernels.limits.singular_damping`."""
    if not (threshold > 0.0 and damping > 0.0 and smax > 0.0) or smin >= threshold * smax:
        return 0.0
    ratio = smin / (threshold * smax)
    scale = damping * smax
    return (1.0 - ratio * ratio) * scale * scale


def limit_table(lower, upper, velocity, *, margin, velocity_scale):
    """The (3, n) table of :func:`acceleration_bounds`: position limits shrunk by ``margin`` of their range
    at each end (joints without both limits keep -inf / inf), speed limits times ``velocity_scale`` (inf
    where none). Raises ValueError when a range is empty or inverted."""
    lower = np.asarray(lower, dtype=float).copy()
    upper = np.asarray(upper, dtype=float).copy()
    bounded = np.isfinite(lower) & np.isfinite(upper)
    if np.any(bounded & ~(upper > lower)):
        k = int(np.flatnonzero(bounded & ~(upper > lower))[0])
        raise ValueError(f'coordinate {k}: position limits [{lower[k]}, {upper[k]}] are empty or inverted')
    delta = np.where(bounded, margin * (upper - lower), 0.0)
    lower = np.where(bounded, lower + delta, -np.inf)
    upper = np.where(bounded, upper - delta, np.inf)
    vmax = np.asarray(velocity, dtype=float) * velocity_scale
    vmax = np.where(vmax > 0.0, vmax, np.inf)
    return np.vstack((lower, upper, vmax))


#: iterations of the projected Newton method of :func:`bounded_lsq` (it ends in a few: each Newton step
#: on a piece of the piecewise-quadratic objective is exact)
MAX_ITERATIONS = 100


def beyond_limits(u, limits, qdd, lo, hi):
    """True when an effort is beyond +-limits or a joint acceleration outside [lo, hi]."""
    return bool(np.any(np.abs(u) > limits) or np.any(qdd < lo) or np.any(qdd > hi))


def bounded_lsq(C, d, D, dlo, dhi, weight, lo, hi, eps, u0, u, start=None):
    """Bounded least squares of the joint-limit stage::

        minimize  f(u) = 1/2 |C u - d|^2 + w/2 sum_k dist(D_k u, [dlo_k, dhi_k])^2 + eps/2 |u - u0|^2
        subject to  lo <= u <= hi

    f is strictly convex (eps > 0), piecewise quadratic and C^1, so the minimizer is unique and a
    Lipschitz-continuous function of the data: the effort never jumps between the limits. The method is
    a primal active-set Newton method with an exact line search (Nocedal & Wright, Numerical
    Optimization, 2nd ed., sections 16.5-16.7, on the piecewise quadratic): per iteration the gradient
    ``g = G u - C^T d + w D^T v + eps (u - u0)`` (``G = C^T C`` formed once; v: the signed violations of
    the rows of D), the free set (u_j inside its box, or at a bound with g pointing inward), the Newton
    step on the free set with the Hessian of the current piece ``G + w D_V^T D_V + eps I`` (D_V: the
    violated rows; a free variable the step would push out of its box through the bound it sits on is
    held), then the exact minimum of f along the step up to the box: f is a convex piecewise quadratic in
    the step length, its derivative piecewise linear between the points where a row of D crosses its
    interval. On the right piece the Newton step is exact, so the method ends after the pieces and the
    active set stop changing; at most MAX_ITERATIONS.

    `start` (default u0), projected on the box, is the first iterate: a warm start from the previous
    control step's solution starts on (or next to) the piece and active set of the minimizer, which then
    takes one Newton step and one check (the active-set warm start of Nocedal & Wright section 16.5; the
    minimizer is unique, so the start changes the iterations; the last solve, :func:`_polish`, on the
    final piece and active set makes the result the same bits from any start).
    `u` (p,) receives the minimizer. Returns ``(iterations, largest violation of a D-interval left)``.
    The compiled twin is :func:`uk_controller.kernels.limits.bounded_lsq`."""
    p = u0.shape[0]
    np.clip(u0 if start is None else start, lo, hi, out=u)
    finite_lo, finite_hi = np.where(np.isfinite(dlo), dlo, 0.0), np.where(np.isfinite(dhi), dhi, 0.0)
    Cd = C.T @ d
    G = C.T @ C
    gscale = max(
        np.abs(Cd).max(initial=0.0),
        weight * np.abs(D.T @ finite_lo).max(initial=0.0),
        weight * np.abs(D.T @ finite_hi).max(initial=0.0),
        1e-300,
    )
    iterations = 0
    for iterations in range(1, MAX_ITERATIONS + 1):
        r = D @ u
        v = np.minimum(r - dlo, 0.0) + np.maximum(r - dhi, 0.0)
        Gu = G @ u
        g = Gu - Cd + weight * (D.T @ v) + eps * (u - u0)
        free = ~(((u <= lo) & (g > 0.0)) | ((u >= hi) & (g < 0.0)))
        if not free.any():
            break
        if np.abs(g[free]).max() <= 1e-13 * gscale:
            _polish(G, Cd, D, dlo, dhi, v, weight, eps, u0, free, u, lo, hi)
            break
        viol = v != 0.0
        H = G + weight * (D[viol].T @ D[viol]) + eps * np.eye(p)
        step = np.zeros(p)
        while free.any():
            F = np.flatnonzero(free)
            step[:] = 0.0
            step[F] = -np.linalg.solve(H[np.ix_(F, F)], g[F])
            out = free & (((u <= lo) & (step < 0.0)) | ((u >= hi) & (step > 0.0)))
            if not out.any():
                break
            free &= ~out
        if not free.any():
            break
        alpha, blocking = _exact_step(G, Gu - Cd, D, r, dlo, dhi, weight, eps, u - u0, u, step, lo, hi)
        u += alpha * step
        if blocking >= 0:  # exactly on the bound it reached
            u[blocking] = hi[blocking] if step[blocking] > 0.0 else lo[blocking]
        np.clip(u, lo, hi, out=u)
    r = D @ u
    v = np.minimum(r - dlo, 0.0) + np.maximum(r - dhi, 0.0)
    return iterations, float(np.abs(v).max(initial=0.0))


def _polish(G, Cd, D, dlo, dhi, v, weight, eps, u0, free, u, lo, hi):
    """u on the free set F becomes the minimizer of the final piece of f, solved directly::

        (G + w D_V^T D_V + eps I)_FF u_F = Cd_F + w (D_V^T b_V)_F + eps u0_F - (G + w D_V^T D_V)_FH u_H

    (V: the violated rows, b_V the bounds they violate; H: the variables held at their bounds), then
    projected on the box. The iterates that lead there depend on the start (the warm start); this solve
    depends only on the piece and the active set, which the unique minimizer fixes, so the effort is the
    same bits from any start: a function of the data alone, not of the controller's history. Its accuracy
    is that of the final Newton system (cond(H) times round-off; eps bounds cond(H))."""
    viol = v != 0.0
    Dv = D[viol]
    bv = np.where(v[viol] < 0.0, dlo[viol], dhi[viol])
    K = G + weight * (Dv.T @ Dv)
    F, Hd = np.flatnonzero(free), np.flatnonzero(~free)
    rhs = Cd[F] + weight * (Dv[:, F].T @ bv) + eps * u0[F] - K[np.ix_(F, Hd)] @ u[Hd]
    try:
        u[F] = np.linalg.solve(K[np.ix_(F, F)] + eps * np.eye(F.size), rhs)
    except np.linalg.LinAlgError:
        return
    np.clip(u, lo, hi, out=u)


def _exact_step(G, gt, D, r, dlo, dhi, weight, eps, du0, u, step, lo, hi):
    """``(alpha, blocking)``: the minimizer of f(u + alpha step) over ``0 <= alpha <= alpha_box`` (the
    first box bound a moving variable reaches, `blocking` its index, -1 when the minimum is inside).
    ``f'(alpha) = (gt + alpha G s).s + w sum_k v_k(alpha) D_k s + eps (u - u0 + alpha s).s`` (gt = G u -
    C^T d, the task part of the gradient) is piecewise linear and nondecreasing, its kinks where a row of
    D enters or leaves its interval."""
    gs, ds = G @ step, D @ step
    moving = step != 0.0
    with np.errstate(divide='ignore', invalid='ignore'):
        to_bound = np.where(step > 0.0, (hi - u) / step, np.where(step < 0.0, (lo - u) / step, np.inf))
    to_bound = np.where(moving, np.maximum(to_bound, 0.0), np.inf)
    blocking = int(np.argmin(to_bound)) if moving.any() else -1
    alpha_box = float(to_bound[blocking]) if blocking >= 0 else np.inf
    with np.errstate(divide='ignore', invalid='ignore'):
        kinks = np.concatenate(((dlo - r) / ds, (dhi - r) / ds))
    kinks = np.sort(kinks[np.isfinite(kinks) & (kinks > 0.0) & (kinks < alpha_box)])
    task0, task1 = gt @ step, gs @ step

    def piece(a0, a1):
        """f'(a0) and f'' on the piece (a0, a1): the rows violated at its middle."""
        ra = r + a0 * ds
        va = np.minimum(ra - dlo, 0.0) + np.maximum(ra - dhi, 0.0)
        mid = r + (0.5 * (a0 + a1) if np.isfinite(a1) else a0 + 1.0) * ds
        active = (mid < dlo) | (mid > dhi)
        dphi = task0 + a0 * task1 + weight * (va @ ds) + eps * ((du0 + a0 * step) @ step)
        return dphi, task1 + weight * (ds[active] @ ds[active]) + eps * (step @ step)

    a0 = 0.0
    for a1 in list(kinks) + [alpha_box]:
        d0, curv = piece(a0, a1)
        if d0 >= 0.0:
            return a0, -1
        if curv > 0.0 and a0 - d0 / curv <= a1:
            return a0 - d0 / curv, -1
        if not np.isfinite(a1):
            return a0, -1
        a0 = a1
    return alpha_box, blocking


def bounded_stage(CB, bbar, NB, a0, lo, hi, limits, weight, eps, u, start=None, damping=0.0, center=None):
    """The joint-limit stage of the servo solve: u (in place) becomes :func:`bounded_lsq` of the task rows
    ``CB u = bbar`` with the joint accelerations ``a0 + NB u`` in ``[lo, hi]`` (weight `weight`), the
    efforts in ``+-limits`` and the tie-break toward the unbounded u, ``eps`` relative to the mean diagonal
    of ``CB^T CB + weight NB^T NB``. `start`: the first iterate (the previous step's effort, a warm start;
    default the unbounded u). With `damping` = lambda^2 > 0 (:func:`singular_damping`) the task rows are
    the damped least squares ``[CB; lambda I] u = [bbar; lambda center]`` (`center`: the null-space part
    of the unbounded u, whose damped task part is ``(CB^T CB + lambda^2 I)^{-1} CB^T bbar``), so the
    unbounded u stays the minimizer while no bound is reached and the objective is uniformly convex across
    a singularity of CB. Returns ``(iterations, largest acceleration-bound violation left)``."""
    p = u.shape[0]
    scale = (np.sum(CB * CB) + weight * np.sum(NB * NB)) / max(p, 1)
    u0 = u.copy()
    if damping > 0.0:
        lam = np.sqrt(damping)
        CB = np.vstack((CB, lam * np.eye(p)))
        bbar = np.concatenate((bbar, lam * (np.zeros(p) if center is None else center)))
    return bounded_lsq(CB, bbar, NB, lo - a0, hi - a0, weight, -limits, limits, eps * max(scale, 1e-300), u0, u, start)
