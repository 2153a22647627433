"""MIT-mode CAN frames (the wire format without I/O), shared by the bus, the emulator and the tests.

The frame format is the one of Ben Katz's mini-cheetah motor controller (github.com/bgkatz/motorcontrol,
``Core/Src/can.c``: ``pack_reply`` / ``unpack_cmd``), which the CubeMars AK modules ("AK Series Actuator
Driver Manual" V1.0.8, section 5.3 "MIT power mode communication protocol") and the Damiao DM-J motors
(DM-J4310-2EC manual, "MIT mode"; enactic/openarm_can ``damiao_motor``) follow. Standard 11-bit ids.

Special frames, sent to the motor's CAN id (every one is answered with a state reply)::

    FF FF FF FF FF FF FF FC   enter motor mode (torque on)
    FF FF FF FF FF FF FF FD   exit motor mode (torque off)
    FF FF FF FF FF FF FF FE   set the present position as zero

Command (8 bytes, to the motor's CAN id): p 16 bit, v 12 bit, kp 12 bit, kd 12 bit, tau 12 bit, big end
first: ``p[15:8] p[7:0] v[11:4] v[3:0]|kp[11:8] kp[7:0] kd[11:4] kd[3:0]|t[11:8] t[7:0]``. Each value x
of a range [lo, hi] travels as the integer

    u = round((x - lo) (2^b - 1) / (hi - lo)),   x = lo + u (hi - lo) / (2^b - 1)        (the linear maps)

with p in [-p_max, p_max], v in [-v_max, v_max], kp in [0, kp_max], kd in [0, kd_max], tau in
[-t_max, t_max] (per model: :data:`PRESETS`). The motor applies ``tau_ref = kp (p - theta) + kd (v -
omega) + tau``; effort control is ``kp = kd = 0``, ``tau = tau_ff``. The decoded value is within half a
step (hi - lo) / (2 (2^b - 1)) of the sent one (the quantisation bound: the host rounds its commands;
the firmware truncates when it encodes its replies, and the host reads a reply code as the middle of its
interval, :func:`reply_value`).

Replies go to the master CAN id (``hardware.can.master_id``; Damiao: the motor's MST_ID register) and
name their motor in the first byte:

- ``cubemars`` (mini-cheetah, CubeMars AK; 6 bytes): ``id p[15:8] p[7:0] v[11:4] v[3:0]|t[11:8] t[7:0]``
  (the manual calls the last field "current"; its own receive routine, like the mini-cheetah's
  ``pack_reply``, scales it over [-t_max, t_max]: a torque);
- ``damiao`` (8 bytes): ``id[3:0]|err<<4`` then p, v, t as above, then the MOS and rotor temperatures
  (deg C). ``err`` is 0 disabled, 1 enabled, 8.. faults (:data:`DAMIAO_ERRORS`); only the low 4 bits of
  the id are there, so Damiao ids on one bus must differ in them.

Damiao registers (the motor-side timeout): a frame to id 0x7FF, ``id_lo id_hi 0x55 rid value:u32le``
writes register ``rid`` (the motor echoes it to the master id); TIMEOUT (rid 9) counts 50 us periods
without a command before the motor disables itself with error 0xD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ....settings.setting import NONE, Setting

# ---------------------------------------------------------------- the options (hardware.can, hardware.<motor>.mit)
OPTIONS = {
    'interface': 'slcan',  # python-can interface name
    'bitrate': 1000000,  # CAN bit rate (slcan: one of the adapter's S0..S8 rates)
    'master_id': 0,  # CAN id the motors answer to
    'open_delay': 0.0,  # s to wait after opening an slcan adapter (python-can's sleep_after_open)
    'device_watchdog_factor': 2.0,  # Damiao TIMEOUT register = factor x hardware.watchdog
}
#: the per-motor maps ``hardware.<motor>.mit`` reach the bus and the emulator as ``options['motors']``
MOTOR_SECTION = 'mit'


@dataclass(frozen=True)
class MitRanges:
    """The ranges of one motor's MIT frames (rad, rad/s, N m at the module's output), its reply format and
    the document the numbers come from."""

    p_max: float
    v_max: float
    t_max: float
    kp_max: float = 500.0
    kd_max: float = 5.0
    reply: str = 'cubemars'
    document: str = ''


_AK = 'CubeMars "AK Series Actuator Driver Manual" V1.0.8, section 5.3 (MIT mode ranges table)'
_DM = (
    'Damiao defaults PMAX/VMAX/TMAX of the DM-J manuals (as listed by enactic/openarm_can '
    'dm_motor_constants.hpp and the Seeed "Damiao Series Motors" wiki)'
)
#: presets ``hardware.<motor>.mit.model``; ranges as the named document gives them
PRESETS = {
    'mini-cheetah': MitRanges(
        12.5,
        65.0,
        18.0,
        document='bgkatz/motorcontrol (mini-cheetah firmware): P_MAX 12.5, V_MAX 65, T_MAX 18, KP_MAX 500, KD_MAX 5',
    ),
    'ak10-9': MitRanges(12.5, 50.0, 65.0, document=_AK),
    'ak60-6': MitRanges(12.5, 45.0, 15.0, document=_AK),
    'ak70-10': MitRanges(12.5, 50.0, 25.0, document=_AK),
    'ak80-6': MitRanges(12.5, 76.0, 12.0, document=_AK),
    'ak80-9': MitRanges(12.5, 50.0, 18.0, document=_AK),
    'ak80-64': MitRanges(12.5, 8.0, 144.0, document=_AK),
    'dm-j3507': MitRanges(12.5, 50.0, 5.0, reply='damiao', document=_DM),
    'dm-j4310': MitRanges(12.5, 30.0, 10.0, reply='damiao', document=_DM),
    'dm-j4340': MitRanges(12.5, 10.0, 28.0, reply='damiao', document=_DM),
    'dm-j6006': MitRanges(12.5, 45.0, 20.0, reply='damiao', document=_DM),
    'dm-j8006': MitRanges(12.5, 45.0, 40.0, reply='damiao', document=_DM),
    'dm-j8009': MitRanges(12.5, 45.0, 54.0, reply='damiao', document=_DM),
    'dm-j10010': MitRanges(12.5, 20.0, 200.0, reply='damiao', document=_DM),
    'dm-j10010l': MitRanges(12.5, 25.0, 200.0, reply='damiao', document=_DM),
}
DEFAULT_MODEL = 'mini-cheetah'
REPLIES = ('cubemars', 'damiao')

#: the settings schema's keys of section hardware.can and of the per-motor maps hardware.<name>.mit
SETTINGS = (
    Setting(
        'hardware.can.interface',
        'str',
        OPTIONS['interface'],
        '',
        'python-can interface (slcan, socketcan, gs_usb, pcan, virtual, ...); the channel is hardware.port '
        '(slcan: the adapter\'s serial device, socketcan: can0)',
    ),
    Setting(
        'hardware.can.bitrate',
        'int',
        OPTIONS['bitrate'],
        'bit/s',
        'CAN bit rate (slcan: 10k, 20k, 50k, 100k, 125k, 250k, 500k, 750k, 1M)',
        low=10000,
        high=1000000,
    ),
    Setting(
        'hardware.can.master_id',
        'int',
        OPTIONS['master_id'],
        '',
        'CAN id the motors reply to (Damiao: their MST_ID)',
        low=0,
        high=0x7FE,
    ),
    Setting(
        'hardware.can.open_delay',
        'float',
        OPTIONS['open_delay'],
        's',
        'wait after opening an slcan adapter (2 s for adapters that reset on open)',
        low=0.0,
        high=10.0,
    ),
    Setting(
        'hardware.can.device_watchdog_factor',
        'float',
        OPTIONS['device_watchdog_factor'],
        '',
        'Damiao motor timeout = factor x hardware.watchdog',
        low=0.0,
        low_open=True,
        high=100.0,
    ),
    Setting(
        'hardware.<name>.mit.model',
        'str',
        DEFAULT_MODEL,
        '',
        'preset of the MIT ranges and reply format (documents: docs/hardware.md)',
        choices=tuple(PRESETS),
    ),
    Setting('hardware.<name>.mit.reply', 'str', NONE, '', 'reply format (default: the model\'s)', choices=REPLIES),
    Setting(
        'hardware.<name>.mit.p_max',
        'float',
        NONE,
        'rad',
        'position range +-p_max (default: the model\'s)',
        low=0.0,
        low_open=True,
    ),
    Setting(
        'hardware.<name>.mit.v_max',
        'float',
        NONE,
        'rad/s',
        'velocity range +-v_max (default: the model\'s)',
        low=0.0,
        low_open=True,
    ),
    Setting(
        'hardware.<name>.mit.t_max',
        'float',
        NONE,
        'N m',
        'torque range +-t_max (default: the model\'s)',
        low=0.0,
        low_open=True,
    ),
    Setting(
        'hardware.<name>.mit.kp_max',
        'float',
        NONE,
        'N m/rad',
        'kp range [0, kp_max] (default: the model\'s)',
        low=0.0,
        low_open=True,
    ),
    Setting(
        'hardware.<name>.mit.kd_max',
        'float',
        NONE,
        'N m s/rad',
        'kd range [0, kd_max] (default: the model\'s)',
        low=0.0,
        low_open=True,
    ),
)


def motor_ranges(section: dict | None) -> MitRanges:
    """The ranges of one motor: its ``model`` preset with the keys the map ``hardware.<name>.mit`` sets."""
    section = dict(section or {})
    model = section.get('model', DEFAULT_MODEL)
    if model not in PRESETS:
        raise ValueError(f'mit.model {model!r} is not one of {", ".join(PRESETS)}')
    base = PRESETS[model]
    fields = {
        k: float(section[k]) for k in ('p_max', 'v_max', 't_max', 'kp_max', 'kd_max') if section.get(k) is not None
    }
    reply = section.get('reply') or base.reply
    if reply not in REPLIES:
        raise ValueError(f'mit.reply {reply!r} is not one of {", ".join(REPLIES)}')
    return MitRanges(**{**base.__dict__, **fields, 'reply': reply})


def cycle_cost(p: int, options: dict, facts: dict):
    """One armed cycle of :class:`~.bus.CanMitBus`: a command frame (8 data bytes) to every motor, then
    one reply per motor (6 bytes cubemars, 8 damiao: each motor's ``reply``), all on the CAN bus at
    ``hardware.can.bitrate``; the host waits for the last reply. The budget is a lower bound on the
    period (a rate above it cannot be carried), so the frames count without bit stuffing
    (:func:`~uk_controller.hardware.bus_timing.can_frame_bits`: 111 bits for 8 data bytes, 95 for 6);
    the note gives the worst case with stuffing too (135 and 115 bits), the time the bus needs whatever
    the data. The host-adapter side is not counted at ``hardware.baud``: an slcan adapter is a USB CDC
    device (its ASCII frames cross USB, not a UART), socketcan and gs_usb have no serial line; an
    adapter behind an FTDI chip shows its latency timer in sysfs, and the budget adds it."""
    from ...bus_timing import CycleCost, Exchange, can_frame_time

    sections = list(options.get('motors') or [{}] * p)
    sections += [{}] * (p - len(sections))
    bitrate = float(options['bitrate'])
    reply_len = [DAMIAO_REPLY_LEN if motor_ranges(s).reply == 'damiao' else CUBEMARS_REPLY_LEN for s in sections[:p]]

    def frames(worst):
        return p * can_frame_time(COMMAND_LEN, bitrate, worst_case_stuffing=worst) + sum(
            can_frame_time(n, bitrate, worst_case_stuffing=worst) for n in reply_len
        )

    note = (
        f'CAN at {bitrate:g} bit/s: {p} command frames of {COMMAND_LEN} bytes and {p} replies of '
        f'{"/".join(str(n) for n in sorted(set(reply_len)))} bytes, {frames(False) * 1e3:.3f} ms without '
        f'bit stuffing (counted), {frames(True) * 1e3:.3f} ms with the worst case; the adapter\'s own link '
        f'(slcan: USB CDC) not counted at hardware.baud'
    )
    advice = (
        (
            f'a higher CAN bit rate (hardware.can.bitrate, now {bitrate:g} bit/s, at most 1 Mbit/s) or fewer '
            f'motors on this bus',
            'always',
        ),
    )
    return CycleCost(
        exchanges=(
            Exchange(
                'MIT commands -> replies (CAN frames)',
                0,
                reply_bytes=0,
                replies=p,
                frame_time=frames(False),
                waits=True,
            ),
        ),
        advice=advice,
        notes=(note,),
    )


# ---------------------------------------------------------------- frames
ENTER_MOTOR_MODE = bytes([0xFF] * 7 + [0xFC])
EXIT_MOTOR_MODE = bytes([0xFF] * 7 + [0xFD])
SET_ZERO = bytes([0xFF] * 7 + [0xFE])
SPECIAL = {ENTER_MOTOR_MODE: 'enter', EXIT_MOTOR_MODE: 'exit', SET_ZERO: 'zero'}

COMMAND_LEN = 8
CUBEMARS_REPLY_LEN = 6
DAMIAO_REPLY_LEN = 8
P_BITS, V_BITS, K_BITS, T_BITS = 16, 12, 12, 12

DAMIAO_REGISTER_ID = 0x7FF  # register frames: id_lo id_hi cmd rid value
DAMIAO_WRITE, DAMIAO_READ, DAMIAO_REFRESH = 0x55, 0x33, 0xCC
DAMIAO_RID_TIMEOUT = 9
DAMIAO_TIMEOUT_UNIT = 50e-6  # s per count of TIMEOUT
DAMIAO_DISABLED, DAMIAO_ENABLED = 0x0, 0x1
#: Damiao error codes (upper nibble of a reply's first byte), named as the manual names them
DAMIAO_ERRORS = {
    0x8: 'over-voltage',
    0x9: 'under-voltage',
    0xA: 'over-current',
    0xB: 'MOS over-temperature',
    0xC: 'rotor over-temperature',
    0xD: 'lost communication (motor timeout)',
    0xE: 'overload',
}
#: host-side faults of a reply (bits above the Damiao nibble): a value at an end of its code range
#: is the range's clamp, not a measurement
FAULT_POSITION_RANGE = 0x100
FAULT_VELOCITY_RANGE = 0x200


def fault_names(code: int) -> list:
    """The names of a motor fault code (a Damiao error and/or the out-of-range bits)."""
    code = int(code)
    out = []
    if code & 0xF:
        out.append(DAMIAO_ERRORS.get(code & 0xF, f'error 0x{code & 0xF:X}'))
    if code & FAULT_POSITION_RANGE:
        out.append('position outside +-p_max (the reply is clamped)')
    if code & FAULT_VELOCITY_RANGE:
        out.append('velocity outside +-v_max (the reply is clamped)')
    return out


def float_to_uint(x: float, lo: float, hi: float, bits: int) -> int:
    """u = round((x - lo) (2^b - 1) / (hi - lo)), x clipped to [lo, hi] first."""
    top = (1 << bits) - 1
    x = min(max(float(x), lo), hi)
    return min(max(int(round((x - lo) * top / (hi - lo))), 0), top)


def float_to_uint_truncated(x: float, lo: float, hi: float, bits: int) -> int:
    """The firmware's encoding of its replies: ``(int)`` truncation instead of rounding."""
    top = (1 << bits) - 1
    x = min(max(float(x), lo), hi)
    return min(max(int((x - lo) * top / (hi - lo)), 0), top)


def uint_to_float(u: int, lo: float, hi: float, bits: int) -> float:
    """x = lo + u (hi - lo) / (2^b - 1)."""
    return lo + int(u) * (hi - lo) / ((1 << bits) - 1)


def torque_code(tau: float, lo: float, hi: float, r: MitRanges) -> int:
    """The code of tau clipped to [lo, hi] (within [-t_max, t_max]) whose decoded value is in [lo, hi]
    too: rounding may not carry a clipped torque past its limit, so such a code steps back by one."""
    t = r.t_max
    lo, hi = max(lo, -t), min(hi, t)
    u = float_to_uint(min(max(tau, lo), hi), -t, t, T_BITS)
    if uint_to_float(u, -t, t, T_BITS) > hi + 1e-12:
        u -= 1
    elif uint_to_float(u, -t, t, T_BITS) < lo - 1e-12:
        u += 1
    return u


def pack_command(
    p: float, v: float, kp: float, kd: float, tau: float, r: MitRanges, tau_code: int | None = None
) -> bytes:
    """The 8-byte MIT command (module docstring); `tau_code` overrides the torque's code."""
    pu = float_to_uint(p, -r.p_max, r.p_max, P_BITS)
    vu = float_to_uint(v, -r.v_max, r.v_max, V_BITS)
    kpu = float_to_uint(kp, 0.0, r.kp_max, K_BITS)
    kdu = float_to_uint(kd, 0.0, r.kd_max, K_BITS)
    tu = float_to_uint(tau, -r.t_max, r.t_max, T_BITS) if tau_code is None else int(tau_code)
    return bytes(
        [
            pu >> 8,
            pu & 0xFF,
            vu >> 4,
            ((vu & 0xF) << 4) | (kpu >> 8),
            kpu & 0xFF,
            kdu >> 4,
            ((kdu & 0xF) << 4) | (tu >> 8),
            tu & 0xFF,
        ]
    )


def unpack_command(data: bytes, r: MitRanges):
    """-> (p, v, kp, kd, tau) of an 8-byte command (the motor's side)."""
    pu = (data[0] << 8) | data[1]
    vu = (data[2] << 4) | (data[3] >> 4)
    kpu = ((data[3] & 0xF) << 8) | data[4]
    kdu = (data[5] << 4) | (data[6] >> 4)
    tu = ((data[6] & 0xF) << 8) | data[7]
    return (
        uint_to_float(pu, -r.p_max, r.p_max, P_BITS),
        uint_to_float(vu, -r.v_max, r.v_max, V_BITS),
        uint_to_float(kpu, 0.0, r.kp_max, K_BITS),
        uint_to_float(kdu, 0.0, r.kd_max, K_BITS),
        uint_to_float(tu, -r.t_max, r.t_max, T_BITS),
    )


def pack_reply(
    motor_id: int,
    p: float,
    v: float,
    t: float,
    r: MitRanges,
    *,
    error: int = DAMIAO_ENABLED,
    t_mos: int = 30,
    t_rotor: int = 30,
) -> bytes:
    """A motor's state reply in the format ``r.reply`` (encoded as the firmware does: truncation)."""
    pu = float_to_uint_truncated(p, -r.p_max, r.p_max, P_BITS)
    vu = float_to_uint_truncated(v, -r.v_max, r.v_max, V_BITS)
    tu = float_to_uint_truncated(t, -r.t_max, r.t_max, T_BITS)
    body = bytes([pu >> 8, pu & 0xFF, vu >> 4, ((vu & 0xF) << 4) | (tu >> 8), tu & 0xFF])
    if r.reply == 'damiao':
        return bytes([(motor_id & 0xF) | ((error & 0xF) << 4)]) + body + bytes([t_mos & 0xFF, t_rotor & 0xFF])
    return bytes([motor_id & 0xFF]) + body


@dataclass
class Reply:
    """One decoded state reply."""

    motor: int  # the id byte (Damiao: its low 4 bits)
    position: float
    velocity: float
    torque: float
    fault: int = 0  # Damiao error code (>= 8) | FAULT_* bits; 0 = none
    enabled: bool | None = None  # Damiao: err == 1 (None: the format does not say)
    t_mos: float = math.nan
    t_rotor: float = math.nan


def reply_value(u: int, x_max: float, bits: int) -> float:
    """A reply's value: the middle of code u's interval, x = -x_max + (u + 1/2) 2 x_max / (2^b - 1).

    The mini-cheetah firmware encodes its replies by truncation (``(int)`` in ``float_to_uint``), so a
    received u stands for [u, u + 1) steps; the plain linear map would read every value half a step
    low (velocity -v_max/4095 at rest: a steady bias the servo rows would integrate into a task error).
    The middle removes that bias; the error is at most half a step (a rounding firmware: at most one).
    """
    return min(max(-x_max + (int(u) + 0.5) * 2.0 * x_max / ((1 << bits) - 1), -x_max), x_max)


def reply_motor(data: bytes, reply: str) -> int:
    """The motor named by a reply's first byte."""
    return data[0] & 0xF if reply == 'damiao' else data[0]


def unpack_reply(data: bytes, r: MitRanges) -> Reply:
    """Decode a reply of format ``r.reply``; ValueError for a frame of the wrong length."""
    want = DAMIAO_REPLY_LEN if r.reply == 'damiao' else CUBEMARS_REPLY_LEN
    if len(data) != want:
        raise ValueError(f'{r.reply} reply of {len(data)} bytes (expected {want})')
    pu = (data[1] << 8) | data[2]
    vu = (data[3] << 4) | (data[4] >> 4)
    tu = ((data[4] & 0xF) << 8) | data[5]
    fault = (FAULT_POSITION_RANGE if pu in (0, (1 << P_BITS) - 1) else 0) | (
        FAULT_VELOCITY_RANGE if vu in (0, (1 << V_BITS) - 1) else 0
    )
    out = Reply(
        reply_motor(data, r.reply),
        reply_value(pu, r.p_max, P_BITS),
        reply_value(vu, r.v_max, V_BITS),
        reply_value(tu, r.t_max, T_BITS),
    )
    if r.reply == 'damiao':
        err = data[0] >> 4
        out.enabled = err == DAMIAO_ENABLED
        if err >= 0x8:
            fault |= err
        out.t_mos, out.t_rotor = float(data[6]), float(data[7])
    out.fault = fault
    return out


def damiao_register_write(motor_id: int, rid: int, value: int) -> bytes:
    """Data of a register write frame (to id 0x7FF): id_lo id_hi 0x55 rid value:u32le."""
    v = int(value) & 0xFFFFFFFF
    return bytes(
        [
            motor_id & 0xFF,
            (motor_id >> 8) & 0xFF,
            DAMIAO_WRITE,
            rid & 0xFF,
            v & 0xFF,
            (v >> 8) & 0xFF,
            (v >> 16) & 0xFF,
            (v >> 24) & 0xFF,
        ]
    )
