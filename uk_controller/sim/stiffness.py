"""The step the embedded plant's RK4 needs: stiffness told apart from divergence.

A light link with passive damping, a spring or dry friction from the description has fast modes: a
coordinate j with mobility ``m_j = (M^-1)_jj`` (its acceleration per unit force, the other joints free)
relaxes at the rate ``lambda_j = m_j (d_j + f_j / v_s)`` (viscous damping d and the slope ``f / v_s`` of the
smoothed Coulomb friction ``f tanh(q' / v_s)``, :mod:`uk_controller.model.joint_dynamics`) and oscillates at
``omega_j = sqrt(m_j k_j)`` (a spring k). Explicit RK4 is stable for ``h lambda < 2.78`` on the negative
real axis and ``h omega < 2.82`` on the imaginary axis (Hairer & Wanner, Solving ODEs II, IV.2); past that
the plant runs to infinity whatever the controller does. :func:`required_substeps` gives the number of
RK4 steps per control period with a margin (h <= 2 / (1.5 rate), M varies with the posture), and the
plant raises its ``simulation.substeps`` to it, or refuses when more than MAX_SUBSTEPS would be needed,
naming the joint and the step.
"""

from __future__ import annotations

import math

import numpy as np

#: RK4 steps per control period beyond which the plant refuses (the description needs an implicit
#: integrator or its passive dynamics revised: e.g. the friction's velocity scale robot.friction_velocity)
MAX_SUBSTEPS = 4000
#: h * rate bound used: 2.0 against RK4's 2.78, and the rates times 1.5 for the posture dependence of M
_RK4_BOUND, _MARGIN = 2.0, 1.5


def fastest_modes(model, q):
    """Per coordinate, the rate (1/s) of its fastest passive mode at q (module docstring); zeros without
    passive joint dynamics."""
    jd = getattr(model, 'joint_dynamics', None)
    n = model.n
    if jd is None:
        return np.zeros(n)
    model.compute(np.asarray(q, dtype=float), np.zeros(n))
    mobility = np.diag(np.linalg.inv(model.M))
    damping = np.asarray(jd.damping, dtype=float) + np.asarray(jd.friction, dtype=float) / jd.friction_velocity
    spring = np.asarray(jd.stiffness, dtype=float)
    return np.maximum(mobility * damping, np.sqrt(np.maximum(mobility * spring, 0.0)))


def required_substeps(model, q, period):
    """``(substeps, joint index, rate)``: the RK4 steps per control period of `period` s the fastest
    passive mode at q needs (1 when there is none), the coordinate it belongs to and its rate."""
    rates = fastest_modes(model, q)
    if rates.size == 0 or not np.isfinite(rates).all():
        return 1, -1, float('nan')
    j = int(np.argmax(rates))
    need = math.ceil(_MARGIN * rates[j] * period / _RK4_BOUND) if rates[j] > 0.0 else 1
    return max(1, need), j, float(rates[j])
