"""The motor protocols: one table (name -> bus, device emulator, calibration defaults) and the
factories that read it.

Every protocol is a subpackage ``uk_controller.hardware.protocols.<name>`` with three modules:

- ``codec.py``  the wire format without I/O (frames, checksums, named ``PKT_*``/``BODY_*`` byte
  offsets), ``OPTIONS``: the keys of the config section ``hardware.<name>`` with their
  defaults (the *calibration defaults* of the protocol: wire units, limits), and ``SETTINGS``:
  those keys as the settings schema declares them (one ``Setting`` each: type, unit, range,
  description; the schema inserts them, docs/config.md lists them);
- ``bus.py``    the host side, a :class:`~uk_controller.hardware.bus.MotorBus` subclass;
- ``device.py`` the device side, a :class:`~uk_controller.hardware.emulator.DeviceEmulator`
  subclass that the tests, ``uk-controller emulate`` and the benchmarks run on a pty.

:data:`PROTOCOLS` below is the only list of them. ``make_bus`` (the SafeBus factory of
``uk-controller run`` and ``serial_bridge_node``), ``make_emulator``, the calibration
(``hardware.protocol`` and the ``hardware.<name>`` option sections), the ``--protocol``
choices of ``uk-controller run`` / ``emulate`` and the settings schema (the ``hardware.protocol``
choices are ``RegistryNames`` of this table, so docs/config.md lists them too) all read it;
test/test_hardware_registry.py checks the schema's ``hardware.<name>.*`` keys and defaults
against it and that a protocol added to this table alone is accepted everywhere. The table holds names only: a
protocol's modules are imported when one
of its classes is asked for, so ``import uk_controller.hardware`` needs neither pyserial nor
dynamixel_sdk (the pattern of DynamixelSDK's ``packet_handler.py``: a small factory above the
protocol classes).

How to add a motor protocol (e.g. ``canopen``):

1. Create ``uk_controller/hardware/protocols/canopen/`` with ``__init__.py`` (a docstring),
   ``codec.py`` (the wire format, ``PKT_*`` offsets, ``OPTIONS = {...}`` with the defaults of
   the ``hardware.canopen`` section; ``{}`` if it has none), ``bus.py`` (``class CanopenBus(MotorBus)``
   implementing ``enable``/``read``/``write``, optionally ``transact``/``configure``/``clear_faults``
   and ``timing_facts``/``motor_torque_limits``: what the cycle budget and the actuator limits read
   from the devices),
   ``SETTINGS = (Setting('hardware.canopen.<key>', ...), ...)`` for the keys of ``OPTIONS``,
   ``cycle_cost(p, options, facts)`` in the codec (what one cycle puts on the bus, for the cycle
   budget of ``uk-controller run``; :mod:`uk_controller.hardware.bus_timing`)
   and ``device.py`` (``class CanopenDevice(DeviceEmulator)`` implementing ``handle(data)``).
   Import third-party packages inside functions, as ``protocols/dynamixel/bus.py`` does.
2. Add one line to :data:`PROTOCOLS`:
   ``Protocol('canopen', bus='CanopenBus', device='CanopenDevice'),``
   That is all: the settings schema takes the name (``hardware.protocol`` choices) and the codec's
   ``SETTINGS`` (``hardware.canopen.<key>``) from this table, docs/config.md and the typed section
   ``settings.hardware.canopen`` follow with ``python -m uk_controller.settings --write-docs --write-types``,
   and test/test_hardware_registry.py checks
   ``SETTINGS`` against ``OPTIONS``. The bus tests parametrized over :func:`names`
   (test/test_serial_buses.py) then run the new protocol against its emulator, and
   ``uk-controller run/emulate --protocol``, ``serial_bridge_node -p hardware.protocol:=`` and
   ``hardware.launch.py protocol:=`` accept it.

Options in a section of another name: ``Protocol('can_mit', ..., section='can')`` reads
``hardware.can`` (the CAN transport). Per-motor options: a codec with ``MOTOR_SECTION = 'mit'``
declares ``hardware.<name>.mit.<key>`` in its ``SETTINGS`` and gets those maps as ``options['motors']``.

A protocol kept outside this package (your own repository) is the same line with
``package='my_pkg.canopen'``: the package that holds its codec, bus and device modules.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..settings import protocols

__all__ = ['Protocol', 'PROTOCOLS', 'DEFAULT_PROTOCOL', 'names', 'sections', 'get', 'make_bus', 'make_emulator']

PACKAGE = 'uk_controller.hardware.protocols'


@dataclass(frozen=True)
class Protocol:
    """One registry line: the protocol's name and its class names (see the module docstring)."""

    name: str
    bus: str  # class in protocols/<name>/bus.py
    device: str  # class in protocols/<name>/device.py
    package: str = ''  # where codec/bus/device live (default: uk_controller.hardware.protocols.<name>)
    section: str = ''  # config section of its options, hardware.<section> (default: its name)

    @property
    def section_name(self) -> str:
        """The section ``hardware.<section>`` that holds this protocol's options (``OPTIONS``)."""
        return self.section or self.name

    def _module(self, part: str):
        return importlib.import_module(f'{self.package or PACKAGE + "." + self.name}.{part}')

    def bus_class(self):
        """The host-side :class:`~uk_controller.hardware.bus.MotorBus` subclass."""
        return getattr(self._module('bus'), self.bus)

    def device_class(self):
        """The :class:`~uk_controller.hardware.emulator.DeviceEmulator` subclass."""
        return getattr(self._module('device'), self.device)

    def settings(self) -> tuple:
        """The schema keys ``hardware.<name>.<option>`` (``SETTINGS`` of the codec; none if it has no options)."""
        return tuple(getattr(self._module('codec'), 'SETTINGS', ()))

    def defaults(self) -> dict:
        """Calibration defaults: the ``hardware.<name>`` keys and their default values."""
        return dict(self._module('codec').OPTIONS)

    def cycle_cost(self, p: int, options: dict | None = None, facts: dict | None = None, motors=None):
        """What one armed control cycle puts on the bus: ``cycle_cost(p, options, facts)`` of the codec,
        a :class:`~uk_controller.hardware.bus_timing.CycleCost` (``options``: the ``hardware.<section>``
        section with its defaults, and the per-motor maps of `motors` as :meth:`options` makes them;
        ``facts``: what the bus read from the devices,
        :meth:`~uk_controller.hardware.bus.MotorBus.timing_facts`). A codec without one costs nothing
        that the budget could know of (an empty cost: the budget then bounds nothing)."""
        from .bus_timing import CycleCost

        fn = getattr(self._module('codec'), 'cycle_cost', None)
        if fn is None:
            return CycleCost(exchanges=(), notes=(f'{self.name}: its codec states no cycle_cost',))
        return fn(int(p), self.options(options, motors), dict(facts or {}))

    def options(self, given: dict | None, motors=None) -> dict:
        """The defaults updated by the config's ``hardware.<section>`` section (known keys only).

        A codec with ``MOTOR_SECTION = '<key>'`` (per-motor options ``hardware.<motor>.<key>.*``, e.g.
        the MIT ranges of ``can_mit``) also gets ``'motors'``: those maps in actuator order, from the
        :class:`~.calibration.MotorCalibration` list `motors`.
        """
        out = self.defaults()
        out.update({k: v for k, v in (given or {}).items() if k in out})
        per_motor = getattr(self._module('codec'), 'MOTOR_SECTION', '')
        if per_motor and motors is not None:
            out['motors'] = [dict((getattr(m, 'sections', None) or {}).get(per_motor) or {}) for m in motors]
        return out


PROTOCOLS = {
    p.name: p
    for p in (
        Protocol('uk_binary', bus='UKBinaryBus', device='UKBinaryDevice'),
        Protocol('dynamixel', bus='DynamixelBus', device='DynamixelDevice'),
        Protocol('odrive', bus='ODriveBus', device='ODriveDevice'),
        Protocol('can_mit', bus='CanMitBus', device='CanMitDevice', section='can'),
    )
}
DEFAULT_PROTOCOL = 'uk_binary'


protocols.register(lambda: PROTOCOLS)  # the settings schema reads the table as it is now


def names() -> tuple:
    """The protocol names, in registry order (CLI ``--protocol`` choices)."""
    return tuple(PROTOCOLS)


def sections() -> tuple:
    """The option sections ``hardware.<section>`` of the protocols (their names unless a line says otherwise)."""
    return tuple(p.section_name for p in PROTOCOLS.values())


def get(name: str) -> Protocol:
    """The registry line of `name`; a ValueError naming the accepted ones otherwise."""
    try:
        return PROTOCOLS[name]
    except (KeyError, TypeError):
        raise ValueError(f'unknown protocol {name!r} (one of {", ".join(PROTOCOLS)})') from None


def make_bus(hw, *, timeout=None):
    """The bus for a :class:`~.calibration.HardwareConfig`, which is made from the resolved settings
    (``hardware.protocol``, ``port``, ``baud``, ...: CLI flags and ROS parameters are overrides there).

    The bus timeout (how long one transaction waits for its reply) defaults to half the host watchdog,
    within [5, 50] ms.
    """
    entry = get(hw.protocol)
    if timeout is None:
        timeout = max(0.005, min(0.05, hw.watchdog / 2))
    return entry.bus_class()(
        hw.port,
        int(hw.baud),
        hw.ids,
        hw.kt,
        timeout=timeout,
        options=entry.options(hw.options.get(entry.section_name), hw.motors),
    )


def make_emulator(protocol: str, plant, hw, **kw):
    """The device emulator of `protocol` for `plant` with calibration `hw` (started by the caller)."""
    entry = get(protocol)
    kw.setdefault('options', entry.options(hw.options.get(entry.section_name), hw.motors))
    return entry.device_class()(plant, hw, **kw)
