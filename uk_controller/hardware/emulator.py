"""Device emulators on the far side of a pseudo-terminal, backed by a plant.

A :class:`PtyLink` is an ``os.openpty`` pair in raw mode with a stable symlink
(``link.path``) that the host opens like ``/dev/ttyUSB0``; ``unplug()`` closes
the master and removes the link (the host sees a hang-up, then ENOENT), and
``replug()`` makes a fresh pair behind the same path.

A :class:`DeviceEmulator` (one subclass per protocol, ``protocols/<name>/device.py``, built by
:func:`uk_controller.hardware.registry.make_emulator`) runs in a thread (or a
forked process for benchmarks), parses requests, drives a *plant* -- any object
with ``reset(q, qd)``, ``step(u, dt)``, ``q``, ``qd`` (and optionally
``joint_names``), e.g. the embedded ``UKPlant`` -- and answers with feedback.

Time: ``mode='lockstep'`` advances the plant by exactly ``dt`` per torque
command cycle (so the serial loop reproduces the in-process simulation
step for step); ``mode='realtime'`` integrates the plant with the device
clock. The device clock (watchdogs included) is ``clock``, the wall clock
``time.monotonic`` by default; fault scenarios share a :class:`SteppedClock`
between host and device so that their timing does not depend on how busy
the machine is.

Line rate: a pty moves bytes at memory speed whatever baud is set, so the
emulator imposes the UART timing itself when ``baud`` is given: it waits
``10 / baud`` s per byte (8N1: start + 8 data + stop bits) for every request
it receives before acting on it, and for every byte it sends before writing
the answer (the host sees the last byte when a real line would deliver it).

Reply timing of real devices and adapters: :meth:`DeviceEmulator.answer_delay` is the time a device
waits before each answer (the Dynamixel servos' Return Delay Time register), and ``usb_latency`` (s)
models an FTDI USB-serial adapter's latency timer: the answers to a request reach the host together at
the next tick of a grid of that period (FTDI AN232B-04: the chip sends what it holds when its latency
timer expires; the timer restarts whenever it sends). The cycle budget of ``uk-controller run``
(:mod:`.bus_timing`) predicts the loop period from the same quantities.

Joint limits: :class:`JointLimitedPlant` gives a plant the hard stops of the robot description
(``uk-controller emulate`` uses it), so a joint the motors cannot hold stops at its limit instead of
falling without end.

Fault injection (:class:`Faults`, changeable while running): corrupted bytes
in either direction, dropped / duplicated / partially written / truncated
answers, added latency, a device that stops answering, a port that vanishes.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import select
import tempfile
import threading
import time
import tty
from dataclasses import dataclass

import numpy as np

__all__ = ['SteppedClock', 'PtyLink', 'Faults', 'DeviceEmulator', 'IndependentJointsPlant', 'JointLimitedPlant']


class SteppedClock:
    """A clock that only moves when told: ``clock()`` reads it, ``advance(dt)`` moves it.

    Shared by a host :class:`~.safety.SafeBus` and a device emulator, it makes
    watchdog periods count control cycles instead of wall time, so a test
    process that is descheduled for a while cannot trip (or fail to trip) a
    watchdog. Bus I/O still waits on the wall clock (the bus timeout).
    """

    def __init__(self, start: float = 0.0):
        self.t = float(start)

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> float:
        self.t += dt
        return self.t


class PtyLink:
    """A raw pty pair behind a stable symlink path."""

    def __init__(self, directory: str | None = None, name: str = 'ttyEMU0'):
        self._tmp = None
        if directory is None:
            self._tmp = tempfile.mkdtemp(prefix='ukemu_')
            directory = self._tmp
        self.path = os.path.join(directory, name)
        self.master = self.slave = None
        self.replug()

    def replug(self):
        self.unplug()
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        tty.setraw(self.master)
        os.set_blocking(self.master, False)
        tmp = self.path + '.new'
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.ttyname(self.slave), tmp)
        os.replace(tmp, self.path)

    @property
    def plugged(self) -> bool:
        return self.master is not None

    def unplug(self):
        if os.path.lexists(self.path):
            os.unlink(self.path)
        for fd in (self.master, self.slave):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.master = self.slave = None

    def close(self):
        self.unplug()
        if self._tmp:
            try:
                os.rmdir(self._tmp)
            except OSError:
                pass


@dataclass
class Faults:
    """Fault injection settings; probabilities are per frame/answer."""

    corrupt_rx: float = 0.0  # flip one byte of a received request chunk
    corrupt_tx: float = 0.0  # flip one byte of an answer
    drop: float = 0.0  # answer not sent
    duplicate: float = 0.0  # answer sent twice
    partial: float = 0.0  # answer written in 2-3 pieces with short gaps
    truncate: float = 0.0  # answer cut short (the rest is never sent)
    latency: float = 0.0  # s (wall clock) before every answer; the device handles nothing
    # meanwhile (an overloaded driver), so requests queue up
    silent: bool = False  # device keeps working but never answers

    def clear(self):
        self.__init__()


class IndependentJointsPlant:
    """Stand-in plant: p decoupled joints ``I qdd + c qd = u`` (semi-implicit Euler
    with exact damping factor per step). For benchmarks and tests."""

    def __init__(self, inertia, damping=0.0):
        self.inertia = np.atleast_1d(np.asarray(inertia, float))
        self.damping = np.broadcast_to(np.asarray(damping, float), self.inertia.shape).copy()
        self.n = self.inertia.size
        self.joint_names = [f'joint{i + 1}' for i in range(self.n)]
        self.reset(np.zeros(self.n), np.zeros(self.n))

    def reset(self, q, qd):
        self.q = np.array(q, float)
        self.qd = np.array(qd, float)
        self.t = 0.0

    def step(self, u, dt):
        # exact solution of I v' = u - c v over dt for constant u, then q += mean velocity
        u = np.asarray(u, float)
        c, m = self.damping, self.inertia
        with np.errstate(divide='ignore', invalid='ignore'):
            a = np.exp(-c * dt / m)
            v_inf = np.where(c > 0, u / np.where(c > 0, c, 1.0), 0.0)
            v1 = np.where(c > 0, v_inf + (self.qd - v_inf) * a, self.qd + u / m * dt)
            dq = np.where(
                c > 0,
                v_inf * dt + (self.qd - v_inf) * (1 - a) * m / np.where(c > 0, c, 1.0),
                self.qd * dt + 0.5 * u / m * dt * dt,
            )
        self.q = self.q + dq
        self.qd = v1
        self.t += dt


class JointLimitedPlant:
    """`plant` with hard stops at the joint limits of the description: after every step a coordinate
    past [lower, upper] is put back on the limit and its velocity into the stop removed (an inelastic
    stop; ``stops`` counts the steps that hit one). ``lower``/``upper`` are per coordinate of
    ``plant.joint_names`` (+-inf: no stop)."""

    def __init__(self, plant, lower, upper):
        self.plant = plant
        self.joint_names = list(getattr(plant, 'joint_names', []))
        self.lower = np.asarray(lower, float)
        self.upper = np.asarray(upper, float)
        self.stops = 0

    @classmethod
    def from_setup(cls, plant, setup):
        """The description's position limits (``setup.model.position_limits``), matched by joint name."""
        lo, hi = setup.model.position_limits
        index = {name: k for k, name in enumerate(setup.joint_names)}
        names = list(getattr(plant, 'joint_names', setup.joint_names))
        lower = np.array([lo[index[j]] if j in index else -np.inf for j in names])
        upper = np.array([hi[index[j]] if j in index else np.inf for j in names])
        return cls(plant, lower, upper)

    q = property(lambda self: self.plant.q)
    qd = property(lambda self: self.plant.qd)
    t = property(lambda self: self.plant.t)

    def reset(self, q, qd, *args):
        self.plant.reset(q, qd, *args)

    def step(self, u, dt):
        out = self.plant.step(u, dt)
        q = np.array(self.plant.q, float)
        below, above = q < self.lower, q > self.upper
        if below.any() or above.any():
            qd = np.array(self.plant.qd, float)
            qd[(below & (qd < 0)) | (above & (qd > 0))] = 0.0
            self.plant.reset(np.clip(q, self.lower, self.upper), qd, self.plant.t)
            self.stops += 1
        return out


def _precise_sleep(duration: float):
    if duration <= 0:
        return
    end = time.perf_counter() + duration
    if duration > 0.0015:
        time.sleep(duration - 0.001)
    while time.perf_counter() < end:
        pass


class DeviceEmulator:
    """Protocol-independent part of a device emulator (see module docstring).

    Subclasses implement ``handle(data) -> list[bytes]`` using the helpers
    ``motor_state()``, ``set_motor_torque()``, ``step_plant()`` and
    ``feed_watchdog()``.
    """

    protocol = ''
    select_period = 0.002

    def __init__(
        self,
        plant,
        hw,
        *,
        dt: float = 0.001,
        mode: str = 'lockstep',
        baud: int | None = None,
        link: PtyLink | None = None,
        faults: Faults | None = None,
        seed: int = 1,
        watchdog: float = 0.0,
        clock=time.monotonic,
        options: dict | None = None,
        usb_latency: float = 0.0,
    ):
        self.clock = clock  # device time: watchdogs, realtime plant (a SteppedClock in tests)
        self.plant = plant
        self.hw = hw  # HardwareConfig: ids, gear, kt, direction, offset (actuator order)
        self.options = dict(options or {})  # hardware.<protocol> with the registry's defaults
        self.p = hw.p
        names = list(getattr(plant, 'joint_names', []))
        self.joint_index = [names.index(j) if (j is not None and j in names) else k for k, j in enumerate(hw.joints)]
        self.dt = float(dt)
        self.time_mode = mode
        self.baud = baud
        self.byte_time = 10.0 / baud if baud else 0.0
        self.usb_latency = float(usb_latency)  # s: FTDI latency timer model (module docstring), 0 = none
        self._tick0 = time.monotonic()  # the latency timer's grid starts here
        self.link = link or PtyLink()
        self.faults = faults or Faults()
        self.rng = random.Random(seed)
        self.watchdog = float(watchdog)  # device-side watchdog (0 = off until configured)
        self.enabled = False
        self.tau_m = np.zeros(self.p)  # motor torque currently applied
        self.current_limit = np.full(self.p, np.inf)
        self.last_command = self.clock()
        self.watchdog_tripped = False
        self._last_rt = None
        # records for tests
        self.counters = {
            'rx_bytes': 0,
            'rx_frames': 0,
            'rx_bad': 0,
            'tx_frames': 0,
            'steps': 0,
            'watchdog_trips': 0,
            'dropped': 0,
            'duplicated': 0,
            'corrupted': 0,
            'truncated': 0,
            'partial': 0,
        }
        self.max_abs_effort = np.zeros(self.p)  # joint side, max over everything applied
        self.effort_log = []  # (plant time, joint efforts) per lockstep step
        self._run = False
        self._thread = None
        self._proc = None

    # ---- plant interface -------------------------------------------------------
    @property
    def port(self) -> str:
        return self.link.path

    def motor_state(self):
        """Motor-side (theta, omega) of every motor from the plant state."""
        q = np.asarray(self.plant.q)[self.joint_index]
        qd = np.asarray(self.plant.qd)[self.joint_index]
        return self.hw.joint_to_motor(q, qd)

    def joint_effort(self):
        return self.hw.motor_torque_to_effort(self.tau_m if self.enabled else np.zeros(self.p))

    def set_motor_torque(self, tau_m):
        """Apply motor torques (clamped to the device current limit). Returns True if clamped."""
        tau = np.asarray(tau_m, float)
        lim = self.current_limit * self.hw.kt
        clamped = np.clip(tau, -lim, lim)
        self.tau_m = clamped
        u = np.abs(self.joint_effort())
        np.maximum(self.max_abs_effort, u, out=self.max_abs_effort)
        return bool(np.any(clamped != tau))

    def step_plant(self):
        """Lockstep: advance the plant by dt with the applied torque."""
        if self.time_mode != 'lockstep':
            return
        u = self.joint_effort()
        self.plant.step(u, self.dt)
        self.counters['steps'] += 1
        if len(self.effort_log) < 200000:
            self.effort_log.append(u.copy())

    def feed_watchdog(self):
        self.last_command = self.clock()
        self.watchdog_tripped = False

    def _tick(self):
        now = self.clock()
        if self.enabled and self.watchdog > 0 and not self.watchdog_tripped and now - self.last_command > self.watchdog:
            self.watchdog_tripped = True
            self.tau_m = np.zeros(self.p)
            self.counters['watchdog_trips'] += 1
        if self.time_mode == 'realtime':
            if self._last_rt is None:
                self._last_rt = now
            k = int((now - self._last_rt) / self.dt)
            if k > 0:
                u = self.joint_effort()
                for _ in range(min(k, 100)):
                    self.plant.step(u, self.dt)
                self._last_rt += k * self.dt
                self.counters['steps'] += k

    # ---- protocol hook ---------------------------------------------------------------
    def handle(self, data: bytes) -> list:
        raise NotImplementedError

    def answer_delay(self, frame: bytes) -> float:
        """s the device waits before sending `frame` (a protocol's hook: the Dynamixel Return Delay Time)."""
        return 0.0

    # ---- I/O loop ----------------------------------------------------------------------
    def _send(self, frame: bytes, held=None):
        """Put `frame` on the line (faults applied); with `held` (a list) the bytes go there instead of
        to the host: the USB adapter holds them until its latency timer's tick (:meth:`_deliver`)."""
        f, rng, fd = self.faults, self.rng, self.link.master
        if f.silent or fd is None:
            return
        if f.drop and rng.random() < f.drop:
            self.counters['dropped'] += 1
            return
        if f.corrupt_tx and rng.random() < f.corrupt_tx:
            b = bytearray(frame)
            k = rng.randrange(len(b))
            b[k] ^= 1 << rng.randrange(8) or 1
            frame = bytes(b)
            self.counters['corrupted'] += 1
        if f.truncate and rng.random() < f.truncate:
            frame = frame[: rng.randrange(1, max(2, len(frame) - 1))]
            self.counters['truncated'] += 1
        copies = 2 if (f.duplicate and rng.random() < f.duplicate) else 1
        self.counters['duplicated'] += copies - 1
        _precise_sleep(f.latency + self.answer_delay(frame) + self.byte_time * len(frame) * copies)
        if held is not None:
            held.append(frame * copies)
            self.counters['tx_frames'] += 1
            return
        pieces = [frame]
        if f.partial and rng.random() < f.partial and len(frame) > 3:
            a = rng.randrange(1, len(frame) - 1)
            pieces = [frame[:a], frame[a:]]
            self.counters['partial'] += 1
        for _ in range(copies):
            for i, piece in enumerate(pieces):
                if i:
                    time.sleep(0.0005)
                try:
                    os.write(fd, piece)
                except OSError:
                    return
        self.counters['tx_frames'] += 1

    def poll(self, timeout: float | None = None):
        """One iteration of the device loop (read, act, answer, tick)."""
        fd = self.link.master
        if fd is None:
            time.sleep(self.select_period)
            return
        try:
            ready, _, _ = select.select([fd], [], [], self.select_period if timeout is None else timeout)
        except (OSError, ValueError, TypeError):
            return
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b''
            if data:
                self.counters['rx_bytes'] += len(data)
                _precise_sleep(self.byte_time * len(data))
                if self.faults.corrupt_rx and self.rng.random() < self.faults.corrupt_rx:
                    b = bytearray(data)
                    b[self.rng.randrange(len(b))] ^= 0x10
                    data = bytes(b)
                frames = self.handle(data)
                if self.usb_latency > 0 and frames:
                    self._deliver(frames)
                else:
                    for frame in frames:
                        self._send(frame)
        self._tick()

    def _deliver(self, frames):
        """The answers through an adapter with a latency timer: on the line one after the other, then
        to the host together at the timer's next tick (a grid of period ``usb_latency``)."""
        held = []
        for frame in frames:
            self._send(frame, held)
        if not held or self.link.master is None:
            return
        L = self.usb_latency
        now = time.monotonic()
        tick = self._tick0 + L * math.ceil((now - self._tick0) / L)
        _precise_sleep(tick - now)
        try:
            os.write(self.link.master, b''.join(held))
        except OSError:
            pass

    def serve(self):
        while self._run:
            self.poll()

    def start(self, process: bool = False):
        """Run in a daemon thread (default) or a forked process (benchmarks)."""
        self._run = True
        if process:
            ctx = multiprocessing.get_context('fork')
            self._proc = ctx.Process(target=self.serve, daemon=True)
            self._proc.start()
        else:
            self._thread = threading.Thread(target=self.serve, daemon=True, name=f'emu-{self.protocol}')
            self._thread.start()
        return self

    def stop(self):
        self._run = False
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join(timeout=2.0)
            self._proc = None

    def close(self):
        self.stop()
        self.link.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # ---- hot unplug -----------------------------------------------------------------------
    def unplug(self):
        """The port disappears (USB adapter pulled): the device loses power too."""
        self.link.unplug()
        self.enabled = False
        self.tau_m = np.zeros(self.p)

    def replug(self):
        self.link.replug()
        self.reset_protocol()

    def reset_protocol(self):
        """Hook: forget partial input after a replug."""
