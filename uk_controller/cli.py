"""The `uk-controller` command: simulate (and, where installed, run and bench)."""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from .baumgarte import Baumgarte


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


def _stabilization(args, setup):
    if args.no_baumgarte:
        return Baumgarte.none()
    if args.omega is not None:
        return Baumgarte.critical(args.omega)
    if args.alpha is not None or args.beta is not None:
        if args.alpha is None or args.beta is None:
            raise SystemExit('--alpha and --beta go together')
        if args.convention == 'squared':
            return Baumgarte.squared(args.alpha, args.beta)
        return Baumgarte.seed000(args.alpha, args.beta)
    return None


def add_simulate_parser(sub):
    p = sub.add_parser(
        'simulate', help='closed-loop simulation with plots',
        description='Run the UK controller at a fixed rate on a simulated plant (zero-order hold) and '
                    'write a CSV log, PNG figures and a summary.')
    p.add_argument('robot', help="robot name (config/<name>.yaml: scara, five_bar, five_bar_redundant, "
                                 "dual_arm, planar_3r) or a path to a robot YAML")
    p.add_argument('--duration', type=float, help='simulated seconds (default: simulation.duration)')
    p.add_argument('--rate', type=float, help='control rate in Hz (default: control.rate)')
    p.add_argument('--plant', choices=['uk', 'mujoco'], default='uk',
                   help='uk: embedded UK forward dynamics; mujoco: MuJoCo physics engine')
    p.add_argument('--no-baumgarte', action='store_true', help='switch Baumgarte stabilization off')
    p.add_argument('--omega', type=float, help="critically damped stabilization with this natural frequency [rad/s]")
    p.add_argument('--alpha', type=float, help='Baumgarte alpha (with --beta and --convention)')
    p.add_argument('--beta', type=float, help='Baumgarte beta')
    p.add_argument('--convention', choices=['seed000', 'squared'], default='seed000',
                   help="seed000: phi''+a phi'+b phi=0; squared: phi''+2a phi'+b^2 phi=0")
    p.add_argument('--pinv', choices=['svd', 'varga', 'greville', 'householder', 'mgs', 'damped'],
                   help='pseudo-inverse method (default: control.pinv)')
    p.add_argument('--mass-scale', type=float, help='plant inertias x this factor (model mismatch)')
    p.add_argument('--noise', type=float, help='std of position measurement noise')
    p.add_argument('--delay', type=int, help='measurement delay in control periods')
    p.add_argument('--integrator', choices=['rk4', 'solve_ivp'], help='plant integrator')
    p.add_argument('--substeps', type=int, help='RK4 steps per control period')
    p.add_argument('--transient', type=float, help='seconds excluded from the error statistics')
    p.add_argument('--out', default=None, help='output folder (default: results/<robot>)')
    p.add_argument('--no-plots', action='store_true', help='write the CSV and summary only')
    p.add_argument('--mcap', metavar='PATH', help='also write the run as ROS 2 messages in an MCAP file '
                                                  '(the nodes\' topics, simulated stamps; docs/sweep.md)')
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(args):
    from .config import ConfigError
    from .robots import load_robot
    from .sim.closed_loop import simulate
    from .sim.report import format_summary, plot_all, write_csv, write_summary

    try:
        setup = load_robot(args.robot)
    except (ConfigError, FileNotFoundError) as exc:
        print(f'error: {exc}', file=sys.stderr)
        return 2
    out = Path(args.out or Path('results') / setup.name)
    out.mkdir(parents=True, exist_ok=True)
    options = {}
    if args.pinv:
        options['pinv'] = args.pinv
    try:
        result = simulate(setup, duration=args.duration, rate=args.rate, plant=args.plant,
                          stabilization=_stabilization(args, setup), mass_scale=args.mass_scale,
                          sensor_noise=args.noise, measurement_delay=args.delay, integrator=args.integrator,
                          substeps=args.substeps, progress=_progress_bar(f'simulating {setup.name}'),
                          controller_options=options)
    except ConfigError as exc:          # e.g. a plant that cannot load this description (MuJoCo and SDF)
        print(f'error: {exc}', file=sys.stderr)
        return 2
    summary = result.summary(args.transient)
    write_csv(result, out / 'log.csv')
    write_summary(summary, out / 'summary.json')
    files = [] if args.no_plots else plot_all(result, setup, out)
    if args.mcap:
        from .sim.mcap_log import write_mcap
        try:
            write_mcap(result, setup, args.mcap)
        except RuntimeError as exc:
            print(f'error: {exc}', file=sys.stderr)
            return 2
        files.append(args.mcap)
    print(format_summary(summary))
    print(f'wrote {out / "log.csv"}, {out / "summary.json"}' + ''.join(f', {f}' for f in files))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog='uk-controller',
        description='Udwadia-Kalaba constrained-dynamics control: simulate, run on hardware, benchmark.')
    sub = parser.add_subparsers(dest='command', required=True)
    add_simulate_parser(sub)
    from .sweep.cli import add_sweep_parser
    add_sweep_parser(sub)
    if importlib.util.find_spec('uk_controller.hardware.runner') is not None:
        from .hardware.runner import add_run_arguments, run
        p = sub.add_parser('run', help='run the controller on serial motor drivers',
                           description='Run ControllerCore at a fixed rate directly on a serial motor bus.')
        add_run_arguments(p)
        p.set_defaults(func=run)
    from .hardware.emulate_command import add_emulate_arguments, run_emulate
    p = sub.add_parser('emulate', help='motor drivers on a pseudo-terminal, driven by a simulated robot',
                       description='Emulate the serial motor drivers of a robot on a pty and print its path.')
    add_emulate_arguments(p)
    p.set_defaults(func=run_emulate)
    if importlib.util.find_spec('uk_controller.bench') is not None:
        from .bench import add_bench_arguments, run_bench
        p = sub.add_parser('bench', help='benchmarks: control step, simulation, loop jitter',
                           description='Print benchmark tables (medians and p99).')
        add_bench_arguments(p)
        p.set_defaults(func=run_bench)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
