"""Constraint terms: ``phi``, ``phi'``, ``A``, ``b`` from Pinocchio quantities.

Each term describes m rows ``phi(q, q', t) = 0`` and their second-order form
``A q'' = b`` (seed 000 eqs 3-5, seed 004 eq 23), obtained by differentiating
twice with the frame Jacobian J and the drift ``J' q'`` of
:class:`~uk_controller.model.robot_model.RobotModel`, never from per-robot formulas:

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
:class:`~uk_controller.core.rows.ConstraintRows` filled in place by a single
:meth:`ConstraintStack.evaluate` call. The caller has already run
``model.compute(q, q')``.

Roles (docs/config.md): ``passive`` rows are mechanism closures realised by the
structure; ``servo`` rows are tasks realised by the actuators (Chen, seed 004).

Modules: :mod:`.so3` (SO(3) and planar-angle helpers), :mod:`.terms` (the term classes), :mod:`.stack`
(:class:`ConstraintStack` and the config builders), :mod:`.compiled` (:class:`CompiledRows`, the
stacks' compiled program, created by :meth:`ConstraintStack.create_data`), :mod:`.trajectories` (desired
trajectories with analytic derivatives).

:data:`TYPES` is the one table of constraint type names (the ``type`` key; :func:`build_term` builds
them, the settings schema reads its choices here). Importing this package loads nothing but this file:
the names below load their module on first use (PEP 562), so the settings schema can read
:data:`TYPES` and :mod:`.trajectories` without numba or Pinocchio.
"""

import importlib

#: the constraint types, in the order of docs/config.md
TYPES = ('frame_position', 'frame_orientation', 'joint_linear', 'joint_polynomial', 'loop_closure', 'callable')
#: the types whose ``role`` is passive unless the item says servo (the mechanism's own couplings and closures)
PASSIVE_BY_DEFAULT = ('joint_polynomial', 'loop_closure')

#: exported name -> the module of this package that defines it
_EXPORTS = {
    'CompiledRows': 'compiled',
    'jl': 'so3',
    'jl_dot': 'so3',
    'jr_inv': 'so3',
    'jr_inv_dot': 'so3',
    'planar_angle': 'so3',
    'skew': 'so3',
    'wrap_angle': 'so3',
    'ConstraintStack': 'stack',
    'build_stacks': 'stack',
    'build_term': 'stack',
    'AXES': 'terms',
    'ROLES': 'terms',
    'CallableTerm': 'terms',
    'FrameOrientation': 'terms',
    'FramePosition': 'terms',
    'JointLinear': 'terms',
    'JointPolynomial': 'terms',
    'LoopClosure': 'terms',
    'Term': 'terms',
    'load_function': 'terms',
}
__all__ = sorted(['TYPES', 'PASSIVE_BY_DEFAULT', *_EXPORTS])


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    return getattr(importlib.import_module(f'.{_EXPORTS[name]}', __name__), name)
