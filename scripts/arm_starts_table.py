#!/usr/bin/env python3
"""Print the table of real arms x seeded random starts x {position, pose} tasks (test/arm_starts.py).

Each row is one closed-loop run on the embedded UK plant at 1 kHz: time to converge (|task error| stays
below 1e-3), max |q'|/velocity limit, closest approach to a position limit in % of the joint's range
(negative: past it), effort peak / limit, saturated steps, max joint speed in the last second (the task
holds still, so this is the null-space speed), largest count of step-to-step sign flips of an effort at
its limit, median control step [us]. A summary line per arm follows.

    PYTHONPATH=. python scripts/arm_starts_table.py [--arms ur5,panda] [--seeds 5] [--duration 4] [--jobs 2]
        [--approach auto|on|off]
"""

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))
import arm_starts  # noqa: E402


def _one(args):
    arm, seed, task, duration, approach = args
    try:
        return arm_starts.run_case(arm, seed, task, duration=duration, approach=approach)
    except Exception as exc:  # noqa: BLE001 - a case that cannot run is a row of the table
        return (arm, seed, task, f'{type(exc).__name__}: {exc}')


def _f(x, fmt):
    return 'nan' if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


HEADER = (
    f"{'arm':7} {'seed':>4} {'task':8} {'dist_m':>6} {'deg':>5} {'conv':>4} {'t_conv':>6} {'err_end':>8} "
    f"{'|qd|/lim':>8} {'lim_%':>7} {'u/lim':>5} {'sat_%':>6} {'ns_rad/s':>9} {'flips':>5} {'step_us':>7}  note"
)


def row(m):
    if isinstance(m, tuple):
        return f'{m[0]:7} {m[1]:>4} {m[2]:8} ERROR {m[3]}'
    note = m.failure or ''
    if m.unlimited_speed:
        note += f' (no velocity limit: {",".join(m.unlimited_speed)})'
    return (
        f'{m.arm:7} {m.seed:>4} {m.task:8} {m.distance:6.3f} {m.angle_deg:5.1f} {"yes" if m.converged else "NO":>4} '
        f'{_f(m.t_converge, "6.3f")} {_f(m.final_error, "8.1e")} {_f(m.speed_ratio, "8.3g")} '
        f'{_f(m.limit_margin_pct, "7.4g")} {_f(m.effort_ratio, "5.2f")} {100 * m.saturated_fraction:6.1f} '
        f'{_f(m.last_s_speed, "9.3g")} {m.sign_flips:5d} {_f(m.step_us, "7.1f")}  {note}'
    )


def summary(arm, ms):
    ok = [m for m in ms if not isinstance(m, tuple)]
    if not ok:
        return f'{arm}: no run'
    conv = sum(m.converged for m in ok)
    worst = lambda key, f=max: f(getattr(m, key) for m in ok)  # noqa: E731
    crit = sum(
        m.converged
        and m.finite
        and m.speed_ratio <= 1.0
        and m.limit_margin_pct >= 0.0
        and m.effort_ratio <= 1.0 + 1e-9
        and m.last_s_speed < 0.05
        and m.sign_flips == 0
        for m in ok
    )
    return (
        f'{arm}: converged {conv}/{len(ms)}, all criteria {crit}/{len(ms)}, max |qd|/lim '
        f'{_f(worst("speed_ratio"), ".3g")}, closest limit {_f(worst("limit_margin_pct", min), ".4g")} %, '
        f'max sat {100 * worst("saturated_fraction"):.1f} %, max ns speed {_f(worst("last_s_speed"), ".3g")} '
        f'rad/s, max flips {worst("sign_flips")}, median step '
        f'{_f(sorted(m.step_us for m in ok)[len(ok) // 2], ".1f")} us'
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--arms', default=','.join(arm_starts.ARMS))
    ap.add_argument('--seeds', type=int, default=5)
    ap.add_argument('--tasks', default=','.join(arm_starts.TASKS))
    ap.add_argument('--duration', type=float, default=4.0)
    ap.add_argument('--jobs', type=int, default=1)
    ap.add_argument(
        '--approach',
        choices=('auto', 'on', 'off'),
        default=None,
        help='approach.mode the setups write (default: none written, the default auto; off: the task law alone)',
    )
    a = ap.parse_args(argv)
    arms = a.arms.split(',')
    jobs = [(arm, s, t, a.duration, a.approach) for arm in arms for s in range(a.seeds) for t in a.tasks.split(',')]
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as ex:
            results = list(ex.map(_one, jobs))
    else:
        results = [_one(j) for j in jobs]
    print(HEADER)
    for m in results:
        print(row(m), flush=True)
    print()
    for arm in arms:
        print(summary(arm, [m for j, m in zip(jobs, results) if j[0] == arm]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
