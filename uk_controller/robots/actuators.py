"""Actuator map ``B`` (n x p): generalized force of each actuator's unit effort.

The dynamics with actuators read ``M q'' + h = B u`` (seed 004 eq 1 with
Q = B u). Two kinds of actuator (docs/config.md, section ``actuators``):

- ``joint: <name>``: a motor on a tree joint; its column is the unit vector
  of that coordinate (u is the joint-side torque or force);
- ``tendon: <name>``: a force on a fixed tendon of the MJCF (length ``L = sum c_j q_j``); by virtual work
  its column is the tendon's coefficients ``c`` (uk_controller.files.description_extras);
- ``between: [body_a, body_b]``, ``axis: [ax, ay, az]`` (world frame): a
  torque ``u a`` on body A and ``-u a`` on body B, e.g. a motor on a hinge
  that is not a tree joint (a loop-closing joint). By virtual work its column
  is ``(J_ang,A - J_ang,B)^T a`` (q-dependent; 'world' is the fixed base).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Actuator:
    name: str
    joint: int | None = None  # index into q (joint actuators)
    bodies: tuple | None = None  # (body_a, body_b) frame names, None for 'world'
    axis: np.ndarray | None = None  # unit axis in world frame
    effort_limit: float = np.inf
    column: np.ndarray | None = None  # a constant column (n,): a fixed tendon's coefficients


class ActuatorMap:
    """Ordered actuators: ``names``, ``p``, ``effort_limits`` (p,), :meth:`matrix`."""

    def __init__(self, actuators, n):
        self.actuators = list(actuators)
        self.n = int(n)
        self.names = [a.name for a in self.actuators]
        if len(set(self.names)) != len(self.names):
            raise ValueError(f'actuator names must be unique: {self.names}')
        self.p = len(self.actuators)
        self.effort_limits = np.array([a.effort_limit for a in self.actuators], dtype=float)
        self._B = np.zeros((self.n, self.p))
        self._between = []
        for k, act in enumerate(self.actuators):
            if act.joint is not None:
                self._B[act.joint, k] = 1.0
            elif act.column is not None:
                self._B[:, k] = act.column
            else:
                self._between.append((k, act))
        self.constant = not self._between

    def compiled_form(self):
        """(B, between) as ``constraints.CompiledRows.build`` takes them: B (n, p) with the joint
        actuators' unit columns, and (k, body_a, body_b, axis) per `between` actuator, whose column
        the compiled program forms from the frame Jacobians at every call."""
        return self._B, [(k, act.bodies[0], act.bodies[1], act.axis) for k, act in self._between]

    def matrix(self, model=None, out=None):
        """B (n, p) at the state of the last ``model.compute`` (needed only for `between` actuators).

        Returns an internal buffer reused across calls (copy it to keep it),
        or writes into `out`.
        """
        B = self._B
        for k, act in self._between:
            if model is None:
                raise ValueError(f'actuator {act.name!r} acts between bodies: matrix() needs the model')
            a, b = act.bodies
            if a is None:
                B[:, k] = act.axis @ model.frame(b).jacobian()[3:]
                np.negative(B[:, k], out=B[:, k])
            elif b is None:
                B[:, k] = act.axis @ model.frame(a).jacobian()[3:]
            else:
                B[:, k] = act.axis @ (model.frame(a).jacobian()[3:] - model.frame(b).jacobian()[3:])
        if out is not None:
            out[...] = B
            return out
        return B

    def __repr__(self):
        return f'ActuatorMap({self.names})'
