"""Constraint terms: ``phi``, ``phi'``, ``A``, ``b`` from Pinocchio quantities.

Each term describes m rows ``phi(q, q', t) = 0`` and their second-order form
``A q'' = b`` (seed 000 eqs 3-5, seed 004 eq 23), obtained by differentiating
twice with the frame Jacobian J and the drift ``J' q'`` of
:class:`~uk_controller.model.RobotModel`, never from per-robot formulas:

- :class:`FramePosition`     ``phi = S (p_frame - p_d(t))``,
  ``A = S J_lin``, ``b = S (a_d - J_lin' q')``  (S selects axes);
- :class:`FrameOrientation`  planar angle about an axis, or the full SO(3)
  error ``phi = log(R_d^T R)``;
- :class:`JointLinear`       ``phi = c . q - value(t)``, ``A = c``,
  ``b = value''(t)`` (e.g. seed 000 eq 46: q1 + q2 + q3 = 0);
- :class:`JointPolynomial`   ``q1 - r1 = P(q2 - r2)`` (MuJoCo's joint equality, exact derivatives);
- :class:`LoopClosure`       two frames coincide in chosen position axes
  (revolute closure) and optionally in a planar angle, or fully (weld);
- :class:`CallableTerm`      a user function ``module:function``.

:class:`ConstraintStack` stacks terms into one preallocated
:class:`~uk_controller.rows.ConstraintRows` filled in place by a single
:meth:`ConstraintStack.evaluate` call. The caller has already run
``model.compute(q, q')``.

Roles (docs/config.md): ``passive`` rows are mechanism closures realised by the
structure; ``servo`` rows are tasks realised by the actuators (Chen, seed 004).

Modules: :mod:`.so3` (SO(3) and planar-angle helpers), :mod:`.terms` (the term classes), :mod:`.stack`
(:class:`ConstraintStack` and the config builders), :mod:`.compiled` (:class:`CompiledRows`, the
stacks' compiled program, created by :meth:`ConstraintStack.create_data`).
"""
from .compiled import CompiledRows
from .so3 import jl, jl_dot, jr_inv, jr_inv_dot, planar_angle, skew, wrap_angle
from .stack import ConstraintStack, build_stacks, build_term
from .terms import (AXES, ROLES, TYPES, CallableTerm, FrameOrientation, FramePosition, JointLinear, JointPolynomial,
                    LoopClosure, Term, load_function)

__all__ = ['AXES', 'ROLES', 'TYPES', 'CallableTerm', 'CompiledRows', 'ConstraintStack', 'FrameOrientation',
           'FramePosition', 'JointLinear', 'JointPolynomial', 'LoopClosure', 'Term', 'build_stacks', 'build_term', 'jl', 'jl_dot',
           'jr_inv', 'jr_inv_dot', 'load_function', 'planar_angle', 'skew', 'wrap_angle']
