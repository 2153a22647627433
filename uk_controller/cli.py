"""The `uk-controller` command: simulate (and, where installed, run and bench)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from .core.baumgarte import CONVENTIONS
from .interrupts import interrupt_requested, interrupt_signal
from .settings import schema as S
from .sim import plants

#: the conventions that read stabilization.alpha and .beta (--alpha, --beta), from the one table
ALPHA_BETA = [name for name, c in CONVENTIONS.items() if c.gains == ('alpha', 'beta')]


def file_safe(name):
    """`name` as one path component: characters other than letters, digits, '.', '_', '-' become '_',
    leading dots are dropped (a robot name '../x' or 'a/b' must not leave results/ or make folders)."""
    import re

    return re.sub(r'[^A-Za-z0-9._-]+', '_', str(name)).lstrip('.') or 'robot'


def _progress_bar(label):
    state = {'last': -1}
    tty = sys.stderr.isatty()

    def show(fraction):
        pct = int(fraction * 100)
        if pct == state['last']:
            return
        state['last'] = pct
        if tty:
            filled = pct // 4
            sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (25 - filled)}] {pct:3d}%")
            if pct >= 100:
                sys.stderr.write('\n')
        elif pct % 25 == 0:
            sys.stderr.write(f'{label} {pct}%\n')
        sys.stderr.flush()

    return show


#: simulate's flags and the setting each one sets: each given flag is an override of resolve()
SIMULATE_FLAGS = {
    '--duration': 'simulation.duration',
    '--rate': 'control.rate',
    '--omega': 'stabilization.omega',
    '--alpha': 'stabilization.alpha',
    '--beta': 'stabilization.beta',
    '--mass-scale': 'simulation.mass_scale',
    '--noise': 'simulation.sensor_noise',
    '--delay': 'simulation.measurement_delay',
    '--substeps': 'simulation.substeps',
    '--transient': 'simulation.transient',
    '--log-every': 'simulation.log_every',
}

#: at most this many rows of a run are kept in memory for the figures (longer runs: every k-th step)
PLOT_POINTS = 20_000


def _flag(flag):
    return S.arg_type(SIMULATE_FLAGS[flag], flag)


def add_simulate_parser(sub):
    p = sub.add_parser(
        'simulate',
        help='closed-loop simulation with plots',
        description='Run the UK controller at a fixed rate on a simulated plant (zero-order hold) and '
        'write a CSV log, PNG figures and a summary. Ctrl-C stops early and writes what ran.',
    )
    p.add_argument(
        'robot',
        help='robot name (a setup shipped in config/<name>.yaml; an unknown name lists them) or a path to a robot YAML',
    )
    p.add_argument('--duration', type=_flag('--duration'), help='simulated seconds (default: simulation.duration)')
    p.add_argument('--rate', type=_flag('--rate'), help='control rate in Hz (default: control.rate)')
    p.add_argument(
        '--plant',
        choices=S.PLANTS,
        help=f'{plants.describe()} (default: simulation.plant)',
    )
    p.add_argument('--no-baumgarte', action='store_true', help='switch Baumgarte stabilization off')
    p.add_argument(
        '--omega', type=_flag('--omega'), help="critically damped stabilization with this natural frequency [rad/s]"
    )
    p.add_argument('--alpha', type=_flag('--alpha'), help='Baumgarte alpha (with --beta and --convention)')
    p.add_argument('--beta', type=_flag('--beta'), help='Baumgarte beta')
    p.add_argument(
        '--convention',
        choices=ALPHA_BETA,
        default=ALPHA_BETA[0],
        help='; '.join(f'{name}: {CONVENTIONS[name].equation}' for name in ALPHA_BETA),
    )
    p.add_argument('--pinv', choices=S.PINV_METHODS, help='pseudo-inverse method (default: control.pinv)')
    p.add_argument('--mass-scale', type=_flag('--mass-scale'), help='plant inertias x this factor (model mismatch)')
    p.add_argument('--noise', type=_flag('--noise'), help='std of position measurement noise')
    p.add_argument('--delay', type=_flag('--delay'), help='measurement delay in control periods')
    p.add_argument('--integrator', choices=S.INTEGRATORS, help='plant integrator')
    p.add_argument('--substeps', type=_flag('--substeps'), help='RK4 steps per control period')
    p.add_argument('--transient', type=_flag('--transient'), help='seconds excluded from the error statistics')
    p.add_argument(
        '--log-every',
        type=_flag('--log-every'),
        help='log.csv holds every Nth control step; the summary covers all (default: simulation.log_every)',
    )
    p.add_argument('--out', default=None, help='output folder (default: results/<robot>)')
    p.add_argument('--no-plots', action='store_true', help='write the CSV and summary only')
    p.add_argument(
        '--mcap',
        metavar='PATH',
        help='also write the run as ROS 2 messages in an MCAP file '
        '(the nodes\' topics, simulated stamps; docs/sweep.md)',
    )
    p.set_defaults(func=cmd_simulate)


def _fail(message):
    print(f'uk-controller simulate: error: {message}', file=sys.stderr)
    return 2


def simulate_overrides(args):
    """``(overrides, labels)`` of simulate's flags: {dotted key: value} for uk_controller.settings.resolve
    and {dotted key: what was typed} for its messages. A stabilization flag replaces the section."""
    overrides, labels = {}, {}
    for flag, key in SIMULATE_FLAGS.items():
        value = getattr(args, flag[2:].replace('-', '_'))
        if value is not None:
            labels[key] = f'{flag} ({key})'
            if not key.startswith('stabilization.'):
                overrides[key] = value
    for flag, key in (
        ('--pinv', 'control.pinv'),
        ('--integrator', 'simulation.integrator'),
        ('--plant', 'simulation.plant'),
    ):
        value = getattr(args, flag[2:])
        if value is not None:
            overrides[key], labels[key] = value, f'{flag} ({key})'
    stab = None
    if args.no_baumgarte:
        stab = {'convention': 'none'}
    elif args.omega is not None:
        stab = {'convention': 'critical', 'omega': args.omega}
    elif args.alpha is not None:
        stab = {'convention': args.convention, 'alpha': args.alpha, 'beta': args.beta}
    if stab is not None:
        for key in ('convention', 'omega', 'alpha', 'beta'):
            overrides[f'stabilization.{key}'] = stab.get(key)
    return overrides, labels


def _closure_at_start(setup, tol=1e-6):
    """Why the initial state violates a passive (closure) constraint, or None. The plant starts from
    robot.initial_position / initial_velocity and integrates the closed chain from there."""
    import numpy as np

    if not setup.passive.m:
        return None
    setup.model.compute(setup.q0, setup.qd0)
    rows = setup.passive.evaluate(setup.model, setup.q0, setup.qd0, 0.0)
    for values, key, what in (
        (rows.phi, 'robot.initial_position', 'phi'),
        (rows.phidot, 'robot.initial_velocity', "phi'"),
    ):
        worst = float(np.max(np.abs(values))) if np.all(np.isfinite(values)) else float('inf')
        if worst > tol:
            return (
                f'{setup.config_path}: {key}: violates the closure constraints ({", ".join(setup.passive.names)}): '
                f'max |{what}| = {worst:.3g} > {tol:g}; the initial state must close the chain'
            )
    return None


def _writable_folder(out, flag='--out'):
    """None when `out` is (or can be made) a writable folder, else why not."""
    if out.exists() and not out.is_dir():
        return f'{flag}: {out} exists and is not a folder'
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f'.uk_write_test_{os.getpid()}'
        probe.write_text('')
        probe.unlink()
    except OSError as exc:
        return f'{flag}: cannot write to {out}: {exc.strerror or exc}'
    return None


def _output_files(setup, out):
    """Every file `simulate` may write into the folder `out`."""
    names = ['log.csv', 'summary.json', 'task_error.png', 'joint_error.png', 'efforts.png', 'closure_residual.png']
    names += [f'path_{name}.png' for name in setup.servo.names]
    return [out / name for name in names]


def _check_outputs(setup, out, mcap):
    """Why the outputs cannot be written (an input, a folder, another output, no MCAP support), or None."""
    from .files.io_safety import refuse_inputs_as_outputs, setup_inputs
    from .files.parameter_file import ConfigError

    files = _output_files(setup, out)
    try:
        refuse_inputs_as_outputs([('--out', f) for f in files] + [('--mcap', mcap)], setup_inputs(setup))
        if mcap is not None:
            if any(mcap.resolve() == f.resolve() for f in files):
                raise ConfigError(
                    f'{mcap} is also written by --out {out}; give the recording its own name', file=mcap, key='--mcap'
                )
            from .sim.mcap_log import writer_class

            writer_class()
    except (ConfigError, RuntimeError) as exc:
        return str(exc)
    problem = _writable_folder(out)
    if problem is None and mcap is not None:
        problem = _writable_folder(mcap.parent if str(mcap.parent) else Path('.'), '--mcap')
    return problem


def cmd_simulate(args):
    from .core.uk import NotPositiveDefiniteError
    from .files.parameter_file import ConfigError
    from .robots import load_robot
    from .sim.closed_loop import simulate
    from .sim.report import CsvLog, format_summary, plot_all, write_summary

    if (args.alpha is None) != (args.beta is None):
        return _fail('--alpha and --beta go together (both > 0)')
    try:
        overrides, labels = simulate_overrides(args)
        setup = load_robot(args.robot, overrides, labels=labels)
    except (ConfigError, FileNotFoundError) as exc:
        return _fail(exc)
    problem = _closure_at_start(setup)
    if problem:
        return _fail(problem)
    out = Path(args.out or Path('results') / file_safe(setup.name))
    mcap = Path(args.mcap) if args.mcap else None
    problem = _check_outputs(setup, out, mcap)
    if problem:
        return _fail(problem)
    sim = setup.settings.simulation
    rate = setup.settings.control.rate
    steps = int(round(sim.duration * rate))
    sinks = []
    try:
        csv_log = CsvLog(out / 'log.csv', every=sim.log_every)
        sinks.append(csv_log)
        if mcap is not None:
            from .sim.mcap_log import McapLog

            sinks.append(
                McapLog(
                    setup,
                    mcap,
                    rate=rate,
                    actuator_names=setup.actuators.names,
                    settings={'measurement_delay': sim.measurement_delay},
                )
            )
    except ConfigError as exc:
        for sink in sinks:
            sink.abandon()
        return _fail(exc)
    stop = {'signal': None}

    def on_signal(signum, frame):
        if stop['signal'] is None:  # the first one says how the run ended (Ctrl-C, then launch's SIGTERM)
            stop['signal'] = signal.Signals(signum).name

    def stream(chunk):
        for sink in sinks:
            sink(chunk)

    old = (
        {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        if threading.current_thread() is threading.main_thread()
        else {}
    )
    try:
        # every setting from the resolved setup: the file with the flags given
        result = simulate(
            setup,
            progress=_progress_bar(f'simulating {setup.name}'),
            should_stop=lambda: stop['signal'] is not None or interrupt_requested(),
            sink=stream,
            keep_every=max(1, -(-steps // PLOT_POINTS)),
            announce=lambda text: print(f'joint-space approach: {text}', file=sys.stderr, flush=True),
        )
    except ConfigError as exc:  # e.g. a plant that cannot load this description (MuJoCo and SDF)
        for sink in sinks:
            sink.abandon()
        return _fail(exc)
    except NotPositiveDefiniteError as exc:  # only a model accepted with robot.allow_nonphysical gets here
        for sink in sinks:
            sink.abandon()
        return _fail(
            f'{setup.config_path}: the plant cannot integrate this model: {exc} (robot.allow_nonphysical '
            'accepted a description whose mass matrix is not positive definite)'
        )
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    summary = result.summary(sim.transient)
    errors = []  # write errors: what was kept and what was lost, said at the end
    files = []
    for sink, path in zip(sinks, [out / 'log.csv', mcap]):
        try:
            sink.close(steps) if sink is csv_log else sink.close()
            files.append(path)
        except ConfigError as exc:
            errors.append(exc)
    try:
        write_summary(summary, out / 'summary.json')
        files.insert(1, out / 'summary.json')
    except ConfigError as exc:
        errors.append(exc)
    if result.interrupted:
        print(
            f'\ninterrupted ({stop["signal"]}) after {summary["steps"]} control steps: wrote '
            + ', '.join(str(f) for f in files)
            + ' (partial, marked interrupted)',
            file=sys.stderr,
        )
        print(format_summary(summary))
        for exc in errors:
            print(f'uk-controller simulate: error: {exc}', file=sys.stderr)
        stopped_by = signal.Signals[stop['signal']] if stop['signal'] else interrupt_signal()
        return 128 + int(stopped_by)  # 130 Ctrl-C, 143 SIGTERM
    if not args.no_plots and result.t.size and not errors:
        try:
            files += plot_all(result, setup, out)
        except ConfigError as exc:
            errors.append(exc)
    print(format_summary(summary))
    print('wrote ' + ', '.join(str(f) for f in files) if files else 'wrote nothing')
    for exc in errors:
        print(f'uk-controller simulate: error: {exc}', file=sys.stderr)
    if result.failure:
        print(
            f'uk-controller simulate: error: the run FAILED: {result.failure} (log and summary kept)', file=sys.stderr
        )
        return 2
    return 2 if errors else 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog='uk-controller',
        description='Udwadia-Kalaba constrained-dynamics control: simulate, run on hardware, benchmark.',
    )
    sub = parser.add_subparsers(dest='command', required=True)
    add_simulate_parser(sub)
    from .sweep.cli import add_sweep_parser

    add_sweep_parser(sub)
    from .hardware.run_command import add_run_arguments, run

    p = sub.add_parser(
        'run',
        help='run the controller on serial motor drivers',
        description='Run ControllerCore at a fixed rate directly on a serial motor bus.',
    )
    add_run_arguments(p)
    p.set_defaults(func=run)
    from .hardware.emulate_command import add_emulate_arguments, run_emulate

    p = sub.add_parser(
        'emulate',
        help='motor drivers on a pseudo-terminal, driven by a simulated robot',
        description='Emulate the serial motor drivers of a robot on a pty and print its path.',
    )
    add_emulate_arguments(p)
    p.set_defaults(func=run_emulate)
    p = sub.add_parser(
        'bench',
        help='benchmarks of a source checkout: control step, simulation, loop jitter',
        description='Print benchmark tables (medians and p99). The tables live in bench/ of a '
        'source checkout, beside uk_controller/; they are not installed.',
    )
    folder = bench_folder()
    if folder is not None:
        if str(folder.parent) not in sys.path:
            sys.path.insert(0, str(folder.parent))
        from bench.bench_command import add_bench_arguments, run_bench

        add_bench_arguments(p)
        p.set_defaults(func=run_bench)
    else:
        p.set_defaults(func=_no_bench)
    return parser


def bench_folder():
    """The bench/ folder of the source checkout this package runs from, or None (an installed package)."""
    folder = Path(__file__).resolve().parent.parent / 'bench'
    return folder if (folder / 'bench_command.py').is_file() else None


def _no_bench(args):
    print(
        'uk-controller bench: the benchmarks are not installed; they run from a source checkout '
        '(git clone the repository, pip install -e . there, and run uk-controller bench from it)',
        file=sys.stderr,
    )
    return 2


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        if interrupt_requested():  # Ctrl-C during the imports, swallowed where it landed
            raise KeyboardInterrupt
        status = args.func(args)
        if interrupt_requested() and status == 0:
            # Ctrl-C landed where Python could not raise it (a __del__ or weakref callback while
            # plotting): the command finished its work, but the user asked it to stop; say so.
            print('\ninterrupted (after the command had finished: what it wrote is complete)', file=sys.stderr)
            return 128 + int(interrupt_signal())
        return status
    except KeyboardInterrupt:  # Ctrl-C before or after the loop (loading, plotting)
        print('\ninterrupted', file=sys.stderr)
        return 128 + int(interrupt_signal())
    except BrokenPipeError:
        return 1


if __name__ == '__main__':
    sys.exit(main())
