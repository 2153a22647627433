"""ROBOTIS Dynamixel Protocol 2.0 in current (torque) control via the official SDK.

One cycle is a GroupSyncWrite of Goal Current (address 102, 2 bytes) to every
servo followed by one GroupSyncRead of Present Current/Velocity/Position
(addresses 126..135, 10 bytes). Enabling sets Operating Mode 0 (current
control) with torque off, then Torque Enable = 1. The servo's Bus Watchdog
(address 98, 20 ms units) is used as the device-side watchdog.

The SDK hides individual status packets, so duplicated answers are skipped
without being counted; ``seq_errors`` counts only late answers of an earlier,
shorter request that the SDK matched to the sync read (it matches by id).
"""

from __future__ import annotations

import math
import select
import time

import numpy as np

from ...bus import BusError, BusTimeout, MotorBus, MotorFeedback, PortError, open_serial
from . import control_table as T


def _sdk():
    try:
        import dynamixel_sdk as sdk
    except ImportError as exc:  # pragma: no cover
        raise BusError('protocol dynamixel needs the `dynamixel-sdk` package (pip install dynamixel-sdk)') from exc
    return sdk


def _port_handler_class():
    sdk = _sdk()

    class ExclusivePortHandler(sdk.PortHandler):
        """SDK port handler that opens the port exclusively (busy ports are
        reported, not shared) and uses our timeout instead of the fixed
        2 x 16 ms USB latency allowance."""

        timeout_ms = 20.0

        def setupPort(self, cflag_baud):
            if self.is_open:
                self.closePort()
            self.ser = open_serial(self.port_name, self.baudrate)
            self.is_open = True
            self.ser.reset_input_buffer()
            self.tx_time_per_byte = (1000.0 / self.baudrate) * 10.0
            return True

        def setPacketTimeout(self, packet_length):
            self.packet_start_time = self.getCurrentTime()
            self.packet_timeout = self.tx_time_per_byte * packet_length + self.timeout_ms

        def readPort(self, length):
            """The SDK polls this in a tight loop until its packet timeout; when no byte
            is waiting, block in select() for up to 1 ms first. That frees the CPU
            (and Python's GIL) instead of spinning, and costs no latency: select
            returns as soon as a byte arrives."""
            data = self.ser.read(length)
            if data:
                return data
            left_ms = self.packet_timeout - (self.getCurrentTime() - self.packet_start_time)
            if left_ms > 0:
                select.select([self.ser.fileno()], [], [], min(left_ms, 1.0) * 1e-3)
            return self.ser.read(length)

    return ExclusivePortHandler


class DynamixelBus(MotorBus):
    protocol = 'dynamixel'

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.opt = self.options  # hardware.dynamixel over codec.OPTIONS (registry.make_bus)
        self.limit_units = np.full(self.p, int(self.opt['current_limit']))
        self.device_limit_units = None  # Current Limit register of each servo, read at connect
        self.return_delay_units = None  # Return Delay Time register of each servo, read at connect
        self.port_handler = None

    def _call(self, fn, *args):
        """Run an SDK call, turning a vanished port into PortError."""
        import termios

        import serial

        try:
            return fn(*args)
        except (serial.SerialException, OSError, TypeError, ValueError, AttributeError, termios.error) as exc:
            self.stats.io_errors += 1
            raise PortError(f'serial port {self.port} vanished or failed: {exc}') from exc

    def _check(self, result, error, what):
        sdk = _sdk()
        if result == sdk.COMM_RX_TIMEOUT:
            self.stats.timeouts += 1
            raise BusTimeout(f'{what}: no status packet')
        if result == sdk.COMM_RX_CORRUPT:
            self.stats.crc_errors += 1
            raise BusError(f'{what}: corrupt status packet')
        if result != sdk.COMM_SUCCESS:
            self.stats.timeouts += 1
            raise BusError(f'{what}: {self.packet.getTxRxResult(result)}')
        if error & 0x7F:
            self.stats.device_errors += 1
            raise BusError(f'{what}: {self.packet.getRxPacketError(error)}')

    def _set_timeout(self, seconds):
        self.timeout = seconds
        ph = getattr(self, 'port_handler', None)
        if ph is not None:  # the SDK's port handler keeps the packet timeout it waits on
            ph.timeout_ms = seconds * 1000.0

    def _open(self):
        sdk = _sdk()
        cls = _port_handler_class()
        ph = cls(self.port)
        ph.timeout_ms = self.timeout * 1000.0
        try:
            ok = ph.setBaudRate(self.baud)
        except PortError:
            raise
        if not ok:
            raise PortError(f'baud {self.baud} is not supported by the Dynamixel SDK')
        self.port_handler = ph
        self.ser = ph.ser
        self.packet = sdk.PacketHandler(2.0)
        self.sync_read = sdk.GroupSyncRead(ph, self.packet, T.FEEDBACK_START, T.FEEDBACK_LEN)
        self.sync_write = sdk.GroupSyncWrite(ph, self.packet, T.ADDR_GOAL_CURRENT, 2)
        self.err_read = sdk.GroupSyncRead(ph, self.packet, T.ADDR_HW_ERROR, 1)
        self.torque_write = sdk.GroupSyncWrite(ph, self.packet, T.ADDR_TORQUE_ENABLE, 1)
        for i in self.ids:
            self.sync_read.addParam(i)
            self.err_read.addParam(i)
            self.sync_write.addParam(i, [0, 0])
            self.torque_write.addParam(i, [0])
        for i in self.ids:  # current control with torque off; read the current limit
            self._check(*self._call(self.packet.write1ByteTxRx, ph, i, T.ADDR_TORQUE_ENABLE, 0), f'id {i} torque off')
            self._check(
                *self._call(self.packet.write1ByteTxRx, ph, i, T.ADDR_OPERATING_MODE, T.MODE_CURRENT),
                f'id {i} operating mode',
            )
            lim, res, err = self._call(self.packet.read2ByteTxRx, ph, i, T.ADDR_CURRENT_LIMIT)
            self._check(res, err, f'id {i} current limit')
            self.limit_units[self.ids.index(i)] = lim
        self.device_limit_units = self.limit_units.copy()
        self._read_return_delays()

    def _read_return_delays(self):
        units = []
        for i in self.ids:
            rdt, res, err = self._call(self.packet.read1ByteTxRx, self.port_handler, i, T.ADDR_RETURN_DELAY_TIME)
            self._check(res, err, f'id {i} return delay time')
            units.append(int(rdt))
        self.return_delay_units = units

    def set_return_delay_time(self, units: int = 0) -> None:
        """Write the Return Delay Time register (EEPROM: torque must be off, as after connect) of every
        servo, then read it back. Only on the user's request (``uk-controller run --set-return-delay-zero``):
        it changes the servos' stored configuration."""
        for i in self.ids:
            self._check(
                *self._call(self.packet.write1ByteTxRx, self.port_handler, i, T.ADDR_RETURN_DELAY_TIME, int(units)),
                f'id {i} return delay time',
            )
        self._read_return_delays()

    def timing_facts(self) -> dict:
        """The servos' Return Delay Time (s), as read at connect (codec.cycle_cost)."""
        if self.return_delay_units is None:
            return {}
        from .codec import RETURN_DELAY_UNIT

        return {'return_delay': [u * RETURN_DELAY_UNIT for u in self.return_delay_units]}

    def motor_torque_limits(self):
        """Current Limit register x current unit x torque constant (motor side N m), read at connect."""
        if self.device_limit_units is None:
            return None
        return np.asarray(self.device_limit_units, float) * self.opt['current_unit'] * self.kt

    def torque_limit_sources(self) -> list:
        if self.device_limit_units is None:
            return super().torque_limit_sources()
        unit = self.opt['current_unit']
        return [
            f'id {i}: Current Limit {int(u)} x {unit * 1e3:g} mA x torque constant {kt:g} N m/A'
            for i, u, kt in zip(self.ids, self.device_limit_units, self.kt)
        ]

    def _close(self):
        self.port_handler.closePort()

    def configure(self, watchdog: float, torque_limit) -> None:
        lim = np.floor(np.asarray(torque_limit, float) / self.kt / self.opt['current_unit'])
        self.limit_units = np.minimum(self.limit_units, np.where(np.isfinite(lim), lim, 32767)).astype(int)
        units = 0 if watchdog <= 0 else min(127, max(1, math.ceil(watchdog / T.BUS_WATCHDOG_UNIT)))
        for i in self.ids:
            self._check(
                *self._call(self.packet.write1ByteTxRx, self.port_handler, i, T.ADDR_BUS_WATCHDOG, 0),
                f'id {i} bus watchdog clear',
            )
            self._check(
                *self._call(self.packet.write1ByteTxRx, self.port_handler, i, T.ADDR_BUS_WATCHDOG, units),
                f'id {i} bus watchdog',
            )

    def enable(self, on: bool) -> None:
        self.stats.transactions += 1
        if not on:
            # one broadcast Sync Write reaches every servo even if some stopped answering
            for i in self.ids:
                self.torque_write.changeParam(i, [0])
            res = self._call(self.torque_write.txPacket)
            if res != _sdk().COMM_SUCCESS:
                raise BusError(f'torque off failed: {self.packet.getTxRxResult(res)}')
            self.stats.ok += 1
            return
        self.write(np.zeros(self.p))
        for i in self.ids:
            self._check(
                *self._call(self.packet.write1ByteTxRx, self.port_handler, i, T.ADDR_TORQUE_ENABLE, 1 if on else 0),
                f'id {i} torque {"on" if on else "off"}',
            )
        self.stats.ok += 1

    def clear_faults(self) -> None:
        for i in self.ids:
            self._call(self.packet.write1ByteTxRx, self.port_handler, i, T.ADDR_BUS_WATCHDOG, 0)
        for k, code in enumerate(self.read_faults()):
            if code:
                self._call(self.packet.reboot, self.port_handler, self.ids[k])

    def read_faults(self) -> np.ndarray:
        res = self._call(self.err_read.txRxPacket)
        self._check(res, 0, 'hardware error status')
        return np.array([self.err_read.getData(i, T.ADDR_HW_ERROR, 1) for i in self.ids], int)

    def write(self, torque) -> None:
        units = np.rint(np.asarray(torque, float) / self.kt / self.opt['current_unit'])
        units = np.clip(np.nan_to_num(units), -self.limit_units, self.limit_units).astype(int)
        for i, u in zip(self.ids, units):
            v = int(u) & 0xFFFF
            self.sync_write.changeParam(i, [v & 0xFF, v >> 8])
        res = self._call(self.sync_write.txPacket)
        if res != _sdk().COMM_SUCCESS:
            self.stats.io_errors += 1
            raise BusError(f'sync write failed: {self.packet.getTxRxResult(res)}')

    def read(self) -> MotorFeedback:
        t0 = time.monotonic()
        res = self._call(self.sync_read.txRxPacket)
        self._check(res, 0, 'sync read')
        o, sr = self.opt, self.sync_read
        pos, vel, cur = np.empty(self.p), np.empty(self.p), np.empty(self.p)
        for k, i in enumerate(self.ids):
            if not sr.isAvailable(i, T.FEEDBACK_START, T.FEEDBACK_LEN):
                self.stats.crc_errors += 1
                raise BusError(f'sync read: no data for id {i}')
            try:
                c = sr.getData(i, T.ADDR_PRESENT_CURRENT, 2)
                v = sr.getData(i, T.ADDR_PRESENT_VELOCITY, 4)
                p = sr.getData(i, T.ADDR_PRESENT_POSITION, 4)
            except IndexError:
                # the SDK took a late status packet of an earlier, shorter request for this
                # one (it matches status packets by id only): discard it and what else is queued
                self.stats.seq_errors += 1
                self._call(self.port_handler.clearPort)
                raise BusError(f'sync read: the answer of id {i} belongs to an earlier request') from None
            cur[k] = (c - 0x10000 if c & 0x8000 else c) * o['current_unit']
            vel[k] = (v - 0x100000000 if v & 0x80000000 else v) * o['velocity_unit']
            pos[k] = (p - 0x100000000 if p & 0x80000000 else p) * o['position_unit']
        self.stats.rtt.append(time.monotonic() - t0)
        self.stats.ok += 1
        return MotorFeedback(
            position=pos,
            velocity=vel,
            torque=self.kt * cur,
            fault=np.zeros(self.p, int),
            enabled=True,
            stamp=time.monotonic(),
        )

    def transact(self, torque) -> MotorFeedback:
        self.stats.transactions += 1
        t0 = time.monotonic()
        self.write(torque)
        fb = self.read()
        self.stats.rtt[-1] = time.monotonic() - t0
        return fb
