"""Passive joint dynamics read from the robot description: damping, springs, armature, Coulomb friction.

DESIGN.md: passive joint dynamics belong to Q and M, not to the controller's tuning. Per coordinate i::

    Q_i   = -h_i(q, q') - d_i q'_i - k_i (q_i - q_ref,i) - f_i tanh(q'_i / v_s)
    M_ii += a_i                                                   (armature: rotor inertia)

so :class:`~uk_controller.model.robot_model.RobotModel` reports ``h = C q' + G + d q' + k (q - q_ref) + f tanh(q'/v_s)``
and ``M`` with the armature on its diagonal; every consumer of M and h (the controller, the embedded plant, the
compiled kernels) then sees the same physics. Sources: MJCF ``damping``, ``stiffness`` + ``springref``,
``armature``, ``frictionloss``; URDF ``<dynamics damping friction>`` (:mod:`uk_controller.files.description_extras`).

Coulomb friction is dry friction ``f sign(q')``; the plants here integrate smooth ODEs, so it is approximated
by ``f tanh(q' / v_s)`` with the velocity scale ``v_s`` (``robot.friction_velocity``): at ``|q'| = 3 v_s`` it is
99.5 % of ``f``, and through zero it is a viscous slope ``f / v_s`` (no true sticking). MuJoCo's
``frictionloss`` is a soft dry-friction constraint instead, so the two plants agree on friction only where the
joint slides. Whether the controller compensates the friction it knows of is ``control.friction_compensation``
(with ``false`` the controller's model has no friction and the plant's friction is a disturbance).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

#: fields of one joint's passive dynamics, the order of :meth:`JointDynamics.per_joint`
FIELDS = ('damping', 'stiffness', 'spring_reference', 'armature', 'friction')


@dataclass(frozen=True)
class JointDynamics:
    """Per-coordinate arrays (length n, order of q) and the friction velocity scale (see module docstring)."""

    damping: np.ndarray
    stiffness: np.ndarray
    spring_reference: np.ndarray
    armature: np.ndarray
    friction: np.ndarray
    friction_velocity: float = 0.01

    @classmethod
    def from_joints(cls, per_joint, joint_names, friction_velocity=0.01):
        """From ``{joint name: {field: value}}`` (missing joints and fields are zero); None when all are zero."""
        n = len(joint_names)
        arrays = {f: np.zeros(n) for f in FIELDS}
        for i, name in enumerate(joint_names):
            for f, value in (per_joint.get(name) or {}).items():
                arrays[f][i] = float(value)
        for f in ('damping', 'stiffness', 'armature', 'friction'):
            bad = np.flatnonzero(~(arrays[f] >= 0.0))
            if bad.size:
                raise ValueError(f'joint {joint_names[bad[0]]!r}: {f} must be >= 0, got {arrays[f][bad[0]]}')
        if not friction_velocity > 0.0:
            raise ValueError(f'friction velocity scale must be > 0, got {friction_velocity}')
        jd = cls(**arrays, friction_velocity=float(friction_velocity))
        return jd if jd.active else None

    def __post_init__(self):
        # scratch of force() (the hot path allocates nothing) and the friction switch, fixed at construction
        object.__setattr__(self, '_tmp', np.zeros(np.shape(self.damping)))
        object.__setattr__(self, '_friction', bool(np.any(self.friction)))

    @property
    def active(self):
        """True when any joint has damping, a spring, armature or friction."""
        return bool(np.any(self.damping) or np.any(self.stiffness) or np.any(self.armature) or np.any(self.friction))

    @property
    def has_friction(self):
        return self._friction

    def without_friction(self):
        """The same dynamics with no Coulomb friction (the controller's model when it does not compensate)."""
        return replace(self, friction=np.zeros_like(self.friction))

    def force(self, q, qd, out=None):
        """The passive term of h: ``d q' + k (q - q_ref) + f tanh(q' / v_s)`` (n,), i.e. minus the passive
        generalized force."""
        if out is None:
            out = np.empty(self.damping.shape)
        tmp = self._tmp
        np.multiply(self.damping, qd, out=out)
        np.subtract(q, self.spring_reference, out=tmp)
        tmp *= self.stiffness
        out += tmp
        if self._friction:
            np.divide(qd, self.friction_velocity, out=tmp)
            np.tanh(tmp, out=tmp)
            tmp *= self.friction
            out += tmp
        return out

    def per_joint(self, i):
        """The five values of coordinate i in :data:`FIELDS` order."""
        return tuple(float(getattr(self, f)[i]) for f in FIELDS)
