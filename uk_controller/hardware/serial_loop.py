"""The fixed-rate serial control loop: one bus transaction and one control step per period.

Runs :class:`~uk_controller.control.controller.ControllerCore` at a fixed rate: each
period is one bus transaction (send the effort computed from the previous
feedback, receive the new feedback), then one control step. Safety (watchdog,
limits, arming, reconnect, torque-off on exit) is :class:`~.safety.SafeBus`;
the joint state of closed chains comes from :class:`~.joint_state_assembler.JointStateAssembler`.
Used by ``uk-controller run`` (:mod:`.run_command`), the HIL tests and bench/serial_bench.py.

Loop timing (the same definitions as the ROS node, docs/ros.md "Loop timing"): the loop sleeps to
absolute deadlines d_{k+1} = d_k + T (:class:`~uk_controller.control.loop_timing.DeadlineSleeper` on the monotonic
clock); per window (``ros.loop.window``) it reports the achieved rate, period jitter p50/p99/max, compute
time p50/p99 and missed deadlines (:class:`~uk_controller.control.loop_timing.LoopTiming`) in the status line and
the final summary; ``ros.overrun.*`` (:class:`~uk_controller.control.loop_timing.OverrunPolicy`) warns after k
consecutive missed deadlines and sends the safe effort (``control.safe_effort``) after m.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..control.loop_timing import DeadlineSleeper, LoopTiming, OverrunPolicy, overrun_policy
from ..control.rearm import ReArm
from .safety import ARMED, SATURATED, SafeBus


@dataclass
class LoopResult:
    t: list = field(default_factory=list)
    armed: list = field(default_factory=list)  # SafeBus armed when the step's feedback came
    saturated: list = field(default_factory=list)  # the effort sent in that cycle was clipped (motor limit)
    q: list = field(default_factory=list)
    effort: list = field(default_factory=list)
    task_error: list = field(default_factory=list)
    overruns: int = 0
    cycles: int = 0
    wall: float = 0.0
    stopped_by: str = ''
    rearms: int = 0
    timing: LoopTiming = None  # loop statistics (windows: TIMING_FIELDS order)
    policy: OverrunPolicy = None
    windows: list = field(default_factory=list)  # every closed window's TIMING_FIELDS tuple


def run_loop(
    core,
    safe: SafeBus,
    assembler,
    *,
    duration=None,
    realtime=True,
    csv_writer=None,
    status=None,
    record=False,
    stop_event=None,
    soft_start=None,
    clock=None,
    after_cycle=None,
    log=None,
) -> LoopResult:
    """The fixed-rate loop (also used in-process by the HIL tests).

    ``realtime=False`` runs as fast as the bus answers and uses trajectory time
    ``k * dt`` (k = torque transactions sent), which is exactly the in-process
    simulation's clock when the device emulator runs in lockstep.

    Re-arming (after a watchdog trip or a reconnect) holds the trajectory clock
    for the outage and ramps the gains in over ``soft_start`` seconds
    (default ``control.soft_start``; :class:`uk_controller.control.rearm.ReArm`).
    `clock` (default ``time.monotonic``) and `after_cycle` (called after each
    bus cycle) let tests run on a stepped clock shared with an emulator.

    Loop timing (``realtime=True``): period k starts at its wake-up s_k; its work (bus cycle and step)
    must end by the deadline d_{k+1} = d_k + T; a period that ends after it misses every deadline
    passed, ceil((end - d_{k+1}) / T), and the loop resumes at the next deadline after the end (phase
    kept). Sleeping uses :class:`DeadlineSleeper` on the default clock, ``time.sleep`` with an injected
    one. Statistics go to ``res.timing`` / ``res.windows``, the policy (``ros.overrun.*``) is
    ``res.policy``; while it is ``safe`` the loop sends ``core.safe(...)`` instead of stepping.
    """
    res = LoopResult()
    dt = core.dt
    effort, stamp = None, None
    effort_saturated = None  # the controller's `saturated` of the effort sent next cycle
    started, t0, sent = False, 0.0, 0
    core.reset(0.0)
    rearm = ReArm(core, core.setup.settings.control.soft_start if soft_start is None else soft_start)
    was_armed = False
    loop = core.setup.settings.ros.loop
    timing = res.timing = LoopTiming(dt, loop.window)
    policy = res.policy = overrun_policy(core.setup.settings.ros.overrun)
    sleeper = DeadlineSleeper(loop.spin_us * 1e3) if clock is None else None
    clock = clock or time.monotonic
    tol = 1e-9  # s: float round-off of a stepped clock is not a missed deadline
    last_warn = -math.inf
    next_tick = clock()
    wall0 = clock()
    last_status = 0.0
    last_stamp = None
    while stop_event is None or not stop_event.is_set():
        start = clock()
        reading = safe.cycle(effort, stamp)
        if effort_saturated is not None:
            safe.mark_saturated(effort_saturated)  # the controller clipped what this cycle sent
        if after_cycle is not None:
            after_cycle()
        res.cycles += 1
        armed = safe.state == ARMED
        was_armed = was_armed or armed
        if was_armed and not armed and started:  # the outage begins now: stop the trajectory clock
            rearm.interrupt((clock() - t0) if realtime else (safe.counters['sent'] - sent) * dt)
        if reading is not None and reading.valid and reading.stamp != last_stamp:
            last_stamp = reading.stamp
            if not started:
                started, t0, sent = True, clock(), safe.counters['sent']
            t_raw = (clock() - t0) if realtime else (safe.counters['sent'] - sent) * dt
            t = rearm.time(t_raw) if armed or not was_armed else rearm.waiting(t_raw)
            if duration is not None and t >= duration - 1e-12:
                res.stopped_by = 'duration'
                break
            q, qd = assembler(reading.q, reading.qd, t)
            if policy.state == 'safe':
                step = core.safe(
                    f'overrun: safe effort until {policy.recover_after} periods are on time '
                    f'(ros.overrun.safe_after {policy.safe_after})'
                )
            else:
                step = core.step_view(q, qd, t)  # read in place: used (and copied) before the next step
            if step.ok and (armed or not was_armed):
                rearm.limit(step.effort)  # soft start: no harder than undisturbed operation
            effort, stamp = step.effort, clock()
            effort_saturated = step.saturated if step.ok else None
            if record:
                res.saturated.append(safe.status == SATURATED)
                res.armed.append(armed)
                res.t.append(t)
                res.q.append(q)
                res.effort.append(step.effort.copy())
                res.task_error.append(step.task_error.copy())
            if csv_writer is not None:
                csv_writer.writerow(
                    [
                        f'{t:.6f}',
                        safe.status,
                        *np.round(q, 9),
                        *np.round(qd, 9),
                        *np.round(reading.sent, 9),
                        *np.round(step.task_error, 9),
                        f'{(safe.stats.rtt[-1] if safe.stats and safe.stats.rtt else math.nan):.6f}',
                    ]
                )
            if status is not None and clock() - last_status > 0.25:
                last_status = clock()
                status(t, safe, step, res)
        end = clock()
        missed = 0
        if realtime:
            next_tick += dt
            late = end - next_tick
            if late > tol:  # the lost deadlines are skipped, each counts
                missed = max(1, math.ceil(late / dt - 1e-6))
                next_tick += missed * dt
                res.overruns += missed
        end_ns = int(round(end * 1e9))
        timing.record(int(round(start * 1e9)), end_ns - int(round(start * 1e9)))
        if missed:
            timing.miss(missed)
        if realtime:
            change = policy.update(missed)
            if change is not None and log is not None:
                if change == 'safe':
                    log(
                        f'overrun: {policy.consecutive} consecutive missed deadlines (ros.overrun.safe_after '
                        f'{policy.safe_after}); safe effort until {policy.recover_after} periods in a row are on time'
                    )
                elif change == 'warn' and end - last_warn > 1.0:
                    last_warn = end
                    log(
                        f'overrun: {policy.consecutive} consecutive missed deadlines (ros.overrun.warn_after '
                        f'{policy.warn_after}); {policy.warnings} such runs so far'
                    )
                elif change == 'ok' and policy.safe_entries:
                    log('overrun: on time again, controlling')
        if timing.due(end_ns):
            res.windows.append(timing.window(end_ns))
        if realtime:
            if sleeper is not None:
                sleeper.sleep_until(int(round(next_tick * 1e9)))
            else:
                delay = next_tick - clock()
                if delay > 0:
                    time.sleep(delay)
    res.wall = clock() - wall0
    res.rearms = rearm.rearms
    rearm.reset()
    return res
