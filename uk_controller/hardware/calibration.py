"""Per-motor calibration from the resolved ``hardware`` settings (docs/config.md).

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

import math
from dataclasses import dataclass, field, fields

import numpy as np

from ..files.parameter_file import ConfigError
from ..settings import schema as S

__all__ = ['MotorCalibration', 'HardwareConfig']


def _err(source, key, msg):
    return ConfigError(msg, file=source or None, key=key)


def _motor_sections(item):
    """The protocol maps of one motor's settings (``hardware.<name>.<section>``, e.g. ``mit``) as dicts."""
    return {f.name: getattr(item, f.name).as_dict() for f in fields(item) if hasattr(getattr(item, f.name), 'as_dict')}


@dataclass
class MotorCalibration:
    """Calibration of one motor (one actuator). See module docstring for units. The defaults are the
    schema's (``hardware.<name>.*``); a limit the schema leaves unset is no limit (infinite)."""

    name: str
    id: int
    gear_ratio: float = S.default('hardware.<name>.gear_ratio')
    torque_constant: float = S.default('hardware.<name>.torque_constant')
    direction: float = S.default('hardware.<name>.direction')
    zero_offset: float = S.default('hardware.<name>.zero_offset')
    position_limit: tuple = (-math.inf, math.inf)
    velocity_limit: float = math.inf
    torque_limit: float = math.inf
    joint: str | None = None  # tree joint the actuator drives (None: `between`)
    sections: dict = field(default_factory=dict)  # protocol maps of hardware.<name> (e.g. ``mit``)


@dataclass
class HardwareConfig:
    """The ``hardware`` section resolved against ``actuators``.

    ``motors`` are in *actuator order* (the order of the controller's effort
    vector ``u``), whatever the order of ``hardware.motors`` in the file.
    Vectorised calibration arrays (length p) are built once for the hot path.
    """

    motors: list
    protocol: str = S.default('hardware.protocol')
    port: str = S.default('hardware.port')
    baud: int = S.default('hardware.baud')
    watchdog: float = S.default('hardware.watchdog')
    rate: float = 0.0  # the bus rate (resolved settings: hardware.rate, default control.rate)
    options: dict = field(default_factory=dict)
    source: str = ''
    effort_limits: np.ndarray | None = None  # actuator effort limits (joint side)

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
        self.device_torque_limit = np.full(self.p, np.inf)  # read from the devices at connect
        self.joints = [mc.joint for mc in m]
        if len(set(self.ids)) != len(self.ids):
            raise _err(self.source, 'hardware.motors', f'motor ids are not unique: {self.ids}')

    def apply_device_limits(self, tau_m_device) -> bool:
        """The motor-side torque limits the devices enforce (read at connect: current limit x torque
        constant) become limits here: ``tau_m_max = min(torque_limit, device)`` and
        ``u_max = min(effort_limit, tau_m_max |gear|)``, both updated in place (the
        :class:`~.safety.EffortLimiter` and the controller read these arrays). Returns True when a
        device limit is below what the configuration allowed."""
        dev = np.asarray(tau_m_device, float).reshape(self.p)
        dev = np.where(np.isfinite(dev) & (dev >= 0), dev, np.inf)
        self.device_torque_limit[:] = dev
        lower = bool(np.any(dev < self.tau_m_max))
        np.minimum(self.tau_m_max, dev, out=self.tau_m_max)
        np.minimum(self.u_max, self.tau_m_max * np.abs(self.gear), out=self.u_max)
        return lower

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
        motors = [
            MotorCalibration(name=n, id=i + 1, torque_limit=float(lim[i]), joint=joints[i])
            for i, n in enumerate(actuator_names)
        ]
        return cls(motors=motors, effort_limits=effort_limits, **kw)

    def at_port(self, port, baud=None):
        """This calibration with its bus on `port` (at `baud`; default this one's): the pseudo-terminal a
        device emulator creates when it starts, which no setup file can name in advance. A setup's own port
        is ``hardware.port`` (``--port``, the ``port`` launch argument: overrides of the settings)."""
        import dataclasses

        return dataclasses.replace(self, port=str(port), baud=self.baud if baud is None else int(baud))

    @classmethod
    def from_setup(cls, setup):
        """From a RobotSetup: its settings, its actuators' effort limits (URDF defaults
        included) and the names of the joints the actuators drive."""
        acts = setup.actuators.actuators
        joints = [setup.joint_names[a.joint] if a.joint is not None else None for a in acts]
        return cls.from_settings(setup.settings, effort_limits=setup.actuators.effort_limits, joints=joints)

    @classmethod
    def from_settings(cls, settings, *, effort_limits=None, joints=None):
        """Build from resolved settings (``settings.hardware``: checked, defaults filled by
        uk_controller.settings.resolve). Here only what relates motors to actuators is checked: every
        actuator has one motor, ids unique, a non-zero gear, direction +-1, ordered position limits.

        Without a ``hardware`` section every actuator gets the identity calibration with its effort
        limit as torque limit (the schema's defaults), which is what the emulator-based tests use.
        """
        source = str(settings.file or '')
        act = settings.actuators
        names = list(act.names or [])
        if not names:
            raise _err(source, 'actuators.names', 'missing: the hardware layer maps motors to actuators')
        items = {n: act.items.get(n) for n in names}
        if effort_limits is not None:
            efforts = [float(x) for x in effort_limits]
        else:
            efforts = [math.inf if a is None or a.effort_limit is None else a.effort_limit for a in items.values()]
        joints = list(joints) if joints is not None else [None if a is None else a.joint for a in items.values()]
        hw = settings.hardware
        order = list(hw.motors or names)
        unknown = [m for m in order if m not in names]
        if unknown:
            raise _err(source, 'hardware.motors', f'{unknown} are not in actuators.names {names}')
        missing = [n for n in names if n not in order]
        if missing:
            raise _err(source, 'hardware.motors', f'actuators {missing} have no motor')
        motors = []
        for i, n in enumerate(names):
            m, key = hw.items[n], f'hardware.{n}'
            if m.gear_ratio == 0:
                raise _err(source, key + '.gear_ratio', 'must be non-zero')
            if m.direction not in (1.0, -1.0):
                raise _err(source, key + '.direction', 'must be 1.0 or -1.0')
            limits = (-math.inf, math.inf) if m.position_limit is None else tuple(m.position_limit)
            if limits[0] >= limits[1]:
                raise _err(source, key + '.position_limit', 'must be [lower, upper] with lower < upper')
            mc = MotorCalibration(
                name=n,
                id=m.id if m.id is not None else order.index(n) + 1,
                gear_ratio=m.gear_ratio,
                torque_constant=m.torque_constant,
                direction=m.direction,
                zero_offset=m.zero_offset,
                position_limit=limits,
                velocity_limit=math.inf if m.velocity_limit is None else m.velocity_limit,
                # default: the actuator's effort limit at the motor
                torque_limit=efforts[i] / abs(m.gear_ratio) if m.torque_limit is None else m.torque_limit,
                joint=joints[i],
                sections=_motor_sections(m),
            )
            if not mc.torque_limit > 0:
                raise _err(source, key, 'velocity_limit and torque_limit must be > 0')
            motors.append(mc)
        # the options a file gives under hardware.<protocol>; registry.Protocol.options fills the rest
        options = {name: dict(given) for name, given in hw.options.items()}
        return cls(
            motors=motors,
            options=options,
            source=source,
            effort_limits=np.array(efforts),
            protocol=hw.protocol,
            port=hw.port,
            baud=hw.baud,
            watchdog=hw.watchdog,
            rate=hw.rate,
        )
