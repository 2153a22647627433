"""An slcan USB-CAN adapter with MIT-mode motors behind it, on one pty.

The adapter side speaks the LAWICEL slcan ASCII protocol as python-can's ``slcan`` interface uses it
(every command ends with ``\\r``): ``C`` close the channel, ``S0``..``S8`` bit rate (only while
closed), ``O`` / ``L`` open (normal / listen-only), an empty command (python-can writes the empty data
bit rate code of a classic-CAN set-up), ``V`` / ``N`` version and serial number, ``F`` status flags,
``tiiildd..`` / ``Tiiiiiiiildd..`` transmit a standard / extended frame. It answers ``\\r`` (OK) or
``\\a`` (error: a frame while the channel is closed, a bit rate while open, an unknown command), ``z\\r`` /
``Z\\r`` after a transmitted frame (LAWICEL), and passes frames from the bus up as ``tiiildd..\\r``.

The motors (one per hardware id, codec ranges per motor) follow the mini-cheetah firmware: every frame
to a motor's id is answered with a state reply to the master id; the enter / exit motor mode frames
switch torque on / off; a command's torque ``kp (p - theta) + kd (v - omega) + tau`` (evaluated when
it arrives, held until the next) acts only in motor mode, clipped to +-t_max. Damiao motors (reply
``damiao``) also take the TIMEOUT register (frame to 0x7FF): without a command for that long in motor
mode they disable themselves with error 0xD; a test injects the other error codes with
:meth:`CanMitDevice.inject_error` (the motor disables itself and reports the code until cleared, as the
drives do). In lockstep the plant advances one period when every motor has had a command, and the
replies to that set's commands follow the step.
"""

from __future__ import annotations

import numpy as np

from ...emulator import DeviceEmulator
from . import codec as mit

OK, ERROR = b'\r', b'\a'
SLCAN_BITRATES = {
    'S0': 10000,
    'S1': 20000,
    'S2': 50000,
    'S3': 100000,
    'S4': 125000,
    'S5': 250000,
    'S6': 500000,
    'S7': 750000,
    'S8': 1000000,
}


class CanMitDevice(DeviceEmulator):
    protocol = 'can_mit'

    def __init__(self, plant, hw, **kw):
        super().__init__(plant, hw, **kw)
        o = self.options
        sections = o.get('motors') or [{}] * self.p
        self.ranges = [mit.motor_ranges(s) for s in sections]
        self.master_id = int(o.get('master_id', mit.OPTIONS['master_id']))
        self.index = {int(i): k for k, i in enumerate(hw.ids)}
        self.buf = bytearray()
        self.channel_open = False
        self.bitrate = None
        self.motor_mode = np.zeros(self.p, bool)
        self.error = np.zeros(self.p, int)  # Damiao error code (0: none)
        self.injected = np.zeros(self.p, int)
        self.timeout = np.zeros(self.p)  # Damiao TIMEOUT register, s (0: off)
        self.last_rx = np.full(self.p, self.clock())
        self.command = np.zeros((self.p, 5))  # p, v, kp, kd, tau of the last command
        self.commanded = set()
        self.waiting = []  # lockstep: motors whose reply waits for the period's end
        self.frames_seen = []  # (id, data) of every frame to a motor (tests: the exit frame)

    # ---- adapter -------------------------------------------------------------------------------
    def reset_protocol(self):
        self.buf.clear()
        self.channel_open = False
        self.motor_mode[:] = False
        self.waiting = []
        self.commanded.clear()
        self._apply()

    def handle(self, data: bytes) -> list:
        self.buf += data
        out = []
        while True:
            k = self.buf.find(b'\r')
            if k < 0:
                if len(self.buf) > 64:  # no slcan line is longer: garbage
                    self.buf.clear()
                    self.counters['rx_bad'] += 1
                return out
            line = bytes(self.buf[:k])
            del self.buf[: k + 1]
            out.extend(self._command(line))

    def _command(self, line: bytes) -> list:
        try:
            text = line.decode('ascii')
        except UnicodeDecodeError:
            self.counters['rx_bad'] += 1
            return [ERROR]
        if text == '':
            return [OK]
        head = text[0]
        if head == 'O' or head == 'L':
            self.channel_open = True
            return [OK]
        if head == 'C':
            self.channel_open = False
            return [OK]
        if head == 'S' and text in SLCAN_BITRATES:
            if self.channel_open:
                return [ERROR]
            self.bitrate = SLCAN_BITRATES[text]
            return [OK]
        if head == 'V':
            return [b'V1013\r']
        if head == 'N':
            return [b'NUK01\r']
        if head == 'F':
            return [b'F00\r']
        if head in 'tT' and self.channel_open:
            n_id = 3 if head == 't' else 8
            try:
                can_id = int(text[1 : 1 + n_id], 16)
                dlc = int(text[1 + n_id])
                payload = bytes.fromhex(text[2 + n_id :])
                if dlc > 8 or len(payload) != dlc:
                    raise ValueError
            except (ValueError, IndexError):
                self.counters['rx_bad'] += 1
                return [ERROR]
            self.counters['rx_frames'] += 1
            ack = [b'z\r' if head == 't' else b'Z\r']
            if head == 'T':
                return ack  # no MIT motor has an extended id
            # one answer: the acknowledgement, then the motors' replies as the adapter receives them
            return [
                ack[0] + b''.join(self._frame_line(self.master_id, reply) for reply in self._bus_frame(can_id, payload))
            ]
        self.counters['rx_bad'] += 1
        return [ERROR]

    @staticmethod
    def _frame_line(can_id: int, data: bytes) -> bytes:
        return f't{can_id:03X}{len(data)}{data.hex().upper()}\r'.encode('ascii')

    # ---- motors ------------------------------------------------------------------------------
    def _bus_frame(self, can_id: int, data: bytes) -> list:
        """The frames the motors put on the bus in answer to one frame (replies to the master id)."""
        if can_id == mit.DAMIAO_REGISTER_ID and len(data) == 8:
            k = self.index.get(data[0] | (data[1] << 8))
            if k is None or self.ranges[k].reply != 'damiao':
                return []
            if data[2] == mit.DAMIAO_WRITE and data[3] == mit.DAMIAO_RID_TIMEOUT:
                self.timeout[k] = int.from_bytes(data[4:8], 'little') * mit.DAMIAO_TIMEOUT_UNIT
                return [bytes(data)]  # the write is echoed
            if data[2] == mit.DAMIAO_REFRESH:
                return [self._reply(k)]
            return []
        k = self.index.get(can_id)
        if k is None:
            return []
        self.frames_seen.append((can_id, bytes(data)))
        del self.frames_seen[:-1000]
        self.last_rx[k] = self.clock()
        kind = mit.SPECIAL.get(bytes(data))
        if kind == 'enter':
            if not self.error[k]:
                self.motor_mode[k] = True
                self.command[k] = 0.0
                self.feed_watchdog()
        elif kind == 'exit':
            self.motor_mode[k] = False
            if not self.injected[k]:
                self.error[k] = 0  # a latched timeout clears with the next enable cycle
        elif kind == 'zero':
            pass  # the plant's coordinates are the motor's: nothing to move
        elif len(data) == mit.COMMAND_LEN:
            self.command[k] = mit.unpack_command(data, self.ranges[k])
            self.feed_watchdog()
            self.commanded.add(k)
            self._apply()
            if self.time_mode == 'lockstep':
                # one plant period per full command set; the replies of the set go out after it, so
                # every motor reports the state at the end of the period (as the other protocols' reads)
                if k not in self.waiting:
                    self.waiting.append(k)
                if len(self.commanded) < self.p:
                    return []
                self.commanded.clear()
                self.step_plant()
                self._apply()
                done, self.waiting = self.waiting, []
                return [self._reply(j) for j in done]
        else:
            return []
        self._apply()
        return [self._reply(k)]

    def _apply(self):
        """The torque of every motor from its last command (MIT law) where it is in motor mode."""
        theta, omega = self.motor_state()
        p, v, kp, kd, tau = self.command.T
        t_max = np.array([r.t_max for r in self.ranges])
        law = np.clip(kp * (p - theta) + kd * (v - omega) + tau, -t_max, t_max)
        self.enabled = bool(self.motor_mode.any())
        self.set_motor_torque(np.where(self.motor_mode, law, 0.0))

    def _reply(self, k: int) -> bytes:
        theta, omega = self.motor_state()
        r = self.ranges[k]
        err = self.error[k] or (mit.DAMIAO_ENABLED if self.motor_mode[k] else mit.DAMIAO_DISABLED)
        return mit.pack_reply(
            self.hw.ids[k], theta[k], omega[k], self.tau_m[k] if self.motor_mode[k] else 0.0, r, error=err
        )

    def inject_error(self, k: int, code: int):
        """Motor `k` reports Damiao error `code` (0: clear) and, for a fault, disables itself."""
        self.injected[k] = int(code)
        self.error[k] = int(code)
        if code:
            self.motor_mode[k] = False
        self._apply()

    def _tick(self):
        super()._tick()
        now = self.clock()
        late = self.motor_mode & (self.timeout > 0) & (now - self.last_rx > self.timeout)
        if late.any():
            self.motor_mode[late] = False
            self.error[late] = 0xD  # lost communication
            self.counters['watchdog_trips'] += int(late.sum())
            self._apply()

    # ---- records for tests -------------------------------------------------------------------
    def saw_exit(self) -> list:
        """The motor ids whose last frame was the exit motor mode frame."""
        last = {}
        for can_id, data in self.frames_seen:
            last[can_id] = data
        return sorted(i for i, d in last.items() if d == mit.EXIT_MOTOR_MODE)
