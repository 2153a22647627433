"""Redundancy resolution settings: the posture rows and the internal-force target of a controller.

DESIGN.md "Redundancy" (seed 004 eq 35 with its free vector chosen): with ``q'' = N (Q + B u) + r_p`` and
``G = A_s N B`` every effort meeting the task rows is ``u = G^+ r + P z``, ``P = I - G^+ G``. The
controller picks ``z`` minimizing ``|N B P z - (a_p - q''_task)|_M`` (:func:`uk_controller.core.uk.redundancy_effort`)
for the posture acceleration::

    a_p = -w^2 (q - q_ref) - 2 zeta w q'                       (posture.omega, posture.damping_ratio)
        + sum over joints inside their limit margin of  -w_l^2 d - 2 w_l d'   (posture.limit_*)

where ``d`` is how far the joint is inside the margin ``posture.limit_margin * (upper - lower)`` of its
URDF range (a one-sided spring and damper pushing it back; nothing outside the margin).

The posture enters the solvers as rows, so the compiled step needs no new argument: one ``joint_linear``
row ``q_j = q_ref,j`` per joint with the posture gains as its Baumgarte gains (its stabilized right-hand
side is the j-th entry of a_p), then two one-sided rows per limited joint, ``q_j >= lower + margin`` and
``-q_j >= -(upper - margin)``, which count only where violated (phi < 0). They follow the task rows and
the solvers treat them as secondary (``secondary``, ``one_sided`` of :class:`uk_controller.core.uk.ServoSolver`).

The rows are added only where the task leaves the robot free: the null-space dimension that moves the
robot (``rank N B P``) is evaluated at the initial state; robots whose task uses every degree of freedom
(SCARA, the five-bars, the dual arm) get no posture rows and compute exactly what they computed before.
With redundant actuation (``p - rank G - motion > 0`` efforts that move nothing) the minimum-norm
distribution stays the default; ``internal_force.effort`` sets a preload / squeeze target instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..constraints.terms import JointLinear
from ..constraints.trajectories import Hold
from ..core import uk
from ..files.parameter_file import ConfigError


@dataclass
class Redundancy:
    """What a controller adds for the task's null space (module docstring).

    terms            the posture rows (n joint rows, then the one-sided limit rows)
    gains            (2, len(terms)) kd; kp of those rows
    one_sided        how many of the last rows are one-sided (limit rows)
    internal_effort  (p,) internal-force target, or None (minimum-norm distribution)
    q_ref            the posture reference (n,)
    null_motion      dimension of the task's null space that moves the robot, at the initial state
    null_internal    dimension of the efforts that move nothing (internal forces), at the initial state
    """

    terms: list
    gains: np.ndarray
    one_sided: int
    internal_effort: np.ndarray | None
    q_ref: np.ndarray
    null_motion: int
    null_internal: int

    @property
    def secondary(self):
        """Number of posture rows (0: no posture term)."""
        return len(self.terms)

    @property
    def active(self):
        """True when the solve has a null-space term (posture rows or an internal-force target)."""
        return bool(self.terms) or self.internal_effort is not None


def null_space_dimensions(setup, q, qd, rcond=uk.DEFAULT_RCOND):
    """``(motion, internal)`` null-space dimensions of the task at (q, q') (:func:`uk.redundancy_effort`)."""
    q = np.asarray(q, dtype=float)
    qd = np.asarray(qd, dtype=float)
    passive, servo, B = setup.evaluate(q, qd, 0.0)
    model = setup.model
    res = uk.servo_control(
        model.M,
        -model.h,
        B,
        servo.A,
        servo.b,
        A_passive=passive.A if setup.passive.m else None,
        b_passive=passive.b if setup.passive.m else None,
        rcond=rcond,
        posture_accel=np.zeros(model.n),
        on_infeasible='report',
    )
    return res.null_motion, res.null_internal


def _vector(values, default, length, file, key):
    """A resolved list setting as a float array of `length` entries (`default` when not given)."""
    if values is None:
        return None if default is None else np.asarray(default, dtype=float)
    if len(values) != length:
        raise ConfigError(f'must have {length} entries, got {len(values)}', file=file, key=key)
    return np.asarray(values, dtype=float)


def build(setup, rcond=uk.DEFAULT_RCOND, reference=None):
    """The :class:`Redundancy` of `setup` from its ``posture`` and ``internal_force`` sections; `reference`: the
    posture reference when ``posture.reference`` is not set (default: the start, ``setup.q0``)."""
    posture, internal = setup.settings.posture, setup.settings.internal_force
    model = setup.model
    n, p = model.n, setup.actuators.p
    default = setup.q0 if reference is None else reference
    q_ref = _vector(posture.reference, default, n, setup.config_path, 'posture.reference')
    target = _vector(internal.effort, None, p, setup.config_path, 'internal_force.effort')
    try:
        motion, free_efforts = null_space_dimensions(setup, setup.q0, setup.qd0, rcond)
    except (np.linalg.LinAlgError, ValueError):
        motion, free_efforts = 0, 0
    terms, gains, one_sided = [], [], 0
    if posture.enabled and motion > 0:
        omega, zeta = posture.omega, posture.damping_ratio
        eye = np.eye(n)
        names = model.joint_names
        for j in range(n):
            terms.append(JointLinear(f'posture.{names[j]}', eye[j], Hold([q_ref[j]])))
            gains.append((2.0 * zeta * omega, omega * omega))
        margin, wl = posture.limit_margin, posture.limit_omega
        if margin > 0.0:
            lower, upper = model.position_limits
            for j in range(n):
                lo, hi = lower[j], upper[j]
                if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
                    continue
                delta = margin * (hi - lo)
                terms.append(JointLinear(f'limit_lower.{names[j]}', eye[j], Hold([lo + delta])))
                terms.append(JointLinear(f'limit_upper.{names[j]}', -eye[j], Hold([-(hi - delta)])))
                gains += [(2.0 * wl, wl * wl)] * 2
                one_sided += 2
    gains = np.array(gains, dtype=float).T.reshape(2, len(terms))
    return Redundancy(terms, gains, one_sided, target, q_ref, int(motion), int(free_efforts))


__all__ = ['Redundancy', 'build', 'null_space_dimensions']
