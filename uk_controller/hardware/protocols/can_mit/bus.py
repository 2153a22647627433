"""MIT-mode CAN motors through python-can (slcan adapters, SocketCAN, gs_usb, PCAN, ...), effort control.

One cycle sends one 8-byte MIT command per motor (``kp = kd = 0``, ``tau`` = the motor torque, clipped
to the configured torque limit and to the model's ``t_max``) and collects one state reply per motor,
matched to its motor by the id in the reply's first byte (codec docstring). Torque on / off are the
enter / exit motor mode frames; a read without a new command sends the exit frame while the motors are
off (answered, harmless) and repeats the last command while they are on (the motor applies it anyway).

Counting: a reply for a motor that already answered this cycle, or one left over from an earlier cycle,
is a ``seq_error``; a frame python-can cannot parse or of the wrong length is a ``crc_error``; missing
replies after the bus timeout are a ``timeout``. A Damiao error code and a position or velocity at the
end of its code range (the reply's clamp) are motor faults (``fault`` of the feedback;
:meth:`CanMitBus.describe_faults` names them). Damiao motors get their motor-side timeout register
(TIMEOUT) set to ``device_watchdog_factor`` x the host watchdog by :meth:`configure`; the mini-cheetah
and CubeMars firmware have no such register over CAN.

The channel is ``hardware.port``: the adapter's serial device for ``slcan`` (``/dev/ttyACM0``; the
serial rate is ``hardware.baud``), the network interface for ``socketcan`` (``can0``).
"""

from __future__ import annotations

import math
import select
import time

import numpy as np

from ...bus import BusError, BusTimeout, MotorBus, MotorFeedback, PortError, describe_port_error
from . import codec as mit


def _python_can():
    try:
        import can
    except ImportError as exc:  # pragma: no cover
        raise PortError('protocol can_mit needs the `python-can` package (pip install python-can)') from exc
    return can


class CanMitBus(MotorBus):
    protocol = 'can_mit'
    RESYNC = 2  # complete exchanges in a row before replies count again after a lost or stale one

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        o = self.options
        self.interface = str(o.get('interface', mit.OPTIONS['interface']))
        self.bitrate = int(o.get('bitrate', mit.OPTIONS['bitrate']))
        self.master_id = int(o.get('master_id', mit.OPTIONS['master_id']))
        self.open_delay = float(o.get('open_delay', mit.OPTIONS['open_delay']))
        self.device_watchdog_factor = float(o.get('device_watchdog_factor', mit.OPTIONS['device_watchdog_factor']))
        sections = o.get('motors') or [{}] * self.p
        self.ranges = [mit.motor_ranges(s) for s in sections]
        formats = sorted({r.reply for r in self.ranges})
        if len(formats) > 1:
            raise ValueError(f'can_mit: one reply format per bus (hardware.<motor>.mit.reply), got {formats}')
        self.reply_format = formats[0] if formats else 'cubemars'
        self.reply_key = {}
        for k, (i, r) in enumerate(zip(self.ids, self.ranges)):
            key = mit.reply_motor(bytes([i & 0xFF]), r.reply)
            if key in self.reply_key:
                raise ValueError(
                    f'can_mit: motors with ids {self.ids[self.reply_key[key]]} and {i} cannot be told '
                    f'apart in replies (Damiao replies carry the low 4 bits of the id)'
                )
            if i > 0x7FF or i == self.master_id:
                raise ValueError(
                    f'can_mit: motor id {i} must be a standard CAN id other than the master id {self.master_id}'
                )
            self.reply_key[key] = k
        self.t_max = np.array([r.t_max for r in self.ranges])
        self.limit = self.t_max.copy()  # configure() lowers it to the motor torque limit
        self.enabled = False
        self.last_frames = None  # the last command frames (repeated by read() while on)
        self.fileno = None
        self._msg = None
        self.unsynced = 0
        self.fresh = True

    # ---- port ----------------------------------------------------------------------------
    def _open(self):
        can = _python_can()
        self._msg = can.Message
        kw = {'bitrate': self.bitrate}
        if self.interface == 'slcan':
            kw.update(tty_baudrate=self.baud, sleep_after_open=self.open_delay)
        try:
            self.ser = can.Bus(interface=self.interface, channel=self.port, **kw)
        except Exception as exc:  # noqa: BLE001 - python-can raises CanError, OSError, ValueError per interface
            if self.interface == 'slcan':
                raise PortError(describe_port_error(self.port, exc)) from exc
            raise PortError(f'cannot open CAN interface {self.interface} channel {self.port}: {exc}') from exc
        try:
            self.fileno = self.ser.fileno()
        except Exception:  # noqa: BLE001 - NotImplementedError on interfaces without a file descriptor
            self.fileno = None
        self.enabled = False
        self._drain()

    def _close(self):
        try:
            self.ser.shutdown()
        except Exception:  # noqa: BLE001 - the adapter may be gone already
            pass

    def _send(self, arbitration_id: int, data: bytes):
        try:
            # (the write timeout of the other protocols' ports, open_serial: a write that blocks for a
            # second means the adapter is gone)
            self.ser.send(self._msg(arbitration_id=arbitration_id, data=data, is_extended_id=False), timeout=1.0)
        except Exception as exc:  # noqa: BLE001 - CanOperationError wrapping the serial/socket error
            self.stats.io_errors += 1
            raise PortError(f'CAN interface {self.interface} on {self.port} failed while sending: {exc}') from exc

    def _receive(self, wait: float):
        """The next frame within `wait` s (None if none); a frame python-can cannot parse is counted."""
        try:
            if self.fileno is not None:
                ready, _, _ = select.select([self.fileno], [], [], max(wait, 0.0))
                if not ready:
                    return None
                return self.ser.recv(timeout=0.0)
            return self.ser.recv(timeout=max(wait, 0.0))
        except Exception as exc:  # noqa: BLE001 - python-can wraps what went wrong in CanOperationError
            cause = exc.__cause__ or exc.__context__
            if isinstance(exc, OSError) or isinstance(cause, OSError):  # (pyserial's SerialException too)
                self.stats.io_errors += 1
                raise PortError(f'CAN interface {self.interface} on {self.port} vanished or failed: {exc}') from exc
            self.stats.crc_errors += 1  # a corrupted slcan line python-can could not parse
            # python-can 4.6's slcan keeps a line that fails to decode in its buffer, so every later
            # line would fail too: its flush() empties that buffer (and the port's input; this cycle's
            # other replies are lost, the next cycle is clean)
            flush = getattr(self.ser, 'flush', None)
            if callable(flush):
                try:
                    flush()
                except Exception:  # noqa: BLE001
                    pass
            return None

    def _drain(self) -> int:
        """Frames left from an earlier cycle (late or duplicated replies): read and count them."""
        stale = 0
        for _ in range(1000):
            if self.fileno is None:
                msg = self._receive(0.0)
                if msg is None:
                    return stale
            else:
                try:
                    ready, _, _ = select.select([self.fileno], [], [], 0.0)
                except (OSError, ValueError) as exc:
                    self.stats.io_errors += 1
                    raise PortError(f'CAN interface on {self.port} vanished: {exc}') from exc
                if not ready:
                    return stale
                msg = self._receive(0.0)
            if msg is not None and msg.arbitration_id == self.master_id:
                self.stats.seq_errors += 1
                stale += 1
        return stale

    # ---- one exchange ------------------------------------------------------------------------------
    def _exchange(self, frames) -> MotorFeedback:
        """Send (id, data) frames, one per motor, and collect one reply per motor.

        MIT replies carry no sequence number: a reply later than the bus timeout would pass for the
        answer to a later request. So after a missing reply or a stale one the bus is *unsynchronised*:
        its feedback counts again only after :data:`RESYNC` complete exchanges in a row without stale
        frames (``self.fresh`` says whether this one counts; :meth:`read` / :meth:`transact` raise a
        BusError otherwise). A device that answers late all the time never completes that, and the
        host watchdog trips.
        """
        if self._drain():
            self.unsynced = self.RESYNC
        for arbitration_id, data in frames:
            self._send(arbitration_id, data)
        pos, vel, tau = np.empty(self.p), np.empty(self.p), np.empty(self.p)
        fault = np.zeros(self.p, int)
        enabled = self.enabled
        pending = set(range(self.p))
        deadline = time.monotonic() + self.timeout
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stats.timeouts += 1
                self.unsynced = self.RESYNC
                raise BusTimeout(
                    f'no reply from motor ids {[self.ids[k] for k in sorted(pending)]} '
                    f'within {self.timeout * 1e3:.0f} ms'
                )
            msg = self._receive(left)
            if msg is None or msg.arbitration_id != self.master_id or msg.is_extended_id or msg.is_remote_frame:
                continue  # another node's traffic
            data = bytes(msg.data)
            k = self.reply_key.get(mit.reply_motor(data, self.reply_format)) if data else None
            if k is None:
                self.stats.seq_errors += 1  # a reply naming no motor of ours
                continue
            if k not in pending:
                self.stats.seq_errors += 1  # a second reply of this motor (duplicate)
                continue
            try:
                r = mit.unpack_reply(data, self.ranges[k])
            except ValueError:
                self.stats.crc_errors += 1
                continue
            pos[k], vel[k], tau[k], fault[k] = r.position, r.velocity, r.torque, r.fault
            if r.enabled is not None and self.enabled and not r.enabled:
                enabled = False  # a Damiao motor that disabled itself
            pending.discard(k)
        self.fresh = self.unsynced == 0
        self.unsynced = max(0, self.unsynced - 1)
        return MotorFeedback(
            position=pos, velocity=vel, torque=tau, fault=fault, enabled=enabled, stamp=time.monotonic()
        )

    def _commands(self, torque):
        tau = np.nan_to_num(np.asarray(torque, float), nan=0.0, posinf=0.0, neginf=0.0)
        return [
            (i, mit.pack_command(0.0, 0.0, 0.0, 0.0, 0.0, r, tau_code=mit.torque_code(t, -lim, lim, r)))
            for i, r, t, lim in zip(self.ids, self.ranges, tau, self.limit)
        ]

    # ---- MotorBus ------------------------------------------------------------------------------
    def enable(self, on: bool) -> None:
        self.stats.transactions += 1
        frame = mit.ENTER_MOTOR_MODE if on else mit.EXIT_MOTOR_MODE
        if not on:
            self.enabled = False
            self.last_frames = None
        fb = self._exchange([(i, frame) for i in self.ids])
        if on:
            self.enabled = True
            self.last_frames = self._commands(np.zeros(self.p))
        self.stats.ok += 1
        if on and np.any(fb.fault):
            self.enable(False)  # not armed with a motor in fault: torque off again
            raise BusError(f'enable: {self.describe_faults(fb.fault)}')

    def configure(self, watchdog: float, torque_limit) -> None:
        lim = np.asarray(torque_limit, float).reshape(self.p)
        self.limit = np.where(np.isfinite(lim) & (lim > 0), np.minimum(lim, self.t_max), self.t_max)
        damiao = [i for i, r in zip(self.ids, self.ranges) if r.reply == 'damiao']
        if watchdog > 0 and damiao:
            counts = max(1, int(math.ceil(watchdog * self.device_watchdog_factor / mit.DAMIAO_TIMEOUT_UNIT)))
            self._drain()
            for i in damiao:
                self._send(mit.DAMIAO_REGISTER_ID, mit.damiao_register_write(i, mit.DAMIAO_RID_TIMEOUT, counts))
            self._echoes(len(damiao))

    def _echoes(self, n: int):
        """Collect the `n` echoes of register writes (they carry no state); missing ones are a timeout."""
        deadline = time.monotonic() + self.timeout
        while n > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stats.timeouts += 1
                raise BusTimeout(f'{n} Damiao register writes (TIMEOUT) were not acknowledged')
            msg = self._receive(left)
            if (
                msg is not None
                and msg.arbitration_id == self.master_id
                and len(msg.data) == 8
                and msg.data[2] == mit.DAMIAO_WRITE
            ):
                n -= 1

    def describe_faults(self, fault) -> str:
        parts = []
        for k, code in enumerate(np.asarray(fault, int)):
            if code:
                parts.append(f'motor id {self.ids[k]}: {", ".join(mit.fault_names(code))} (code 0x{int(code):X})')
        return 'motor fault: ' + '; '.join(parts) if parts else ''

    def read(self) -> MotorFeedback:
        self.stats.transactions += 1
        t0 = time.monotonic()
        if self.enabled and self.last_frames is not None:
            fb = self._exchange(self.last_frames)
        else:
            fb = self._exchange([(i, mit.EXIT_MOTOR_MODE) for i in self.ids])
        return self._counted(fb, t0)

    def _counted(self, fb, t0) -> MotorFeedback:
        self.stats.rtt.append(time.monotonic() - t0)
        if not self.fresh:
            raise BusError('replies not trusted yet: resynchronising after a lost or late reply')
        self.stats.ok += 1
        return fb

    def write(self, torque) -> None:
        self.transact(torque)

    def transact(self, torque) -> MotorFeedback:
        self.stats.transactions += 1
        t0 = time.monotonic()
        frames = self._commands(torque)
        if self.enabled:
            self.last_frames = frames
        return self._counted(self._exchange(frames), t0)
