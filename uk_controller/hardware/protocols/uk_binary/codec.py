"""The ``uk_binary`` framed serial protocol (specification: docs/serial_protocol.md).

Wire format of every frame, both directions::

    COBS( type:u8 | seq:u8 | n:u8 | payload | crc:u16le ) | 0x00

COBS (Consistent Overhead Byte Stuffing, Cheshire & Baker 1999) removes every
0x00 from the body so 0x00 delimits frames and a receiver resynchronises on the
next delimiter after any corruption. ``crc`` is CRC-16/CCITT-FALSE (poly 0x1021,
init 0xFFFF, check value 0x29B1 for b"123456789") over type..payload. All
multi-byte fields are little endian, floats IEEE-754 binary32.

This module is pure encode/decode with no I/O, shared by the host bus and the
device emulator.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ...crc import crc16_ccitt_false

# calibration defaults of the config section hardware.uk_binary (none: the frames carry SI floats)
OPTIONS = {}

# byte offsets into a decoded body (after COBS): type | seq | n | payload | crc:u16le
BODY_TYPE = 0
BODY_SEQ = 1
BODY_COUNT = 2
BODY_PAYLOAD = 3
CRC_SIZE = 2
MIN_BODY = BODY_PAYLOAD + CRC_SIZE  # a frame without payload

# frame types
COMMAND = 0x01
STATUS = 0x02
ENABLE = 0x03
CONFIG = 0x04
CLEAR = 0x05
FEEDBACK = 0x81
NAK = 0xFE

# device state bits (FEEDBACK.state)
ST_ENABLED = 0x01
ST_WATCHDOG = 0x02
ST_FAULT = 0x04
ST_LIMITED = 0x08

# error codes (FEEDBACK.error and NAK)
E_NONE = 0
E_CRC = 1
E_LENGTH = 2
E_TYPE = 3
E_COUNT = 4
E_NOT_FINITE = 5
E_WATCHDOG = 6
E_NOT_ENABLED = 7
E_MOTOR_FAULT = 8
E_RANGE = 9
ERROR_NAMES = {
    E_NONE: 'none',
    E_CRC: 'crc',
    E_LENGTH: 'length',
    E_TYPE: 'type',
    E_COUNT: 'count',
    E_NOT_FINITE: 'not_finite',
    E_WATCHDOG: 'watchdog',
    E_NOT_ENABLED: 'not_enabled',
    E_MOTOR_FAULT: 'motor_fault',
    E_RANGE: 'range',
}

# motor fault bits (FEEDBACK per-motor fault byte)
F_OVERCURRENT = 0x01
F_OVERTEMP = 0x02
F_ENCODER = 0x04
F_UNDERVOLTAGE = 0x08
F_DRIVER = 0x10

MAX_MOTORS = 16
MAX_BODY = BODY_PAYLOAD + 16 + 13 * MAX_MOTORS + CRC_SIZE  # largest legal body (FEEDBACK, 16 motors)
_FB_HEAD = struct.Struct('<BBHI')  # state, error, rx_errors, time_us
_FB_MOTOR = struct.Struct('<fffB')  # position, velocity, current, fault


class FrameError(ValueError):
    """A received frame that fails COBS, CRC or layout checks."""

    def __init__(self, kind, msg):
        super().__init__(msg)
        self.kind = kind  # 'cobs' | 'crc' | 'length'


def cobs_encode(data: bytes) -> bytes:
    """COBS-encode ``data`` (output has no 0x00 byte; no trailing delimiter)."""
    out = bytearray([0])
    code_at, code = 0, 1
    for byte in data:
        if byte == 0:
            out[code_at] = code
            code_at, code = len(out), 1
            out.append(0)
        else:
            out.append(byte)
            code += 1
            if code == 0xFF:
                out[code_at] = code
                code_at, code = len(out), 1
                out.append(0)
    out[code_at] = code
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    """Inverse of :func:`cobs_encode`; raises FrameError('cobs') on bad input."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        code = data[i]
        end = i + code
        if code == 0 or end > n:
            raise FrameError('cobs', 'bad COBS code byte')
        block = data[i + 1 : end]
        if 0 in block:
            raise FrameError('cobs', 'zero inside COBS block')
        out += block
        i = end
        if code < 0xFF and i < n:
            out.append(0)
    return bytes(out)


def encode_body(ftype: int, seq: int, n: int, payload: bytes = b'') -> bytes:
    """Body with CRC appended (before COBS)."""
    body = bytes((ftype & 0xFF, seq & 0xFF, n & 0xFF)) + payload
    return body + struct.pack('<H', crc16_ccitt_false(body))


def encode_frame(ftype: int, seq: int, n: int, payload: bytes = b'') -> bytes:
    """Complete wire frame: COBS(body + crc) + 0x00."""
    return cobs_encode(encode_body(ftype, seq, n, payload)) + b'\x00'


def decode_frame(encoded: bytes):
    """Decode one frame *without* its 0x00 delimiter -> (type, seq, n, payload)."""
    body = cobs_decode(encoded)
    if len(body) < MIN_BODY:
        raise FrameError('length', f'frame too short ({len(body)} bytes)')
    if len(body) > MAX_BODY:
        raise FrameError('length', f'frame too long ({len(body)} bytes)')
    end = len(body) - CRC_SIZE
    (crc,) = struct.unpack_from('<H', body, end)
    if crc16_ccitt_false(body[:end]) != crc:
        raise FrameError('crc', 'CRC mismatch')
    return body[BODY_TYPE], body[BODY_SEQ], body[BODY_COUNT], body[BODY_PAYLOAD:end]


class StreamDecoder:
    """Splits a byte stream at 0x00 delimiters and decodes frames.

    ``feed(data)`` returns a list of decoded frames; bad frames are counted in
    ``errors`` (by kind) and skipped. Bytes before the first delimiter after a
    (re)start are a partial frame and are treated like any other frame.
    """

    def __init__(self, max_len: int = 2 * MAX_BODY + 8):
        self.buf = bytearray()
        self.max_len = max_len
        self.errors = {'cobs': 0, 'crc': 0, 'length': 0, 'overflow': 0}

    def feed(self, data: bytes):
        frames = []
        self.buf += data
        while True:
            k = self.buf.find(0)
            if k < 0:
                if len(self.buf) > self.max_len:  # garbage with no delimiter
                    self.errors['overflow'] += 1
                    self.buf.clear()
                return frames
            chunk = bytes(self.buf[:k])
            del self.buf[: k + 1]
            if not chunk:
                continue
            try:
                frames.append(decode_frame(chunk))
            except FrameError as exc:
                self.errors[exc.kind] += 1

    @property
    def bad_frames(self) -> int:
        return sum(self.errors.values())


# ---- payloads -------------------------------------------------------------
def command_payload(currents) -> bytes:
    """COMMAND payload: n x f32 motor current setpoint (A)."""
    c = np.asarray(currents, dtype='<f4')
    return c.tobytes()


def parse_command(payload: bytes, n: int) -> np.ndarray:
    if len(payload) != 4 * n:
        raise FrameError('length', 'COMMAND payload length')
    return np.frombuffer(payload, dtype='<f4').astype(float)


def config_payload(watchdog_s: float, current_limits) -> bytes:
    """CONFIG payload: u16 watchdog (ms, 0 = off) + n x f32 current limit (A)."""
    ms = int(round(min(max(watchdog_s, 0.0), 65.535) * 1000))
    return struct.pack('<H', ms) + np.asarray(current_limits, dtype='<f4').tobytes()


def parse_config(payload: bytes, n: int):
    if len(payload) != 2 + 4 * n:
        raise FrameError('length', 'CONFIG payload length')
    (ms,) = struct.unpack_from('<H', payload)
    return ms / 1000.0, np.frombuffer(payload[2:], dtype='<f4').astype(float)


@dataclass
class Feedback:
    """Decoded FEEDBACK frame (motor side SI units)."""

    seq: int
    state: int
    error: int
    rx_errors: int
    time_us: int
    position: np.ndarray
    velocity: np.ndarray
    current: np.ndarray
    fault: np.ndarray


def feedback_payload(state, error, rx_errors, time_us, pos, vel, cur, fault) -> bytes:
    out = bytearray(_FB_HEAD.pack(state & 0xFF, error & 0xFF, rx_errors & 0xFFFF, time_us & 0xFFFFFFFF))
    for k in range(len(pos)):
        out += _FB_MOTOR.pack(pos[k], vel[k], cur[k], int(fault[k]) & 0xFF)
    return bytes(out)


def frame_size(payload_bytes: int) -> int:
    """Bytes on the wire of a frame with `payload_bytes` of payload: the body (type, seq, n, payload,
    CRC) plus one COBS code byte (bodies of this protocol are shorter than 254 bytes: one block) and
    the 0x00 delimiter."""
    body = BODY_PAYLOAD + payload_bytes + CRC_SIZE
    return body + 1 + body // 254 + 1


def cycle_cost(p: int, options: dict, facts: dict):
    """One armed cycle of :class:`~.bus.UKBinaryBus`: a COMMAND frame (p f32 currents) answered by one
    FEEDBACK frame (8-byte head, 13 bytes per motor); no device delay is specified
    (docs/serial_protocol.md)."""
    from ...bus_timing import CycleCost, Exchange

    return CycleCost(
        exchanges=(
            Exchange(
                'COMMAND -> FEEDBACK',
                frame_size(4 * p),
                reply_bytes=frame_size(_FB_HEAD.size + _FB_MOTOR.size * p),
                replies=1,
            ),
        )
    )


def parse_feedback(seq: int, n: int, payload: bytes) -> Feedback:
    if len(payload) != _FB_HEAD.size + _FB_MOTOR.size * n:
        raise FrameError('length', 'FEEDBACK payload length')
    state, error, rx_err, t_us = _FB_HEAD.unpack_from(payload)
    rec = np.frombuffer(
        payload, offset=_FB_HEAD.size, dtype=np.dtype([('p', '<f4'), ('v', '<f4'), ('c', '<f4'), ('f', 'u1')]), count=n
    )
    return Feedback(
        seq,
        state,
        error,
        rx_err,
        t_us,
        rec['p'].astype(float),
        rec['v'].astype(float),
        rec['c'].astype(float),
        rec['f'].astype(int),
    )
