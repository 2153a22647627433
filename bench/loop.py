"""Table ``loop``: a fixed-rate loop without ROS (sleep + spin scheduler), period jitter and missed deadlines.

`FixedRateLoop` calls one control step per 1 ms period at absolute perf_counter deadlines, under the
default policy and, when permitted, SCHED_FIFO (``--rt-priority``).
"""

from __future__ import annotations

import gc
import math
import os
import time

import numpy as np

from .common import moving_state, table, verdict


class FixedRateLoop:
    """A perf_counter scheduler: sleep until shortly before the deadline, then spin.

    ``run(work, rate, seconds)`` calls ``work(k, t)`` once per period at
    absolute deadlines ``t0 + k / rate`` (no drift) and records the start
    times. A period whose work ends after the next deadline is a missed
    deadline; the schedule then skips to the next future deadline.
    ``priority`` > 0 asks for SCHED_FIFO at that priority for the run (Linux;
    needs CAP_SYS_NICE) as a real-time control loop would; the old policy is
    restored afterwards.
    """

    def __init__(self, spin=300e-6, priority=0):
        self.spin = float(spin)
        self.priority = int(priority)
        self.policy = 'SCHED_OTHER'

    def _realtime(self):
        """Switch to the requested policy; return the old (policy, param) to restore, or None."""
        if not hasattr(os, 'sched_setscheduler'):
            return None
        try:
            old = (os.sched_getscheduler(0), os.sched_getparam(0))
            if self.priority > 0:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
                self.policy = f'SCHED_FIFO {self.priority}'
            else:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            return old
        except (OSError, PermissionError) as exc:
            if self.priority > 0:
                self.policy = f'SCHED_OTHER (SCHED_FIFO refused: {exc.strerror or exc})'
            return None

    def run(self, work, rate, seconds):
        period = 1.0 / rate
        count = int(round(seconds * rate))
        starts = np.zeros(count)
        ends = np.zeros(count)
        deadlines = np.zeros(count)
        clock = time.perf_counter
        sleep = time.sleep
        missed = 0
        k = 0
        old = self._realtime()
        gc_was = gc.isenabled()
        gc.disable()  # a real-time loop collects outside its periods
        t0 = clock() + 0.01
        deadline = t0
        try:
            while k < count:
                remaining = deadline - clock()
                if remaining > self.spin:
                    sleep(remaining - self.spin)
                while clock() < deadline:
                    pass
                start = clock()
                work(k, start - t0)
                end = clock()
                starts[k], ends[k], deadlines[k] = start, end, deadline
                k += 1
                deadline += period
                if end > deadline:  # overran into the next period: skip the lost deadlines
                    late = math.floor((end - deadline) / period) + 1
                    missed += late
                    deadline += late * period
        finally:
            if gc_was:
                gc.enable()
            if old is not None:
                os.sched_setscheduler(0, old[0], old[1])
        return starts, ends, deadlines, missed


def run(args):
    from uk_controller.control.controller import ControllerCore

    seconds = 2.0 if args.quick else args.loop_seconds
    rate = 1000.0
    rows = []
    priorities = [0] + ([args.rt_priority] if args.rt_priority > 0 else [])
    for priority in priorities:
        for name in ('scara', 'five_bar'):
            ctrl = ControllerCore.from_config(name)
            q, qd = moving_state(ctrl.setup)

            def work(k, t):
                ctrl.step(q, qd, t)

            loop = FixedRateLoop(priority=priority)
            starts, ends, deadlines, missed = loop.run(work, rate, seconds)
            periods = np.diff(starts)
            jitter = np.abs(periods - 1.0 / rate)
            lateness = starts - deadlines
            busy = ends - starts
            total = starts.size + missed
            rows.append(
                (
                    name,
                    loop.policy,
                    f'{rate:g}',
                    f'{seconds:g}',
                    starts.size,
                    f'{np.median(jitter) * 1e6:.1f}',
                    f'{np.percentile(jitter, 99) * 1e6:.1f}',
                    f'{jitter.max() * 1e6:.0f}',
                    f'{np.percentile(lateness, 99) * 1e6:.1f}',
                    f'{np.median(busy) * 1e6:.1f}',
                    missed,
                    f'{100.0 * missed / total:.3f}',
                    verdict(np.percentile(jitter, 99) <= 200e-6 and missed <= 0.001 * total),
                )
            )
    table(
        'Fixed-rate loop without ROS (perf_counter deadlines, sleep + 300 us spin, one control step per period)',
        (
            'robot',
            'policy',
            'Hz',
            's',
            'periods',
            'jitter median us',
            'jitter p99 us',
            'jitter max us',
            'lateness p99 us',
            'step median us',
            'missed',
            'missed %',
            'p99<=200us, <=0.1%',
        ),
        rows,
        note='jitter = |start-to-start period - 1 ms|; lateness = start - its deadline; missed = deadlines '
        'that passed while a step was still running.',
    )
