"""Desired trajectories with analytic position, velocity and acceleration.

Every trajectory has ``dim`` and ``__call__(t) -> (p, v, a)`` (three arrays
of length ``dim``). ``start_time`` shifts time: the trajectory is evaluated at
``tau = t - start_time`` (analytic curves extend to tau < 0; segment curves
hold their first point before their first knot and their last point after
the last one).

Built from a config map by :func:`trajectory` (``type`` selects the class):

=============== ==============================================================
helix           seed 000 eq 40: x = cx + r sin(w tau + ph), y = cy + r cos(w tau + ph),
                z = cz + rate tau (rate = pitch w / 2 pi)
line            seed 003 eq 26: p = centre + amplitude cos(w tau + ph) direction
object_motion   seed 004 eq 64: (x3, y3, theta3) = offset + amplitude (1 - cos(w tau + ph)),
                defaults offset = (1.5 l, 0, 0), amplitude = (0, l/2, 0), w = 1
circle          p = centre + r (cos(w tau + ph) u + sin(w tau + ph) w_axis)
polynomial      quintic rest-to-rest segments through waypoints
spline          cubic spline through waypoints (scipy CubicSpline)
hold            constant value
=============== ==============================================================

Any trajectory map may add ``components: [i, j, ...]`` to keep only those
output components (e.g. x and y of the three-component object motion).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..files.parameter_file import ConfigError
from ..kernels.codes import (
    TRAJ_CIRCLE,
    TRAJ_COSINE_RISE,
    TRAJ_CUBIC_PIECES,
    TRAJ_HELIX,
    TRAJ_HOLD,
    TRAJ_LINE,
    TRAJ_QUINTIC,
)

if TYPE_CHECKING:  # the generated item classes (uk_controller/settings/types.py; read at run time by attribute)
    from ..settings.types import (
        CircleTrajectorySettings,
        HelixTrajectorySettings,
        HoldTrajectorySettings,
        LineTrajectorySettings,
        ObjectMotionTrajectorySettings,
        PolynomialTrajectorySettings,
        SplineTrajectorySettings,
        TrajectoryItem,
    )


class Trajectory:
    """Base: subclasses implement ``_eval(tau) -> (p, v, a)``."""

    dim = 0

    def __init__(self, start_time=0.0):
        self.start_time = float(start_time)

    def __call__(self, t):
        return self._eval(float(t) - self.start_time)

    def _eval(self, tau):  # pragma: no cover - abstract
        raise NotImplementedError

    def spec(self):
        """``(kind, dim, params)`` for the compiled evaluator
        (:func:`uk_controller.kernels.trajectory.trajectory_eval`),
        or None when this trajectory has no compiled form. ``params`` starts with ``start_time``."""
        return None


class Hold(Trajectory):
    """Constant value: p = value, v = a = 0."""

    def __init__(self, value, start_time=0.0):
        super().__init__(start_time)
        self.value = np.atleast_1d(np.asarray(value, dtype=float)).copy()
        self.dim = self.value.size
        self._zero = np.zeros(self.dim)

    def _eval(self, tau):
        return self.value.copy(), self._zero.copy(), self._zero.copy()

    def spec(self):
        return TRAJ_HOLD, self.dim, np.concatenate(([self.start_time], self.value))


class Helix(Trajectory):
    """Seed 000 eq 40 (generalised)::

        x = cx + r sin(w tau + ph),  y = cy + r cos(w tau + ph),  z = cz + rate tau

    The paper: r = 0.05 m, w = 0.4 pi rad/s, centre (0, 0.35, 0), rate 0.02 m/s
    (pitch = rate 2 pi / w = 0.1 m per turn).
    """

    dim = 3

    def __init__(self, radius, omega, centre=(0.0, 0.0, 0.0), rate=0.0, phase=0.0, start_time=0.0):
        super().__init__(start_time)
        self.radius, self.omega, self.rate, self.phase = float(radius), float(omega), float(rate), float(phase)
        self.centre = np.asarray(centre, dtype=float).reshape(3)

    def _eval(self, tau):
        r, w = self.radius, self.omega
        s, c = math.sin(w * tau + self.phase), math.cos(w * tau + self.phase)
        p = self.centre + np.array([r * s, r * c, self.rate * tau])
        v = np.array([r * w * c, -r * w * s, self.rate])
        a = np.array([-r * w * w * s, -r * w * w * c, 0.0])
        return p, v, a

    def spec(self):
        return (
            TRAJ_HELIX,
            3,
            np.concatenate(([self.start_time, self.radius, self.omega, self.phase, self.rate], self.centre)),
        )


class Line(Trajectory):
    """Seed 003 eq 26 (generalised): ``p = centre + amplitude cos(w tau + ph) d``.

    The paper: x = xe + 0.01 cos t, y = ye (d = (1, 0), amplitude 0.01 m, w = 1).
    """

    def __init__(self, centre, amplitude, omega=1.0, direction=None, phase=0.0, start_time=0.0):
        super().__init__(start_time)
        self.centre = np.atleast_1d(np.asarray(centre, dtype=float)).copy()
        self.dim = self.centre.size
        if direction is None:
            direction = np.eye(self.dim)[0]
        d = np.asarray(direction, dtype=float).reshape(self.dim)
        if not np.linalg.norm(d) > 0.0:
            raise ValueError('direction must be a non-zero vector')
        self.direction = d / np.linalg.norm(d)
        self.amplitude, self.omega, self.phase = float(amplitude), float(omega), float(phase)

    def _eval(self, tau):
        A, w = self.amplitude, self.omega
        c, s = math.cos(w * tau + self.phase), math.sin(w * tau + self.phase)
        return (self.centre + A * c * self.direction, -A * w * s * self.direction, -A * w * w * c * self.direction)

    def spec(self):
        return (
            TRAJ_LINE,
            self.dim,
            np.concatenate(([self.start_time, self.amplitude, self.omega, self.phase], self.centre, self.direction)),
        )


class CosineRise(Trajectory):
    """``p = offset + amplitude (1 - cos(w tau + ph))`` per component.

    Seed 004 eq 64 (object motion) is the case offset = (1.5 l, 0, 0),
    amplitude = (0, l/2, 0), w = 1: ``x3 = 1.5 l, y3 = (l/2)(1 - cos t),
    theta3 = 0`` (the paper's printed second derivative is mislabelled; here
    ``y3'' = (l/2) cos t``).
    """

    def __init__(self, offset, amplitude, omega=1.0, phase=0.0, start_time=0.0):
        super().__init__(start_time)
        self.offset = np.atleast_1d(np.asarray(offset, dtype=float)).copy()
        self.amplitude = np.atleast_1d(np.asarray(amplitude, dtype=float)).copy()
        if self.offset.shape != self.amplitude.shape:
            raise ValueError('offset and amplitude must have the same length')
        self.dim = self.offset.size
        self.omega, self.phase = float(omega), float(phase)

    def _eval(self, tau):
        w = self.omega
        c, s = math.cos(w * tau + self.phase), math.sin(w * tau + self.phase)
        return self.offset + self.amplitude * (1.0 - c), self.amplitude * w * s, self.amplitude * w * w * c

    def spec(self):
        return (
            TRAJ_COSINE_RISE,
            self.dim,
            np.concatenate(([self.start_time, 0.0, self.omega, self.phase], self.offset, self.amplitude)),
        )


def object_motion(length=1.0, omega=1.0, offset=None, amplitude=None, phase=0.0, start_time=0.0):
    """Seed 004 eq 64 with object length l: see :class:`CosineRise`."""
    length = float(length)
    offset = [1.5 * length, 0.0, 0.0] if offset is None else offset
    amplitude = [0.0, 0.5 * length, 0.0] if amplitude is None else amplitude
    return CosineRise(offset, amplitude, omega, phase, start_time)


class Circle(Trajectory):
    """``p = centre + r (cos(w tau + ph) u + sin(w tau + ph) v)``; u, v default to the first two axes."""

    def __init__(self, centre, radius, omega, u=None, v=None, phase=0.0, start_time=0.0):
        super().__init__(start_time)
        self.centre = np.atleast_1d(np.asarray(centre, dtype=float)).copy()
        self.dim = self.centre.size
        if self.dim < 2:
            raise ValueError('circle centre needs at least 2 components')
        eye = np.eye(self.dim)
        self.u = eye[0] if u is None else np.asarray(u, dtype=float).reshape(self.dim)
        self.v = eye[1] if v is None else np.asarray(v, dtype=float).reshape(self.dim)
        self.radius, self.omega, self.phase = float(radius), float(omega), float(phase)

    def _eval(self, tau):
        r, w = self.radius, self.omega
        c, s = math.cos(w * tau + self.phase), math.sin(w * tau + self.phase)
        p = self.centre + r * (c * self.u + s * self.v)
        vel = r * w * (-s * self.u + c * self.v)
        acc = -r * w * w * (c * self.u + s * self.v)
        return p, vel, acc

    def spec(self):
        return (
            TRAJ_CIRCLE,
            self.dim,
            np.concatenate(([self.start_time, self.radius, self.omega, self.phase], self.centre, self.u, self.v)),
        )


def _check_knots(times, points):
    times = np.asarray(times, dtype=float)
    points = np.atleast_2d(np.asarray(points, dtype=float))
    if times.ndim != 1 or times.size < 2 or np.any(np.diff(times) <= 0.0):
        raise ValueError('times must be at least 2 strictly increasing values')
    if points.shape[0] != times.size:
        raise ValueError(f'{times.size} times but {points.shape[0]} waypoints')
    return times, points


class Quintic(Trajectory):
    """Rest-to-rest quintic segments through waypoints.

    On segment k (``t_k <= tau <= t_{k+1}``, T = t_{k+1} - t_k, s = (tau - t_k)/T)::

        p = p_k + (p_{k+1} - p_k) (10 s^3 - 15 s^4 + 6 s^5)

    so velocity and acceleration are zero at every waypoint (C2 overall).
    """

    def __init__(self, times, points, start_time=0.0):
        super().__init__(start_time)
        self.times, self.points = _check_knots(times, points)
        self.dim = self.points.shape[1]

    def _eval(self, tau):
        t, P = self.times, self.points
        zero = np.zeros(self.dim)
        if tau <= t[0]:
            return P[0].copy(), zero, zero.copy()
        if tau >= t[-1]:
            return P[-1].copy(), zero, zero.copy()
        k = int(np.searchsorted(t, tau, side='right')) - 1
        T = t[k + 1] - t[k]
        s = (tau - t[k]) / T
        d = P[k + 1] - P[k]
        f = s**3 * (10.0 - 15.0 * s + 6.0 * s * s)
        df = 30.0 * s * s * (1.0 - s) ** 2 / T
        ddf = 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s) / (T * T)
        return P[k] + f * d, df * d, ddf * d

    def spec(self):
        """Floats: start time, knot count K, the K times, the K points (row by row)."""
        return (
            TRAJ_QUINTIC,
            self.dim,
            np.concatenate(([self.start_time, self.times.size], self.times, self.points.ravel())),
        )


class Spline(Trajectory):
    """Cubic spline through waypoints (scipy CubicSpline, default clamped ends: v = 0)."""

    def __init__(self, times, points, bc_type='clamped', start_time=0.0):
        from scipy.interpolate import CubicSpline

        super().__init__(start_time)
        self.times, self.points = _check_knots(times, points)
        self.dim = self.points.shape[1]
        self._spline = CubicSpline(self.times, self.points, axis=0, bc_type=bc_type)
        self._d1 = self._spline.derivative(1)
        self._d2 = self._spline.derivative(2)

    def _eval(self, tau):
        t = self.times
        if tau <= t[0] or tau >= t[-1]:
            end = self.points[0] if tau <= t[0] else self.points[-1]
            return end.copy(), np.zeros(self.dim), np.zeros(self.dim)
        return self._spline(tau), self._d1(tau), self._d2(tau)

    def spec(self):
        """Floats: start time, knot count K, the K times, the first and last points, then per segment k and
        component i the cubic's coefficients ``c[0..3, k, i]`` of scipy's PPoly (``p = c0 x^3 + c1 x^2 + c2 x
        + c3``, x = tau - t_k): the compiled evaluator uses the coefficients scipy solved for."""
        c = np.asarray(self._spline.c, dtype=float)  # (4, K - 1, dim)
        return (
            TRAJ_CUBIC_PIECES,
            self.dim,
            np.concatenate(
                (
                    [self.start_time, self.times.size],
                    self.times,
                    self.points[0],
                    self.points[-1],
                    np.transpose(c, (1, 2, 0)).ravel(),
                )
            ),
        )


class Components(Trajectory):
    """Selected components of another trajectory."""

    def __init__(self, inner, components):
        super().__init__(0.0)
        self.inner = inner
        self.components = np.asarray(components, dtype=np.intp)
        if np.any(self.components < 0) or np.any(self.components >= inner.dim):
            raise ValueError(f'components must be in 0..{inner.dim - 1}')
        self.dim = self.components.size

    def __call__(self, t):
        p, v, a = self.inner(t)
        c = self.components
        return p[c], v[c], a[c]


# ---------------------------------------------------------------------------- factory
#
# The table of trajectory types, TYPES: each entry carries its builder and the config keys it reads, so a
# new type is ONE entry here (docs/architecture.md, "How to add a trajectory type"). The settings schema
# declares ``constraints.<name>.trajectory.*`` from it (uk_controller.settings.schema), resolve() gives each
# trajectory map as the typed item of its type (``HelixTrajectorySettings``, ...: uk_controller/settings/types.py,
# generated from this table by ``python -m uk_controller.settings --write-types``), docs/config.md lists it
# (``--write-docs``), :func:`trajectory` dispatches on it.


@dataclass(frozen=True)
class Key:
    """One config key of a trajectory map as the settings schema declares it: ``name``, value ``type``
    (a :class:`~uk_controller.settings.setting.Setting` type), one-line ``doc``, ``unit``, the Setting's range
    fields in ``limits`` (``(('low', 0.0),)``, ``(('length', 3),)``, ``(('choices', (...)),)``), its
    ``default`` (the value of the typed item's attribute when the map does not give it) and ``required``
    (the type needs it: a map without it is an error naming the key). Types that share a key share one
    Key object (one row of docs/config.md lists them)."""

    name: str
    type: str
    doc: str
    unit: str = ''
    limits: tuple = ()
    default: Any = None
    required: bool = False


@dataclass(frozen=True)
class TrajectoryType:
    """One trajectory type: ``build(item) -> Trajectory`` from its typed item (the generated class of the
    type: its keys are attributes, the defaults filled, ``item.error(key, message)`` a ConfigError naming
    the file and key) and the ``keys`` it reads besides :data:`COMMON_KEYS`."""

    build: Callable
    keys: tuple = ()


#: keys of every trajectory map (``type`` itself lists the names of :data:`TYPES`)
COMMON_KEYS = (
    Key('start_time', 'float', 'trajectory time of t = 0', 's', default=0.0),
    Key('components', 'floats', 'indices of the components used'),
)
PHASE = Key('phase', 'float', 'phase', 'rad', default=0.0)
RADIUS = Key('radius', 'float', 'radius', 'm', (('low', 0.0),), required=True)
OMEGA = Key('omega', 'float', 'angular frequency', 'rad/s', required=True)
OMEGA_1 = Key('omega', 'float', 'angular frequency', 'rad/s', default=1.0)
CENTRE = Key('centre', 'floats', 'centre', 'm', required=True)
TIMES = Key('times', 'floats', 'waypoint times', 's', required=True)
WAYPOINTS = Key('waypoints', 'floats', 'waypoints, flat list', required=True)
DIM = Key('dim', 'int', 'components per waypoint (default: from times and waypoints)', '', (('low', 1),))
SPLINE_BC = ('clamped', 'natural', 'not-a-knot')


def _waypoints(item: PolynomialTrajectorySettings | SplineTrajectorySettings) -> tuple[np.ndarray, np.ndarray]:
    times = np.asarray(item.times, dtype=float)
    if times.size < 2:
        raise item.error('times', f'must have at least 2 entries, got {times.size}')
    flat = np.asarray(item.waypoints, dtype=float)
    if flat.size % times.size:
        raise item.error(
            'waypoints',
            f'{flat.size} numbers do not split into {times.size} waypoints '
            '(write them flat: p0 components, p1 components, ...)',
        )
    dim = flat.size // times.size
    if item.dim is not None and item.dim != dim:
        raise item.error('dim', f'waypoints give {dim} components per point')
    if np.any(np.diff(times) <= 0.0):
        raise item.error('times', 'must be strictly increasing')
    return times, flat.reshape(times.size, dim)


def _matching(item: TrajectoryItem, key: str, size: int) -> np.ndarray | None:
    """Optional key `key` of `item` (a list of numbers) as an array of `size` entries (None when not given)."""
    value = getattr(item, key)
    if value is None:
        return None
    if len(value) != size:
        raise item.error(key, f'must have {size} entries, got {len(value)}')
    return np.asarray(value, dtype=float)


def _helix(item: HelixTrajectorySettings) -> Helix:
    if item.pitch is not None and item.rate is not None:
        raise item.error('pitch', 'give pitch or rate, not both')
    rate = item.pitch * item.omega / (2.0 * np.pi) if item.pitch is not None else (item.rate or 0.0)
    return Helix(item.radius, item.omega, item.centre, rate, item.phase, item.start_time)


def _line(item: LineTrajectorySettings) -> Line:
    centre = np.asarray(item.centre, dtype=float)
    return Line(
        centre, item.amplitude, item.omega, _matching(item, 'direction', centre.size), item.phase, item.start_time
    )


def _object_motion(item: ObjectMotionTrajectorySettings) -> CosineRise:
    return object_motion(item.length, item.omega, item.offset, item.amplitude, item.phase, item.start_time)


def _circle(item: CircleTrajectorySettings) -> Circle:
    centre = np.asarray(item.centre, dtype=float)
    if centre.size < 2:
        raise item.error('centre', f'must have at least 2 entries, got {centre.size}')
    return Circle(
        centre,
        item.radius,
        item.omega,
        _matching(item, 'u', centre.size),
        _matching(item, 'v', centre.size),
        item.phase,
        item.start_time,
    )


def _polynomial(item: PolynomialTrajectorySettings) -> Quintic:
    return Quintic(*_waypoints(item), item.start_time)


def _spline(item: SplineTrajectorySettings) -> Spline:
    times, points = _waypoints(item)
    return Spline(times, points, item.bc_type, item.start_time)


def _hold(item: HoldTrajectorySettings) -> Hold:
    if item.value is None:
        raise item.error('value', 'required key is missing')
    return Hold(item.value, item.start_time)


#: name -> TrajectoryType: the one table of trajectory types (its order is the order of docs/config.md)
TYPES = {
    'helix': TrajectoryType(
        _helix,
        (
            PHASE,
            RADIUS,
            OMEGA,
            Key('centre', 'floats', 'centre', 'm', (('length', 3),), default=(0.0, 0.0, 0.0)),
            Key('rate', 'float', 'axial speed (default: 0, or from pitch)', 'm/s'),
            Key('pitch', 'float', 'axial advance per turn (instead of rate)', 'm'),
        ),
    ),
    'line': TrajectoryType(
        _line,
        (
            PHASE,
            OMEGA_1,
            CENTRE,
            Key('direction', 'floats', 'direction of the line (default: the first axis)'),
            Key('amplitude', 'float', 'amplitude', 'm', required=True),
        ),
    ),
    'object_motion': TrajectoryType(
        _object_motion,
        (
            PHASE,
            OMEGA_1,
            Key('amplitude', 'floats', 'amplitude (default: 0, length/2, 0)', '', (('length', 3),)),
            Key('length', 'float', 'object length', 'm', (('low', 0.0), ('low_open', True)), default=1.0),
            Key('offset', 'floats', 'object offset (default: 1.5 length, 0, 0)', 'm', (('length', 3),)),
        ),
    ),
    'circle': TrajectoryType(
        _circle,
        (
            PHASE,
            RADIUS,
            OMEGA,
            CENTRE,
            Key('u', 'floats', 'first plane axis (default: the first axis)'),
            Key('v', 'floats', 'second plane axis (default: the second axis)'),
        ),
    ),
    'polynomial': TrajectoryType(_polynomial, (TIMES, WAYPOINTS, DIM)),
    'spline': TrajectoryType(
        _spline,
        (
            TIMES,
            WAYPOINTS,
            DIM,
            Key('bc_type', 'str', 'boundary condition', '', (('choices', SPLINE_BC),), default='clamped'),
        ),
    ),
    'hold': TrajectoryType(
        _hold, (Key('value', 'floats', 'held value (frame and joint rows: default where the row is at the start)'),)
    ),
}


def trajectory(item: TrajectoryItem) -> Trajectory:
    """Build a trajectory from its typed item (docs/config.md, ``constraints.<name>.trajectory``, as
    resolve() gives it; a map written in code is made one, checked as a setup file is, by
    :func:`uk_controller.settings.sections.trajectory_item`).

    Common keys: ``type`` (one of :data:`TYPES`), ``start_time`` (s, default 0),
    ``components`` (optional list of indices); the type's own keys are its entry's ``keys``. Errors are
    :class:`~uk_controller.files.parameter_file.ConfigError` naming the item's file and dotted key.
    """
    if isinstance(item, Mapping):
        raise TypeError(
            'trajectory() takes a typed item; uk_controller.settings.sections.trajectory_item(map) makes one from a map'
        )
    try:
        traj: Trajectory = TYPES[item.type].build(item)
        if item.components is not None:
            comps = np.asarray(item.components, dtype=float)
            if np.any(comps != np.round(comps)):
                raise item.error('components', 'must be integer indices')
            traj = Components(traj, comps.astype(int))
    except ConfigError:
        raise
    except ValueError as exc:
        raise item.error(None, str(exc)) from None
    return traj
