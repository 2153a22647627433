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
- :class:`LoopClosure`       two frames coincide in chosen position axes
  (revolute closure) and optionally in a planar angle, or fully (weld);
- :class:`CallableTerm`      a user function ``module:function``.

:class:`ConstraintStack` stacks terms into one preallocated
:class:`~uk_controller.rows.ConstraintRows` filled in place by a single
:meth:`ConstraintStack.evaluate` call. The caller has already run
``model.compute(q, q')``.

Roles (docs/config.md): ``passive`` rows are mechanism closures realised by the
structure; ``servo`` rows are tasks realised by the actuators (Chen, seed 004).
"""
from __future__ import annotations

import importlib
import importlib.util
import math
from pathlib import Path

import numpy as np
import pinocchio as pin

from .config import ConfigError, ConfigView
from .kernels import codes, jit
from .kernels import rows as row_kernels
from .rows import ConstraintRows
from .trajectories import Hold
from .trajectories import trajectory as build_trajectory

AXES = {'x': 0, 'y': 1, 'z': 2}
#: compiled twins of the row computations (numba), None to use the NumPy/Python reference code
_K = row_kernels if jit.AVAILABLE else None
ROLES = ('passive', 'servo')
TYPES = ('frame_position', 'frame_orientation', 'joint_linear', 'loop_closure', 'callable')


# ----------------------------------------------------------------------------- SO(3) helpers


def skew(x):
    """``[x]x`` with ``skew(x) @ y == cross(x, y)``."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def _cross(a, b):
    """Cross product of two 3-vectors (np.cross is slow for single vectors)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _jr_inv_coeffs(theta):
    """c and (dc/dtheta)/theta of ``Jr^-1 = I + S/2 + c S^2``."""
    if theta < 0.1:
        t2 = theta * theta
        return 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0, 1.0 / 360.0 + t2 / 7560.0 + t2 * t2 / 201600.0
    half = 0.5 * theta
    cot = math.cos(half) / math.sin(half)
    c = 1.0 / theta ** 2 - cot / (2.0 * theta)
    dc = -2.0 / theta ** 3 + cot / (2.0 * theta ** 2) + 1.0 / (4.0 * theta * math.sin(half) ** 2)
    return c, dc / theta


def jr_inv(phi):
    """Inverse right Jacobian of SO(3): ``d/dt log(E) = Jr^-1(phi) omega_body`` (= pinocchio.Jlog3).

    ``Jr^-1(phi) = I + [phi]/2 + (1/th^2 - (1 + cos th)/(2 th sin th)) [phi]^2``, th = |phi| < pi.
    """
    S = skew(phi)
    c, _ = _jr_inv_coeffs(float(np.linalg.norm(phi)))
    return np.eye(3) + 0.5 * S + c * (S @ S)


def jr_inv_dot(phi, phidot):
    """Time derivative of ``Jr^-1(phi(t))`` given phi' (directional derivative)."""
    S, Sd = skew(phi), skew(phidot)
    c, e = _jr_inv_coeffs(float(np.linalg.norm(phi)))
    return 0.5 * Sd + e * float(phi @ phidot) * (S @ S) + c * (Sd @ S + S @ Sd)


def _jl_coeffs(theta):
    """a, b, (da/dth)/th, (db/dth)/th of ``Jl = I + a S + b S^2``."""
    if theta < 0.1:
        t2 = theta * theta
        return (0.5 - t2 / 24.0 + t2 * t2 / 720.0, 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0,
                -1.0 / 12.0 + t2 / 180.0 - t2 * t2 / 6720.0, -1.0 / 60.0 + t2 / 1260.0 - t2 * t2 / 60480.0)
    s, c = math.sin(theta), math.cos(theta)
    a = (1.0 - c) / theta ** 2
    b = (theta - s) / theta ** 3
    da = (theta * s - 2.0 * (1.0 - c)) / theta ** 3
    db = (1.0 - c) / theta ** 3 - 3.0 * (theta - s) / theta ** 4
    return a, b, da / theta, db / theta


def jl(r):
    """Left Jacobian of SO(3): ``omega_world = Jl(r) r'`` for ``R = exp(r)``."""
    S = skew(r)
    a, b, _, _ = _jl_coeffs(float(np.linalg.norm(r)))
    return np.eye(3) + a * S + b * (S @ S)


def jl_dot(r, rdot):
    S, Sd = skew(r), skew(rdot)
    a, b, ea, eb = _jl_coeffs(float(np.linalg.norm(r)))
    rr = float(r @ rdot)
    return ea * rr * S + a * Sd + eb * rr * (S @ S) + b * (Sd @ S + S @ Sd)


def _wrap(angle):
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def planar_angle(R, Jw, drift_w, qd, axis, e1, reference):
    """Angle of a frame about a world axis, with exact first and second derivatives.

    ``v = R r`` (r: frame-fixed reference vector), ``theta = atan2(e2 . v, e1 . v)``
    with ``e2 = axis x e1``. Since ``v' = omega x v``::

        theta'  = k . omega,          k = v x g,   g = (vx e2 - vy e1) / (vx^2 + vy^2)
        theta'' = k . omega' + k' . omega,  omega' = J_ang q'' + drift_ang

    For motion about `axis` only, ``k = axis`` and ``theta' = axis . omega``.
    Returns ``(theta, theta', row, gamma)`` with ``theta'' = row . q'' + gamma``.
    Singular when the reference vector is parallel to the axis.
    """
    # 3-vectors as Python floats: a dozen cross/dot products on scalars cost far less than
    # the same number of NumPy calls on length-3 arrays (the control hot path).
    ax, ay, az = axis.tolist()
    e1x, e1y, e1z = e1.tolist()
    e2x, e2y, e2z = ay * e1z - az * e1y, az * e1x - ax * e1z, ax * e1y - ay * e1x
    v0, v1, v2 = (R @ reference).tolist()
    omega_arr = Jw @ qd
    w0, w1, w2 = omega_arr.tolist()
    d0, d1, d2 = drift_w.tolist()
    u0, u1, u2 = w1 * v2 - w2 * v1, w2 * v0 - w0 * v2, w0 * v1 - w1 * v0          # v' = omega x v
    vx = e1x * v0 + e1y * v1 + e1z * v2
    vy = e2x * v0 + e2y * v1 + e2z * v2
    vxd = e1x * u0 + e1y * u1 + e1z * u2
    vyd = e2x * u0 + e2y * u1 + e2z * u2
    rho2 = vx * vx + vy * vy
    g0, g1, g2 = (vx * e2x - vy * e1x) / rho2, (vx * e2y - vy * e1y) / rho2, (vx * e2z - vy * e1z) / rho2
    c = 2.0 * (vx * vxd + vy * vyd) / rho2
    gd0 = (vxd * e2x - vyd * e1x) / rho2 - c * g0
    gd1 = (vxd * e2y - vyd * e1y) / rho2 - c * g1
    gd2 = (vxd * e2z - vyd * e1z) / rho2 - c * g2
    k0, k1, k2 = v1 * g2 - v2 * g1, v2 * g0 - v0 * g2, v0 * g1 - v1 * g0          # k = v x g
    kd0 = (u1 * g2 - u2 * g1) + (v1 * gd2 - v2 * gd1)                                # k' = v' x g + v x g'
    kd1 = (u2 * g0 - u0 * g2) + (v2 * gd0 - v0 * gd2)
    kd2 = (u0 * g1 - u1 * g0) + (v0 * gd1 - v1 * gd0)
    theta = math.atan2(vy, vx)
    row = np.array((k0, k1, k2)) @ Jw
    return (theta, k0 * w0 + k1 * w1 + k2 * w2, row,
            k0 * d0 + k1 * d1 + k2 * d2 + kd0 * w0 + kd1 * w1 + kd2 * w2)


# ----------------------------------------------------------------------------- terms


class Term:
    """One named block of constraint rows. Subclasses implement :meth:`fill`."""

    kind = 'term'

    def __init__(self, name, m, role='servo', order=2):
        if role not in ROLES:
            raise ValueError(f'role must be one of {ROLES}, got {role!r}')
        self.name, self.m, self.role = name, int(m), role
        self.order = np.full(self.m, order, dtype=np.int8)

    def fill(self, model, q, qd, t, phi, phidot, A, b):  # pragma: no cover - abstract
        """Write this term's rows into the given views (length m / shape (m, n))."""
        raise NotImplementedError

    def evaluate(self, model, q, qd, t):
        """This term alone as :class:`ConstraintRows` (allocates; for tests and tools)."""
        rows = ConstraintRows.empty(self.m, model.n)
        rows.order[:] = self.order
        self.fill(model, np.asarray(q, float), np.asarray(qd, float), float(t), rows.phi, rows.phidot, rows.A, rows.b)
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

    def fill(self, model, q, qd, t, phi, phidot, A, b):
        p_d, v_d, a_d = self.traj(t)
        f = model.frame(self.frame)
        if _K is not None:
            _K.frame_position_rows(f.jacobian(), f.translation, f.drift(), self.idx, p_d, v_d, a_d, qd, phi, phidot,
                                   A, b)
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

    def __init__(self, name, frame, traj, mode='planar', axis=(0.0, 0.0, 1.0), reference=None,
                 zero_direction=None, role='servo'):
        if mode not in ('planar', 'so3'):
            raise ValueError(f"mode must be 'planar' or 'so3', got {mode!r}")
        m = 1 if mode == 'planar' else 3
        super().__init__(name, m, role)
        if traj.dim != m:
            raise ValueError(f'trajectory has {traj.dim} components, orientation mode {mode!r} needs {m}')
        self.frame, self.traj, self.mode = frame, traj, mode
        if mode == 'planar':
            self.axis, self.e1, self.reference = _planar_frame(axis, reference, zero_direction)

    def fill(self, model, q, qd, t, phi, phidot, A, b):
        p_d, v_d, a_d = self.traj(t)
        f = model.frame(self.frame)
        R = f.rotation
        Jw = f.jacobian()[3:]
        dw = f.drift()[3:]
        if self.mode == 'planar':
            if _K is not None:
                theta, thetad, gamma = _K.planar_angle(R, f.jacobian(), f.drift(), qd, self.axis, self.e1,
                                                       self.reference, A[0])
            else:
                theta, thetad, A[0], gamma = planar_angle(R, Jw, dw, qd, self.axis, self.e1, self.reference)
            phi[0] = _wrap(theta - p_d[0])
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
    e = pin.log3(E)
    omega = Jw @ qd
    omega_e = R.T @ (omega - omega_d)
    Jinv = jr_inv(e)
    ed = Jinv @ omega_e
    M = Jinv @ R.T
    phi[:] = e
    phidot[:] = ed
    Jrel = Jw if JwB is None else Jw - JwB
    np.matmul(M, Jrel, out=A)
    rest = dw - omega_d_dot_time + _cross(omega, omega_d)
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
        self._value = float(traj.value[0]) if type(traj) is Hold else None

    def fill(self, model, q, qd, t, phi, phidot, A, b):
        if self._value is not None:                 # constant value: v' = v'' = 0
            phi[0] = self.c @ q - self._value
            phidot[0] = self.c @ qd
            A[0] = self.c
            b[0] = 0.0
            return
        v, vd, vdd = self.traj(t)
        phi[0] = self.c @ q - v[0]
        phidot[0] = self.c @ qd - vd[0]
        A[0] = self.c
        b[0] = vdd[0]


class LoopClosure(Term):
    """Two frames coincide: a kinematic loop closed by a constraint (role passive).

    Position rows (chosen axes S): ``phi = S (p_A - p_B)``,
    ``A = S (J_A - J_B)_lin``, ``b = -S (drift_A - drift_B)_lin`` (a revolute
    closure such as the five-bar's E1 = E2, seed 003). Optional planar angle
    row (``angle_axis``): ``theta_A - theta_B`` about that axis. ``mode='weld'``
    adds the three rotation rows ``log(R_B^T R_A) = 0`` to x, y, z positions.
    """

    kind = 'loop_closure'

    def __init__(self, name, frames, axes=('x', 'y', 'z'), mode='position', angle_axis=None,
                 reference=None, role='passive'):
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
        self._rows = (np.zeros(0), np.zeros(0))      # planar-angle rows of the two frames (sized on use)

    def fill(self, model, q, qd, t, phi, phidot, A, b):
        fa, fb = self.frames
        FA, FB = model.frame(fa), model.frame(fb)
        JA, JB = FA.jacobian(), FB.jacobian()
        dA, dB = FA.drift(), FB.drift()
        k = self.idx.size
        if k and _K is not None:
            _K.closure_position_rows(JA, JB, FA.translation, FB.translation, dA, dB, self.idx, qd, phi[:k],
                                     phidot[:k], A[:k], b[:k])
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
            _so3_rows(FA.rotation, JA[3:], dA[3:], qd, RB, omega_B, np.zeros(3), JB[3:], dB[3:],
                      phi[k:k + 3], phidot[k:k + 3], A[k:k + 3], b[k:k + 3])
        if self.planar is not None:
            axis, e1, ref = self.planar
            if _K is not None:
                ra, rb = self._rows
                if ra.size != model.n:
                    ra, rb = self._rows = (np.zeros(model.n), np.zeros(model.n))
                ta, tad, ga = _K.planar_angle(FA.rotation, JA, dA, qd, axis, e1, ref, ra)
                tb, tbd, gb = _K.planar_angle(FB.rotation, JB, dB, qd, axis, e1, ref, rb)
            else:
                ta, tad, ra, ga = planar_angle(FA.rotation, JA[3:], dA[3:], qd, axis, e1, ref)
                tb, tbd, rb, gb = planar_angle(FB.rotation, JB[3:], dB[3:], qd, axis, e1, ref)
            phi[-1] = _wrap(ta - tb)
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
        mod_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f'cannot import {module_name!r}: {exc}') from None
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

    def fill(self, model, q, qd, t, phi, phidot, A, b):
        f_phi, f_phidot, f_A, f_b = self.function(model, q, qd, t, self.params)
        phi[:] = f_phi
        phidot[:] = f_phidot
        A[:] = np.reshape(f_A, A.shape)
        b[:] = f_b


# ----------------------------------------------------------------------------- stack


class ConstraintStack:
    """Several terms stacked into one preallocated :class:`ConstraintRows`.

    ``names`` (evaluation order), ``m`` (total rows), ``slices`` (name ->
    slice of the rows), ``terms``. :meth:`evaluate` fills every row in place
    and returns the rows (the same object each call unless `out` is given).
    """

    def __init__(self, terms, n):
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
        return [(term, rows.phi[s], rows.phidot[s], rows.A[s], rows.b[s])
                for term, s in ((term, self.slices[term.name]) for term in self.terms)]

    def __len__(self):
        return len(self.terms)

    def __getitem__(self, name):
        return self.terms[self.names.index(name)]

    def evaluate(self, model, q, qd, t, out=None):
        """Fill all rows at (q, q', t); ``model.compute(q, qd)`` must have been called."""
        views = self._views if out is None else self._make_views(out)
        for term, phi, phidot, A, b in views:
            term.fill(model, q, qd, t, phi, phidot, A, b)
        return self.rows if out is None else out

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
    role = cv.get_str('role', 'passive' if kind == 'loop_closure' else 'servo', choices=ROLES)
    n = model.n if model is not None else None

    def traj(key='trajectory'):
        return build_trajectory(cv.section(key))

    try:
        if kind == 'frame_position':
            return FramePosition(name, _frame(cv, 'frame', model), cv.get_strs('axes', ['x', 'y', 'z']),
                                 traj(), role)
        if kind == 'frame_orientation':
            mode = cv.get_str('mode', 'planar', choices=('planar', 'so3'))
            return FrameOrientation(name, _frame(cv, 'frame', model), traj(), mode,
                                    cv.get_floats('axis', [0.0, 0.0, 1.0], length=3),
                                    cv.get_floats('reference', None, length=3),
                                    cv.get_floats('zero_direction', None, length=3), role)
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
                raise cv.error('coefficients', f'needs {n} entries (one per joint in robot.joints order), '
                               f'got {coeffs.size}; or add a joints list')
            if 'value' in cv and 'trajectory' in cv:
                raise cv.error('value', 'give value or trajectory, not both')
            value = traj() if 'trajectory' in cv else build_trajectory(
                {'type': 'hold', 'value': [cv.get_float('value', 0.0)]})
            return JointLinear(name, coeffs, value, role)
        if kind == 'loop_closure':
            frames = cv.get_strs('frames', length=2)
            if model is not None:
                for f in frames:
                    if not model.has_frame(f):
                        raise cv.error('frames', f'unknown frame {f!r}; frames: {", ".join(model.frame_names())}')
            mode = cv.get_str('mode', 'position', choices=('position', 'weld'))
            axes = cv.get_strs('axes', ['x', 'y', 'z'])
            return LoopClosure(name, frames, axes, mode, cv.get_floats('angle_axis', None, length=3),
                               cv.get_floats('reference', None, length=3), role)
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


# ----------------------------------------------------------------------------- compiled form


def _traj_spec(traj):
    """``(kind, dim, floats, components)`` of a trajectory's compiled form, or None."""
    from .trajectories import Components
    comps = None
    if isinstance(traj, Components):
        comps = [int(c) for c in traj.components]
        traj = traj.inner
    spec = traj.spec() if hasattr(traj, 'spec') else None
    if spec is None:
        return None
    kind, dim, floats = spec
    if dim > codes.MAX_TRAJ_DIM or (comps is not None and len(comps) > codes.MAX_COMPONENTS):
        return None
    return kind, dim, np.asarray(floats, dtype=float), comps


class CompiledRows:
    """The rows of a passive and a servo :class:`ConstraintStack` (and `between` actuator columns) as
    ONE compiled program: :func:`uk_controller.kernels.rows.fused_step` evaluates frame Jacobians and
    drifts from Pinocchio's joint Jacobian, the trajectories, every row, Baumgarte and the servo solve
    in one call after ``pinocchio.computeAllTerms`` (the same equations as :meth:`ConstraintStack.evaluate`
    and :class:`uk_controller.uk.ServoSolver`, which stay the reference; test/test_uk_fast.py).

    Build with :meth:`build`, which returns None when a term or trajectory has no compiled form
    (so3 orientation, weld closures, callables, polynomial/spline trajectories), when the model
    permutes Pinocchio's joint order or when numba is not available; callers then keep the
    reference path.

    After :meth:`run` (q, q', t): ``phi``, ``phidot``, ``A``, ``b`` (passive rows first),
    ``B`` (n, p), ``u``, ``effort``, ``saturated`` (bool, where clipped), ``qdd``, ``passive_force``,
    ``info`` (see kernels.codes.INFO_SIZE; info[0] = 3 when the state is not finite) are views of
    one workspace, overwritten by the next call; ``tau`` (n,) is the applied generalized force
    input (zero for a controller; ``B u`` for a plant).
    """

    def __init__(self):
        raise TypeError('use CompiledRows.build(...)')

    @classmethod
    def build(cls, model, passive, servo, *, p=0, B=None, between=(), gains=None, rcond=1e-10,
              gram_floor=1e-14, consistency_tol=1e-8, max_sweeps=60, limits=None):
        """Compile; `between` lists ``(column, frame_a or None, frame_b or None, axis)``; `B` the
        constant columns (n, p); `gains` (2, mp + ms) from :func:`uk_controller.uk.row_gains`."""
        # continuous joints are fine (their angle is q; make_runner hands Pinocchio (cos, sin)); a permuted
        # joint order is not
        if not jit.AVAILABLE or getattr(model, '_order_permuted', getattr(model, '_perm', None) is not None):
            return None
        self = object.__new__(cls)
        n = model.n
        pm = model.model
        frames, frame_index = [], {}

        def frame_slot(name):
            if name not in frame_index:
                frame_index[name] = len(frames)
                frames.append(name)
            return frame_index[name]

        terms, trajs, floats = [], [], [0.0]        # floats[0] unused: offsets are > 0

        def add_floats(values):
            start = len(floats)
            floats.extend(float(v) for v in np.ravel(values))
            return start

        def add_traj(traj):
            spec = _traj_spec(traj)
            if spec is None:
                return None
            kind, dim, fl, comps = spec
            row = [0] * codes.TRAJ_WIDTH
            row[codes.TR_KIND], row[codes.TR_DIM], row[codes.TR_FOFS] = kind, dim, add_floats(fl)
            row[codes.TR_NCOMP] = 0 if comps is None else len(comps)
            for i, c in enumerate(comps or ()):
                row[codes.TR_COMPS + i] = c
            trajs.append(row)
            return len(trajs) - 1

        K = codes
        row0 = 0
        for term in list(passive.terms) + list(servo.terms):
            rec = [0] * K.TERM_WIDTH
            rec[K.TERM_ROW0], rec[K.TERM_M], rec[K.TERM_TRAJ] = row0, term.m, -1
            if type(term) is FramePosition:
                tr = add_traj(term.traj)
                if tr is None:
                    return None
                rec[K.TERM_OP], rec[K.TERM_FRAME_A], rec[K.TERM_TRAJ] = K.OP_FRAME_POSITION, frame_slot(term.frame), tr
                rec[K.TERM_NAX] = term.m
                rec[K.TERM_AXES:K.TERM_AXES + term.m] = [int(i) for i in term.idx]
            elif type(term) is FrameOrientation and term.mode == 'planar':
                tr = add_traj(term.traj)
                if tr is None:
                    return None
                rec[K.TERM_OP], rec[K.TERM_FRAME_A], rec[K.TERM_TRAJ] = K.OP_PLANAR, frame_slot(term.frame), tr
                # floats at PLANAR_AXIS, PLANAR_E1, PLANAR_REFERENCE
                rec[K.TERM_FOFS] = add_floats(np.concatenate((term.axis, term.e1, term.reference)))
            elif type(term) is JointLinear:
                tr = add_traj(term.traj)
                if tr is None:
                    return None
                rec[K.TERM_OP], rec[K.TERM_TRAJ] = K.OP_JOINT_LINEAR, tr
                rec[K.TERM_FOFS] = add_floats(term.c)
            elif type(term) is LoopClosure and term.mode == 'position':
                rec[K.TERM_OP] = K.OP_CLOSURE
                rec[K.TERM_FRAME_A], rec[K.TERM_FRAME_B] = frame_slot(term.frames[0]), frame_slot(term.frames[1])
                rec[K.TERM_NAX] = term.idx.size
                rec[K.TERM_AXES:K.TERM_AXES + term.idx.size] = [int(i) for i in term.idx]
                if term.planar is not None:
                    rec[K.TERM_PLANAR] = 1
                    rec[K.TERM_FOFS] = add_floats(np.concatenate(term.planar))
            else:
                return None
            terms.append(rec)
            row0 += term.m
        betw = []
        for col, fa, fb, axis in between:
            rec = [0] * codes.BETWEEN_WIDTH
            rec[codes.BETWEEN_COL] = int(col)
            rec[codes.BETWEEN_FRAME_A] = -1 if fa is None else frame_slot(fa)
            rec[codes.BETWEEN_FRAME_B] = -1 if fb is None else frame_slot(fb)
            rec[codes.BETWEEN_FOFS] = add_floats(axis)
            betw.append(rec)
        mp, ms = passive.m, servo.m
        m = mp + ms
        gains = np.zeros((2, m)) if gains is None else np.asarray(gains, dtype=float).reshape(2, m)
        limits = np.full(p, np.inf) if limits is None else np.broadcast_to(np.asarray(limits, float), (p,))
        g_ofs = add_floats(gains)
        par_ofs = add_floats([rcond, gram_floor, consistency_tol, float(max_sweeps)])
        lim_ofs = add_floats(limits)
        nf = len(frames)
        # workspace layout
        sizes = [('phi', m), ('phidot', m), ('A', m * n), ('b', m), ('FJ', nf * 6 * n), ('FD', nf * 6),
                 ('B', n * p), ('tau', n), ('u', p), ('qdd', n), ('pforce', n), ('effort', p), ('sat', p),
                 ('info', codes.INFO_SIZE), ('scratch', 3 * codes.MAX_TRAJ_DIM + 2 * n)]
        offsets, total = {}, 0
        for key, size in sizes:
            offsets[key] = total
            total += size
        ws = np.zeros(total)
        # integer program
        ip = [0] * K.HEADER
        ip[K.IH_N], ip[K.IH_P], ip[K.IH_MP], ip[K.IH_MS], ip[K.IH_F] = n, p, mp, ms, nf
        ip[K.IH_NT], ip[K.IH_NTR], ip[K.IH_NB] = len(terms), len(trajs), len(betw)
        ip[K.IH_TERMS] = len(ip)
        for rec in terms:
            ip += rec
        ip[K.IH_TRAJ] = len(ip)
        for rec in trajs:
            ip += rec
        ip[K.IH_CHAIN] = len(ip)
        for name in frames:
            joint = pm.frames[model.frame_id(name)].parentJoint
            cols = [int(pm.idx_vs[j]) for j in pm.supports[joint] if j > 0]
            ip += [len(cols)] + cols + [0] * (n - len(cols))
        ip[K.IH_BETW] = len(ip)
        for rec in betw:
            ip += rec
        for key, slot in (('phi', K.IH_PHI), ('phidot', K.IH_PHID), ('A', K.IH_A), ('b', K.IH_BV), ('FJ', K.IH_FJ),
                          ('FD', K.IH_FD), ('B', K.IH_BMAT), ('tau', K.IH_TAU), ('u', K.IH_U), ('qdd', K.IH_QDD),
                          ('pforce', K.IH_PF), ('effort', K.IH_EFF), ('sat', K.IH_SAT), ('info', K.IH_INFO),
                          ('scratch', K.IH_SCR)):
            ip[slot] = offsets[key]
        ip[K.IH_GAINS], ip[K.IH_PARAMS], ip[K.IH_LIMITS] = g_ofs, par_ofs, lim_ofs
        self.ip = np.asarray(ip, dtype=np.int64)
        self.fp = np.asarray(floats, dtype=float)
        self.ws = ws

        def view(key, shape=None):
            size = dict(sizes)[key]
            v = ws[offsets[key]:offsets[key] + size]
            return v if shape is None else v.reshape(shape)

        self.phi, self.phidot, self.A, self.b = view('phi'), view('phidot'), view('A', (m, n)), view('b')
        self.B, self.tau, self.u, self.qdd = view('B', (n, p)), view('tau'), view('u'), view('qdd')
        self.passive_force, self.effort = view('pforce'), view('effort')
        self.saturated = np.zeros(p, dtype=bool)
        self.info = view('info')
        self.frame_jacobians, self.frame_drifts = view('FJ', (nf, 6, n)), view('FD', (nf, 6))
        if B is not None:
            self.B[...] = B
        self.n, self.p, self.mp, self.ms, self.frames = n, p, mp, ms, frames
        self.model = model
        views = [model.frame(name) for name in frames] or [None]
        dummy_t, dummy_r = np.zeros(3), np.asfortranarray(np.eye(3))
        self.trans = tuple(dummy_t if v is None else v.translation for v in views)
        self.rots = tuple(dummy_r if v is None else v.rotation for v in views)
        # live views of Pinocchio's Data (its buffers live as long as the Data)
        self.M_lower = model.data.M.T
        self.h = model.data.nle
        self.J = model.data.J
        self.kernel = row_kernels.fused_step
        self._rows_kernel = row_kernels.fused_rows
        self._run = self.make_runner()
        self.run(model.neutral(), np.zeros(n), 0.0)          # compile or load the cache now
        return self

    def set_gains(self, gains):
        """Replace the per-row Baumgarte gains (2, mp + ms)."""
        o = int(self.ip[codes.IH_GAINS])
        self.fp[o:o + 2 * (self.mp + self.ms)] = np.asarray(gains, dtype=float).ravel()

    def set_limits(self, limits):
        o = int(self.ip[codes.IH_LIMITS])
        self.fp[o:o + self.p] = limits

    def run(self, q, qd, t):
        """``pinocchio.computeAllTerms`` + ``updateFramePlacements`` and the fused kernel at (q, q', t).

        q and q' must be C-contiguous float64 arrays of length n, t a float."""
        self._run(q, qd, t)
        return self

    def make_runner(self):
        """:meth:`run` as a closure over its arguments (no attribute look-ups per call; returns None)."""
        model = self.model
        pm, data = model.model, model.data
        cat, ufp = pin.computeAllTerms, pin.updateFramePlacements
        kernel = self.kernel
        Ml, h, J, trans, rots, ip, fp, ws, sat = (self.M_lower, self.h, self.J, self.trans, self.rots, self.ip,
                                                  self.fp, self.ws, self.saturated)

        if getattr(model, 'continuous', ()).__len__():
            # continuous joints: Pinocchio gets (cos q, sin q) (model.RobotModel); the kernel keeps the angle
            q_pin, to_pin = np.zeros(pm.nq), model._q_to_pin

            def run(q, qd, t):
                cat(pm, data, to_pin(q, q_pin), qd)
                ufp(pm, data)
                model._stamp += 1
                kernel(Ml, h, J, trans, rots, q, qd, t, ip, fp, ws, sat)
            return run

        def run(q, qd, t):
            cat(pm, data, q, qd)
            ufp(pm, data)
            model._stamp += 1                   # frame caches of the model are stale now
            kernel(Ml, h, J, trans, rots, q, qd, t, ip, fp, ws, sat)
        return run

    def rows(self, q, qd, t):
        """Only the rows (and B) at (q, q', t), for tests; ``model.compute`` must have been called."""
        self._rows_kernel(self.J, self.trans, self.rots, np.asarray(q, float), np.asarray(qd, float), float(t),
                          self.ip, self.fp, self.ws)
        return self
