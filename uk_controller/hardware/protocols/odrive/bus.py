"""ODrive over its ASCII protocol, torque control.

One cycle writes ``c <axis> <torque>`` for every axis together with ``f``
for the first axis, then ``f`` for each further axis, one line answer each.
The ASCII protocol has no sequence numbers, so the host flushes stale input
before every request and treats any extra line that arrives with an answer as
a duplicate (counted in ``seq_errors``, the answer discarded). All lines carry
checksums; answers with a wrong checksum count as ``crc_errors``.
Position/velocity are reported in turns (converted to rad); the ASCII feedback
has no torque, so ``torque`` in the feedback is the last commanded torque.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...bus import BusError, BusTimeout, MotorBus, MotorFeedback
from . import codec as oa

TWO_PI = 2.0 * math.pi


class ODriveBus(MotorBus):
    protocol = 'odrive'

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.buf = bytearray()
        self.last_torque = np.zeros(self.p)
        self.enabled = False
        self.device_watchdog_factor = float(
            self.options.get('device_watchdog_factor', oa.OPTIONS['device_watchdog_factor'])
        )

    def _open(self):
        super()._open()
        self.buf.clear()
        self._flush_input()
        for a in self.ids:
            self._send(f'w axis{a}.requested_state {oa.AXIS_STATE_IDLE}')
            self._send(f'w axis{a}.controller.config.control_mode {oa.CONTROL_MODE_TORQUE}')
        for a in self.ids:
            mode = self._query(f'r axis{a}.controller.config.control_mode')
            if self._integer_of(mode, 'control mode') != oa.CONTROL_MODE_TORQUE:
                raise BusError(f'axis {a} refused torque control mode')
        self.device_torque_lim = np.array(
            [self._float_of(self._query(f'r axis{a}.motor.config.torque_lim'), 'torque limit') for a in self.ids]
        )

    def _float_of(self, text, what):
        try:
            return float(text)
        except ValueError:
            self.stats.seq_errors += 1
            raise BusError(f'unexpected answer {text!r} to a {what} request') from None

    def motor_torque_limits(self):
        """``axis<n>.motor.config.torque_lim`` of every axis (N m, inf: none), read at connect."""
        return getattr(self, 'device_torque_lim', None)

    def torque_limit_sources(self) -> list:
        return [f'axis{a}.motor.config.torque_lim' for a in self.ids]

    def _send(self, *cmds):
        self._write_bytes(b''.join(oa.make_line(c) for c in cmds))

    def _readline(self, deadline) -> bytes:
        while True:
            k = self.buf.find(b'\n')
            if k >= 0:
                line = bytes(self.buf[:k])
                del self.buf[: k + 1]
                return line
            left = deadline - time.monotonic()
            if left <= 0:
                self.stats.timeouts += 1
                raise BusTimeout('no answer from the ODrive')
            self.buf += self._read_bytes(left)

    def _query(self, *cmds) -> str:
        """Send lines (the last one expects an answer) and return the answer text."""
        if self.buf or self._bytes_waiting():
            self.stats.seq_errors += 1  # stale lines from an earlier answer
            self.buf.clear()
            self._flush_input()
        self._send(*cmds)
        deadline = time.monotonic() + self.timeout
        line = self._readline(deadline)
        try:
            text, _ = oa.parse_line(line)
        except oa.ChecksumError:
            self.stats.crc_errors += 1
            raise BusError('corrupt answer (checksum)') from None
        if b'\n' in self.buf or self._bytes_waiting():
            # answer arrived twice (or garbage with it): cannot tell which is ours
            time.sleep(0)
            self.stats.seq_errors += 1
            self.buf.clear()
            self._flush_input()
        return text

    def _integer_of(self, text, what):
        """An integer answer (mode, state, error); anything else is a desynchronised line
        (e.g. a late feedback answer after a drop): counted and raised as a BusError."""
        try:
            return int(float(text))
        except ValueError:
            self.stats.seq_errors += 1
            raise BusError(f'unexpected answer {text!r} to a {what} request') from None

    def _feedback_of(self, text):
        parts = text.split()
        try:
            pos, vel = float(parts[0]), float(parts[1])
            if len(parts) != 2 or not (math.isfinite(pos) and math.isfinite(vel)):
                raise ValueError
        except (IndexError, ValueError):
            self.stats.crc_errors += 1
            raise BusError(f'malformed feedback {text!r}') from None
        return pos * TWO_PI, vel * TWO_PI

    def configure(self, watchdog: float, torque_limit) -> None:
        lim = np.asarray(torque_limit, float)
        cmds = []
        for k, a in enumerate(self.ids):
            if math.isfinite(lim[k]):
                cmds.append(f'w axis{a}.motor.config.torque_lim {lim[k]:.6g}')
            if watchdog > 0:
                cmds.append(f'w axis{a}.config.watchdog_timeout {watchdog * self.device_watchdog_factor:.6g}')
                cmds.append(f'w axis{a}.config.enable_watchdog 1')
        if cmds:
            self._send(*cmds)

    def clear_faults(self) -> None:
        self._send('sc')

    def read_faults(self) -> np.ndarray:
        return np.array([self._integer_of(self._query(f'r axis{a}.error'), 'error') for a in self.ids], int)

    def enable(self, on: bool) -> None:
        self.stats.transactions += 1
        target = oa.AXIS_STATE_CLOSED_LOOP if on else oa.AXIS_STATE_IDLE
        cmds = (
            (['sc'] if on else [])
            + [f'w axis{a}.controller.input_torque 0' for a in self.ids]
            + [f'w axis{a}.requested_state {target}' for a in self.ids]
        )
        self._send(*cmds)
        for a in self.ids:
            state = self._integer_of(self._query(f'r axis{a}.current_state'), 'state')
            if state != target:
                raise BusError(f'axis {a} is in state {state}, not {target}')
        self.enabled = on
        self.stats.ok += 1

    def _read_all(self, first_cmds=()):
        pos, vel = np.empty(self.p), np.empty(self.p)
        for k, a in enumerate(self.ids):
            cmds = (list(first_cmds) if k == 0 else []) + [f'f {a}']
            pos[k], vel[k] = self._feedback_of(self._query(*cmds))
        return MotorFeedback(
            position=pos,
            velocity=vel,
            torque=self.last_torque.copy(),
            fault=np.zeros(self.p, int),
            enabled=self.enabled,
            stamp=time.monotonic(),
        )

    def read(self) -> MotorFeedback:
        self.stats.transactions += 1
        t0 = time.monotonic()
        fb = self._read_all()
        self.stats.rtt.append(time.monotonic() - t0)
        self.stats.ok += 1
        return fb

    def write(self, torque) -> None:
        tau = np.nan_to_num(np.asarray(torque, float))
        self._send(*[f'c {a} {t:.7g}' for a, t in zip(self.ids, tau)])
        self.last_torque = tau

    def transact(self, torque) -> MotorFeedback:
        self.stats.transactions += 1
        t0 = time.monotonic()
        tau = np.nan_to_num(np.asarray(torque, float))
        self.last_torque = tau
        fb = self._read_all([f'c {a} {t:.7g}' for a, t in zip(self.ids, tau)])
        self.stats.rtt.append(time.monotonic() - t0)
        self.stats.ok += 1
        return fb
