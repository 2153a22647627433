"""CRC-16 checksums used by the serial protocols.

Two CRC-16 variants appear on our wires, both in the Rocksoft/Williams model
(width 16, polynomial, init, reflect-in/out, xor-out):

- ``crc16_ccitt_false``: poly 0x1021, init 0xFFFF, no reflection, xorout 0x0000.
  Used by our ``uk_binary`` protocol (docs/serial_protocol.md).
  Check value: ``crc16_ccitt_false(b"123456789") == 0x29B1``.
- ``crc16_umts`` (a.k.a. CRC-16/BUYPASS): poly 0x8005, init 0x0000, no
  reflection, xorout 0x0000. Used by ROBOTIS Dynamixel Protocol 2.0 (only our
  device emulator needs it; the host side uses the official SDK).
  Check value: ``crc16_umts(b"123456789") == 0xFEE8``.

Both are table driven (one 256-entry table per polynomial, built once at import
from the bitwise definition) because the emulator and the host run them on
every frame.
"""

from __future__ import annotations

__all__ = ['crc16_ccitt_false', 'crc16_umts', 'crc16_bitwise']


def crc16_bitwise(data: bytes, poly: int, init: int) -> int:
    """Reference CRC-16 (non-reflected, xorout 0), one bit at a time.

    For every byte b: crc ^= b << 8; then 8 times: crc = (crc << 1) ^ poly if the
    top bit was set, else crc << 1 (all mod 2^16).
    """
    crc = init & 0xFFFF
    for byte in data:
        crc ^= (byte & 0xFF) << 8
        for _ in range(8):
            if crc & 0x8000:
                crc = ((crc << 1) ^ poly) & 0xFFFF
            else:
                crc = (crc << 1) & 0xFFFF
    return crc


def _table(poly: int) -> tuple:
    return tuple(crc16_bitwise(bytes([i]), poly, 0) for i in range(256))


_T1021 = _table(0x1021)
_T8005 = _table(0x8005)


def _crc(table, data, crc):
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ byte) & 0xFF]
    return crc


def crc16_ccitt_false(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (poly 0x1021, init 0xFFFF)."""
    return _crc(_T1021, data, crc)


def crc16_umts(data: bytes, crc: int = 0x0000) -> int:
    """CRC-16/UMTS (Dynamixel 2.0) of ``data`` (poly 0x8005, init 0x0000)."""
    return _crc(_T8005, data, crc)
