"""ConstraintStack (terms stacked into one preallocated ConstraintRows) and the builders from the config."""

from __future__ import annotations

import numpy as np

from ..core.rows import ConstraintRows
from ..files.parameter_file import ConfigError, ConfigView
from . import TYPES
from .terms import (
    ROLES,
    CallableTerm,
    FrameOrientation,
    FramePosition,
    JointLinear,
    JointPolynomial,
    LoopClosure,
    load_function,
    row_kernels,
)
from .trajectories import trajectory as build_trajectory


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


def _frame(cv, key, model):
    name = cv.get_str(key)
    if model is not None and not model.has_frame(name):
        raise cv.error(key, f'unknown frame {name!r}; frames in the URDF: {", ".join(model.frame_names())}')
    return name


def build_term(name, cv, model=None, base_dir=None):
    """One constraint term from its config map ``constraints.<name>`` (docs/config.md).

    `model` (a RobotModel) is used to check frame and joint names; errors are
    :class:`ConfigError` naming the file and dotted key.
    """
    if not isinstance(cv, ConfigView):
        cv = ConfigView(cv, None, f'constraints.{name}')
    kind = cv.get_str('type', choices=TYPES)
    role = cv.get_str('role', 'passive' if kind in ('loop_closure', 'joint_polynomial') else 'servo', choices=ROLES)
    n = model.n if model is not None else None

    held_at_start = []

    def traj(key='trajectory', dim=None):
        section = cv.section(key)
        if dim is not None and section.raw('type', None) == 'hold' and 'value' not in section:
            held_at_start.append(True)  # `hold` without a value: where the row is at the start
            return build_trajectory(
                {'type': 'hold', 'value': [0.0] * dim, 'start_time': section.get_float('start_time', 0.0)}
            )
        return build_trajectory(section)

    def start_held(term):
        term.held_at_start = bool(held_at_start)
        return term

    try:
        if kind == 'frame_position':
            axes = cv.get_strs('axes', ['x', 'y', 'z'])
            return start_held(FramePosition(name, _frame(cv, 'frame', model), axes, traj(dim=len(axes)), role))
        if kind == 'frame_orientation':
            mode = cv.get_str('mode', 'planar', choices=('planar', 'so3'))
            return start_held(
                FrameOrientation(
                    name,
                    _frame(cv, 'frame', model),
                    traj(dim=3 if mode == 'so3' else 1),
                    mode,
                    cv.get_floats('axis', [0.0, 0.0, 1.0], length=3),
                    cv.get_floats('reference', None, length=3),
                    cv.get_floats('zero_direction', None, length=3),
                    role,
                )
            )
        if kind == 'joint_linear':
            coeffs = cv.get_floats('coefficients')
            if 'joints' in cv:
                joints = cv.get_strs('joints', length=coeffs.size, unique=True)
                if model is None:
                    raise cv.error('joints', 'needs a model to map joint names')
                full = np.zeros(n)
                for jname, c in zip(joints, coeffs):
                    if jname not in model.joint_names:
                        raise cv.error('joints', f'unknown joint {jname!r}; joints: {model.joint_names}')
                    full[model.joint_index(jname)] = c
                coeffs = full
            elif n is not None and coeffs.size != n:
                raise cv.error(
                    'coefficients',
                    f'needs {n} entries (one per joint in robot.joints order), got {coeffs.size}; or add a joints list',
                )
            if 'value' in cv and 'trajectory' in cv:
                raise cv.error('value', 'give value or trajectory, not both')
            value = (
                traj(dim=1)
                if 'trajectory' in cv
                else build_trajectory({'type': 'hold', 'value': [cv.get_float('value', 0.0)]})
            )
            return start_held(JointLinear(name, coeffs, value, role))
        if kind == 'joint_polynomial':
            joints = cv.get_strs('joints', length=2, unique=True)
            if model is None:
                raise cv.error('joints', 'needs a model to map joint names')
            for jname in joints:
                if jname not in model.joint_names:
                    raise cv.error('joints', f'unknown joint {jname!r}; joints: {model.joint_names}')
            return JointPolynomial(
                name,
                [model.joint_index(j) for j in joints],
                cv.get_floats('polycoef'),
                cv.get_floats('reference', [0.0, 0.0], length=2),
                role,
            )
        if kind == 'loop_closure':
            frames = cv.get_strs('frames', length=2)
            if model is not None:
                for f in frames:
                    if not model.has_frame(f):
                        raise cv.error('frames', f'unknown frame {f!r}; frames: {", ".join(model.frame_names())}')
            mode = cv.get_str('mode', 'position', choices=('position', 'weld'))
            axes = cv.get_strs('axes', ['x', 'y', 'z'])
            return LoopClosure(
                name,
                frames,
                axes,
                mode,
                cv.get_floats('angle_axis', None, length=3),
                cv.get_floats('reference', None, length=3),
                role,
            )
        # callable
        try:
            func = load_function(cv.get_str('function'), base_dir)
        except ValueError as exc:
            raise cv.error('function', str(exc)) from None
        params = cv.raw('params', {})
        if not isinstance(params, dict):
            raise cv.error('params', 'must be a map')
        rows = cv.get_int('rows', None)
        order = cv.get_int('order', 2)
        try:
            return CallableTerm(name, func, params, rows, order, role, model)
        except ConfigError:
            raise
        except Exception as exc:
            raise cv.error('function', f'probe call failed: {type(exc).__name__}: {exc}') from None
    except ConfigError:
        raise
    except ValueError as exc:
        raise cv.error(None, str(exc)) from None


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


def build_stacks(cv, model, base_dir=None):
    """``(passive, servo)`` ConstraintStacks from the ``constraints`` section (a ConfigView)."""
    passive, servo = [], []
    for name, sub in cv.named_items():
        term = build_term(name, sub, model, base_dir)
        (passive if term.role == 'passive' else servo).append(term)
    extra = [k for k in cv.keys() if k != 'names' and k not in cv.get_strs('names', [])]
    if extra:
        raise cv.error(extra[0], f'constraint {extra[0]!r} is not listed in {cv.key("names")}')
    return ConstraintStack(passive, model.n), ConstraintStack(servo, model.n)
