"""``uk-controller bench``: the benchmark tables, all measured in one run.

    uk-controller bench [--quick] [--tables step reference pyudk pinocchio simulation parallelogram loop memory
                                          step_ratio ros_rate limit_ratio]

A thin command over bench (one module per table, each with ``run(args)``; the
list and what each measures is that package's docstring). Every figure is a median (and p99) over
many calls on this machine; all comparisons are made in the same run on the same inputs, and each
table says whether the results agree (relative difference). Speed depends on the machine and on its
load: the header prints the CPU, the load average and the package versions. Nothing here is a test;
``python -m bench.bench_command --tables NAME`` prints one of them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

from uk_controller.settings import schema as S

from .common import PYUDK_PYTHON_DEFAULT, STEP_ROBOTS

#: table name -> module of bench (imported only when the table runs)
TABLE_MODULES = {
    'step': 'step',
    'reference': 'reference',
    'pyudk': 'vs_pyudk',
    'pinocchio': 'constraint_dynamics',
    'simulation': 'simulation',
    'parallelogram': 'parallelogram',
    'loop': 'loop',
    'memory': 'memory',
    'step_ratio': 'step_ratio',
    'ros_rate': 'ros_rate',
    'limit_ratio': 'limit_ratio',
}
TABLES = tuple(TABLE_MODULES)
#: what a table needs beyond the core install: table -> (module to import, how to get it)
TABLE_NEEDS = {'ros_rate': ('rclpy', 'the ros extra: pip install -e ".[ros]"')}


def add_bench_arguments(parser):
    parser.add_argument('--quick', action='store_true', help='fewer samples and shorter runs (about a minute)')
    parser.add_argument(
        '--tables',
        nargs='+',
        choices=TABLES,
        default=list(TABLES),
        metavar='TABLE',
        help=f'which tables (default all): {" ".join(TABLES)}',
    )
    parser.add_argument(
        '--robots', nargs='+', type=_robot_arg, default=list(STEP_ROBOTS), help='robot setups for the step tables'
    )
    parser.add_argument(
        '--pyudk-python',
        default=PYUDK_PYTHON_DEFAULT,
        help='python of a virtualenv with pyudk installed (default: $UK_PYUDK_PYTHON or /tmp/pyudk_venv/bin/python)',
    )
    parser.add_argument(
        '--loop-seconds',
        type=S.arg_type('simulation.duration', '--loop-seconds'),
        default=10.0,
        help='fixed-rate loop duration [s]',
    )
    parser.add_argument(
        '--rt-priority',
        type=int,
        default=50,
        help='run under SCHED_FIFO at this priority when permitted (0: default policy); the loop table runs under both',
    )
    parser.add_argument(
        '--para-tol',
        type=float,
        default=1e-10,
        help='parallelogram integrator tolerance (default: the paper\'s Table 10)',
    )
    parser.add_argument(
        '--para-rcond',
        type=float,
        default=None,
        help='parallelogram pseudo-inverse rank threshold (default: = TOL, as in the paper)',
    )
    parser.add_argument(
        '--para-max-nfev',
        type=int,
        default=300_000,
        help='parallelogram: right-hand-side evaluations before a run is called failed',
    )
    parser.add_argument('--para-max-wall', type=float, default=10.0, help='parallelogram wall budget per run [s]')
    return parser


def _set_policy(priority):
    """Run the benchmark under SCHED_FIFO (no preemption by ordinary processes) when allowed."""
    if priority <= 0 or not hasattr(os, 'sched_setscheduler'):
        return 'SCHED_OTHER (default)'
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return f'SCHED_FIFO {priority} (other processes on this machine cannot preempt the measurements)'
    except (OSError, PermissionError) as exc:
        return f'SCHED_OTHER (SCHED_FIFO refused: {exc.strerror or exc})'


def _robot_arg(text):
    """argparse type of --robots: a shipped setup name or a setup file (message lists the shipped ones)
    whose robot loads (a description without movable joints had segfaulted the step table)."""
    from uk_controller.files.parameter_file import ConfigError
    from uk_controller.paths import resolve_config
    from uk_controller.robots import load_robot

    try:
        resolve_config(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    try:
        load_robot(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def missing_extras(tables):
    """{table: how to get what it needs} for the asked tables whose package is not importable here."""
    missing = {}
    for name in tables:
        module, how = TABLE_NEEDS.get(name, (None, None))
        if module is not None and importlib.util.find_spec(module) is None:
            missing[name] = how
    return missing


def run_bench(args):
    from .common import calibration, machine_header

    missing = missing_extras(args.tables)
    for name, how in missing.items():
        print(f'skipping table {name}: it needs {how}')
    args.tables = [name for name in args.tables if name not in missing]
    policy = _set_policy(args.rt_priority)
    machine_header()
    print(f'scheduling: {policy}')
    calibration()
    for name in args.tables:
        importlib.import_module(f'{__package__}.{TABLE_MODULES[name]}').run(args)
    print()
    return 0


def main(argv=None, tables=None):
    """Entry for ``python -m bench.bench_command``: the same tables, optionally a fixed subset."""
    parser = add_bench_arguments(argparse.ArgumentParser(description=__doc__.split('\n\n')[0]))
    if tables is not None:
        parser.set_defaults(tables=list(tables))
    return run_bench(parser.parse_args(argv))


if __name__ == '__main__':
    sys.exit(main())
