"""``uk-controller run CONFIG --port ... --protocol ...``: the controller on a serial bus.

Builds the controller, the :class:`~.safety.SafeBus` over the protocol's bus
(:func:`~.registry.make_bus`) and runs :func:`~.serial_loop.run_loop` until the
trajectory ends, ``--duration`` passes or a signal arrives; torque goes off on
every exit.

Before the first cycle (and alone with ``--check``) it reports what the set-up can do, read from the
devices at connect: the cycle budget (:mod:`.bus_timing`: bytes per cycle at the baud rate, the
devices' reply delays, the USB adapter's latency timer from sysfs, the highest rate the bus carries)
and the effort limits the controller clips to (the motors' limits read at connect) against the
static load at the start pose (:mod:`.static_load`). A requested rate above the bus's, or a motor
that cannot hold the start pose, is an error (exit 2) naming what to change, torque never on.
``--set-return-delay-zero`` writes 0 to the Dynamixel servos' Return Delay Time register first
(a change of the servos' stored configuration: only on request). A one-line live summary goes to stderr; ``--log``
writes a CSV row
per period to ``<log>.part``, flushed as it goes and renamed when the run ends (a write error, e.g.
a full disk, stops the run: torque off, the summary, exit 2; the rows so far stay in ``.part``). The loop-timing figures
(docs/ros.md "Loop
timing") end the run.
"""

from __future__ import annotations

import argparse
import csv
import math
import signal
import sys
import threading
import time

import numpy as np

from ..settings import schema as S
from . import registry
from .bus import PortError
from .calibration import HardwareConfig
from .joint_state_assembler import JointStateAssembler
from .safety import SafeBus, patient
from .setup_check import check_setup


def add_run_arguments(parser: argparse.ArgumentParser):
    parser.add_argument('config', help='robot setup: name (scara, five_bar, ...) or YAML path')
    parser.add_argument('--port', help='serial port (default: config hardware.port)')
    parser.add_argument('--protocol', choices=registry.names(), help='default: config hardware.protocol')
    parser.add_argument('--baud', type=S.arg_type('hardware.baud', '--baud'), help='default: config hardware.baud')
    parser.add_argument(
        '--duration',
        type=S.arg_type('simulation.duration', '--duration'),
        default=None,
        help='seconds of trajectory time to run (default: until Ctrl-C)',
    )
    parser.add_argument(
        '--rate',
        type=S.arg_type('control.rate', '--rate'),
        default=None,
        help='control rate in Hz, also the bus rate: the loop steps the controller once per bus '
        'cycle (default: control.rate; a file that sets hardware.rate runs the loop at that)',
    )
    parser.add_argument(
        '--watchdog',
        type=S.arg_type('hardware.watchdog', '--watchdog'),
        default=None,
        help='s without effort or feedback before torque off (default: hardware.watchdog); '
        'longer than the control period',
    )
    parser.add_argument(
        '--log',
        metavar='CSV',
        help='write one CSV row per period (to CSV.part, flushed as it '
        'goes, renamed to CSV when the run ends; a write error stops '
        'the run with torque off)',
    )
    parser.add_argument('--quiet', action='store_true', help='no live summary line')
    parser.add_argument(
        '--check',
        action='store_true',
        help='connect (torque off), print the cycle budget and the effort limits against the '
        'static load, and exit: 0 if the set-up can run, 2 naming what to change',
    )
    parser.add_argument(
        '--set-return-delay-zero',
        action='store_true',
        help='dynamixel: write 0 to every servo\'s Return Delay Time register (EEPROM, with '
        'torque off) before the run: 500 us less per servo and cycle at the factory value',
    )
    return parser


class _Stop(Exception):
    pass


def _loop_summary(timing):
    """The last closed window (achieved rate, jitter, compute) and the missed deadlines so far."""
    if timing is None:
        return ''
    rate, jp50, jp99, jmax, cp50, cp99, _age, missed = timing.last
    return (
        f'loop {rate:.0f}Hz jitter p50/p99/max={jp50:.0f}/{jp99:.0f}/{jmax:.0f}us '
        f'compute p50/p99={cp50:.0f}/{cp99:.0f}us missed={missed:.0f} (total {timing.total_missed} '
        f'of {timing.total_periods})'
    )


def _status_line(t, safe, step, res):
    d = safe.diagnostics()
    rate = res.cycles / max(res.wall or (time.monotonic() - _status_line.t0), 1e-9)  # type: ignore[attr-defined]
    if res.timing is not None and res.windows:
        rate = res.timing.last[0]
    err = float(np.max(np.abs(step.task_error), initial=0.0))
    state = d['state'] + ('(' + ','.join(d['saturated_motors']) + ')' if d['saturated_motors'] else '')
    line = (
        f't={t:7.2f}s {rate:6.0f}Hz {state:<12} |e|={err:.2e} |u|={np.max(np.abs(step.effort), initial=0):.3g} '
        f'rtt p50/p99={d.get("rtt_p50", math.nan) * 1e3:.2f}/{d.get("rtt_p99", math.nan) * 1e3:.2f}ms '
        f'saturated={d["saturated_cycles"]} crc={d.get("crc_errors", 0)} timeouts={d.get("timeouts", 0)} '
        f'trips={d["watchdog_trips"]} '
        f'reconnects={d["reconnects"]} {_loop_summary(res.timing)}'
    )
    sys.stderr.write('\r' + line[:260].ljust(260))
    sys.stderr.flush()


def _signal_name(signum):
    return 'Ctrl-C' if signum == signal.SIGINT else signal.Signals(signum).name


#: run's flags and the setting each one overrides (uk_controller.settings.resolve). --rate is the control
#: rate, as in simulate and emulate; the bus rate (hardware.rate) follows it unless the file sets it.
RUN_FLAGS = {
    '--port': 'hardware.port',
    '--protocol': 'hardware.protocol',
    '--baud': 'hardware.baud',
    '--rate': 'control.rate',
    '--watchdog': 'hardware.watchdog',
}


def run_overrides(args):
    """``(overrides, labels)`` of the flags given: {dotted key: value}, {dotted key: flag (key)}."""
    given = {key: getattr(args, flag[2:]) for flag, key in RUN_FLAGS.items() if getattr(args, flag[2:]) is not None}
    return given, {key: f'{flag} ({key})' for flag, key in RUN_FLAGS.items() if key in given}


def loop_rate(setup, hw, labels):
    """The one rate of run's loop, which steps the controller once per bus cycle: the bus rate (hardware.rate,
    which is control.rate unless the file sets it; the sampling rule of the settings checked the slower of
    the two). A --rate that the file's hardware.rate overrules would not be the rate that runs: a ConfigError
    naming both."""
    control = setup.settings.control.rate
    if 'control.rate' in labels and hw.rate != control:
        from ..files.parameter_file import ConfigError

        raise ConfigError(
            f'{labels["control.rate"]} {control:g} Hz is not the bus rate the file sets, hardware.rate '
            f'{hw.rate:g} Hz; uk-controller run steps the controller once per bus cycle, so give '
            f'--rate {hw.rate:g}, or remove hardware.rate from the file for the bus to follow --rate',
            file=setup.config_path,
            key='hardware.rate',
        )
    return hw.rate


def run_setup(config, overrides, labels):
    """``(setup, hw)`` that run steps: `config` with the flags' `overrides`, and control.rate at the bus rate
    (:func:`loop_rate`) when the file's hardware.rate differs, so the controller is built for the rate that
    runs and the settings' rules checked it."""
    from ..robots import load_robot

    setup = load_robot(config, overrides, labels=labels)
    hw = HardwareConfig.from_setup(setup)
    rate = loop_rate(setup, hw, labels)
    if rate != setup.settings.control.rate:
        setup = load_robot(config, {**overrides, 'control.rate': rate}, labels=labels)
        hw = HardwareConfig.from_setup(setup)
    return setup, hw


def run(args) -> int:
    # imported here, not with the parser: they load NumPy's linear algebra, Pinocchio and numba, a
    # second and more that `uk-controller --help` or a mistyped flag should not wait for
    from ..control.controller import ControllerCore
    from .serial_loop import run_loop

    try:
        overrides, labels = run_overrides(args)
        setup, hw = run_setup(args.config, overrides, labels)
        rate = hw.rate
    except (ValueError, FileNotFoundError) as exc:
        print(f'uk-controller run: {exc}', file=sys.stderr)
        return 2
    protocol, port, watchdog = hw.protocol, hw.port, hw.watchdog
    try:
        core = None if args.check else ControllerCore(setup)
        assembler = JointStateAssembler(setup, hw)
        # the protocol's own checks of its options (e.g. can_mit: ids a reply can tell apart), port unopened
        registry.make_bus(hw)
    except ValueError as exc:
        print(f'uk-controller run: error: {exc}', file=sys.stderr)
        return 2
    stream = None
    if args.log:
        from ..files.io_safety import StreamingFile, refuse_inputs_as_outputs, setup_inputs
        from ..files.parameter_file import ConfigError

        try:
            refuse_inputs_as_outputs([('--log', args.log)], setup_inputs(setup))
            stream = _LogStream(StreamingFile(args.log, flag='--log'))
        except ConfigError as exc:
            print(f'uk-controller run: error: {exc}', file=sys.stderr)
            return 2

    def log(msg):
        print(('\n' if not args.quiet else '') + msg, file=sys.stderr)

    safe = SafeBus(hw, lambda: registry.make_bus(hw), watchdog=watchdog, log=log)
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
            if stream is not None:
                stream.file.abandon()
                stream = None
            return 2
        with patient(safe.bus):  # the pre-flight's register reads are set-up exchanges too
            ok, text = _preflight(setup, hw, safe, protocol, port, args, rate)
        print(text, file=sys.stdout if args.check else sys.stderr, flush=True)
        if not ok or args.check:
            if stream is not None:
                stream.file.abandon()
                stream = None
            if ok:
                print('check passed: the bus carries the rate and every motor holds the start pose', file=sys.stdout)
            return 0 if ok else 2
        assert core is not None  # (None only with --check, which returned above)
        core.set_effort_limits(hw.u_max)  # what the motors give is what the controller works with
        writer = None
        if stream is not None:
            writer = csv.writer(stream)
            ms = setup.servo.m
            writer.writerow(
                [
                    't',
                    'state',
                    *[f'q_{j}' for j in core.joint_names],
                    *[f'qd_{j}' for j in core.joint_names],
                    *[f'u_{a}' for a in core.actuator_names],
                    *[f'task_error_{i}' for i in range(ms)],
                    'rtt',
                ]
            )
        _status_line.t0 = time.monotonic()  # type: ignore[attr-defined]
        print(
            f'running {setup.name} on {port} ({protocol}) at {core.rate:g} Hz, watchdog '
            f'{watchdog * 1e3:.0f} ms; Ctrl-C stops with torque off',
            file=sys.stderr,
        )
        res = run_loop(
            core,
            safe,
            assembler,
            duration=args.duration,
            realtime=True,
            csv_writer=writer,
            status=None if args.quiet else _status_line,
            stop_event=stop,
            log=log,
        )
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
        if stream is not None and stream.file.error is not None:
            why = f'--log: writing {args.log} failed ({stream.file.error.strerror or stream.file.error})'
            code = 2
        else:
            why = f'error: {exc!r}'
            code = 1
    finally:
        safe.shutdown()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    log_error = None
    if stream is not None:
        try:
            stream.file.close(lost='the periods after it (the run stopped there, torque off)')
        except ValueError as exc:  # ConfigError: what was kept and where
            log_error = exc
            code = code or 2
    d = safe.diagnostics()
    print(
        f'\n{why}: torque off. cycles={d["cycles"]} crc_errors={d.get("crc_errors", 0)} '
        f'timeouts={d.get("timeouts", 0)} watchdog_trips={d["watchdog_trips"]} '
        f'reconnects={d["reconnects"]} saturated_cycles={d["saturated_cycles"]} (of {d["sent"]} sent)',
        file=sys.stderr,
    )
    if res is not None and res.timing is not None:
        if res.timing.count:  # the last, partial window: up to the end of its last period
            res.windows.append(res.timing.window(res.timing.last_start_ns + res.timing.period_ns))
        p = res.policy
        print(
            f'{_loop_summary(res.timing)} overrun warnings={p.warnings} safe_entries={p.safe_entries} '
            f'longest_run={p.longest}',
            file=sys.stderr,
        )
    if log_error is not None:
        print(f'uk-controller run: error: {log_error}', file=sys.stderr)
    return code


def _preflight(setup, hw, safe, protocol, port, args, rate):
    """The report before the first cycle: ``(ok, text)`` (module docstring); errors end the text."""
    bus = safe.bus
    lines, errors = [], []
    if args.set_return_delay_zero:
        if not hasattr(bus, 'set_return_delay_time'):
            errors.append(f'--set-return-delay-zero: the {protocol} protocol has no Return Delay Time register')
        else:
            bus.set_return_delay_time(0)
            lines.append(
                f'Return Delay Time set to 0 on servos {bus.ids} (--set-return-delay-zero; stored in their EEPROM)'
            )
    more, problems = check_setup(setup, hw, bus, protocol, port, rate)
    lines += more
    errors += problems
    lines += [f'uk-controller run: error: {e}' for e in errors]
    return not errors, '\n'.join(lines)


class _LogStream:
    """The file object csv.writer writes the --log rows to: a StreamingFile (``<log>.part``, renamed when
    the run ends) whose first write error is raised, so the loop stops (torque off) instead of running on
    without the record the user asked for."""

    def __init__(self, file):
        self.file = file

    def write(self, text):
        if not self.file.write(text):
            raise self.file.error
        if text.endswith('\n'):
            self.file.flush()  # one row per period, on disk as it goes
            if self.file.error is not None:
                raise self.file.error
        return len(text)
