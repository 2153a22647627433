"""Numerical fingerprint of the shipped robots: proves a refactor changed no result.

    python -m bench.fingerprint --save before.npz       # on the old commit
    python -m bench.fingerprint --compare before.npz    # on the new one: exit 1 on any difference

Recorded (every float compared bit for bit, NaN equal to NaN):

* ``simulate`` on every shipped robot, on the embedded UK plant (compiled loop and
  Python loop) and on MuJoCo: q, q', efforts, all constraint residuals, per-step
  status and saturation;
* ``ControllerCore.step`` on 40 seeded random states per robot (inside and outside
  the effort limits): efforts, residuals, rank, condition, ok, reason;
* the seed 002 parallelogram (Flores et al. / pseudo-inverse benchmark) with every
  pseudo-inverse method, Baumgarte on and off: completion, final time, residual,
  right-hand-side count and angle error of the compiled BDF run.

Wall-clock fields (compute times, wall) are left out: they are the only outputs
allowed to change.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np

from uk_controller.paths import available_configs

#: every robot setup shipped in config/ (a setup added there is fingerprinted from then on)
ROBOTS = tuple(available_configs())
SIM_FIELDS = ('q', 'qd', 'effort', 'phi', 'phidot', 'status', 'saturated', 'ok')


def _simulations(record, duration):
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    for robot in ROBOTS:
        for plant, compiled in (('uk', None), ('uk', False), ('mujoco', None)):
            res = simulate(
                load_robot(robot, {'simulation.duration': duration, 'simulation.plant': plant}), compiled=compiled
            )
            key = f'sim/{robot}/{plant}/{"default" if compiled is None else "python"}'
            for name in SIM_FIELDS:
                record[f'{key}/{name}'] = np.asarray(getattr(res, name))


def _steps(record, count=40):
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    for robot in ROBOTS:
        setup = load_robot(robot)
        ctrl = ControllerCore(setup)
        rng = np.random.default_rng(12)
        q0 = np.zeros(ctrl.n)
        rows = {k: [] for k in ('effort', 'phi', 'phidot', 'task_error', 'rank', 'condition', 'ok', 'reason')}
        for k in range(count + 3):
            scale = 0.05 if k < count // 2 else 1.0
            q = q0 + rng.normal(size=ctrl.n) * scale
            qd = rng.normal(size=ctrl.n) * scale
            if k == count:  # the bad inputs: safe effort and its reason
                q[0] = np.nan
            elif k == count + 1:
                qd[-1] = np.inf
            elif k == count + 2:
                q = q[:-1]
            try:
                r = ctrl.step(q, qd, 0.01 * k)
            except (ValueError, IndexError) as exc:  # a wrong length may be refused outright
                rows['reason'].append(f'{type(exc).__name__}')
                continue
            for name in rows:
                rows[name].append(getattr(r, name))
        for name, values in rows.items():
            if name in ('reason', 'error'):
                record[f'step/{robot}/{name}'] = np.array([str(v) for v in values])
            else:
                record[f'step/{robot}/{name}'] = np.array(values)


def _parallelogram_module():
    return importlib.import_module('bench.parallelogram')


def _parallelogram(record, tf):
    mod = _parallelogram_module()
    for baumgarte in (True, False):
        for method in mod.METHODS:
            r = mod.simulate(method, baumgarte=baumgarte, tol=1e-8, tf=tf, max_nfev=20000)
            key = f'parallelogram/{method}/{"baumgarte" if baumgarte else "none"}'
            for name in ('completed', 't_end', 'residual', 'nfev', 'angle_error', 'correct_until'):
                record[f'{key}/{name}'] = np.asarray(getattr(r, name))


def fingerprint(duration=0.3, parallelogram_tf=2.0):
    record = {}
    _simulations(record, duration)
    _steps(record)
    _parallelogram(record, parallelogram_tf)
    return record


def compare(before, after):
    """Names whose arrays differ (bit for bit; NaN == NaN) or were recorded before and are missing now.
    Arrays only in `after` (a robot setup added since) are new, not a difference."""
    diffs = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            diffs.append(f'{name}: only before')
            continue
        if name not in before:
            continue
        a, b = np.asarray(before[name]), np.asarray(after[name])
        if a.shape != b.shape or a.dtype != b.dtype:
            diffs.append(f'{name}: shape/dtype {a.shape} {a.dtype} -> {b.shape} {b.dtype}')
        elif a.dtype.kind == 'f':
            if not np.array_equal(
                a.view(np.uint64) if a.dtype == np.float64 else a, b.view(np.uint64) if b.dtype == np.float64 else b
            ):
                diffs.append(f'{name}: max |diff| {np.nanmax(np.abs(a - b)) if a.size else 0:.3e}')
        elif not np.array_equal(a, b):
            diffs.append(f'{name}: differs')
    return diffs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument('--save', type=Path, help='write the fingerprint to this .npz')
    group.add_argument('--compare', type=Path, help='compare against this .npz; exit 1 on any difference')
    parser.add_argument('--duration', type=float, default=0.3, help='simulated seconds per run')
    args = parser.parse_args(argv)
    record = fingerprint(args.duration)
    if args.save:
        np.savez(args.save, **{k.replace('/', '|'): v for k, v in record.items()})
        print(f'{len(record)} arrays written to {args.save}')
        return 0
    with np.load(args.compare) as data:
        before = {k.replace('|', '/'): data[k] for k in data.files}
    diffs = compare(before, record)
    new = sorted(set(record) - set(before))
    print(
        f'{len(record) - len(new)} arrays compared with {args.compare}: '
        f'{"bit-identical" if not diffs else f"{len(diffs)} differ"}'
        + (f'; {len(new)} new (robot setups not in the saved file)' if new else '')
    )
    for line in diffs:
        print('  ' + line)
    return 1 if diffs else 0


if __name__ == '__main__':
    sys.exit(main())
