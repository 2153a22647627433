"""Emulated ROBOTIS X-series servos (Protocol 2.0) on one pty, backed by a plant.

Implements the device side of Protocol 2.0 as documented by ROBOTIS: packet
``FF FF FD 00 | ID | LEN(2) | INST | PARAMS | CRC(2)`` with LEN = len(PARAMS)+3,
byte stuffing (``FF FF FD`` inside INST..PARAMS is followed by an extra ``FD``),
CRC-16/UMTS over the transmitted (stuffed) packet; instructions PING, READ,
WRITE, REBOOT, SYNC_READ, SYNC_WRITE; status packets (0x55) with the error byte.
Current control mode, torque enable, current limit, bus watchdog and hardware
error status behave like the X series control table. Every status packet waits the
servo's Return Delay Time (address 9, units of 2 us, the factory value 250 = 500 us
unless ``return_delay_time`` says otherwise) before it goes on the line, as the servos do.
"""

from __future__ import annotations

import struct

import numpy as np

from ...crc import crc16_umts
from ...emulator import DeviceEmulator
from . import control_table as T
from .codec import (
    CRC_SIZE,
    HEADER,
    PKT_ID,
    PKT_INSTRUCTION,
    PKT_LENGTH,
    PKT_MAX_LENGTH,
    PKT_MIN_LENGTH,
    RETURN_DELAY_DEFAULT,
    RETURN_DELAY_UNIT,
    packet,
    unstuff,
)


class DynamixelDevice(DeviceEmulator):
    protocol = 'dynamixel'

    def __init__(self, plant, hw, *, return_delay_time: int = RETURN_DELAY_DEFAULT, **kw):
        super().__init__(plant, hw, **kw)
        self.opt = self.options
        self.buf = bytearray()
        self.tables = {}
        for k, i in enumerate(hw.ids):
            t = bytearray(256)
            struct.pack_into('<H', t, T.ADDR_MODEL_NUMBER, self.opt['model_number'])
            t[T.ADDR_FIRMWARE] = 48
            t[T.ADDR_ID] = i
            t[T.ADDR_RETURN_DELAY_TIME] = int(return_delay_time)
            t[T.ADDR_OPERATING_MODE] = 3
            struct.pack_into('<H', t, T.ADDR_CURRENT_LIMIT, int(self.opt['current_limit']))
            self.tables[i] = t
        self.index = {i: k for k, i in enumerate(hw.ids)}
        self.current_limit = np.full(self.p, self.opt['current_limit'] * self.opt['current_unit'])

    def answer_delay(self, frame: bytes) -> float:
        """The answering servo's Return Delay Time."""
        t = self.tables.get(frame[PKT_ID]) if len(frame) > PKT_ID else None
        return 0.0 if t is None else t[T.ADDR_RETURN_DELAY_TIME] * RETURN_DELAY_UNIT

    def reset_protocol(self):
        self.buf.clear()

    # control table <-> plant
    def _refresh(self, dxl_id):
        k = self.index[dxl_id]
        t = self.tables[dxl_id]
        theta, omega = self.motor_state()
        o = self.opt
        cur = self.tau_m[k] / self.hw.kt[k] if t[T.ADDR_TORQUE_ENABLE] else 0.0
        struct.pack_into('<h', t, T.ADDR_PRESENT_CURRENT, int(np.clip(round(cur / o['current_unit']), -32768, 32767)))
        struct.pack_into('<i', t, T.ADDR_PRESENT_VELOCITY, int(round(omega[k] / o['velocity_unit'])))
        struct.pack_into('<i', t, T.ADDR_PRESENT_POSITION, int(round(theta[k] / o['position_unit'])))
        t[T.ADDR_PRESENT_TEMPERATURE] = 35

    def _apply(self):
        """Motor torques from the tables (goal current if enabled in current mode)."""
        tau = np.zeros(self.p)
        for i, k in self.index.items():
            t = self.tables[i]
            if (
                t[T.ADDR_TORQUE_ENABLE]
                and t[T.ADDR_OPERATING_MODE] == T.MODE_CURRENT
                and t[T.ADDR_BUS_WATCHDOG] != 0xFF
                and not t[T.ADDR_HW_ERROR]
            ):
                (g,) = struct.unpack_from('<h', t, T.ADDR_GOAL_CURRENT)
                tau[k] = g * self.opt['current_unit'] * self.hw.kt[k]
        self.enabled = any(self.tables[i][T.ADDR_TORQUE_ENABLE] for i in self.index)
        self.set_motor_torque(tau)

    def _write(self, dxl_id, addr, data) -> int:
        """Write ``data`` at ``addr``; returns a Protocol 2.0 error number (0 = ok)."""
        t = self.tables[dxl_id]
        if addr + len(data) > 256:
            return T.ERR_DATA_LENGTH
        if addr < 64 and t[T.ADDR_TORQUE_ENABLE]:
            return T.ERR_ACCESS  # EEPROM is locked while torque is on
        if addr <= T.ADDR_GOAL_CURRENT < addr + len(data):
            off = T.ADDR_GOAL_CURRENT - addr
            if off + 2 <= len(data):
                (g,) = struct.unpack_from('<h', bytes(data), off)
                (lim,) = struct.unpack_from('<H', t, T.ADDR_CURRENT_LIMIT)
                if abs(g) > lim:
                    return T.ERR_DATA_LIMIT
                if t[T.ADDR_BUS_WATCHDOG] == 0xFF:
                    return T.ERR_DATA_LIMIT  # goal writes refused after the bus watchdog fired
        t[addr : addr + len(data)] = data
        if addr <= T.ADDR_TORQUE_ENABLE < addr + len(data) and not t[T.ADDR_TORQUE_ENABLE]:
            struct.pack_into('<h', t, T.ADDR_GOAL_CURRENT, 0)
        if addr <= T.ADDR_CURRENT_LIMIT < addr + len(data):
            (lim,) = struct.unpack_from('<H', t, T.ADDR_CURRENT_LIMIT)
            self.current_limit[self.index[dxl_id]] = lim * self.opt['current_unit']
        return 0

    def _status(self, dxl_id, error=0, params=b''):
        t = self.tables[dxl_id]
        if t[T.ADDR_HW_ERROR]:
            error |= T.ERR_ALERT
        return packet(dxl_id, T.INST_STATUS, bytes([error]) + params)

    def _tick(self):
        super()._tick()
        if self.watchdog_tripped:  # generic trip (unused by X series) is cleared here
            self.watchdog_tripped = False
        for i, t in self.tables.items():
            wd = t[T.ADDR_BUS_WATCHDOG]
            if 0 < wd < 0x80 and t[T.ADDR_TORQUE_ENABLE]:
                if self.clock() - self.last_command > wd * T.BUS_WATCHDOG_UNIT:
                    t[T.ADDR_BUS_WATCHDOG] = 0xFF
                    struct.pack_into('<h', t, T.ADDR_GOAL_CURRENT, 0)
                    self.counters['watchdog_trips'] += 1
                    self._apply()

    # packet parser
    def handle(self, data: bytes) -> list:
        self.buf += data
        out = []
        while True:
            k = self.buf.find(HEADER)
            if k < 0:
                del self.buf[: max(0, len(self.buf) - 3)]
                return out
            del self.buf[:k]
            if len(self.buf) < PKT_INSTRUCTION:
                return out
            (length,) = struct.unpack_from('<H', self.buf, PKT_LENGTH)
            total = PKT_INSTRUCTION + length
            if length < PKT_MIN_LENGTH or length > PKT_MAX_LENGTH:
                del self.buf[:1]
                self.counters['rx_bad'] += 1
                continue
            if len(self.buf) < total:
                return out
            pkt = bytes(self.buf[:total])
            (crc,) = struct.unpack_from('<H', pkt, total - CRC_SIZE)
            if crc16_umts(pkt[:-CRC_SIZE]) != crc:
                self.counters['rx_bad'] += 1
                del self.buf[:1]  # resynchronise on the next header
                continue
            del self.buf[:total]
            self.counters['rx_frames'] += 1
            self.feed_watchdog()
            body = unstuff(pkt[PKT_INSTRUCTION:-CRC_SIZE])
            out.extend(self._execute(pkt[PKT_ID], body[0], body[1:]))

    def _execute(self, dxl_id, inst, prm) -> list:
        ours = dxl_id in self.tables
        if inst == T.INST_SYNC_READ and dxl_id == T.BROADCAST:
            addr, n = struct.unpack_from('<HH', prm)
            res = []
            for i in prm[4:]:
                if i in self.tables:
                    self._refresh(i)
                    res.append(self._status(i, 0, bytes(self.tables[i][addr : addr + n])))
            return res
        if inst == T.INST_SYNC_WRITE and dxl_id == T.BROADCAST:
            addr, n = struct.unpack_from('<HH', prm)
            seen = set()
            for j in range(4, len(prm) - n + 1, n + 1):
                i = prm[j]
                if i in self.tables:
                    self._write(i, addr, prm[j + 1 : j + 1 + n])
                    seen.add(i)
            self._apply()
            if addr <= T.ADDR_GOAL_CURRENT < addr + n:
                if seen == set(self.tables):
                    self.step_plant()
            return []
        if not ours:
            return []
        if inst == T.INST_PING:
            t = self.tables[dxl_id]
            return [self._status(dxl_id, 0, bytes(t[0:2]) + bytes([t[T.ADDR_FIRMWARE]]))]
        if inst == T.INST_READ:
            addr, n = struct.unpack_from('<HH', prm)
            self._refresh(dxl_id)
            return [self._status(dxl_id, 0, bytes(self.tables[dxl_id][addr : addr + n]))]
        if inst == T.INST_WRITE:
            (addr,) = struct.unpack_from('<H', prm)
            err = self._write(dxl_id, addr, prm[2:])
            self._apply()
            return [self._status(dxl_id, err)]
        if inst == T.INST_REBOOT:
            t = self.tables[dxl_id]
            t[T.ADDR_TORQUE_ENABLE] = 0
            t[T.ADDR_HW_ERROR] = 0
            t[T.ADDR_BUS_WATCHDOG] = 0
            struct.pack_into('<h', t, T.ADDR_GOAL_CURRENT, 0)
            self._apply()
            return [self._status(dxl_id, 0)]
        return [self._status(dxl_id, T.ERR_INSTRUCTION)]
