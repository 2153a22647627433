"""Emulated ODrive (ASCII protocol, torque control) with ``p`` axes on one pty.

A real ODrive v3 has axes 0 and 1; the emulator accepts any axis number listed
as a motor id so 2..6 motor benchmarks can run on one port. Behaviour follows
the firmware: torque commands act only in CLOSED_LOOP_CONTROL with
control_mode TORQUE_CONTROL; an enabled axis watchdog that is not fed drops the
axis to IDLE with AXIS_ERROR_WATCHDOG_TIMER_EXPIRED until ``sc``; lines with a
wrong checksum are ignored; a reply carries a checksum when the request did.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ...emulator import DeviceEmulator
from . import codec as oa

_PROP = re.compile(r'^axis(\d+)\.(.+)$')


class ODriveDevice(DeviceEmulator):
    protocol = 'odrive'

    def __init__(self, plant, hw, **kw):
        super().__init__(plant, hw, **kw)
        self.buf = bytearray()
        self.axis = {i: k for k, i in enumerate(hw.ids)}
        self.state = np.full(self.p, oa.AXIS_STATE_IDLE)
        self.mode = np.full(self.p, 3)  # position control at power-up
        self.error = np.zeros(self.p, int)
        self.wd_enable = np.zeros(self.p, bool)
        self.wd_timeout = np.zeros(self.p)
        self.wd_fed = np.full(self.p, self.clock())
        self.torque_lim = np.full(self.p, math.inf)
        self.setpoint = np.zeros(self.p)
        self.commanded = set()

    def reset_protocol(self):
        self.buf.clear()
        self.state[:] = oa.AXIS_STATE_IDLE
        self.setpoint[:] = 0

    def _active(self):
        return (self.state == oa.AXIS_STATE_CLOSED_LOOP) & (self.mode == oa.CONTROL_MODE_TORQUE)

    def _apply(self):
        act = self._active()
        self.enabled = bool(act.any())
        self.current_limit = np.where(np.isfinite(self.torque_lim), self.torque_lim / self.hw.kt, np.inf)
        self.set_motor_torque(np.where(act, self.setpoint, 0.0))

    def _tick(self):
        super()._tick()
        now = self.clock()
        trip = self.wd_enable & (self.state == oa.AXIS_STATE_CLOSED_LOOP) & (now - self.wd_fed > self.wd_timeout)
        if trip.any():
            self.state[trip] = oa.AXIS_STATE_IDLE
            self.error[trip] |= oa.AXIS_ERROR_WATCHDOG_TIMER_EXPIRED
            self.counters['watchdog_trips'] += int(trip.sum())
            self._apply()

    def handle(self, data: bytes) -> list:
        self.buf += data
        out = []
        while True:
            k = self.buf.find(b'\n')
            if k < 0:
                if len(self.buf) > 256:
                    self.buf.clear()
                return out
            line = bytes(self.buf[:k])
            del self.buf[: k + 1]
            try:
                text, cs = oa.parse_line(line)
            except oa.ChecksumError:
                self.counters['rx_bad'] += 1
                continue
            if not text:
                continue
            self.counters['rx_frames'] += 1
            reply = self._execute(text.split())
            if reply is not None:
                out.append(oa.make_line(reply, cs))

    def _k(self, axis):
        k = self.axis.get(int(axis))
        if k is None:
            raise ValueError('invalid motor')
        return k

    def _execute(self, tok):
        try:
            cmd = tok[0]
            if cmd == 'c':
                k = self._k(tok[1])
                tau = float(tok[2])
                self.wd_fed[k] = self.clock()
                self.feed_watchdog()
                self.setpoint[k] = tau if math.isfinite(tau) else 0.0
                self._apply()
                self.commanded.add(k)
                if len(self.commanded) == self.p:  # a full command set: one lockstep period
                    self.commanded.clear()
                    self.step_plant()
                return None
            if cmd == 'f':
                k = self._k(tok[1])
                theta, omega = self.motor_state()
                return f'{theta[k] / (2 * math.pi):.9g} {omega[k] / (2 * math.pi):.9g}'
            if cmd == 'u':
                self.wd_fed[self._k(tok[1])] = self.clock()
                return None
            if cmd == 'sc':
                self.error[:] = 0
                return None
            if cmd in ('r', 'w'):
                m = _PROP.match(tok[1])
                if not m:
                    return 'invalid property'
                k, prop = self._k(m.group(1)), m.group(2)
                table = {
                    'current_state': 'state',
                    'requested_state': 'state',
                    'controller.config.control_mode': 'mode',
                    'error': 'error',
                    'config.enable_watchdog': 'wd_enable',
                    'config.watchdog_timeout': 'wd_timeout',
                    'motor.config.torque_lim': 'torque_lim',
                    'controller.input_torque': 'setpoint',
                }
                if prop not in table:
                    return 'invalid property'
                arr = getattr(self, table[prop])
                if cmd == 'r':
                    v = arr[k]
                    return f'{v:.9g}' if arr.dtype.kind == 'f' else str(int(v))
                value = float(tok[2])
                if prop == 'requested_state':
                    if int(value) == oa.AXIS_STATE_CLOSED_LOOP and self.error[k]:
                        return None  # refuses to arm with a latched error
                    self.wd_fed[k] = self.clock()
                    self.setpoint[k] = 0.0
                arr[k] = value
                self._apply()
                return None
            return 'unknown command'
        except (IndexError, ValueError):
            return 'invalid command format'
