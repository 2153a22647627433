"""Coulomb friction over a control period: the controller's mass matrix with the friction's secant slope.

A joint with Coulomb friction ``f tanh(q'/v_s)`` (robot.friction_velocity ``v_s``, 0.01 rad/s by default)
has a friction force whose slope near rest is ``f / v_s`` (100 N m s/rad for f = 1 N m): on a light link
its time constant ``I v_s / f`` is far below the control period. The effort is held over the period (zero
order hold), so the plant's friction changes within it while the controller compensated its value at the
sampled speed: the joint does not realize the acceleration the controller asked for (the xArm7 and Z1
wrists creep to their targets; the Z1 jaw runs past its limit while the controller commands braking).

The control law therefore asks for the friction at the speed it wants at the end of the period,
``q'_+ = q' + dt q''``, not at the sampled ``q'`` (model-based friction compensation at the desired speed:
Bona & Indri, "Friction compensation in robotics: an overview", CDC-ECC 2005, section III; the fixed-step
friction compensation of Kikuuwe, Takesue, Sano, Mochiyama & Fujimoto, "Fixed-step friction simulation
and compensation", IEEE Trans. Robotics 21(6), 2005, evaluates the friction implicitly at the end of the
step for the same reason). ``q''`` depends on that friction, so the law is linearly implicit (a Rosenbrock
step): with the secant slope of the friction between ``q'`` and the speed the explicit solve predicts,

    c_k = f_k (tanh((q'_k + dt a_k) / v_s) - tanh(q'_k / v_s)) / (dt a_k)        (f_k / v_s sech^2(q'_k / v_s) at a_k = 0)
    f(q'_+) ~ f(q') + c dt q''   =>   (M + dt diag(c)) q'' + h(q, q') = B u + passive force

so the second solve is the same servo solve on ``M + dt diag(c)`` (c >= 0: the matrix stays positive
definite). ``a`` is the explicit solve's q''; c is a continuous function of (q', a), so the effort stays a
continuous function of the state. Joints without friction have c = 0; a robot without friction runs the
one solve it ran before (bit for bit). The compiled twin is :func:`uk_controller.kernels.rows.friction_secant`.
"""
from __future__ import annotations

import numpy as np


def friction_step(model, dt):
    """``(dt, f, v_s)`` of the controller's model `model` (RobotModel) at the control period `dt`: the
    Coulomb friction per coordinate and its tanh velocity scale; None when no joint has friction."""
    jd = getattr(model, 'joint_dynamics', None)
    if jd is None or not np.any(np.asarray(jd.friction, dtype=float) != 0.0) or not dt > 0.0:
        return None
    friction = np.asarray(jd.friction, dtype=float).copy()
    vs = np.broadcast_to(np.asarray(jd.friction_velocity, dtype=float), friction.shape).copy()
    return float(dt), friction, vs


def secant_slopes(qd, qdd, friction, vs, dt):
    """The secant slope c_k of ``f_k tanh(v / v_s)`` between q'_k and q'_k + dt q''_k (module docstring)."""
    qd = np.asarray(qd, dtype=float)
    dv = dt * np.asarray(qdd, dtype=float)
    t0 = np.tanh(qd / vs)
    with np.errstate(divide='ignore', invalid='ignore'):
        secant = friction * (np.tanh((qd + dv) / vs) - t0) / dv
    tangent = friction / vs * (1.0 - t0 * t0)
    return np.where((dv != 0.0) & (friction != 0.0), secant, np.where(friction != 0.0, tangent, 0.0))


def friction_mass(M, qd, qdd, step):
    """``M + dt diag(c)`` for ``step = (dt, f, v_s)`` (:func:`friction_step`), c the secant slopes at the
    explicit solve's q'' (a new array; M is left alone)."""
    dt, friction, vs = step
    Mc = np.array(M, dtype=float)
    Mc[np.diag_indices_from(Mc)] += dt * secant_slopes(qd, qdd, friction, vs, dt)
    return Mc
