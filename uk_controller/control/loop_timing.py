"""Timing of a fixed-rate period loop, its overrun policy and the loop settings (plain Python, no rclpy).

Shared by the ROS controller node (uk_controller.ros.control_loop), serial_bridge_node and
``uk-controller run`` (uk_controller.hardware.run_command); uk_controller.ros.loop_timing re-exports it.

- :func:`overrun_policy`, :func:`loop_cpus`: what the sections ``ros.loop`` and ``ros.overrun`` of resolved
  settings make.
- :class:`LoopTiming`: per-window statistics of the loop (achieved rate, period jitter, compute time,
  state age, latency, missed deadlines), preallocated (no allocation per period).
- :class:`OverrunPolicy`: k consecutive missed deadlines -> WARN, m -> safe effort until r periods in a
  row are on time again.
- :class:`DeadlineSleeper`: sleep to an absolute ``CLOCK_MONOTONIC`` deadline (``clock_nanosleep`` with
  ``TIMER_ABSTIME``; ``time.sleep`` where libc is not reachable), optionally busy-waiting the last
  ``spin`` microseconds.
- :func:`realtime_setup`: SCHED_FIFO, CPU affinity, ``mlockall`` and timer slack for the calling thread,
  each reported as applied or refused (with the reason).

Definitions (docs/ros.md, "Loop timing"): a period k starts at its wake-up time s_k (monotonic clock);
its deadline is d_{k+1} = d_k + T. Period jitter = |(s_k - s_{k-1}) - T|; compute time = end of the
period's work (efforts published) - s_k; a deadline is missed when the work ends after d_{k+1} (the
lost deadlines are skipped, each counts); achieved rate = periods run in the window / window length.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import time

import numpy as np

from ..settings import schema as S

LOOP_MODES = ('thread', 'timer')
#: order of std_msgs/Float64MultiArray ``~/loop_timing`` (contract with the PlotJuggler layouts)
TIMING_FIELDS = (
    'achieved_rate_hz',
    'period_jitter_p50_us',
    'period_jitter_p99_us',
    'period_jitter_max_us',
    'compute_p50_us',
    'compute_p99_us',
    'state_age_p50_us',
    'missed_deadlines',
)


def loop_cpus(loop):
    """The CPU numbers of the typed ``ros.loop`` section as whole numbers (the schema checked that they
    are; empty: any)."""
    return [int(c) for c in loop.cpus or ()]


def overrun_policy(overrun):
    """The :class:`OverrunPolicy` of the typed ``ros.overrun`` section of resolved settings."""
    return OverrunPolicy(overrun.warn_after, overrun.safe_after, overrun.recover_after)


# ----------------------------------------------------------------------------- statistics


class LoopTiming:
    """Per-window loop statistics in preallocated arrays; :meth:`window` closes a window.

    Quantiles are taken over the periods of the window (numpy's linear-interpolation percentile).
    Times are integers in nanoseconds on input; the window reports microseconds.
    """

    def __init__(self, period, window):
        self.period_ns = int(round(period * 1e9))
        self.window_ns = int(round(window * 1e9))
        size = int(math.ceil(window / period * 2.0)) + 16
        # two sets of arrays: the loop records into one while another thread summarizes the other
        # (hand_off / summarize_handed_off); window() uses the first only
        self._sets = [tuple(np.zeros(size) for _ in range(4)) for _ in range(2)]
        self._active = 0
        self.jitter, self.compute, self.age, self.latency = self._sets[0]
        self._handed = None  # the closed window waiting for summarize_handed_off (or None)
        self.size = size
        self.count = 0  # periods in the window
        self.jitter_count = 0
        self.missed = 0  # deadlines missed in the window
        self.total_periods = 0
        self.total_missed = 0
        self.window_start_ns = None
        self.last_start_ns = None
        self.last = (0.0,) * len(TIMING_FIELDS)  # the last closed window (TIMING_FIELDS order)
        self.last_latency = (math.nan, math.nan)  # p50, p99 [us] of the last closed window

    def record(self, start_ns, compute_ns, age_ns=-1, latency_ns=-1):
        """One period that started at `start_ns` and took `compute_ns`; ages < 0 are unknown."""
        if self.window_start_ns is None:
            self.window_start_ns = start_ns
        i = self.count
        if i < self.size:
            if self.last_start_ns is not None:
                self.jitter[self.jitter_count] = abs((start_ns - self.last_start_ns) - self.period_ns)
                self.jitter_count += 1
            self.compute[i] = compute_ns
            self.age[i] = age_ns
            self.latency[i] = latency_ns
            self.count = i + 1
        self.last_start_ns = start_ns
        self.total_periods += 1

    def miss(self, count):
        self.missed += count
        self.total_missed += count

    def due(self, now_ns):
        return self.window_start_ns is not None and now_ns - self.window_start_ns >= self.window_ns

    @staticmethod
    def _quantiles(values, qs):
        known = values[values >= 0.0]
        if known.size == 0:
            return [math.nan] * len(qs)
        return [float(v) * 1e-3 for v in np.percentile(known, qs)]

    def _close(self, now_ns):
        """The window up to `now_ns` as ``(arrays, count, jitter_count, missed, span_s)``; a new one starts."""
        span = (now_ns - self.window_start_ns) * 1e-9 if self.window_start_ns is not None else 0.0
        closed = ((self.jitter, self.compute, self.age, self.latency), self.count, self.jitter_count, self.missed, span)
        self.count = self.jitter_count = self.missed = 0
        self.window_start_ns = now_ns
        return closed

    def _summarize(self, closed):
        (jitter, compute, age, latency), n, jitter_count, missed, span = closed
        rate = n / span if span > 0 else 0.0
        j = jitter[:jitter_count]
        jp50, jp99, jmax = self._quantiles(j, (50, 99, 100)) if j.size else (math.nan,) * 3
        cp50, cp99 = self._quantiles(compute[:n], (50, 99))
        (ap50,) = self._quantiles(age[:n], (50,))
        self.last_latency = tuple(self._quantiles(latency[:n], (50, 99)))
        self.last = (rate, jp50, jp99, jmax, cp50, cp99, ap50, float(missed))
        return self.last

    def window(self, now_ns):
        """Close the window at `now_ns`; returns the TIMING_FIELDS tuple (also kept in ``last``)."""
        return self._summarize(self._close(now_ns))

    def hand_off(self, now_ns):
        """Close the window at `now_ns` without computing its statistics (the loop thread's part):
        recording goes on in the other set of arrays and :meth:`summarize_handed_off` (another thread)
        computes the closed one. While the previous closed window is not summarized yet the window
        goes on instead (False): its arrays are still being read."""
        if self._handed is not None:
            return False
        closed = self._close(now_ns)
        self._active ^= 1
        self.jitter, self.compute, self.age, self.latency = self._sets[self._active]
        self._handed = closed  # one reference assignment: the summarizing thread sees all or nothing
        return True

    def summarize_handed_off(self):
        """The TIMING_FIELDS tuple of the window :meth:`hand_off` closed (also kept in ``last``), or None."""
        closed = self._handed
        if closed is None:
            return None
        values = self._summarize(closed)
        self._handed = None
        return values


class OverrunPolicy:
    """Consecutive missed deadlines -> ``warn`` after `warn_after`, ``safe`` after `safe_after`.

    A period either meets its deadline (``update(0)``) or misses ``count >= 1`` deadlines
    (each lost deadline counts towards the consecutive run). In ``safe`` the node publishes the safe
    effort (control.safe_effort) instead of computing; it controls again after `recover_after`
    consecutive on-time periods. 0 disables warn_after / safe_after.
    """

    def __init__(
        self,
        warn_after=S.default('ros.overrun.warn_after'),
        safe_after=S.default('ros.overrun.safe_after'),
        recover_after=S.default('ros.overrun.recover_after'),
    ):
        self.warn_after = int(warn_after)
        self.safe_after = int(safe_after)
        self.recover_after = int(recover_after)
        self.consecutive = 0
        self.on_time = 0
        self.state = 'ok'
        self.warnings = 0
        self.safe_entries = 0
        self.longest = 0

    def update(self, missed):
        """Account one period; returns the new state when it changed, else None."""
        old = self.state
        if missed:
            self.consecutive += missed
            self.on_time = 0
            self.longest = max(self.longest, self.consecutive)
            if self.safe_after and self.consecutive >= self.safe_after:
                self.state = 'safe'
            elif self.warn_after and self.consecutive >= self.warn_after and self.state == 'ok':
                self.state = 'warn'
        else:
            self.consecutive = 0
            self.on_time += 1
            if self.state == 'warn' or (self.state == 'safe' and self.on_time >= self.recover_after):
                self.state = 'ok'
        if self.state == old:
            return None
        if self.state == 'warn':
            self.warnings += 1
        elif self.state == 'safe':
            self.safe_entries += 1
        return self.state


# ----------------------------------------------------------------------------- sleeping and the OS


class _Timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


CLOCK_MONOTONIC, TIMER_ABSTIME = 1, 1
PR_SET_TIMERSLACK = 29
MCL_CURRENT, MCL_FUTURE = 1, 2


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
    except OSError:
        return None


class DeadlineSleeper:
    """``sleep_until(deadline_ns)`` on the monotonic clock (``time.monotonic_ns``'s clock).

    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) releases the GIL (ctypes) and does not drift; the
    last `spin_ns` are busy-waited to absorb the wake-up latency.
    """

    def __init__(self, spin_ns=0):
        self.spin_ns = int(spin_ns)
        libc = _libc()
        self._call = None
        if libc is not None and hasattr(libc, 'clock_nanosleep'):
            self._call = libc.clock_nanosleep
            self._call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Timespec), ctypes.c_void_p)
            self._ts = _Timespec()
            self._ref = ctypes.byref(self._ts)
        self.method = 'clock_nanosleep(TIMER_ABSTIME)' if self._call else 'time.sleep'

    def sleep_until(self, deadline_ns):
        clock = time.monotonic_ns
        wake = deadline_ns - self.spin_ns
        if self._call is not None:
            ts = self._ts
            ts.tv_sec, ts.tv_nsec = divmod(wake, 1_000_000_000)
            while self._call(CLOCK_MONOTONIC, TIMER_ABSTIME, self._ref, None) != 0:  # EINTR: sleep again
                pass
        else:
            remaining = wake - clock()
            if remaining > 0:
                time.sleep(remaining * 1e-9)
        while clock() < deadline_ns:
            pass


PR_SET_NAME = 15
#: the kernel's name of the ROS node's loop thread (top -H, /proc/<pid>/task/<tid>/comm)
LOOP_THREAD_NAME = 'uk_control_loop'


def name_thread(name):
    """Give the calling thread `name` (at most 15 bytes) in the kernel's view, so that ``top -H`` and
    /proc/<pid>/task/*/comm tell it apart from rclpy's and DDS's threads (CPU per thread)."""
    libc = _libc()
    if libc is not None:
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def realtime_setup(priority=0, cpus=(), mlockall=False):
    """Apply what was asked to the CALLING thread/process; returns a list of human-readable outcomes.

    SCHED_FIFO and the affinity apply to the calling thread only (Linux: pid 0 = this thread);
    mlockall to the whole process. The timer slack of the thread is set to 1 ns (default 50 us),
    so that sleeps end on time without real-time priority.
    """
    notes = []
    libc = _libc()
    if libc is not None:
        if libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0) == 0:
            notes.append('timer slack 1 ns')
        else:
            notes.append(f'timer slack unchanged ({os.strerror(ctypes.get_errno())})')
    if priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            notes.append(f'SCHED_FIFO priority {priority}')
        except (OSError, AttributeError) as exc:
            notes.append(
                f'SCHED_FIFO {priority} refused ({getattr(exc, "strerror", None) or exc}; needs '
                f'CAP_SYS_NICE or an rtprio limit, e.g. /etc/security/limits.conf); running SCHED_OTHER'
            )
    else:
        notes.append('SCHED_OTHER (ros.loop.priority 0)')
    if cpus:
        try:
            os.sched_setaffinity(0, set(cpus))
            notes.append(f'CPU affinity {sorted(cpus)}')
        except (OSError, AttributeError) as exc:
            notes.append(f'CPU affinity {sorted(cpus)} refused ({getattr(exc, "strerror", None) or exc})')
    if mlockall:
        if libc is None:
            notes.append('mlockall unavailable (no libc)')
        elif libc.mlockall(MCL_CURRENT | MCL_FUTURE) == 0:
            notes.append('memory locked (mlockall)')
        else:
            notes.append(
                f'mlockall refused ({os.strerror(ctypes.get_errno())}; needs CAP_IPC_LOCK or a '
                f'memlock limit above the process size)'
            )
    return notes
