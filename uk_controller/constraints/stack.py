"""ConstraintStack (terms stacked into one preallocated ConstraintRows) and the builders from the config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..core.rows import ConstraintRows
from ..files.parameter_file import ConfigError
from .terms import (
    CallableTerm,
    FrameOrientation,
    FramePosition,
    JointLinear,
    JointPolynomial,
    LoopClosure,
    Term,
    load_function,
    row_kernels,
)
from .trajectories import Hold
from .trajectories import trajectory as build_trajectory

if TYPE_CHECKING:  # the generated item classes (uk_controller/settings/types.py); the rows read their attributes
    from ..settings.types import ConstraintItem, ConstraintRefinementSettings, TrajectoryItem


class ConstraintStack:
    """Several terms stacked into one preallocated :class:`ConstraintRows`.

    ``names`` (evaluation order), ``m`` (total rows), ``slices`` (name ->
    slice of the rows), ``terms``. :meth:`evaluate` fills every row in place
    and returns the rows (the same object each call unless `out` is given).

    ``backend`` ('auto', 'compiled' or 'numpy') is chosen once here: 'compiled' evaluates the
    frame-position, closure-position and planar-angle rows with their compiled twins (the row
    kernels), 'numpy' with the NumPy/Python reference code of the terms; 'auto' = compiled when numba
    is installed. ``backend_name`` says which runs. :meth:`create_data` builds the stacks' compiled
    program (:class:`~uk_controller.constraints.compiled.CompiledRows`), as a Pinocchio constraint
    model creates its data.
    """

    def __init__(self, terms, n, backend='auto'):
        self._kernels = row_kernels(backend)
        self.backend_name = 'numpy' if self._kernels is None else 'compiled'
        self.terms = list(terms)
        self.n = int(n)
        self.names = [term.name for term in self.terms]
        if len(set(self.names)) != len(self.names):
            raise ValueError(f'constraint names must be unique: {self.names}')
        self.slices = {}
        start = 0
        for term in self.terms:
            self.slices[term.name] = slice(start, start + term.m)
            start += term.m
        self.m = start
        self.rows = self.empty_rows()
        self._views = self._make_views(self.rows)

    def empty_rows(self):
        rows = ConstraintRows.empty(self.m, self.n)
        for term in self.terms:
            rows.order[self.slices[term.name]] = term.order
        return rows

    def _make_views(self, rows):
        return [
            (term, rows.phi[s], rows.phidot[s], rows.A[s], rows.b[s])
            for term, s in ((term, self.slices[term.name]) for term in self.terms)
        ]

    def __len__(self):
        return len(self.terms)

    def __getitem__(self, name):
        return self.terms[self.names.index(name)]

    def evaluate(self, model, q, qd, t, out=None):
        """Fill all rows at (q, q', t); ``model.compute(q, qd)`` must have been called."""
        views = self._views if out is None else self._make_views(out)
        K = self._kernels
        for term, phi, phidot, A, b in views:
            term.fill(model, q, qd, t, phi, phidot, A, b, K)
        return self.rows if out is None else out

    def with_backend(self, backend):
        """The same terms as a new stack evaluated by `backend` ('compiled' or 'numpy'; for comparisons)."""
        return ConstraintStack(self.terms, self.n, backend)

    def create_data(self, model, servo=None, **options):
        """This stack's rows (passive, first) and `servo`'s as ONE compiled program for `model`:
        :meth:`CompiledRows.build(model, self, servo, **options)
        <uk_controller.constraints.compiled.CompiledRows.build>`
        (None when a row has no compiled form); `servo` None: no servo rows (a plant's closures)."""
        from .compiled import CompiledRows

        return CompiledRows.build(model, self, ConstraintStack([], self.n) if servo is None else servo, **options)

    def __repr__(self):
        return f'ConstraintStack({self.names}, m={self.m})'


# ----------------------------------------------------------------------------- config


def _frame(item, key, name, model):
    if model is not None and not model.has_frame(name):
        raise item.error(key, f'unknown frame {name!r}; frames in the URDF: {", ".join(model.frame_names())}')
    return name


def _joint_index(item, model, joints):
    """Model indices of the joint names `joints` of `item`'s ``joints`` key (errors name the key)."""
    if len(set(joints)) != len(joints):
        raise item.error('joints', f'entries must be unique, got {list(joints)!r}')
    if model is None:
        raise item.error('joints', 'needs a model to map joint names')
    for jname in joints:
        if jname not in model.joint_names:
            raise item.error('joints', f'unknown joint {jname!r}; joints: {model.joint_names}')
    return [model.joint_index(j) for j in joints]


def build_term(name: str, item: ConstraintItem | ConstraintRefinementSettings, model=None, base_dir=None) -> Term:
    """One constraint term from its typed item ``constraints.<name>`` (docs/config.md; the classes of
    uk_controller/settings/types.py, as resolve() gives them; a map written in code is made one, checked
    as a setup file is, by :func:`uk_controller.settings.sections.constraint_item`).

    `model` (a RobotModel) is used to check frame and joint names; errors are
    :class:`ConfigError` naming the file and dotted key.
    """
    if isinstance(item, Mapping):
        raise TypeError(
            f'constraint {name!r}: build_term takes a typed item; '
            'uk_controller.settings.sections.constraint_item(name, map) makes one from a map'
        )
    if item.type is None:  # refines a closure the description does not declare
        raise item.error('type', 'required key is missing')
    n = model.n if model is not None else None
    held_at_start: list[bool] = []

    def traj(sub: TrajectoryItem | None, dim: int):
        assert sub is not None  # a required section (frame rows), or given (joint_linear)
        if sub.type == 'hold' and sub.value is None:
            held_at_start.append(True)  # `hold` without a value: where the row is at the start
            return Hold([0.0] * dim, sub.start_time)
        return build_trajectory(sub)

    def start_held(term: Term) -> Term:
        term.held_at_start = bool(held_at_start)
        return term

    try:
        if item.type == 'frame_position':
            frame = _frame(item, 'frame', item.frame, model)
            return start_held(FramePosition(name, frame, item.axes, traj(item.trajectory, len(item.axes)), item.role))
        if item.type == 'frame_orientation':
            return start_held(
                FrameOrientation(
                    name,
                    _frame(item, 'frame', item.frame, model),
                    traj(item.trajectory, 3 if item.mode == 'so3' else 1),
                    item.mode,
                    item.axis,
                    item.reference,
                    item.zero_direction,
                    item.role,
                )
            )
        if item.type == 'joint_linear':
            coeffs = np.asarray(item.coefficients, dtype=float)
            if item.joints is not None:
                if len(item.joints) != coeffs.size:
                    raise item.error('joints', f'must have {coeffs.size} entries, got {len(item.joints)}')
                full = np.zeros(n or 0)
                full[_joint_index(item, model, item.joints)] = coeffs
                coeffs = full
            elif n is not None and coeffs.size != n:
                raise item.error(
                    'coefficients',
                    f'needs {n} entries (one per joint in robot.joints order), got {coeffs.size}; or add a joints list',
                )
            if item.value is not None and item.trajectory is not None:
                raise item.error('value', 'give value or trajectory, not both')
            value = (
                traj(item.trajectory, 1)
                if item.trajectory is not None
                else Hold([0.0 if item.value is None else item.value])
            )
            return start_held(JointLinear(name, coeffs, value, item.role))
        if item.type == 'joint_polynomial':
            return JointPolynomial(
                name, _joint_index(item, model, item.joints), item.polycoef, item.reference, item.role
            )
        if item.type == 'loop_closure':
            for f in item.frames:
                if model is not None and not model.has_frame(f):
                    raise item.error('frames', f'unknown frame {f!r}; frames: {", ".join(model.frame_names())}')
            return LoopClosure(name, item.frames, item.axes, item.mode, item.angle_axis, item.reference, item.role)
        # callable
        try:
            func = load_function(item.function, base_dir)
        except ValueError as exc:
            raise item.error('function', str(exc)) from None
        try:
            return CallableTerm(name, func, item.params.thaw(), item.rows, item.order, item.role, model)
        except ConfigError:
            raise
        except Exception as exc:
            raise item.error('function', f'probe call failed: {type(exc).__name__}: {exc}') from None
    except ConfigError:
        raise
    except ValueError as exc:
        raise item.error(None, str(exc)) from None


def hold_where_they_start(stack, model, q0, qd0):
    """Give each row of `stack` built from a ``hold`` trajectory without ``value`` the value it has at the
    start (q0, q'0): the frame's position, its attitude (so3: the rotation vector; planar: the angle) or
    ``c . q``. With a zero reference each of these rows' phi is exactly that value (``phi = f(q) - 0``; so3:
    ``log(I^T R)``), so the value is the row evaluated once with its zero hold."""
    terms = [term for term in stack.terms if getattr(term, 'held_at_start', False)]
    if not terms:
        return
    model.compute(q0, qd0)
    for term in terms:
        term.traj.value[:] = term.evaluate(model, q0, qd0, term.traj.start_time).phi


def build_stacks(names, items, model, base_dir=None, *, file=None):
    """``(passive, servo)`` ConstraintStacks of the constraints `names` (``constraints.names``, evaluation
    order) from their typed `items` (name -> item: resolve()'s ``constraints.items`` with the description's
    closures, uk_controller/robots/setup.py); `file` names errors."""
    passive: list[Term] = []
    servo: list[Term] = []
    names = list(names or ())
    for name in names:
        item = items.get(name)
        if item is None:
            raise ConfigError('required section is missing', file=file, key=f'constraints.{name}')
        term = build_term(name, item, model, base_dir)
        (passive if term.role == 'passive' else servo).append(term)
    extra = [k for k in items if k not in names]
    if extra:
        raise ConfigError(
            f'constraint {extra[0]!r} is not listed in constraints.names', file=file, key=f'constraints.{extra[0]}'
        )
    return ConstraintStack(passive, model.n), ConstraintStack(servo, model.n)
