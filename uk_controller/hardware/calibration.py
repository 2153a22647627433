"""Per-motor calibration from the config ``hardware`` section (docs/config.md).

Everything above this module speaks *joint-side* quantities in SI units: the
actuator effort ``u`` (N m or N, the controller's output, actuator order), the
joint position ``q`` (rad or m) and velocity ``qd``. Everything below speaks
*motor-side* quantities: motor shaft angle ``theta`` (rad), speed ``omega``
(rad/s), motor torque ``tau_m`` (N m) and current ``i`` (A). The mapping is the
ideal transmission (the same convention as ros2_control's SimpleTransmission,
with ``direction`` carrying the sign):

    q      = direction * theta / gear_ratio + zero_offset
    qd     = direction * omega / gear_ratio
    u      = direction * gear_ratio * tau_m           (joint effort from motor torque)
    tau_m  = torque_constant * i

so ``tau_m = direction * u / gear_ratio`` and ``i = tau_m / torque_constant``.

Units of the limits: ``position_limit`` [lo, hi] and ``velocity_limit`` are
joint side (rad, rad/s); ``torque_limit`` is motor side (N m at the motor
shaft, i.e. what the driver is asked for). The effective joint-side effort
limit of an actuator is ``min(actuators.<name>.effort_limit, torque_limit *
gear_ratio)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import math
from pathlib import Path

import numpy as np

from ..files.parameter_file import ConfigError
from . import registry

__all__ = ['MotorCalibration', 'HardwareConfig']



def _err(source, key, msg):
    return ConfigError(msg, file=source or None, key=key)


@dataclass
class MotorCalibration:
    """Calibration of one motor (one actuator). See module docstring for units."""
    name: str
    id: int
    gear_ratio: float = 1.0
    torque_constant: float = 1.0
    direction: float = 1.0
    zero_offset: float = 0.0
    position_limit: tuple = (-math.inf, math.inf)
    velocity_limit: float = math.inf
    torque_limit: float = math.inf
    joint: str | None = None          # tree joint the actuator drives (None: `between`)
    sections: dict = field(default_factory=dict)   # protocol maps of hardware.<name> (e.g. ``mit``)


@dataclass
class HardwareConfig:
    """The ``hardware`` section resolved against ``actuators``.

    ``motors`` are in *actuator order* (the order of the controller's effort
    vector ``u``), whatever the order of ``hardware.motors`` in the file.
    Vectorised calibration arrays (length p) are built once for the hot path.
    """
    motors: list
    protocol: str = registry.DEFAULT_PROTOCOL
    port: str = '/dev/ttyUSB0'
    baud: int = 1000000
    watchdog: float = 0.05
    rate: float = 0.0                 # 0: use control.rate
    options: dict = field(default_factory=dict)
    source: str = ''
    effort_limits: np.ndarray | None = None   # actuator effort limits (joint side)

    def __post_init__(self):
        m = self.motors
        self.p = len(m)
        self.names = [mc.name for mc in m]
        self.ids = [int(mc.id) for mc in m]
        self.gear = np.array([mc.gear_ratio for mc in m], float)
        self.kt = np.array([mc.torque_constant for mc in m], float)
        self.direction = np.array([mc.direction for mc in m], float)
        self.offset = np.array([mc.zero_offset for mc in m], float)
        self.q_lo = np.array([mc.position_limit[0] for mc in m], float)
        self.q_hi = np.array([mc.position_limit[1] for mc in m], float)
        self.qd_max = np.array([mc.velocity_limit for mc in m], float)
        self.tau_m_max = np.array([mc.torque_limit for mc in m], float)
        lim = self.tau_m_max * np.abs(self.gear)
        if self.effort_limits is not None:
            lim = np.minimum(lim, np.asarray(self.effort_limits, float))
        self.u_max = lim
        self.joints = [mc.joint for mc in m]
        if len(set(self.ids)) != len(self.ids):
            raise _err(self.source, 'hardware.motors', f'motor ids are not unique: {self.ids}')

    # ---- joint <-> motor maps (see module docstring) -------------------------
    def effort_to_motor_torque(self, u, out=None):
        """tau_m = direction * u / gear_ratio."""
        return np.multiply(self.direction / self.gear, u, out=out)

    def motor_torque_to_effort(self, tau_m, out=None):
        """u = direction * gear_ratio * tau_m."""
        return np.multiply(self.direction * self.gear, tau_m, out=out)

    def motor_to_joint(self, theta, omega):
        """(q, qd) = (direction theta / N + offset, direction omega / N)."""
        s = self.direction / self.gear
        return s * np.asarray(theta) + self.offset, s * np.asarray(omega)

    def joint_to_motor(self, q, qd):
        """Inverse of :meth:`motor_to_joint` (used by the device emulator)."""
        s = self.gear / self.direction
        return s * (np.asarray(q) - self.offset), s * np.asarray(qd)

    def torque_to_current(self, tau_m):
        """i = tau_m / torque_constant."""
        return np.asarray(tau_m) / self.kt

    # ---- construction ---------------------------------------------------------
    @classmethod
    def default(cls, actuator_names, effort_limits=None, joints=None, **kw):
        """Identity calibration (ids 1..p, gear 1, kt 1) for emulators and tests."""
        lim = [math.inf] * len(actuator_names) if effort_limits is None else list(effort_limits)
        joints = joints or [None] * len(actuator_names)
        motors = [MotorCalibration(name=n, id=i + 1, torque_limit=float(lim[i]), joint=joints[i])
                  for i, n in enumerate(actuator_names)]
        return cls(motors=motors, effort_limits=effort_limits, **kw)

    @classmethod
    def from_setup(cls, setup, *, require_section=False):
        """From a RobotSetup: its config, its actuators' effort limits (URDF defaults
        included) and the names of the joints the actuators drive."""
        acts = setup.actuators.actuators
        joints = [setup.joint_names[a.joint] if a.joint is not None else None for a in acts]
        return cls.from_params(setup.config, setup.config_path or '', require_section=require_section,
                               effort_limits=setup.actuators.effort_limits, joints=joints)

    @classmethod
    def from_params(cls, params: dict, source: str | Path = '', *, require_section=False,
                    effort_limits=None, joints=None):
        """Build from the nested ``ros__parameters`` dict of a robot config.

        Without a ``hardware`` section (and ``require_section=False``) every
        actuator gets the identity calibration with its effort limit as torque
        limit, which is what the emulator-based tests use.
        """
        source = str(source)
        act = params.get('actuators') or {}
        names = list(act.get('names') or [])
        if not names:
            raise _err(source, 'actuators.names', 'missing: the hardware layer maps motors to actuators')
        efforts, cfg_joints = [], []
        for n in names:
            a = act.get(n) or {}
            efforts.append(float(a['effort_limit']) if 'effort_limit' in a else math.inf)
            cfg_joints.append(a.get('joint'))
        if effort_limits is not None:
            efforts = [float(x) for x in effort_limits]
        joints = list(joints) if joints is not None else cfg_joints
        hw = params.get('hardware')
        if hw is None:
            if require_section:
                raise _err(source, 'hardware', 'missing section (see docs/config.md)')
            return cls.default(names, np.array(efforts), joints, source=source)
        if not isinstance(hw, dict):
            raise _err(source, 'hardware', 'must be a map')
        kw = {}
        if 'protocol' in hw:
            if hw['protocol'] not in registry.PROTOCOLS:
                raise _err(source, 'hardware.protocol', f'{hw["protocol"]!r} is not one of {registry.names()}')
            kw['protocol'] = hw['protocol']
        for key, typ in (('port', str), ('baud', int), ('watchdog', float), ('rate', float)):
            if key in hw:
                try:
                    kw[key] = typ(hw[key])
                except (TypeError, ValueError):
                    raise _err(source, f'hardware.{key}', f'expected {typ.__name__}, got {hw[key]!r}') from None
        if kw.get('watchdog', 1.0) <= 0:
            raise _err(source, 'hardware.watchdog', 'must be > 0 s')
        order = list(hw.get('motors') or names)
        unknown = [m for m in order if m not in names]
        if unknown:
            raise _err(source, 'hardware.motors', f'{unknown} are not in actuators.names {names}')
        missing = [n for n in names if n not in order]
        if missing:
            raise _err(source, 'hardware.motors', f'actuators {missing} have no motor')
        motors = []
        for i, n in enumerate(names):
            entry = hw.get(n, {}) or {}
            if not isinstance(entry, dict):
                raise _err(source, f'hardware.{n}', 'must be a map')
            key = f'hardware.{n}'
            try:
                mc = MotorCalibration(
                    name=n, id=int(entry.get('id', order.index(n) + 1)),
                    gear_ratio=float(entry.get('gear_ratio', 1.0)),
                    torque_constant=float(entry.get('torque_constant', 1.0)),
                    direction=float(entry.get('direction', 1.0)),
                    zero_offset=float(entry.get('zero_offset', 0.0)),
                    position_limit=tuple(float(x) for x in entry.get('position_limit', (-math.inf, math.inf))),
                    velocity_limit=float(entry.get('velocity_limit', math.inf)),
                    torque_limit=float(entry['torque_limit']) if 'torque_limit' in entry else math.nan,
                    joint=joints[i],
                    sections={k: dict(v) for k, v in entry.items() if isinstance(v, dict)})
            except (TypeError, ValueError) as exc:
                raise _err(source, key, f'bad value ({exc})') from None
            if mc.gear_ratio == 0:
                raise _err(source, key + '.gear_ratio', 'must be non-zero')
            if math.isnan(mc.torque_limit):     # default: the actuator's effort limit at the motor
                mc.torque_limit = efforts[i] / abs(mc.gear_ratio)
            if mc.torque_constant <= 0:
                raise _err(source, key + '.torque_constant', 'must be > 0')
            if mc.direction not in (1.0, -1.0):
                raise _err(source, key + '.direction', 'must be 1.0 or -1.0')
            if len(mc.position_limit) != 2 or mc.position_limit[0] >= mc.position_limit[1]:
                raise _err(source, key + '.position_limit', 'must be [lower, upper] with lower < upper')
            if not mc.velocity_limit > 0 or not mc.torque_limit > 0:
                raise _err(source, key, 'velocity_limit and torque_limit must be > 0')
            motors.append(mc)
        # the protocol sections hardware.<section>; their defaults (registry.Protocol.defaults) are
        # filled in by registry.make_bus / make_emulator for the protocol in use
        options = {k: v for k, v in hw.items() if isinstance(v, dict) and k in registry.sections()}
        return cls(motors=motors, options=options, source=source,
                   effort_limits=np.array(efforts), **kw)
