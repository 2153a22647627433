"""ROBOTIS Dynamixel Protocol 2.0 packets (the framing; no I/O), shared by the emulator and the tests.

Packet (ROBOTIS e-Manual, "Protocol 2.0")::

    FF FF FD 00 | ID | LEN:u16le | INST | PARAMS | CRC:u16le

with LEN = len(INST + PARAMS) + 2 counted after stuffing, byte stuffing (``FF FF FD`` inside
INST..PARAMS is followed by an extra ``FD``) and CRC-16/UMTS over everything before the CRC.
The ``PKT_*`` names are the byte offsets into a packet. The host side uses the official SDK
(dynamixel_sdk), which frames the packets itself.

``OPTIONS`` are the calibration defaults of the config section ``hardware.dynamixel``: the
wire units and the current limit register of an XM430-W350.
"""

from __future__ import annotations

import math
import struct

from ....settings.setting import NONE, Setting
from ...crc import crc16_umts

OPTIONS = {
    'model_number': 1020,  # XM430-W350
    'position_unit': 2.0 * math.pi / 4096.0,  # rad per tick
    'velocity_unit': 0.229 * 2.0 * math.pi / 60.0,  # rad/s per unit (0.229 rpm)
    'current_unit': 2.69e-3,  # A per unit
    'current_limit': 1193,  # units (XM430-W350 default)
}

#: the settings schema's keys of section hardware.dynamixel (no schema default: OPTIONS above is)
SETTINGS = (
    Setting('hardware.dynamixel.position_unit', 'float', NONE, 'rad', 'rad per position tick', low=0.0, low_open=True),
    Setting(
        'hardware.dynamixel.velocity_unit', 'float', NONE, 'rad/s', 'rad/s per velocity unit', low=0.0, low_open=True
    ),
    Setting('hardware.dynamixel.current_unit', 'float', NONE, 'A', 'A per current unit', low=0.0, low_open=True),
    Setting('hardware.dynamixel.current_limit', 'int', NONE, 'units', 'current limit register', low=0),
    Setting('hardware.dynamixel.model_number', 'int', NONE, '', 'expected model number', low=0),
)

PKT_ID = 4  # after the 4-byte header
PKT_LENGTH = 5  # u16le: bytes from INST to the end of the CRC
PKT_INSTRUCTION = 7  # INST, then PARAMS (stuffed)
CRC_SIZE = 2
PKT_MIN_LENGTH = 3  # INST + CRC
PKT_MAX_LENGTH = 1024  # longer LEN fields are garbage: resynchronise

HEADER = b'\xff\xff\xfd\x00'

# sizes of the cycle's packets without byte stuffing (stuffing only adds bytes):
# header 4, id 1, length 2, instruction 1, then the parameters, CRC 2
_FRAMING = len(HEADER) + 1 + 2 + 1 + CRC_SIZE
SYNC_ADDR_LEN = 4  # sync read/write parameters: start address u16, data length u16
RETURN_DELAY_UNIT = 2e-6  # s per unit of the Return Delay Time register (X series)
RETURN_DELAY_DEFAULT = 250  # units, the X series' factory value (500 us)


def cycle_cost(p: int, options: dict, facts: dict):
    """One armed cycle of :class:`~.bus.DynamixelBus`: a Sync Write of Goal Current (no reply) and a
    Sync Read of the 10 feedback bytes answered by one status packet per servo, each after the
    servo's Return Delay Time (control table address 9, units of 2 us, factory value 250 = 500 us;
    ROBOTIS e-Manual, X series control table). The status packets follow one another on the bus,
    so the delays add up. Sizes without byte stuffing (Protocol 2.0 packet layout, this module):

        sync write  = 10 + 4 + p (1 + 2)    (framing, address and length, id and 2 bytes per servo)
        sync read   = 10 + 4 + p            (framing, address and length, one id per servo)
        status      = 10 + 1 + 10 per servo (framing, error byte, the feedback bytes)
    """
    from ...bus_timing import CycleCost, Exchange
    from .control_table import FEEDBACK_LEN

    delays = facts.get('return_delay')
    if delays is None:
        delays = [RETURN_DELAY_DEFAULT * RETURN_DELAY_UNIT] * p
        note = (
            f'return delays: not read from the servos; the factory value {RETURN_DELAY_DEFAULT} x 2 us assumed for each'
        )
    else:
        units = [round(d / RETURN_DELAY_UNIT) for d in delays]
        note = (
            f'return delays read from the servos (register 9, x 2 us): {units} = '
            f'{sum(delays) * 1e6:.0f} us per sync read'
        )
    status = _FRAMING + 1 + FEEDBACK_LEN
    exchanges = (
        Exchange('sync write goal current', _FRAMING + SYNC_ADDR_LEN + 3 * p),
        Exchange(
            'sync read feedback',
            _FRAMING + SYNC_ADDR_LEN + p,
            reply_bytes=status * p,
            replies=p,
            device_delay=float(sum(delays)),
        ),
    )
    advice = (
        (
            f'the servos\' Return Delay Time (register 9; {sum(delays) * 1e6:.0f} us per cycle now): '
            f'`uk-controller run ... --set-return-delay-zero` writes 0 to every servo (EEPROM, torque off) '
            f'before the run',
            'device_delay',
        ),
    )
    return CycleCost(exchanges=exchanges, advice=advice, notes=(note,))


def stuff(body: bytes) -> bytes:
    """Insert 0xFD after every FF FF FD in ``body`` (INST..PARAMS)."""
    out = bytearray()
    for b in body:
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(body: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(body):
        out.append(body[i])
        if (
            body[i] == 0xFD
            and len(out) >= 3
            and out[-3] == 0xFF
            and out[-2] == 0xFF
            and i + 1 < len(body)
            and body[i + 1] == 0xFD
        ):
            i += 1
        i += 1
    return bytes(out)


def packet(dxl_id: int, inst: int, params: bytes = b'') -> bytes:
    """A complete Protocol 2.0 packet (used for status packets and in tests)."""
    body = stuff(bytes([inst]) + params)
    head = HEADER + bytes([dxl_id]) + struct.pack('<H', len(body) + CRC_SIZE)
    pkt = head + body
    return pkt + struct.pack('<H', crc16_umts(pkt))
