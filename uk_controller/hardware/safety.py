"""Safety between the controller (or the ROS effort topic) and a motor bus.

:class:`SafeBus` is used by both the CLI runner and ``serial_bridge_node``:

- **limits before sending**: non-finite efforts become zero; each effort is
  clipped to ``u_max`` (actuator effort limit and motor torque limit x gear, the
  latter lowered at connect to what the devices enforce, read from them:
  :meth:`~.bus.MotorBus.motor_torque_limits`); a cycle whose effort was clipped is
  reported ``saturated`` (:attr:`SafeBus.status`, diagnostics ``saturated_cycles``,
  ``saturated_motors``), never as plain ``armed``;
  an effort pushing a joint further past its position limit, or accelerating
  it beyond its velocity limit, is set to zero (:class:`EffortLimiter`);
- **host watchdog**: torque is only ever sent while the newest valid feedback
  and the effort command are both younger than ``watchdog`` seconds, judged
  at the moment of sending; when either is stale at the start of a cycle the
  bus is commanded torque-off (a *trip*); when they only aged during the
  cycle (enabling a slow bus) nothing is sent that cycle (``stale_skips``);
- **arming**: after (re)connecting, torque stays off until ``arm_after``
  consecutive valid feedback frames were received and a fresh effort exists;
- **reconnect**: a vanished port is closed and reopened every
  ``reconnect_interval`` s; the device comes back torque-off;
- **shutdown**: ``shutdown()`` sends zero torque, disables torque and closes
  the port; it is idempotent and safe to call from ``finally`` blocks.

The device-side watchdog (``MotorBus.configure``) is the backstop if the host
dies: it is set to the same period, so the motor stops even without a host.
"""

from __future__ import annotations

import time
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from .bus import BusError, PortError


def patient(bus):
    """``bus.patient()`` (the set-up timeout of :meth:`uk_controller.hardware.bus.MotorBus.patient`), or no
    change for a stand-in bus without one."""
    method = getattr(bus, 'patient', None)
    return method() if method is not None else nullcontext()


DISCONNECTED, SAFE, ARMED = 'disconnected', 'safe', 'armed'
SATURATED = 'saturated'  # armed, but an effort was clipped to what the motor gives


class EffortLimiter:
    """Joint-side effort limits of :class:`~.calibration.HardwareConfig`."""

    def __init__(self, hw):
        self.u_max = np.asarray(hw.u_max, float)
        self.q_lo, self.q_hi, self.qd_max = hw.q_lo, hw.q_hi, hw.qd_max
        self.counts = {'clipped': 0, 'position': 0, 'velocity': 0, 'not_finite': 0}
        self.clipped = np.zeros(len(self.u_max), dtype=bool)  # which efforts the last apply clipped

    def apply(self, u, q=None, qd=None):
        """Safe copy of ``u`` for joint state (q, qd) of the actuated joints."""
        u = np.array(u, dtype=float)
        bad = ~np.isfinite(u)
        if bad.any():
            self.counts['not_finite'] += 1
            u[bad] = 0.0
        np.greater(np.abs(u), self.u_max, out=self.clipped)
        if self.clipped.any():
            self.counts['clipped'] += 1
            np.clip(u, -self.u_max, self.u_max, out=u)
        if q is not None:
            out = ((q > self.q_hi) & (u > 0)) | ((q < self.q_lo) & (u < 0)) | ~np.isfinite(q)
            if out.any():
                self.counts['position'] += 1
                u[out] = 0.0
        if qd is not None:
            fast = ((np.abs(qd) > self.qd_max) & (u * qd > 0)) | ~np.isfinite(qd)
            if fast.any():
                self.counts['velocity'] += 1
                u[fast] = 0.0
        return u


@dataclass
class Reading:
    """Joint-side feedback of one cycle (actuator order)."""

    q: np.ndarray  # positions of the actuated joints
    qd: np.ndarray
    effort: np.ndarray  # joint-side effort from the motor torque feedback
    valid: bool
    stamp: float
    state: str
    sent: np.ndarray  # joint-side effort sent this cycle (zeros when not armed)


class SafeBus:
    """Watchdog, limits, arming and reconnect around a :class:`~.bus.MotorBus`."""

    def __init__(
        self,
        hw,
        bus_factory,
        *,
        watchdog=None,
        arm_after=3,
        reconnect_interval=0.25,
        configure_device=True,
        clock=time.monotonic,
        log=None,
    ):
        self.hw = hw
        self.bus_factory = bus_factory
        self.watchdog = float(watchdog if watchdog is not None else hw.watchdog)
        self.arm_after = int(arm_after)
        self.reconnect_interval = float(reconnect_interval)
        self.configure_device = configure_device
        self.clock = clock
        self.log = log or (lambda msg: None)
        self.limiter = EffortLimiter(hw)
        self.bus = None
        self.state = DISCONNECTED
        self.reason = 'not connected'
        self.last_feedback = -np.inf  # time of the newest valid feedback
        self.last_reading = None
        self.valid_in_row = 0
        self._last_attempt = -np.inf
        self.counters = {
            'watchdog_trips': 0,
            'reconnects': 0,
            'connect_failures': 0,
            'invalid_feedback': 0,
            'bus_errors': 0,
            'arms': 0,
            'cycles': 0,
            'faults': 0,
            'sent': 0,
            'stale_skips': 0,
            'saturated_cycles': 0,
        }
        self.saturated = np.zeros(hw.p, dtype=bool)  # efforts clipped this cycle (by the limiter or marked
        #                                               by the caller: mark_saturated)
        self.sent_log = deque(maxlen=100000)  # (t, feedback_age, effort_age, |u|/u_max max)
        self.first_error = None

    # ---- connection -----------------------------------------------------------
    def connect(self, raise_errors=False) -> bool:
        """(Re)open the port, torque off, configure the device watchdog/limits."""
        self._last_attempt = self.clock()
        bus = None
        try:
            bus = self.bus_factory()
            # the first connect is the set-up: its answers may be late (MotorBus.patient); a reconnect runs
            # inside the loop and keeps the cycle's short timeout (a failed one is retried anyway)
            with patient(bus) if self.bus is None else nullcontext():
                bus.open()
                read_limits = getattr(bus, 'motor_torque_limits', None)  # a MotorBus has it; stand-ins may not
                device_limits = read_limits() if read_limits is not None else None
                if device_limits is not None:
                    self.hw.apply_device_limits(device_limits)
                bus.enable(False)
                if self.configure_device:
                    bus.configure(self.watchdog, self.hw.tau_m_max)
                    bus.clear_faults()
        except BusError as exc:
            self.counters['connect_failures'] += 1
            if bus is not None:
                try:
                    bus.close()
                except Exception:  # noqa: BLE001
                    pass
            self.reason = str(exc)
            if raise_errors:
                raise
            return False
        if self.bus is not None:
            self.counters['reconnects'] += 1
            if self.bus is not bus:
                self._carry_stats(self.bus, bus)
        self.bus = bus
        self.state = SAFE
        self.valid_in_row = 0
        self.reason = 'connected, torque off until feedback is valid'
        self.log(f'serial bus {self.hw.protocol} on {bus.port}: connected (torque off)')
        return True

    @staticmethod
    def _carry_stats(old, new):
        new.stats = old.stats

    def _lost(self, exc):
        self.log(f'serial bus lost: {exc}; torque off, reconnecting')
        self.reason = f'port lost: {exc}'
        if self.bus is not None:
            try:
                self.bus.close()
            except Exception:  # noqa: BLE001
                pass
        self.state = DISCONNECTED
        self.valid_in_row = 0
        self._last_attempt = self.clock()  # retry every reconnect_interval from now

    def trip(self, reason):
        """Torque off now (watchdog, invalid feedback, fault)."""
        if self.state == ARMED:
            self.counters['watchdog_trips'] += 1
            self.log(f'torque off: {reason}')
        self.reason = reason
        self.valid_in_row = 0
        if self.state == DISCONNECTED:
            return
        self.state = SAFE
        try:
            self.bus.enable(False)
        except PortError as exc:
            self._lost(exc)
        except BusError:
            self.counters['bus_errors'] += 1  # the device watchdog stops it anyway

    # ---- one cycle ---------------------------------------------------------------
    def cycle(self, effort=None, effort_stamp=None) -> Reading | None:
        """Send ``effort`` (joint side, actuator order) if it is safe, read feedback.

        Returns the newest :class:`Reading`, or None when there is no port.
        """
        self.counters['cycles'] += 1
        now = self.clock()
        if self.state == DISCONNECTED:
            if now - self._last_attempt < self.reconnect_interval or not self.connect():
                return None
        effort_age = np.inf if (effort is None or effort_stamp is None) else now - effort_stamp
        effort_ok = effort is not None and effort_age <= self.watchdog
        feedback_age = now - self.last_feedback
        if self.state == ARMED and not (effort_ok and feedback_age <= self.watchdog):
            self.trip(
                'watchdog: '
                + ('no effort command' if not effort_ok else 'no valid feedback')
                + f' within {self.watchdog * 1e3:.0f} ms'
            )
            if self.state == DISCONNECTED:
                return None
        if self.state == SAFE and effort_ok and self.valid_in_row >= self.arm_after and feedback_age <= self.watchdog:
            try:
                self.bus.enable(True)
                self.state = ARMED
                self.counters['arms'] += 1
                self.reason = ''
            except PortError as exc:
                self._lost(exc)
                return None
            except BusError as exc:
                self.counters['bus_errors'] += 1
                self.reason = f'enable failed: {exc}'
        sent = np.zeros(self.hw.p)
        self.saturated[:] = False
        try:
            now = self.clock()
            if self.state == ARMED and (now - self.last_feedback > self.watchdog or now - effort_stamp > self.watchdog):
                # the inputs aged within this cycle (a slow enable on a slow bus): send nothing,
                # refresh the feedback; the next cycle sends, or trips if the command is stale
                self.counters['stale_skips'] += 1
                fb = self.bus.read()
            elif self.state == ARMED:
                r = self.last_reading
                sent = self.limiter.apply(effort, r.q, r.qd)
                self.saturated |= self.limiter.clipped
                self.sent_log.append(
                    (
                        now,
                        now - self.last_feedback,
                        now - effort_stamp,
                        float(np.max(np.abs(sent) / self.hw.u_max, initial=0.0)),
                    )
                )
                fb = self.bus.transact(self.hw.effort_to_motor_torque(sent))
                self.counters['sent'] += 1
                if self.saturated.any():
                    self.counters['saturated_cycles'] += 1
            else:
                fb = self.bus.read()
        except PortError as exc:
            self._lost(exc)
            return None
        except BusError as exc:
            self.counters['bus_errors'] += 1
            if self.first_error is None:
                self.first_error = str(exc)
            if self.state == ARMED and self.clock() - self.last_feedback > self.watchdog:
                self.trip(f'watchdog: no valid feedback within {self.watchdog * 1e3:.0f} ms ({exc})')
            return self.last_reading
        q, qd = self.hw.motor_to_joint(fb.position, fb.velocity)
        u_fb = self.hw.motor_torque_to_effort(fb.torque)
        valid = bool(np.all(np.isfinite(q)) and np.all(np.isfinite(qd)) and not np.any(fb.fault))
        t = self.clock()
        if valid:
            self.last_feedback = t
            self.valid_in_row += 1
        else:
            self.counters['invalid_feedback'] += 1
            if np.any(fb.fault):
                self.counters['faults'] += 1
            self.trip('invalid feedback' + (f' ({self.bus.describe_faults(fb.fault)})' if np.any(fb.fault) else ''))
        if self.state == ARMED and not fb.enabled:
            self.trip('device reports torque off (device watchdog or fault)')
        self.last_reading = Reading(q, qd, u_fb, valid, t, self.state, sent)
        return self.last_reading

    # ---- shutdown ---------------------------------------------------------------------
    def shutdown(self):
        """Zero torque, torque off, close. Never raises."""
        bus, self.bus = self.bus, None
        was = self.state
        self.state = DISCONNECTED
        if bus is None:
            return
        try:
            if was == ARMED and bus.is_open:
                bus.write(np.zeros(self.hw.p))
        except Exception:  # noqa: BLE001
            pass
        try:
            if bus.is_open:
                bus.enable(False)
        except Exception:  # noqa: BLE001
            pass
        try:
            bus.close()
        except Exception:  # noqa: BLE001
            pass
        self.bus = None
        self._stats = bus.stats
        self.log('torque off, port closed')

    def mark_saturated(self, which):
        """The effort sent this cycle was already clipped upstream (the controller's ``saturated`` of the
        step that computed it, at the same limits): count and report it like a clip here."""
        which = np.asarray(which, dtype=bool)
        if self.state == ARMED and which.any() and not self.saturated.any():
            self.counters['saturated_cycles'] += 1
        if self.state == ARMED:
            self.saturated |= which

    @property
    def status(self) -> str:
        """``state``, but ``saturated`` while armed with an effort clipped this cycle."""
        if self.state == ARMED and self.saturated.any():
            return SATURATED
        return self.state

    @property
    def stats(self):
        if self.bus is not None:
            return self.bus.stats
        return getattr(self, '_stats', None)

    def diagnostics(self) -> dict:
        d = dict(self.counters)
        d.update(self.limiter.counts)
        st = self.stats
        if st is not None:
            d.update(st.as_dict())
        d['state'] = self.status
        d['saturated_motors'] = [n for n, s in zip(self.hw.names, self.saturated) if s]
        d['u_max'] = self.hw.u_max.tolist()
        d['reason'] = self.reason
        return d
