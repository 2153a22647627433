"""Control-loop statistics and their ``diagnostic_msgs/DiagnosticArray`` form.

A step's :class:`uk_controller.control.status.Status` gives its diagnostics level through the one table of
:mod:`uk_controller.control.status` (:func:`status_level`); its reason is the message.
"""

from __future__ import annotations

import math

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from ..control.status import Status, level

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
_LEVELS = {'ok': OK, 'warn': WARN, 'error': ERROR}


def status_level(status):
    """The DiagnosticStatus level (OK, WARN, ERROR) of a :class:`~uk_controller.control.status.Status`."""
    return _LEVELS[level(status)]


def status_name(status):
    """The lower-case name of a status for a diagnostics value ('ok', 'servo_inconsistent', ...)."""
    return Status(status).name.lower()


class LoopStats:
    """Counters of the control steps; the window ones reset at every diagnostics message.

    Missed deadlines are not counted here: the control loop (control_loop.ControlLoop, its LoopTiming)
    is the one place that knows when a period started and ended, in thread and in timer mode, and
    /diagnostics reports its count (a second count here had stayed 0 in thread mode).
    """

    def __init__(self, period):
        self.period = float(period)
        self.steps = 0
        self.safe_steps = 0
        self.window_n = 0
        self.window_sum = 0.0
        self.window_max = 0.0
        self.rank = -1
        self.condition = math.nan
        self.saturated = 0
        self.saturated_steps = 0
        self.last_status = Status.OK
        self.posture_error = math.nan  # |q - q_ref| of the posture term (NaN: none)
        self.null_motion = 0  # null-space dimensions of the task: moving, internal forces
        self.null_internal = 0

    def record(self, result):
        self.steps += 1
        self.last_status = result.status
        t = result.compute_time
        self.window_n += 1
        self.window_sum += t
        self.window_max = max(self.window_max, t)
        if result.ok:
            self.rank = int(result.rank)
            self.condition = float(result.condition)
            self.saturated = int(result.saturated.sum())
            self.posture_error = result.posture_error
            self.null_motion, self.null_internal = result.null_motion, result.null_internal
            if self.saturated:
                self.saturated_steps += 1
        else:
            self.safe_steps += 1

    def window(self):
        mean = self.window_sum / self.window_n if self.window_n else 0.0
        out = (mean, self.window_max)
        self.window_n, self.window_sum, self.window_max = 0, 0.0, 0.0
        return out


def _kv(key, value):
    if isinstance(value, float):
        value = f'{value:.6g}'
    return KeyValue(key=key, value=str(value))


def diagnostic_array(stamp, name, hardware_id, level, message, values):
    """One DiagnosticArray with a single status; `values` is an ordered list of (key, value)."""
    msg = DiagnosticArray()
    msg.header.stamp = stamp
    status = DiagnosticStatus()
    status.level = level
    status.name = name
    status.message = message
    status.hardware_id = hardware_id
    status.values = [_kv(k, v) for k, v in values]
    msg.status = [status]
    return msg
