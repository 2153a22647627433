"""The joints' passive dissipation over one control period: implicit Euler under the zero-order hold.

The effort is held for a control period ``dt`` (zero-order hold) while the joints' passive dissipation acts
on the speed *inside* the period: viscous damping ``d q'`` and Coulomb friction ``f tanh(q'/v_s)``
(:mod:`uk_controller.model.joint_dynamics`). On a light link both are stiff against the period: the
friction's slope through rest is ``f / v_s`` (100 N m s/rad for f = 1 N m, v_s = 0.01 rad/s) and a joint
of mobility ``m = (M^-1)_kk`` relaxes at ``m (d + f / v_s)`` (the xArm7's last joint: m = 7200 /(kg m^2),
d = 2 N m s/rad, so its damping alone relaxes in dt / 14). An effort computed from the dynamics at the
sampled speed, ``M q'' + h(q, q') = B u``, then does not give the joint the acceleration asked for: the
speed settles where the dissipation balances the effort within a fraction of the period, and a joint near
rest gets ``1 / (dt m (d + f / v_s))`` of the speed change asked for (1/735 on that joint): it creeps.

The control law therefore asks for the effort that gives the speed it wants at the END of the period,
``q'_+ = q' + dt q''``, with the dissipation taken there: the backward (implicit) Euler step of the
dissipative term, the L-stable treatment of a stiff term (Hairer & Wanner, Solving Ordinary
Differential Equations II, section IV.3; for Coulomb friction in discrete time, Kikuuwe, Takesue, Sano,
Mochiyama & Fujimoto, "Admittance and impedance representations of friction based on implicit Euler
integration", IEEE Trans. Robotics 22(6), 2006; model-based compensation at the desired speed, Bona &
Indri, "Friction compensation in robotics: an overview", IEEE CDC-ECC 2005)::

    M q'' + h(q, q') + D dt q'' + [F(q' + dt q'') - F(q')] = B u + passive force

(h already holds ``D q' + F(q')``, D = diag(d), F_k(v) = f_k tanh(v / v_s)).

- The damping is linear, so its implicit step is exact in the mass matrix: the servo solve runs on
  ``M_d = M + dt D`` (:func:`period_mass`). M_d is what the period's speed change costs: every consumer
  of M in the solve (the task's effort, the null-space metric, the joint-limit stage) sees the discrete
  dynamics the plant will follow. It stays symmetric positive definite (d >= 0).
- The friction is not linear and its slope through rest (``f / v_s``) is far larger than any link's
  inertia over a period; in the mass matrix a slope taken at one acceleration would be extrapolated to
  another (the joint-limit stage may ask for a very different one). It is taken as a *load* instead: a
  first solve gives q''; the friction's change up to the speed it asks for, ``dF = F(q' + dt q'') - F(q')``
  (:func:`friction_change`, |dF_k| < 2 f_k whatever q''), is added to h and the same solve runs again.
  Where the second solve keeps q'' (no bound of the joint-limit stage becomes active or inactive between
  the two: a fully actuated tree gives ``u_2 = u_1 + dF``) the effort is exactly the implicit Euler one;
  where the stage changes q'', the friction in the effort is off by at most the friction's range at the
  joints it changed, never by a slope times an acceleration.

On one joint of inertia I, an effort ``u = (I + dt d) a + d v + F(v + dt a)`` held over dt brings the
speed to ``v + dt a`` to within ``a I / (d + F'(v_+))`` (the dissipation's time constant times a: small
exactly where the dissipation is stiff), where the effort of the sampled speed misses by up to all of
``dt a`` (test/test_implicit_dissipation.py integrates the joint in closed form). Every step of this is a
continuous function of the state (tanh, a constant shift of M, the servo solve). A robot whose controller
model has neither damping nor friction has no :class:`PeriodDissipation`: its control step is unchanged.
The compiled twin is the dissipation block of :func:`uk_controller.kernels.rows.fused_step_ws`
(``period_mass_lower``, ``friction_load``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PeriodDissipation:
    """The dissipation a controller takes over its period ``dt``: ``dt_damping`` = dt d (n,), ``friction``
    f (n,) and the friction's velocity scale ``friction_velocity`` v_s (module docstring)."""

    dt: float
    dt_damping: np.ndarray
    friction: np.ndarray
    friction_velocity: float

    @property
    def has_damping(self):
        return bool(np.any(self.dt_damping))

    @property
    def has_friction(self):
        return bool(np.any(self.friction))


def period_dissipation(dt, damping, friction, friction_velocity):
    """The :class:`PeriodDissipation` of joints with viscous damping `damping` (n,) and Coulomb friction
    `friction` (n,) of velocity scale `friction_velocity`, at the control period `dt`; None when there is
    neither (the control step is then the plain one)."""
    damping = np.array(damping, dtype=float)
    friction = np.array(friction, dtype=float)
    if not (np.any(damping) or np.any(friction)) or not dt > 0.0:
        return None
    return PeriodDissipation(float(dt), dt * damping, friction, float(friction_velocity))


def period_mass(M, dissipation, out=None):
    """``M + dt diag(d)`` (into `out`, a new array by default; `out` may be M itself)."""
    out = np.array(M, dtype=float, order='C') if out is None else out
    if out is not M:
        np.copyto(out, M)
    np.einsum('ii->i', out)[:] += dissipation.dt_damping  # the diagonal as a view of out
    return out


def friction_change(qd, qdd, dissipation, out=None, work=None):
    """``dF_k = f_k (tanh((q'_k + dt q''_k) / v_s) - tanh(q'_k / v_s))``: the friction's change over the
    period up to the speed the solve asks for (into `out`, a new array by default; `work`: an (n,) scratch)."""
    vs = dissipation.friction_velocity
    out = np.empty(np.shape(qd)) if out is None else out
    work = np.empty(np.shape(qd)) if work is None else work
    np.multiply(qdd, dissipation.dt, out=out)
    out += qd
    out /= vs
    np.tanh(out, out=out)
    np.divide(qd, vs, out=work)
    out -= np.tanh(work, out=work)
    out *= dissipation.friction
    return out
