"""Host side of the ``uk_binary`` protocol (docs/serial_protocol.md).

Every request gets exactly one answer echoing its sequence number; a cycle is
one COMMAND frame (all currents) answered by one FEEDBACK frame (all states).
Answers with another sequence number (late, duplicated) are discarded and
counted; corrupted frames are counted and skipped; no valid answer within the
timeout raises :class:`~uk_controller.hardware.bus.BusTimeout`.
"""

from __future__ import annotations

import time

import numpy as np

from ...bus import BusError, BusTimeout, MotorBus, MotorFeedback
from . import codec as ukb


class UKBinaryBus(MotorBus):
    protocol = 'uk_binary'

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.decoder = ukb.StreamDecoder()
        self._seq = 0
        self.last = None  # last decoded ukb.Feedback

    def _open(self):
        super()._open()
        self.decoder = ukb.StreamDecoder()
        self._flush_input()

    def _request(self, ftype: int, payload: bytes = b'') -> ukb.Feedback:
        self._seq = (self._seq + 1) & 0xFF
        seq = self._seq
        st = self.stats
        st.transactions += 1
        bad0 = self.decoder.bad_frames
        t0 = time.monotonic()
        self._write_bytes(ukb.encode_frame(ftype, seq, self.p, payload))
        deadline = t0 + self.timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    st.timeouts += 1
                    raise BusTimeout(f'no answer to frame seq {seq} within {self.timeout * 1e3:.1f} ms')
                frames = self.decoder.feed(self._read_bytes(left))
                for i, (ftype_r, seq_r, n_r, payload_r) in enumerate(frames):
                    if seq_r != seq:
                        st.seq_errors += 1
                        continue
                    st.seq_errors += len(frames) - i - 1  # duplicates arriving with the answer
                    if ftype_r == ukb.NAK:
                        st.device_errors += 1
                        code = payload_r[0] if payload_r else -1
                        raise BusError(f'device rejected frame: {ukb.ERROR_NAMES.get(code, code)}')
                    if ftype_r != ukb.FEEDBACK or n_r != self.p:
                        st.device_errors += 1
                        raise BusError(
                            f'unexpected answer type 0x{ftype_r:02x} with {n_r} motors '
                            f'(expected FEEDBACK with {self.p})'
                        )
                    try:
                        fb = ukb.parse_feedback(seq_r, n_r, payload_r)
                    except ukb.FrameError:
                        st.crc_errors += 1
                        continue
                    st.rtt.append(time.monotonic() - t0)
                    st.ok += 1
                    self.last = fb
                    return fb
        finally:
            st.crc_errors += self.decoder.bad_frames - bad0

    def _to_feedback(self, fb: ukb.Feedback) -> MotorFeedback:
        return MotorFeedback(
            position=fb.position,
            velocity=fb.velocity,
            torque=self.kt * fb.current,
            fault=fb.fault,
            enabled=bool(fb.state & ukb.ST_ENABLED),
            device_watchdog=bool(fb.state & ukb.ST_WATCHDOG),
            stamp=time.monotonic(),
        )

    def enable(self, on: bool) -> None:
        fb = self._request(ukb.ENABLE, bytes([1 if on else 0]))
        if bool(fb.state & ukb.ST_ENABLED) != bool(on):
            raise BusError(
                f'device did not {"enable" if on else "disable"} torque '
                f'(error {ukb.ERROR_NAMES.get(fb.error, fb.error)})'
            )

    def configure(self, watchdog: float, torque_limit) -> None:
        lim = np.asarray(torque_limit, float) / self.kt
        lim = np.where(np.isfinite(lim), lim, 3.0e38)
        self._request(ukb.CONFIG, ukb.config_payload(watchdog, lim))

    def clear_faults(self) -> None:
        self._request(ukb.CLEAR)

    def read(self) -> MotorFeedback:
        return self._to_feedback(self._request(ukb.STATUS))

    def write(self, torque) -> None:
        self.transact(torque)

    def transact(self, torque) -> MotorFeedback:
        cur = np.asarray(torque, float) / self.kt
        return self._to_feedback(self._request(ukb.COMMAND, ukb.command_payload(cur)))
