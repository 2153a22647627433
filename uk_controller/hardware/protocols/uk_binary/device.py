"""Device side of ``uk_binary`` (the behaviour docs/serial_protocol.md requires of
firmware), as an emulator over a pty."""

from __future__ import annotations

import numpy as np

from ...emulator import DeviceEmulator
from . import codec as ukb


class UKBinaryDevice(DeviceEmulator):
    protocol = 'uk_binary'

    def __init__(self, plant, hw, **kw):
        kw.setdefault('watchdog', 0.1)  # firmware default: 100 ms
        super().__init__(plant, hw, **kw)
        self.decoder = ukb.StreamDecoder()
        self.error = ukb.E_NONE
        self.rx_errors = 0
        self.motor_fault = np.zeros(self.p, int)
        self.limited = False
        self.t0 = self.clock()

    def reset_protocol(self):
        self.decoder = ukb.StreamDecoder()

    def _feedback(self, seq):
        theta, omega = self.motor_state()
        cur = (self.tau_m if self.enabled else np.zeros(self.p)) / self.hw.kt
        state = (
            (ukb.ST_ENABLED if self.enabled else 0)
            | (ukb.ST_WATCHDOG if self.watchdog_tripped else 0)
            | (ukb.ST_FAULT if self.motor_fault.any() else 0)
            | (ukb.ST_LIMITED if self.limited else 0)
        )
        payload = ukb.feedback_payload(
            state, self.error, self.rx_errors, int((self.clock() - self.t0) * 1e6), theta, omega, cur, self.motor_fault
        )
        self.error = ukb.E_NONE
        return ukb.encode_frame(ukb.FEEDBACK, seq, self.p, payload)

    def handle(self, data: bytes) -> list:
        bad0 = self.decoder.bad_frames
        frames = self.decoder.feed(data)
        if self.decoder.bad_frames != bad0:
            self.rx_errors += self.decoder.bad_frames - bad0
            self.counters['rx_bad'] += self.decoder.bad_frames - bad0
            self.error = ukb.E_CRC
        out = []
        for ftype, seq, n, payload in frames:
            self.counters['rx_frames'] += 1
            if n != self.p:
                out.append(ukb.encode_frame(ukb.NAK, seq, self.p, bytes([ukb.E_COUNT])))
                continue
            try:
                if ftype == ukb.COMMAND:
                    cur = ukb.parse_command(payload, n)
                    self.feed_watchdog()
                    if not np.all(np.isfinite(cur)):
                        self.set_motor_torque(np.zeros(self.p))
                        self.error = ukb.E_NOT_FINITE
                    elif not self.enabled:
                        self.error = ukb.E_NOT_ENABLED
                    else:
                        self.limited = self.set_motor_torque(cur * self.hw.kt)
                    self.step_plant()
                elif ftype == ukb.STATUS:
                    pass
                elif ftype == ukb.ENABLE:
                    if len(payload) != 1:
                        raise ukb.FrameError('length', 'ENABLE payload')
                    if payload[0] and self.motor_fault.any():
                        self.error = ukb.E_MOTOR_FAULT
                    else:
                        self.enabled = bool(payload[0])
                        self.set_motor_torque(np.zeros(self.p))
                        self.feed_watchdog()
                elif ftype == ukb.CONFIG:
                    wd, lim = ukb.parse_config(payload, n)
                    if np.any(~(lim > 0)):
                        self.error = ukb.E_RANGE
                    else:
                        self.watchdog, self.current_limit = wd, lim
                elif ftype == ukb.CLEAR:
                    self.motor_fault[:] = 0
                    self.watchdog_tripped = False
                else:
                    out.append(ukb.encode_frame(ukb.NAK, seq, self.p, bytes([ukb.E_TYPE])))
                    continue
            except ukb.FrameError:
                out.append(ukb.encode_frame(ukb.NAK, seq, self.p, bytes([ukb.E_LENGTH])))
                continue
            out.append(self._feedback(seq))
        return out
