"""``uk-controller sweep``: the argument parser and the command (docs/sweep.md)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..files.parameter_file import ConfigError
from ..settings import schema as S
from ..settings.resolve import resolve
from . import grid as G
from . import runner as R
from . import table as T

EPILOG = """\
VALUES: a,b,c (a list) | start:stop:count (count values, stop included) | start:stop:count:log
(geometric) | start:stop (a range, --random only). Examples:
  uk-controller sweep scara --grid stabilization.omega=5:50:10 --grid control.rate=250,500,1000 \\
      --grid simulation.mass_scale=0.8,1,1.2 --duration 5
  uk-controller sweep five_bar --grid stabilization.omega=5:80 --grid simulation.sensor_noise=0,1e-4 \\
      --random 50 --ray auto
"""


#: above these a sweep needs --yes (or a "y" on a terminal): the parent keeps ~BYTES_PER_RUN per run in
#: memory (rows, journal, table) and 10^6 runs of a few seconds each take hours
CONFIRM_RUNS = 10_000
CONFIRM_PERIODS = 1e8
BYTES_PER_RUN = 3_000


def add_sweep_parser(sub):
    p = sub.add_parser(
        'sweep',
        help='many closed-loop simulations over a grid of settings, one table',
        description='Run `simulate` for every combination of settings (a grid or random samples), locally on '
        'all cores or on a Ray cluster, and write a table of summary metrics (CSV, Parquet), heat '
        'maps and the best settings.',
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument('robot', help='robot name (config/<name>.yaml) or a path to a robot YAML')
    p.add_argument(
        '--grid',
        action='append',
        default=[],
        metavar='KEY=VALUES',
        help='a setting (dotted key of the YAML ros__parameters) and its values; repeat per key',
    )
    p.add_argument(
        '--set',
        action='append',
        default=[],
        metavar='KEY=VALUE',
        help='a setting held fixed for every run (e.g. stabilization.convention=seed000)',
    )
    p.add_argument('--duration', type=float, help='simulated seconds per run (= --set simulation.duration=...)')
    p.add_argument('--random', type=int, metavar='N', help='N random samples of the ranges/lists instead of the grid')
    p.add_argument('--sample-seed', type=int, default=0, help='seed of the --random sampling (default 0)')
    p.add_argument(
        '--plant',
        choices=S.PLANTS,
        help="plant of every run (default: each run's simulation.plant, the file's unless swept)",
    )
    p.add_argument(
        '--transient',
        type=float,
        help='seconds excluded from the error statistics (default: a fifth of the run, at most 2 s)',
    )
    p.add_argument('--settle-tol', type=float, default=1e-3, help='settling tolerance of |task error| (1e-3)')
    p.add_argument(
        '--diverge-at',
        type=float,
        default=1.0,
        help='a run whose task error or closure residual exceeds this is "diverged" (1.0)',
    )
    p.add_argument('--jobs', type=int, help='local worker processes (default: all cores; 1 = in this process)')
    p.add_argument(
        '--ray',
        metavar='auto|local|ADDRESS',
        help='run on a Ray cluster: auto (the running one), local (start one here on 127.0.0.1) or HOST:PORT',
    )
    p.add_argument('--out', help='output folder (default results/sweep_<robot>)')
    p.add_argument('--resume', action='store_true', help='skip runs already in <out>/runs.jsonl')
    p.add_argument(
        '--yes',
        action='store_true',
        help=f'run a sweep above {CONFIRM_RUNS:,} runs or {CONFIRM_PERIODS:.0e} simulated control '
        'periods without asking (it is refused otherwise when stdin is not a terminal)',
    )
    p.add_argument(
        '--heatmap',
        action='append',
        default=[],
        metavar='X,Y[,METRIC]',
        help='a heat map of METRIC (default task_error_rms) over keys X and Y; repeatable. '
        'Default: the first two keys, task_error_rms and settling_time_s',
    )
    p.add_argument('--facet', metavar='KEY', help='one heat-map panel per value of KEY')
    p.add_argument(
        '--reduce',
        choices=['max', 'mean', 'min'],
        default='max',
        help='how runs in one heat-map cell (differing in other keys) are combined (max = worst)',
    )
    p.add_argument(
        '--mark',
        action='append',
        default=[],
        metavar='LABEL=X,Y',
        help='a point marked on the heat maps (e.g. "seed 000=0.5,200"); the best settings are marked too',
    )
    p.add_argument(
        '--best',
        default='settling_time_s',
        metavar='METRIC',
        help='metric to minimize for the best settings (default settling_time_s)',
    )
    p.add_argument(
        '--best-by',
        metavar='KEYS',
        help='comma-separated keys chosen by the user (e.g. the gains): the best value of these is '
        'the one whose worst case over the other keys is best',
    )
    p.add_argument(
        '--max-saturation',
        type=float,
        default=0.0,
        help='largest fraction of saturated steps a best run may have (default 0: none)',
    )
    p.add_argument(
        '--mcap',
        metavar='RUNS',
        help="re-run and record these runs as MCAP under <out>/mcap: 'best' or run indexes '0,5'",
    )
    p.add_argument('--no-plots', action='store_true', help='write the table only')
    p.set_defaults(func=cmd_sweep)


def _fail(message):
    print(f'error: {message}', file=sys.stderr)
    return 2


def prepare(args):
    """``(context, keys, specs list)`` from the arguments; raises ConfigError."""
    from ..files.parameter_file import load_config
    from ..paths import resolve_config

    params, path = load_config(resolve_config(args.robot))
    specs = {}
    for text in args.grid:
        key, values = G.parse_spec(text, '--grid')
        if key in specs:
            raise ConfigError(f'{key}: given twice')
        specs[key] = values
    fixed = {}
    for text in args.set:
        key, values = G.parse_spec(text, '--set')
        if isinstance(values, G.Range) or len(values) != 1:
            raise ConfigError(f'--set {key}: one value (use --grid for several)')
        fixed[key] = values
    if args.duration is not None:
        fixed['simulation.duration'] = [float(args.duration)]
    if not specs:
        raise ConfigError('give at least one --grid KEY=VALUES')
    for key in fixed:
        if key in specs:
            raise ConfigError(f'{key}: both in --grid and --set')
    # the size first: checking the values builds the robot once per distinct value
    base = resolve(path, {**{k: v[0] for k, v in fixed.items()}, **G.first_values(params, specs)}, params=params)
    confirm_size(args, base, specs)
    # checked together: settings can depend on each other (a convention and its alpha, beta)
    both = G.check_overrides(params, path, {**fixed, **specs})
    fixed = {k: both[k] for k in fixed}
    checked = {k: both[k] for k in specs}
    if args.random is None:
        for key, v in checked.items():
            if isinstance(v, G.Range) and v.count is None:
                raise ConfigError(f'{key}: start:stop is a range for --random; give start:stop:count')
    int_keys = {k for k in checked if G.key_type(params, k) is int}
    runs = G.expand(checked, args.random, args.sample_seed, int_keys)
    name = base.robot.name
    context = R.make_context(
        name,
        params,
        path,
        args.plant,
        args.transient,
        args.settle_tol,
        args.diverge_at,
        fixed={k: v[0] for k, v in fixed.items()},
        convention=base.stabilization.convention,
    )
    # a run's id and seed name the plant it runs on: --plant, else the file's (with --set); a swept
    # simulation.plant is in the run's overrides
    plant = args.plant or base.simulation.plant
    specs_list = []
    for index, overrides in enumerate(runs):
        specs_list.append(
            {
                'index': index,
                'overrides': overrides,
                'run_id': G.run_id(name, plant, {**overrides, **{k: v[0] for k, v in fixed.items()}}),
                'seed': G.run_seed(name, plant, {**overrides, **{k: v[0] for k, v in fixed.items()}}),
            }
        )
    if specs_list:
        context['warm_overrides'] = specs_list[0]['overrides']
    return context, list(checked), specs_list


def estimate(args, base, checked):
    """``(runs, simulated control periods)`` of a sweep, before its runs are expanded: the grid's product
    of value counts (or --random N) and, per run, duration x rate at their largest swept values."""
    if args.random is not None:
        runs = int(args.random)
    else:
        runs = 1
        for values in checked.values():
            runs *= values.count if isinstance(values, G.Range) else len(values)

    def largest(key):
        values = checked.get(key)
        if values is None:
            section, leaf = key.split('.')
            return float(getattr(getattr(base, section), leaf))
        numbers = [values.start, values.stop] if isinstance(values, G.Range) else list(values)
        try:
            return max(float(v) for v in numbers)
        except (TypeError, ValueError):
            return 0.0  # not a number: the value check that follows names it

    return runs, runs * largest('simulation.duration') * largest('control.rate')


def confirm_size(args, base, checked):
    """Refuse (ConfigError, exit 2) a sweep above CONFIRM_RUNS runs or CONFIRM_PERIODS periods unless
    --yes is given or the user answers y on a terminal."""
    runs, periods = estimate(args, base, checked)
    if runs <= CONFIRM_RUNS and periods <= CONFIRM_PERIODS or args.yes:
        return
    what = (
        f'{runs:,} runs, up to {periods:.3g} simulated control periods, ~{runs * BYTES_PER_RUN / 1e6:,.0f} MB '
        f'of results kept in memory'
    )
    if sys.stdin is not None and sys.stdin.isatty():
        print(f'this sweep is large: {what}. Run it? [y/N] ', end='', file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() in ('y', 'yes'):
            return
    raise ConfigError(
        f'this sweep is large: {what} (limits {CONFIRM_RUNS:,} runs, {CONFIRM_PERIODS:.0e} '
        'periods); give --yes to run it, or fewer values / --random N'
    )


def run_sweep(context, specs, out, *, ray=None, jobs=None, resume=False, progress=True):
    """Run `specs` (skipping those in the journal when `resume`); returns the rows in index order."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = R.Journal(out / 'runs.jsonl')
    if not resume and journal.path.exists():
        journal.path.unlink()
    done = journal.load() if resume else {}
    todo = [s for s in specs if s['run_id'] not in done]
    bar = R.Progress(len(todo), label=f"sweep {context['robot']}") if progress and todo else None
    new = {}

    def on_row(row):
        journal.append(row)
        new[row['run_id']] = row
        if bar is not None:
            bar.update(row)

    if todo:
        if ray:
            R.run_ray(context, todo, on_row, address=ray, jobs=jobs)
        else:
            R.run_local(context, todo, on_row, jobs=jobs)
    rows = []
    for spec in specs:
        row = dict(new.get(spec['run_id']) or done[spec['run_id']])
        row['index'] = spec['index']
        row.update(spec['overrides'])
        rows.append(row)
    return rows, len(specs) - len(todo)


def cmd_sweep(args):
    from ..files.parameter_file import ConfigError

    try:
        context, keys, specs = prepare(args)
        if args.ray:
            R.import_ray()
        if args.mcap:  # before the runs: the recording comes after them
            from ..sim.mcap_log import writer_class

            writer_class()
        metrics = set(R.METRICS) | set(R.MEASURED)
        if args.best not in metrics:
            raise ConfigError(f'--best {args.best!r}: not a metric; one of {", ".join(R.METRICS + R.MEASURED)}')
        by = [k.strip() for k in args.best_by.split(',')] if args.best_by else []
        for key in by + ([args.facet] if args.facet else []):
            if key not in keys:
                raise ConfigError(f'{key!r} is not a --grid key ({", ".join(keys)})')
        maps = _heatmap_specs(args, keys, metrics)
        marks = _marks(args)
    except (ConfigError, FileNotFoundError, RuntimeError) as exc:
        return _fail(exc)
    out = Path(args.out or Path('results') / f"sweep_{context['robot']}")
    problem = _check_out(out, context)
    if problem:
        return _fail(problem)
    start = time.perf_counter()
    where = f'Ray ({args.ray})' if args.ray else f"{args.jobs or os.cpu_count()} local processes"
    print(f"{len(specs)} runs of {context['robot']} ({', '.join(keys)}) on {where}", file=sys.stderr)
    try:
        with R.StopOnSignals():
            rows, skipped = run_sweep(context, specs, out, ray=args.ray, jobs=args.jobs, resume=args.resume)
    except RuntimeError as exc:
        return _fail(exc)
    except R.Interrupted as stop:
        done = len(R.Journal(out / 'runs.jsonl').load())
        print(
            f'\ninterrupted ({stop.signal}) after {time.perf_counter() - start:.1f} s: runs cancelled, workers '
            f'stopped; {done} finished runs are in {out / "runs.jsonl"} (--resume continues from them)',
            file=sys.stderr,
        )
        return 143 if stop.signal == 'SIGTERM' else 130
    except OSError as exc:  # runs.jsonl could not be written (disk full, I/O error)
        return _fail(
            f'--out: cannot write {out / "runs.jsonl"}: {exc.strerror or exc}; the runs finished before '
            'the error are in it (--resume continues from them)'
        )
    elapsed = time.perf_counter() - start
    try:
        return _write_results(args, context, keys, specs, rows, skipped, elapsed, out, by, maps, marks)
    except ConfigError as exc:  # a table or figure could not be written: every finished run is in runs.jsonl
        return _fail(f'{exc}; every finished run is in {out / "runs.jsonl"}')
    except OSError as exc:
        return _fail(
            f'--out: cannot write in {out}: {exc.strerror or exc} ({exc.filename}); every finished run is '
            f'in {out / "runs.jsonl"}'
        )


def _check_out(out, context):
    """Why the sweep cannot write into the folder `out` (a file, an input inside it, not writable), or None."""
    from ..files.io_safety import refuse_inputs_as_outputs
    from ..files.parameter_file import ConfigError

    if out.exists() and not out.is_dir():
        return f'--out: {out} exists and is not a folder; accepted: a folder (created if missing)'
    names = ['runs.jsonl', 'table.csv', 'table.parquet', 'best.json']
    try:
        refuse_inputs_as_outputs(
            [('--out', out / name) for name in names], [context['path']] if context.get('path') else []
        )
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f'.uk_write_test_{os.getpid()}'
        probe.write_text('')
        probe.unlink()
    except ConfigError as exc:
        return str(exc)
    except OSError as exc:
        return f'--out: cannot write to {out}: {exc.strerror or exc}'
    return None


def _write_results(args, context, keys, specs, rows, skipped, elapsed, out, by, maps, marks):
    """The table, best.json, heat maps and recordings of a finished sweep, and the printed result."""
    from ..files.io_safety import atomic_write, dumps_strict

    T.write_csv(rows, keys, out / 'table.csv')
    files = [out / 'table.csv']
    if T.write_parquet(rows, keys, out / 'table.parquet'):
        files.append(out / 'table.parquet')
    else:
        print("note: no Parquet table (pip install 'uk-controller[sweep]' for pyarrow)", file=sys.stderr)
    status = {}
    for r in rows:
        status[r['status']] = status.get(r['status'], 0) + 1
    choice = T.best(rows, args.best, by, args.max_saturation)
    criterion = T.criterion_text(args.best, by, args.max_saturation)
    best_marks = list(marks)
    if choice is not None:
        settings = {k: choice[0][k] for k in (by or keys)}
        best = (
            dumps_strict(
                {
                    'criterion': criterion,
                    'settings': settings,
                    args.best: choice[1],
                    'runs': [r['index'] for r in choice[2]],
                },
                indent=2,
            )
            + '\n'
        )
        atomic_write(out / 'best.json', lambda fh: fh.write(best))
    if not args.no_plots:
        for x, y, metric in maps:
            mk = list(best_marks)
            if choice is not None and x in choice[0] and y in choice[0]:
                mk.append(('best', choice[0][x], choice[0][y]))
            path = out / f"heatmap_{x}_{y}_{metric}.png".replace('/', '_')
            T.heatmap(
                rows,
                x,
                y,
                metric,
                path,
                facet=args.facet,
                reduce=args.reduce,
                marks=mk,
                curves=_damping_curves(context, x, y, rows),
                title=f"{context['robot']}: {metric}",
            )
            files.append(path)
    if args.mcap:
        try:
            files += _record(context, specs, args.mcap, choice, args.best, out)
        except (RuntimeError, ConfigError) as exc:
            return _fail(exc)
    print(
        f"{len(rows)} runs ({skipped} resumed) in {elapsed:.1f} s: "
        + ', '.join(f'{n} {s}' for s, n in sorted(status.items()))
    )
    print(f'best ({criterion}):')
    if choice is None:
        print('  no run qualifies')
    else:
        print(
            '  '
            + ', '.join(f'{k}={v!r}' for k, v in choice[0].items() if k in (by or keys))
            + f' -> {args.best} = {choice[1]:.6g}'
            + (f' (worst of {len(choice[2])} runs)' if by else f" (run {choice[2][0]['index']})")
        )
    print('wrote ' + ', '.join(str(f) for f in files))
    return 0


def _heatmap_specs(args, keys, metrics):
    maps = []
    for text in args.heatmap:
        parts = [p.strip() for p in text.split(',')]
        if len(parts) not in (2, 3):
            raise ConfigError(f'--heatmap {text!r}: expected X,Y[,METRIC]')
        x, y = parts[:2]
        metric = parts[2] if len(parts) == 3 else 'task_error_rms'
        for key in (x, y):
            if key not in keys:
                raise ConfigError(f'--heatmap {key!r} is not a --grid key ({", ".join(keys)})')
        if metric not in metrics:
            raise ConfigError(f'--heatmap metric {metric!r}: one of {", ".join(R.METRICS + R.MEASURED)}')
        maps.append((x, y, metric))
    if not args.heatmap and len(keys) >= 2:
        maps = [(keys[0], keys[1], 'task_error_rms'), (keys[0], keys[1], 'settling_time_s')]
    return maps


def _damping_curves(context, x, y, rows):
    """On an alpha x beta map in seed 000's convention (phi'' + alpha phi' + beta phi = 0, seed 000
    eq 52) the critically damped gains alpha = 2 sqrt(beta) as a line."""
    convention = context['convention']
    if convention != 'seed000' or {x, y} != {'stabilization.alpha', 'stabilization.beta'}:
        return []
    import numpy as np

    beta = np.geomspace(min(r['stabilization.beta'] for r in rows) / 2, max(r['stabilization.beta'] for r in rows) * 2)
    alpha = 2.0 * np.sqrt(beta)
    return [('critical: alpha = 2 sqrt(beta)', *((alpha, beta) if x == 'stabilization.alpha' else (beta, alpha)))]


def _marks(args):
    marks = []
    for text in args.mark:
        label, sep, xy = text.rpartition('=')
        try:
            mx, my = (float(v) for v in xy.split(','))
        except ValueError:
            raise ConfigError(f'--mark {text!r}: expected LABEL=X,Y') from None
        marks.append((label or 'mark', mx, my))
    return marks


def _record(context, specs, which, choice, metric, out):
    """Re-run the chosen runs in this process (same settings and seed, so the same run) and
    write each as MCAP."""
    from ..sim.mcap_log import write_mcap

    if which == 'best':
        if choice is None:
            raise ConfigError('--mcap best: no run qualifies as best')
        sign = -1.0 if metric in T.MAXIMIZE else 1.0  # the best run, or the worst run of the best group
        indexes = [max(choice[2], key=lambda r: (sign * r[metric], -r['index']))['index']]
    else:
        try:
            indexes = [int(v) for v in which.split(',')]
        except ValueError:
            raise ConfigError(f"--mcap {which!r}: 'best' or comma-separated run indexes") from None
    folder = out / 'mcap'
    folder.mkdir(exist_ok=True)
    files = []
    for index in indexes:
        if not 0 <= index < len(specs):
            raise ConfigError(f'--mcap: run index {index} out of range 0..{len(specs) - 1}')
        spec = specs[index]
        setup, result = R.simulate_run(context, spec)
        path = folder / f'run_{index:04d}.mcap'
        write_mcap(result, setup, path)
        files.append(path)
    return files
