"""``uk-controller run CONFIG --port ... --protocol ...``: the controller on a serial bus.

Runs :class:`~uk_controller.controller.ControllerCore` at a fixed rate: each
period is one bus transaction (send the effort computed from the previous
feedback, receive the new feedback), then one control step. Safety (watchdog,
limits, arming, reconnect, torque-off on exit) is :class:`~.safety.SafeBus`.
A one-line live summary goes to stderr; ``--log`` writes a CSV row per period,
flushed as it goes.

Loop timing (issue 13, same definitions as the ROS node, docs/ros.md "Loop timing"): the loop sleeps to
absolute deadlines d_{k+1} = d_k + T (:class:`~uk_controller.loop_timing.DeadlineSleeper` on the monotonic
clock); per window (``ros.loop.window``) it reports the achieved rate, period jitter p50/p99/max, compute
time p50/p99 and missed deadlines (:class:`~uk_controller.loop_timing.LoopTiming`) in the status line and
the final summary; ``ros.overrun.*`` (:class:`~uk_controller.loop_timing.OverrunPolicy`) warns after k
consecutive missed deadlines and sends the safe effort (``control.safe_effort``) after m.
"""
from __future__ import annotations

import argparse
import csv
import math
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .. import settings as S
from ..loop_timing import DeadlineSleeper, LoopTiming, OverrunPolicy, loop_settings
from ..rearm import ReArm
from .bus import PortError, make_bus
from .calibration import PROTOCOLS, HardwareConfig
from .safety import ARMED, SafeBus
from .state import JointStateAssembler


def add_run_arguments(parser: argparse.ArgumentParser):
    parser.add_argument('config', help='robot setup: name (scara, five_bar, ...) or YAML path')
    parser.add_argument('--port', help='serial port (default: config hardware.port)')
    parser.add_argument('--protocol', choices=PROTOCOLS, help='default: config hardware.protocol')
    parser.add_argument('--baud', type=S.arg_type('hardware.baud', '--baud'), help='default: config hardware.baud')
    parser.add_argument('--duration', type=S.arg_type('simulation.duration', '--duration'), default=None,
                        help='seconds of trajectory time to run (default: until Ctrl-C)')
    parser.add_argument('--rate', type=S.arg_type('hardware.rate', '--rate'), default=None,
                        help='control/bus rate in Hz (default: hardware.rate, else control.rate)')
    parser.add_argument('--watchdog', type=S.arg_type('hardware.watchdog', '--watchdog'), default=None,
                        help='s without effort or feedback before torque off (default: hardware.watchdog); '
                             'longer than the control period')
    parser.add_argument('--log', metavar='CSV', help='write one CSV row per period (flushed as it goes)')
    parser.add_argument('--quiet', action='store_true', help='no live summary line')
    return parser


class _Stop(Exception):
    pass


@dataclass
class LoopResult:
    t: list = field(default_factory=list)
    armed: list = field(default_factory=list)        # SafeBus armed when the step's feedback came
    q: list = field(default_factory=list)
    effort: list = field(default_factory=list)
    task_error: list = field(default_factory=list)
    overruns: int = 0
    cycles: int = 0
    wall: float = 0.0
    stopped_by: str = ''
    rearms: int = 0
    timing: LoopTiming = None                        # loop statistics (windows: TIMING_FIELDS order)
    policy: OverrunPolicy = None
    windows: list = field(default_factory=list)      # every closed window's TIMING_FIELDS tuple


def run_loop(core, safe: SafeBus, assembler, *, duration=None, realtime=True, csv_writer=None,
             status=None, record=False, stop_event=None, soft_start=None, clock=None,
             after_cycle=None, log=None) -> LoopResult:
    """The fixed-rate loop (also used in-process by the HIL tests).

    ``realtime=False`` runs as fast as the bus answers and uses trajectory time
    ``k * dt`` (k = torque transactions sent), which is exactly the in-process
    simulation's clock when the device emulator runs in lockstep.

    Re-arming (after a watchdog trip or a reconnect) holds the trajectory clock
    for the outage and ramps the gains in over ``soft_start`` seconds
    (default ``control.soft_start``; :class:`uk_controller.rearm.ReArm`).
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
    started, t0, sent = False, 0.0, 0
    core.reset(0.0)
    rearm = ReArm(core, S.get(core.setup.config, 'control.soft_start') if soft_start is None else soft_start)
    was_armed = False
    loop_cfg, overrun_cfg = loop_settings(core.setup.config)
    timing = res.timing = LoopTiming(dt, loop_cfg['window'])
    policy = res.policy = OverrunPolicy(**overrun_cfg)
    sleeper = DeadlineSleeper(loop_cfg['spin_us'] * 1e3) if clock is None else None
    clock = clock or time.monotonic
    tol = 1e-9                  # s: float round-off of a stepped clock is not a missed deadline
    last_warn = -math.inf
    next_tick = clock()
    wall0 = clock()
    last_status = 0.0
    last_stamp = None
    while stop_event is None or not stop_event.is_set():
        start = clock()
        reading = safe.cycle(effort, stamp)
        if after_cycle is not None:
            after_cycle()
        res.cycles += 1
        armed = safe.state == ARMED
        was_armed = was_armed or armed
        if was_armed and not armed and started:      # the outage begins now: stop the trajectory clock
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
                step = core.safe(f'overrun: safe effort until {policy.recover_after} periods are on time '
                                 f'(ros.overrun.safe_after {policy.safe_after})')
            else:
                step = core.step(q, qd, t)
            if step.ok and (armed or not was_armed):
                rearm.limit(step.effort)          # soft start: no harder than undisturbed operation
            effort, stamp = step.effort, clock()
            if record:
                res.armed.append(armed)
                res.t.append(t)
                res.q.append(q)
                res.effort.append(step.effort.copy())
                res.task_error.append(step.task_error.copy())
            if csv_writer is not None:
                csv_writer.writerow([f'{t:.6f}', safe.state, *np.round(q, 9), *np.round(qd, 9),
                                     *np.round(reading.sent, 9), *np.round(step.task_error, 9),
                                     f'{(safe.stats.rtt[-1] if safe.stats and safe.stats.rtt else math.nan):.6f}'])
            if status is not None and clock() - last_status > 0.25:
                last_status = clock()
                status(t, safe, step, res)
        end = clock()
        missed = 0
        if realtime:
            next_tick += dt
            late = end - next_tick
            if late > tol:          # the lost deadlines are skipped, each counts
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
                    log(f'overrun: {policy.consecutive} consecutive missed deadlines (ros.overrun.safe_after '
                        f'{policy.safe_after}); safe effort until {policy.recover_after} periods in a row are on time')
                elif change == 'warn' and end - last_warn > 1.0:
                    last_warn = end
                    log(f'overrun: {policy.consecutive} consecutive missed deadlines (ros.overrun.warn_after '
                        f'{policy.warn_after}); {policy.warnings} such runs so far')
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


def _loop_summary(timing):
    """The last closed window (achieved rate, jitter, compute) and the missed deadlines so far."""
    if timing is None:
        return ''
    rate, jp50, jp99, jmax, cp50, cp99, _age, missed = timing.last
    return (f'loop {rate:.0f}Hz jitter p50/p99/max={jp50:.0f}/{jp99:.0f}/{jmax:.0f}us '
            f'compute p50/p99={cp50:.0f}/{cp99:.0f}us missed={missed:.0f} (total {timing.total_missed} '
            f'of {timing.total_periods})')


def _status_line(t, safe, step, res):
    d = safe.diagnostics()
    rate = res.cycles / max(res.wall or (time.monotonic() - _status_line.t0), 1e-9)
    if res.timing is not None and res.windows:
        rate = res.timing.last[0]
    err = float(np.max(np.abs(step.task_error), initial=0.0))
    line = (f't={t:7.2f}s {rate:6.0f}Hz {d["state"]:<12} |e|={err:.2e} |u|={np.max(np.abs(step.effort), initial=0):.3g} '
            f'rtt p50/p99={d.get("rtt_p50", math.nan) * 1e3:.2f}/{d.get("rtt_p99", math.nan) * 1e3:.2f}ms '
            f'crc={d.get("crc_errors", 0)} timeouts={d.get("timeouts", 0)} trips={d["watchdog_trips"]} '
            f'reconnects={d["reconnects"]} {_loop_summary(res.timing)}')
    sys.stderr.write('\r' + line[:260].ljust(260))
    sys.stderr.flush()


def _signal_name(signum):
    return 'Ctrl-C' if signum == signal.SIGINT else signal.Signals(signum).name


def run(args) -> int:
    from ..controller import ControllerCore
    from ..robots import load_robot
    try:
        setup = load_robot(args.config)
        hw = HardwareConfig.from_setup(setup)
    except (ValueError, FileNotFoundError) as exc:
        print(f'uk-controller run: {exc}', file=sys.stderr)
        return 2
    rate = args.rate if args.rate is not None else (hw.rate if hw.rate > 0 else None)
    protocol = args.protocol or hw.protocol
    port = args.port or hw.port
    watchdog = args.watchdog if args.watchdog is not None else hw.watchdog
    try:
        S.check_cross({'control': {'rate': rate or S.get(setup.config, 'control.rate')},
                       'hardware': {'watchdog': watchdog}}, setup.config_path,
                      names={'hardware.watchdog': '--watchdog (hardware.watchdog)' if args.watchdog is not None
                             else 'hardware.watchdog'})
        core = ControllerCore(setup, rate=rate)
        loop_settings(setup.config)           # ros.loop.window / ros.overrun.* checked before the port opens
        assembler = JointStateAssembler(setup, hw)
    except ValueError as exc:
        print(f'uk-controller run: error: {exc}', file=sys.stderr)
        return 2
    hw.protocol, hw.port = protocol, port         # what the bus really uses (logs, diagnostics)
    stream = None
    if args.log:
        try:
            stream = open(args.log, 'w', newline='', buffering=1)
        except OSError as exc:
            print(f'uk-controller run: error: --log: cannot write {args.log}: {exc.strerror or exc}', file=sys.stderr)
            return 2

    def log(msg):
        print(('\n' if not args.quiet else '') + msg, file=sys.stderr)

    safe = SafeBus(hw, lambda: make_bus(hw, port=port, baud=args.baud, protocol=protocol), watchdog=watchdog,
                   log=log)
    stop = threading.Event()
    received = []
    old = {}

    def on_signal(signum, frame):
        # The first signal only asks the loop to end at the next cycle boundary, so no bus
        # transaction is cut in half before the torque-off below; a second one leaves at once.
        if stop.is_set():
            raise _Stop(_signal_name(signum), 128 + signum)
        received.append(signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            old[sig] = signal.signal(sig, on_signal)
    code = 0
    res = None
    try:
        try:
            safe.connect(raise_errors=True)
        except PortError as exc:
            print(f'uk-controller run: error: {exc}', file=sys.stderr)
            return 2
        writer = None
        if stream is not None:
            writer = csv.writer(stream)
            ms = setup.servo.m
            writer.writerow(['t', 'state', *[f'q_{j}' for j in core.joint_names],
                             *[f'qd_{j}' for j in core.joint_names], *[f'u_{a}' for a in core.actuator_names],
                             *[f'task_error_{i}' for i in range(ms)], 'rtt'])
        _status_line.t0 = time.monotonic()
        print(f'running {setup.name} on {port} ({protocol}) at {core.rate:g} Hz, watchdog '
              f'{watchdog * 1e3:.0f} ms; Ctrl-C stops with torque off', file=sys.stderr)
        res = run_loop(core, safe, assembler, duration=args.duration, realtime=True, csv_writer=writer,
                       status=None if args.quiet else _status_line, stop_event=stop, log=log)
        why = res.stopped_by or 'stopped'
        if received:
            why = f'interrupted ({_signal_name(received[0])})'
            code = 128 + received[0]
    except KeyboardInterrupt:
        why = 'interrupted (Ctrl-C)'
        code = 130
    except _Stop as exc:
        why = f'interrupted ({exc.args[0]})'
        code = exc.args[1]
    except Exception as exc:  # noqa: BLE001 - torque off first, then report
        why = f'error: {exc!r}'
        code = 1
    finally:
        safe.shutdown()
        if stream is not None:
            stream.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    d = safe.diagnostics()
    print(f'\n{why}: torque off. cycles={d["cycles"]} crc_errors={d.get("crc_errors", 0)} '
          f'timeouts={d.get("timeouts", 0)} watchdog_trips={d["watchdog_trips"]} '
          f'reconnects={d["reconnects"]}', file=sys.stderr)
    if res is not None and res.timing is not None:
        if res.timing.count:                  # the last, partial window: up to the end of its last period
            res.windows.append(res.timing.window(res.timing.last_start_ns + res.timing.period_ns))
        p = res.policy
        print(f'{_loop_summary(res.timing)} overrun warnings={p.warnings} safe_entries={p.safe_entries} '
              f'longest_run={p.longest}', file=sys.stderr)
    return code
