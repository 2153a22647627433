"""The constraint terms: each fills its rows ``phi``, ``phi'``, ``A``, ``b`` in place (see the package docstring).

``fill(model, q, qd, t, phi, phidot, A, b, K)``: `K` is the module of compiled row kernels when the
stack chose the compiled backend at construction (:class:`~uk_controller.constraints.stack.ConstraintStack`),
else None (the NumPy/Python code here, the reference).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..core.rows import ConstraintRows
from ..kernels import jit
from ..kernels import rows as _row_kernels
from .so3 import cross3, jl, jl_dot, jr_inv, jr_inv_dot, log3, planar_angle, wrap_angle
from .trajectories import Hold

AXES = {'x': 0, 'y': 1, 'z': 2}
ROLES = ('passive', 'servo')


def row_kernels(backend='auto'):
    """The compiled row kernels for `backend` 'auto' (when numba is installed), 'compiled' or 'numpy' (None)."""
    if backend not in ('auto', 'compiled', 'numpy'):
        raise ValueError(f"backend must be 'auto', 'compiled' or 'numpy', got {backend!r}")
    if backend == 'compiled' and not jit.AVAILABLE:
        raise ValueError('backend compiled requested but numba is not installed')
    return _row_kernels if backend != 'numpy' and jit.AVAILABLE else None


class Term:
    """One named block of constraint rows. Subclasses implement :meth:`fill`."""

    kind = 'term'
    #: built from a ``hold`` trajectory without ``value``: held where the row is at the start
    #: (:func:`~uk_controller.constraints.stack.hold_where_they_start`)
    held_at_start = False

    def __init__(self, name, m, role='servo', order=2):
        if role not in ROLES:
            raise ValueError(f'role must be one of {ROLES}, got {role!r}')
        self.name, self.m, self.role = name, int(m), role
        self.order = np.full(self.m, order, dtype=np.int8)

    def fill(self, model, q, qd, t, phi, phidot, A, b, K=None):  # pragma: no cover - abstract
        """Write this term's rows into the given views (length m / shape (m, n)); `K`: the compiled row
        kernels or None (module docstring)."""
        raise NotImplementedError

    def evaluate(self, model, q, qd, t, backend='auto'):
        """This term alone as :class:`ConstraintRows` (allocates; for tests and tools)."""
        rows = ConstraintRows.empty(self.m, model.n)
        rows.order[:] = self.order
        self.fill(
            model,
            np.asarray(q, float),
            np.asarray(qd, float),
            float(t),
            rows.phi,
            rows.phidot,
            rows.A,
            rows.b,
            row_kernels(backend),
        )
        return rows

    def __repr__(self):
        return f'{type(self).__name__}({self.name!r}, m={self.m}, role={self.role!r})'


def _axes_index(axes):
    idx = []
    for a in axes:
        if a not in AXES:
            raise ValueError(f'axis {a!r} is not one of x, y, z')
        idx.append(AXES[a])
    if len(set(idx)) != len(idx) or not idx:
        raise ValueError(f'axes must be distinct and non-empty, got {list(axes)}')
    return np.array(idx, dtype=np.intp)


def _selector(idx):
    """A basic slice equal to the index array when the axes are consecutive (views, no gather)."""
    idx = np.asarray(idx, dtype=np.intp)
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx


class FramePosition(Term):
    """Frame origin follows a trajectory in the chosen world axes.

    ``phi = S (p - p_d)``, ``phi' = S (J_lin q' - v_d)``, ``A = S J_lin``,
    ``b = S a_d - S (J_lin' q')`` (seed 000 eqs 47-49 are this term for the
    SCARA tool with S = (x, y, z)).
    """

    kind = 'frame_position'

    def __init__(self, name, frame, axes, traj, role='servo'):
        self.idx = _axes_index(axes)
        super().__init__(name, self.idx.size, role)
        if traj.dim != self.m:
            raise ValueError(f'trajectory has {traj.dim} components but {self.m} axes are constrained')
        self.frame, self.traj = frame, traj
        self._sel = _selector(self.idx)

    def fill(self, model, q, qd, t, phi, phidot, A, b, K=None):
        p_d, v_d, a_d = self.traj(t)
        f = model.frame(self.frame)
        if K is not None:
            K.frame_position_rows(
                f.jacobian(), f.translation, f.drift(), self.idx, p_d, v_d, a_d, qd, phi, phidot, A, b
            )
            return
        sel = self._sel
        A[...] = f.jacobian()[sel]
        np.subtract(f.translation[sel], p_d, out=phi)
        np.subtract(A @ qd, v_d, out=phidot)
        np.subtract(a_d, f.drift()[sel], out=b)


def _unit(v, what):
    v = np.asarray(v, dtype=float).reshape(3)
    norm = np.linalg.norm(v)
    if norm == 0.0:
        raise ValueError(f'{what} must be non-zero')
    return v / norm


def _planar_frame(axis, reference=None, zero_direction=None):
    """Unit axis, zero direction e1 (world, in the plane) and frame-fixed reference vector."""
    axis = _unit(axis, 'axis')
    if reference is None:
        reference = np.eye(3)[0] if abs(axis[0]) < 0.9 else np.eye(3)[1]
    reference = _unit(reference, 'reference')
    e1 = reference if zero_direction is None else _unit(zero_direction, 'zero_direction')
    e1 = e1 - (e1 @ axis) * axis
    if np.linalg.norm(e1) < 1e-9:
        raise ValueError('reference/zero direction must not be parallel to the axis')
    return axis, e1 / np.linalg.norm(e1), reference


class FrameOrientation(Term):
    """Frame orientation follows a trajectory.

    ``mode='planar'`` (1 row): the angle theta of the frame about world
    ``axis`` (see :func:`planar_angle`), ``phi = wrap(theta - theta_d)``,
    ``A = row``, ``b = theta_d'' - gamma``. For the SCARA tool about z this is
    theta = q1 + q2 + q3 (seed 000 eqs 43, 46).

    ``mode='so3'`` (3 rows): the trajectory gives a rotation vector r(t)
    (world), ``R_d = exp(r)``; ``phi = log(R_d^T R)``; with
    ``omega_e = R^T (omega - omega_d)``::

        phi'  = Jr^-1(phi) omega_e
        A     = Jr^-1(phi) R^T J_ang
        b     = -Jr^-1 R^T (J_ang' q' - omega_d' + omega x omega_d) - (d/dt Jr^-1) omega_e

    where ``omega_d = Jl(r) r'``, ``omega_d' = Jl(r) r'' + Jl' r'``. Valid for
    rotation errors below pi.
    """

    kind = 'frame_orientation'

    def __init__(
        self, name, frame, traj, mode='planar', axis=(0.0, 0.0, 1.0), reference=None, zero_direction=None, role='servo'
    ):
        if mode not in ('planar', 'so3'):
            raise ValueError(f"mode must be 'planar' or 'so3', got {mode!r}")
        m = 1 if mode == 'planar' else 3
        super().__init__(name, m, role)
        if traj.dim != m:
            raise ValueError(f'trajectory has {traj.dim} components, orientation mode {mode!r} needs {m}')
        self.frame, self.traj, self.mode = frame, traj, mode
        if mode == 'planar':
            self.axis, self.e1, self.reference = _planar_frame(axis, reference, zero_direction)

    def fill(self, model, q, qd, t, phi, phidot, A, b, K=None):
        p_d, v_d, a_d = self.traj(t)
        f = model.frame(self.frame)
        R = f.rotation
        Jw = f.jacobian()[3:]
        dw = f.drift()[3:]
        if self.mode == 'planar':
            if K is not None:
                theta, thetad, gamma = K.planar_angle(
                    R, f.jacobian(), f.drift(), qd, self.axis, self.e1, self.reference, A[0]
                )
            else:
                theta, thetad, A[0], gamma = planar_angle(R, Jw, dw, qd, self.axis, self.e1, self.reference)
            phi[0] = wrap_angle(theta - p_d[0])
            phidot[0] = thetad - v_d[0]
            b[0] = a_d[0] - gamma
            return
        Rd = pin.exp3(p_d)
        Jl = jl(p_d)
        omega_d = Jl @ v_d
        omega_d_dot = Jl @ a_d + jl_dot(p_d, v_d) @ v_d
        _so3_rows(R, Jw, dw, qd, Rd, omega_d, omega_d_dot, None, None, phi, phidot, A, b)


def _so3_rows(R, Jw, dw, qd, Rd, omega_d, omega_d_dot_time, JwB, dwB, phi, phidot, A, b):
    """Rows of ``log(R_d^T R) = 0`` (see :class:`FrameOrientation`).

    If JwB/dwB are given, R_d is a second frame's rotation and
    ``omega_d' = JwB q'' + dwB + omega_d_dot_time``.
    """
    E = Rd.T @ R
    e = log3(E)
    omega = Jw @ qd
    omega_e = R.T @ (omega - omega_d)
    Jinv = jr_inv(e)
    ed = Jinv @ omega_e
    M = Jinv @ R.T
    phi[:] = e
    phidot[:] = ed
    Jrel = Jw if JwB is None else Jw - JwB
    np.matmul(M, Jrel, out=A)
    rest = dw - omega_d_dot_time + cross3(omega, omega_d)
    if dwB is not None:
        rest = rest - dwB
    b[:] = -(M @ rest) - jr_inv_dot(e, ed) @ omega_e


class JointLinear(Term):
    """Linear joint-space relation ``c . q = value(t)`` (one row).

    ``phi = c . q - v(t)``, ``phi' = c . q' - v'(t)``, ``A = c``, ``b = v''(t)``.
    Seed 000 eq 46 (SCARA tool orientation) is ``c = (1, 1, 1, 0)``, v = 0;
    seed 000 eq 47's fourth row ``q4 + l0 = 0.02 t`` is ``c = (0, 0, 0, 1)``.
    """

    kind = 'joint_linear'

    def __init__(self, name, coefficients, traj, role='servo'):
        super().__init__(name, 1, role)
        self.c = np.asarray(coefficients, dtype=float).ravel().copy()
        if traj.dim != 1:
            raise ValueError(f'value trajectory must have 1 component, got {traj.dim}')
        self.traj = traj
        #: the constant right-hand side v when the trajectory is a Hold (v' = v'' = 0), else None
        self.constant_value = float(traj.value[0]) if type(traj) is Hold else None

    def fill(self, model, q, qd, t, phi, phidot, A, b, K=None):
        if self.constant_value is not None:  # constant value: v' = v'' = 0
            phi[0] = self.c @ q - self.constant_value
            phidot[0] = self.c @ qd
            A[0] = self.c
            b[0] = 0.0
            return
        v, vd, vdd = self.traj(t)
        phi[0] = self.c @ q - v[0]
        phidot[0] = self.c @ qd - vd[0]
        A[0] = self.c
        b[0] = vdd[0]


class JointPolynomial(Term):
    """Polynomial coupling of two joints (MuJoCo's ``<equality><joint polycoef>``; one row)::

        phi   = q1 - r1 - P(d),   d = q2 - r2,   P(d) = c0 + c1 d + c2 d^2 + c3 d^3 + c4 d^4
        phi'  = q1' - P'(d) q2'
        A     = e1 - P'(d) e2,    b = P''(d) q2'^2        (phi'' = A q'' - P''(d) q2'^2 = 0)

    with the exact derivatives ``P' = c1 + 2 c2 d + 3 c3 d^2 + 4 c4 d^3``, ``P'' = 2 c2 + 6 c3 d + 12 c4 d^2``.
    ``index`` are the two joints' positions in q, ``reference`` (r1, r2) their MuJoCo qpos0.
    """

    kind = 'joint_polynomial'

    def __init__(self, name, index, polycoef, reference=(0.0, 0.0), role='passive'):
        super().__init__(name, 1, role)
        self.index = (int(index[0]), int(index[1]))
        if self.index[0] == self.index[1]:
            raise ValueError('joint_polynomial needs two different joints')
        c = np.zeros(5)
        values = np.asarray(polycoef, dtype=float).ravel()
        if not 1 <= values.size <= 5:
            raise ValueError(f'polycoef takes 1 to 5 coefficients, got {values.size}')
        c[: values.size] = values
        self.c = c
        self.reference = np.asarray(reference, dtype=float).reshape(2)

    def polynomial(self, d):
        """(P, P', P'') at d."""
        c = self.c
        return (
            c[0] + d * (c[1] + d * (c[2] + d * (c[3] + d * c[4]))),
            c[1] + d * (2.0 * c[2] + d * (3.0 * c[3] + d * 4.0 * c[4])),
            2.0 * c[2] + d * (6.0 * c[3] + d * 12.0 * c[4]),
        )

    def fill(self, model, q, qd, t, phi, phidot, A, b, K=None):
        i1, i2 = self.index
        if K is not None:
            K.joint_polynomial_row(q, qd, i1, i2, self.c, self.reference, phi, phidot, A[0], b)
            return
        P, dP, ddP = self.polynomial(q[i2] - self.reference[1])
        phi[0] = q[i1] - self.reference[0] - P
        phidot[0] = qd[i1] - dP * qd[i2]
        A[0] = 0.0
        A[0, i1] = 1.0
        A[0, i2] = -dP
        b[0] = ddP * qd[i2] * qd[i2]


class LoopClosure(Term):
    """Two frames coincide: a kinematic loop closed by a constraint (role passive).

    Position rows (chosen axes S): ``phi = S (p_A - p_B)``,
    ``A = S (J_A - J_B)_lin``, ``b = -S (drift_A - drift_B)_lin`` (a revolute
    closure such as the five-bar's E1 = E2, seed 003). Optional planar angle
    row (``angle_axis``): ``theta_A - theta_B`` about that axis. ``mode='weld'``
    adds the three rotation rows ``log(R_B^T R_A) = 0`` to x, y, z positions.
    """

    kind = 'loop_closure'

    def __init__(
        self, name, frames, axes=('x', 'y', 'z'), mode='position', angle_axis=None, reference=None, role='passive'
    ):
        if mode not in ('position', 'weld'):
            raise ValueError(f"mode must be 'position' or 'weld', got {mode!r}")
        if len(frames) != 2 or frames[0] == frames[1]:
            raise ValueError(f'frames must be two different frames, got {list(frames)}')
        if mode == 'weld':
            axes = ('x', 'y', 'z')
            if angle_axis is not None:
                raise ValueError('angle_axis is for position mode; weld already fixes the full pose')
        self.idx = _axes_index(axes) if axes else np.zeros(0, dtype=np.intp)
        self.mode = mode
        self.planar = None
        if angle_axis is not None:
            self.planar = _planar_frame(angle_axis, reference)
        m = self.idx.size + (3 if mode == 'weld' else 0) + (1 if self.planar is not None else 0)
        if m == 0:
            raise ValueError('loop closure without any constrained component')
        super().__init__(name, m, role)
        self.frames = tuple(frames)
        self._sel = _selector(self.idx)
        self._rows = (np.zeros(0), np.zeros(0))  # planar-angle rows of the two frames (sized on use)

    def fill(self, model, q, qd, t, phi, phidot, A, b, K=None):
        fa, fb = self.frames
        FA, FB = model.frame(fa), model.frame(fb)
        JA, JB = FA.jacobian(), FB.jacobian()
        dA, dB = FA.drift(), FB.drift()
        k = self.idx.size
        if k and K is not None:
            K.closure_position_rows(
                JA, JB, FA.translation, FB.translation, dA, dB, self.idx, qd, phi[:k], phidot[:k], A[:k], b[:k]
            )
        elif k:
            sel = self._sel
            Ak = A[:k]
            np.subtract(JA[sel], JB[sel], out=Ak)
            np.subtract(FA.translation[sel], FB.translation[sel], out=phi[:k])
            phidot[:k] = Ak @ qd
            np.subtract(dB[sel], dA[sel], out=b[:k])
        if self.mode == 'weld':
            RB = FB.rotation.copy()
            omega_B = JB[3:] @ qd
            _so3_rows(
                FA.rotation,
                JA[3:],
                dA[3:],
                qd,
                RB,
                omega_B,
                np.zeros(3),
                JB[3:],
                dB[3:],
                phi[k : k + 3],
                phidot[k : k + 3],
                A[k : k + 3],
                b[k : k + 3],
            )
        if self.planar is not None:
            axis, e1, ref = self.planar
            if K is not None:
                ra, rb = self._rows
                if ra.size != model.n:
                    ra, rb = self._rows = (np.zeros(model.n), np.zeros(model.n))
                ta, tad, ga = K.planar_angle(FA.rotation, JA, dA, qd, axis, e1, ref, ra)
                tb, tbd, gb = K.planar_angle(FB.rotation, JB, dB, qd, axis, e1, ref, rb)
            else:
                ta, tad, ra, ga = planar_angle(FA.rotation, JA[3:], dA[3:], qd, axis, e1, ref)
                tb, tbd, rb, gb = planar_angle(FB.rotation, JB[3:], dB[3:], qd, axis, e1, ref)
            phi[-1] = wrap_angle(ta - tb)
            phidot[-1] = tad - tbd
            np.subtract(ra, rb, out=A[-1])
            b[-1] = gb - ga


def load_function(spec, base_dir=None):
    """Import ``'package.module:function'`` or ``'path/to/file.py:function'``."""
    if not isinstance(spec, str) or ':' not in spec:
        raise ValueError(f"function must be written 'module:function', got {spec!r}")
    module_name, _, func_name = spec.rpartition(':')
    if module_name.endswith('.py'):
        path = Path(module_name).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ValueError(f'file {path} not found')
        mod_spec = importlib.util.spec_from_file_location(f'uk_user_{path.stem}', path)
        module = importlib.util.module_from_spec(mod_spec)
        try:
            mod_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module: any error is the file's, named
            raise ValueError(f'importing {path} failed: {type(exc).__name__}: {exc}') from None
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f'cannot import {module_name!r}: {exc}') from None
        except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
            raise ValueError(f'importing {module_name!r} failed: {type(exc).__name__}: {exc}') from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ValueError(f'{module_name!r} has no function {func_name!r}')
    return func


class CallableTerm(Term):
    """A user function ``f(model, q, qd, t, params) -> (phi, phidot, A, b)``.

    Called after ``model.compute(q, qd)``, so the function may use
    ``model.M``, ``model.frame_jacobian(...)`` etc. ``rows`` fixes m; if not
    given it is found by one probe call at the model's neutral configuration.
    ``order`` 1 marks first-order (nonholonomic) rows.
    """

    kind = 'callable'

    def __init__(self, name, function, params=None, rows=None, order=2, role='servo', model=None):
        self.function = function
        self.params = dict(params or {})
        if rows is None:
            if model is None:
                raise ValueError('rows is required when no model is given to probe the function')
            q0, qd0 = model.neutral(), np.zeros(model.n)
            model.compute(q0, qd0)
            rows = np.atleast_1d(np.asarray(function(model, q0, qd0, 0.0, self.params)[0])).size
        if order not in (1, 2):
            raise ValueError(f'order must be 1 or 2, got {order!r}')
        super().__init__(name, rows, role, order)

    def fill(self, model, q, qd, t, phi, phidot, A, b, K=None):
        """The user's rows, checked: an exception of the function, a result that is not four arrays of
        the declared shapes, or a non-finite value is a ValueError naming the constraint (the controller
        then returns its safe effort with status NUMERICAL_ERROR and this text as the reason)."""
        try:
            out = self.function(model, q, qd, t, self.params)
        except Exception as exc:  # noqa: BLE001 - the user's code: any error becomes this step's reason
            raise ValueError(f'callable constraint {self.name!r} raised {type(exc).__name__}: {exc}') from None
        try:
            f_phi, f_phidot, f_A, f_b = out
            phi[:] = f_phi
            phidot[:] = f_phidot
            A[:] = np.reshape(np.asarray(f_A, dtype=float), A.shape)
            b[:] = f_b
        except (TypeError, ValueError):
            raise ValueError(
                f'callable constraint {self.name!r} returned {type(out).__name__} {_short(out)}; '
                f'expected (phi, phidot, A, b) with {self.m} rows and A of shape {A.shape}'
            ) from None
        for what, values in (('phi', phi), ('phidot', phidot), ('A', A), ('b', b)):
            if not np.isfinite(values).all():
                raise ValueError(f'callable constraint {self.name!r} returned non-finite values in {what}')


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + '...'
