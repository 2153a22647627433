"""The linearly-implicit ROS2 of the embedded plant (NumPy reference): stable on stiff passive dissipation.

A light link with viscous damping, a spring or Coulomb friction ``f tanh(q'/v_s)``
(:mod:`uk_controller.model.joint_dynamics`) relaxes far faster than the control period (the xArm7's last
joint at 7.35e5 1/s); explicit RK4 then needs hundreds of steps per period (:mod:`.stiffness`). This
integrator takes those passive terms implicitly and the rest (inertia coupling, Coriolis, gravity, the held
efforts) explicitly, with a few steps per period.

**Method.** The two-stage Rosenbrock W-method ROS2 of Verwer, Spee, Blom & Hundsdorfer, "A second-order
Rosenbrock method applied to photochemical dispersion problems", SIAM J. Sci. Comput. 20(4), 1999,
with ``gamma = 1 + 1/sqrt(2)``::

    (I - gamma h A) k1 = f(x)
    (I - gamma h A) k2 = f(x + h k1) - 2 k1
    x+ = x + 3/2 h k1 + 1/2 h k2

It is of order 2 for ANY matrix A (a W-method: A need not be the Jacobian) and L-stable when A is the
Jacobian (its stability function vanishes at infinity: ``gamma^2 - 2 gamma + 1/2 = 0``). For x = (q, q'),
f = (q', q'') and ``M q'' = tau - h(q, q')``, A is the Jacobian of the passive joint terms alone, at the
step's start::

    A = [[0, I], [-M^-1 K, -M^-1 D]],   K = diag(k_j),   D = diag(s_j),
    s_j = d_j + f_j / v_s sech^2(q'_j / v_s)     (the slope of the damping and friction)

so each stage is one n x n solve with ``W = M + gamma h D + (gamma h)^2 K`` (symmetric positive definite,
one Cholesky per step, M of the step's start)::

    W k_v = M r_v - gamma h K r_q,   k_q = r_q + gamma h k_v

A W-method keeps the equilibria of f (f(x) = 0 gives k1 = k2 = 0), so a joint held by friction rests
where the effort balances it, as with the exact dynamics. Its L-stability damps what a step does not
resolve: a stiff spring mode (h omega >> 1) is damped numerically, not followed; the order 2 holds where
h omega is small.

**The friction's zero crossing.** The slope at the step's start can be ~0 (|q'| >> v_s) while the speed
crosses zero inside the step, where the slope is ``f / v_s`` (100 N m s/rad for f = 1 N m): the friction
would then be explicit on a mode of rate ``m f / v_s``, and the speed would chatter around zero by
``h m f`` each step. After the two stages, each joint's friction is compared with its slope over the
speeds the step visited (start, second stage, end: the secant ``(F(hi) - F(lo)) / (hi - lo)``); where
that secant exceeds the slope used by more than :data:`SECANT_RATIO` (a mode taken explicitly for more
than a third of its rate), the step is redone with the slope raised to it (never lowered, so the passes
end). After :data:`PASSES` - 1 passes a joint still flagged takes its largest slope ``d + f / v_s``: an
over-estimated slope only slows that joint's relaxation (R -> 1), it cannot chatter. With the stiff
limit of the W-method's stability function ``R = 1 - 2 u + u^2 / 2`` for an under-estimate by the ratio
``gamma u`` (|R| < 1 for ratios below 4 gamma), a ratio below 1.5 damps a stiff mode at least by 0.4 per
step. On a smooth, non-stiff step the visited speeds are close and the secant is the slope (no redo), so
the order is 2 (test/test_ros2.py).

The compiled twin is :func:`uk_controller.kernels.plant.ros2_period` (UKPlant's compiled period and the
compiled closed loop); :func:`ros2_period` below is its NumPy reference (same passes, round-off apart).
Trees only: plants with closure rows keep RK4 (:class:`~uk_controller.sim.uk_plant.UKPlant`).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ..kernels.codes import ROS2_GAMMA as GAMMA
from ..kernels.codes import ROS2_PASSES as PASSES
from ..kernels.codes import ROS2_SECANT_RATIO as SECANT_RATIO

#: GAMMA: ROS2's gamma (L-stability: gamma^2 - 2 gamma + 1/2 = 0, the larger root); SECANT_RATIO: a step is
#: redone when a joint's friction secant over the visited speeds exceeds its slope by this ratio; PASSES:
#: passes of a step at most (the one before the last raises the joints still flagged to their largest slope)
__all__ = ['GAMMA', 'SECANT_RATIO', 'PASSES', 'passive_slopes', 'raise_slopes', 'ros2_period']


def passive_slopes(qd, damping, friction, vs):
    """``d + f / v_s sech^2(q' / v_s)`` per coordinate (the slope of the damping and friction at q')."""
    th = np.tanh(qd / vs)
    return damping + (friction / vs) * (1.0 - th * th)


def raise_slopes(s, v0, v1, v2, damping, friction, vs, last):
    """Raise the slopes s (in place) where the friction's secant over the speeds v0, v1, v2 exceeds them by
    more than SECANT_RATIO (module docstring); ``last``: raise those to ``d + f / v_s`` instead. Returns
    whether any was raised."""
    lo = np.minimum(np.minimum(v0, v1), v2)
    hi = np.maximum(np.maximum(v0, v1), v2)
    width = hi - lo
    wide = (friction > 0.0) & (width > 1e-12 * vs)
    secant = np.zeros_like(s)
    secant[wide] = friction[wide] * (np.tanh(hi[wide] / vs) - np.tanh(lo[wide] / vs)) / width[wide]
    flag = wide & (damping + secant > SECANT_RATIO * s)
    if not flag.any():
        return False
    s[flag] = (damping + friction / vs)[flag] if last else (damping + secant)[flag]
    return True


def ros2_period(x, t, dt, substeps, accel, mass, damping, stiffness, friction, vs):
    """``substeps`` ROS2 steps of x = (q, q') (advanced in place) over dt from time t (module docstring).

    ``accel(q, qd, t) -> q''`` (the efforts held), ``mass(q, qd) -> M`` at the step's start; ``damping``,
    ``stiffness``, ``friction`` (n,) and ``vs`` (friction velocity scale) of the passive joint terms.
    Returns the time reached."""
    n = x.shape[0] // 2
    H = dt / substeps
    gh = GAMMA * H
    kdiag = gh * gh * np.asarray(stiffness, dtype=float)
    ks = gh * np.asarray(stiffness, dtype=float)
    for _ in range(substeps):
        q, v = x[:n].copy(), x[n:].copy()
        a0 = np.array(accel(q, v, t), dtype=float)
        M0 = np.array(mass(q, v), dtype=float)
        s = passive_slopes(v, damping, friction, vs)
        for p in range(PASSES):
            W = M0 + np.diag(gh * s + kdiag)
            cf = cho_factor(W, lower=True)
            k1v = cho_solve(cf, M0 @ a0 - ks * v)
            k1q = v + gh * k1v
            xt = x + H * np.concatenate((k1q, k1v))
            a1 = np.array(accel(xt[:n], xt[n:], t + H), dtype=float)
            r2q = xt[n:] - 2.0 * k1q
            k2v = cho_solve(cf, M0 @ (a1 - 2.0 * k1v) - ks * r2q)
            k2q = r2q + gh * k2v
            v_end = v + H * (1.5 * k1v + 0.5 * k2v)
            if p == PASSES - 1 or not raise_slopes(s, v, xt[n:], v_end, damping, friction, vs, p == PASSES - 2):
                break
        x[:n] += H * (1.5 * k1q + 0.5 * k2q)
        x[n:] += H * (1.5 * k1v + 0.5 * k2v)
        t += H
    return t
