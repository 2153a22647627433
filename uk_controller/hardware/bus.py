"""The motor bus abstraction shared by all serial protocols.

A :class:`MotorBus` talks to ``p`` motors (actuator order) in motor-side SI
units: it reads all feedback (shaft angle rad, speed rad/s, torque N m), writes
all torque commands in one transaction, enables/disables torque and reports
faults. Protocol classes convert to their wire units (current, ticks, turns).
Calibration to the joint side lives in :mod:`.calibration`; watchdog, limits
and reconnect in :mod:`.safety`. The protocol classes live in ``protocols/<name>/bus.py``;
:func:`uk_controller.hardware.registry.make_bus` picks one by name.
"""

from __future__ import annotations

import errno
import os
import select
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    'MotorFeedback',
    'BusStats',
    'BusError',
    'BusTimeout',
    'PortError',
    'MotorBus',
    'open_serial',
    'describe_port_error',
]


@dataclass
class MotorFeedback:
    """One consistent snapshot of all motors (motor side)."""

    position: np.ndarray  # rad (shaft, multi-turn)
    velocity: np.ndarray  # rad/s
    torque: np.ndarray  # N m (from measured current; NaN if the protocol has none)
    fault: np.ndarray  # int per motor, 0 = ok (protocol specific bits)
    enabled: bool = False  # device reports torque enabled
    device_watchdog: bool = False  # device-side watchdog tripped
    stamp: float = 0.0  # host monotonic time of reception


class BusError(RuntimeError):
    """Communication failed (the port is still there)."""


#: how long set-up exchanges wait for an answer (MotorBus.patient), s
SETUP_TIMEOUT = 1.0


class BusTimeout(BusError):
    """No valid answer within the bus timeout."""


class PortError(BusError):
    """The port itself is unusable (missing, busy, no permission, vanished)."""


def describe_port_error(port: str, exc: BaseException) -> str:
    """Turn an OSError/SerialException from opening ``port`` into advice for people."""
    code = getattr(exc, 'errno', None)
    text = str(exc)
    if code is None and exc.__cause__ is not None:
        code = getattr(exc.__cause__, 'errno', None)
    if code is None:
        for name in ('ENOENT', 'EACCES', 'EPERM', 'EBUSY'):
            if f'[Errno {getattr(errno, name)}]' in text:
                code = getattr(errno, name)
    if code == errno.ENOENT or (code is None and not os.path.exists(port)):
        return (
            f'serial port {port} does not exist: is the adapter plugged in and powered? '
            f'Look at `ls /dev/ttyUSB* /dev/ttyACM*` and give the port: `port:=/dev/ttyUSB0` to '
            f'`ros2 launch uk_controller hardware.launch.py`, `-p hardware.port:=...` to `ros2 run '
            f'uk_controller serial_bridge_node`, `--port ...` to `uk-controller run`. No hardware: '
            f'`uk-controller emulate ROBOT` prints the port of an emulated one.'
        )
    if code in (errno.EACCES, errno.EPERM):
        return (
            f'no permission to open serial port {port}: add your user to the group that '
            f'owns it (usually `sudo usermod -aG dialout $USER`, then log in again).'
        )
    if code == errno.EBUSY or 'lock' in text.lower() or 'busy' in text.lower():
        return (
            f'serial port {port} is busy: another program holds it '
            f'(a serial monitor, ModemManager, another bridge). Find it with `fuser {port}`.'
        )
    return f'cannot open serial port {port}: {text}'


def open_serial(port: str, baud: int, timeout: float = 0.0):
    """Open ``port`` raw 8N1, exclusively; raise :class:`PortError` with advice."""
    import termios

    import serial  # pyserial; imported here so the package imports without it

    try:
        return serial.Serial(
            port=port,
            baudrate=baud,
            bytesize=8,
            parity='N',
            stopbits=1,
            timeout=timeout,
            write_timeout=1.0,
            exclusive=True,
        )
    except (serial.SerialException, OSError, ValueError, termios.error) as exc:
        raise PortError(describe_port_error(port, exc)) from exc


@dataclass
class BusStats:
    """Counters every bus keeps (read by diagnostics and the fault tests)."""

    transactions: int = 0
    ok: int = 0
    crc_errors: int = 0  # bad frames received (CRC, framing, checksum)
    timeouts: int = 0
    seq_errors: int = 0  # stale, duplicated or out-of-order answers discarded
    device_errors: int = 0  # NAK / error status from the device
    io_errors: int = 0  # port vanished / write failed
    rtt: deque = field(default_factory=lambda: deque(maxlen=2000))

    def percentile(self, q: float) -> float:
        if not self.rtt:
            return float('nan')
        return float(np.percentile(np.fromiter(self.rtt, float), q))

    def as_dict(self) -> dict:
        return {
            'transactions': self.transactions,
            'ok': self.ok,
            'crc_errors': self.crc_errors,
            'timeouts': self.timeouts,
            'seq_errors': self.seq_errors,
            'device_errors': self.device_errors,
            'io_errors': self.io_errors,
            'rtt_p50': self.percentile(50),
            'rtt_p99': self.percentile(99),
        }


class MotorBus:
    """Base class. Subclasses implement ``_open``, ``_close``, ``enable``,
    ``read``, ``write`` (and may override ``transact`` to do both in one round
    trip). All arrays are length ``p`` in actuator order."""

    protocol = ''

    def __init__(
        self, port: str, baud: int, ids, torque_constant, *, timeout: float = 0.02, options: dict | None = None
    ):
        self.port = port
        self.baud = int(baud)
        self.ids = [int(i) for i in ids]
        self.p = len(self.ids)
        self.kt = np.asarray(torque_constant, float).reshape(self.p)
        self.timeout = float(timeout)
        self.options = dict(options or {})
        self.stats = BusStats()
        self.ser = None

    # lifecycle
    @property
    def is_open(self) -> bool:
        return self.ser is not None

    def open(self):
        if self.ser is None:
            self._open()
        return self

    def close(self):
        if self.ser is not None:
            try:
                self._close()
            finally:
                self.ser = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def _open(self):
        self.ser = open_serial(self.port, self.baud)

    def _close(self):
        self.ser.close()

    @contextmanager
    def patient(self, seconds: float | None = None):
        """Set-up exchanges (connect: limits, torque off, watchdog, faults; the pre-flight reads) wait up to
        `seconds` (default :data:`SETUP_TIMEOUT`) for an answer, the control cycle keeps its short timeout.
        A first answer on a freshly opened port can be late for reasons that say nothing about the bus: an
        FTDI adapter's 16 ms latency timer, a device still booting, a loaded host (CI saw a 25 ms timeout
        fail a run before its first cycle). Within the block ``timeout`` is the longer one."""
        cycle = self.timeout
        self._set_timeout(max(cycle, SETUP_TIMEOUT if seconds is None else float(seconds)))
        try:
            yield self
        finally:
            self._set_timeout(cycle)

    def _set_timeout(self, seconds: float) -> None:
        """Change how long an exchange waits for its answer (protocols whose SDK keeps its own copy override)."""
        self.timeout = seconds

    # operations
    def enable(self, on: bool) -> None:
        raise NotImplementedError

    def configure(self, watchdog: float, torque_limit) -> None:
        """Optional device-side watchdog and torque limit (motor side, N m)."""

    def read(self) -> MotorFeedback:
        raise NotImplementedError

    def write(self, torque) -> None:
        raise NotImplementedError

    def transact(self, torque) -> MotorFeedback:
        """Write all torques, then read all feedback (one control cycle)."""
        self.write(torque)
        return self.read()

    def clear_faults(self) -> None:
        """Clear latched device faults (if the protocol has the notion)."""

    def describe_faults(self, fault) -> str:
        """The motor faults of a feedback's ``fault`` array for people (protocols name their codes)."""
        return f'motor fault {np.asarray(fault).tolist()}'

    def timing_facts(self) -> dict:
        """What the cycle budget needs from the devices, read at connect (the protocol's codec
        ``cycle_cost`` reads it; e.g. ``{'return_delay': [s per motor]}``); {} if nothing."""
        return {}

    def motor_torque_limits(self):
        """The motor-side torque limit (N m) each device enforces, read at connect (current limit x
        torque constant), or None where the protocol cannot read one (actuator order)."""
        return None

    def torque_limit_sources(self) -> list:
        """Per motor, how :meth:`motor_torque_limits` came about (for messages), '' if unknown."""
        return [''] * self.p

    # helpers for subclasses
    def _write_bytes(self, data: bytes):
        import termios

        import serial

        try:
            n = self.ser.write(data)
        except (serial.SerialException, OSError, termios.error) as exc:
            self.stats.io_errors += 1
            raise PortError(f'serial port {self.port} failed while writing: {exc}') from exc
        if n != len(data):
            self.stats.io_errors += 1
            raise BusError(f'short write on {self.port}')

    def _read_bytes(self, max_wait: float) -> bytes:
        """Whatever is available, waiting up to ``max_wait`` s for the first byte."""
        try:
            fd = self.ser.fileno()
            ready, _, _ = select.select([fd], [], [], max(max_wait, 0.0))
            if not ready:
                return b''
            data = os.read(fd, 4096)
        except (OSError, ValueError, TypeError) as exc:
            self.stats.io_errors += 1
            raise PortError(f'serial port {self.port} vanished or failed while reading: {exc}') from exc
        if not data:  # readable but empty: the device went away (hang-up)
            self.stats.io_errors += 1
            raise PortError(f'serial port {self.port} vanished (hang-up)')
        return data

    def _bytes_waiting(self) -> int:
        """Bytes already received; a vanished port (EIO from the ioctl) is a :class:`PortError`."""
        try:
            return self.ser.in_waiting
        except (OSError, ValueError, TypeError) as exc:
            self.stats.io_errors += 1
            raise PortError(f'serial port {self.port} vanished or failed: {exc}') from exc

    def _flush_input(self):
        try:
            self.ser.reset_input_buffer()
        except Exception as exc:  # noqa: BLE001 - pyserial raises several types here
            self.stats.io_errors += 1
            raise PortError(f'serial port {self.port} failed: {exc}') from exc
