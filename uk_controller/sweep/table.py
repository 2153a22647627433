"""The sweep table (CSV, Parquet), heat maps of two keys against a metric, and the best settings.

Rows are sorted by run index, floats written with Python's shortest round-trip
``repr``, so two tables of the same sweep compare equal text for text in every
column except the measured ones (:data:`uk_controller.sweep.runner.MEASURED`).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from .runner import MEASURED, METRICS

#: Metrics where larger is better; all others are minimized.
MAXIMIZE = {'real_time_factor', 'ok_steps'}


def columns(keys):
    return ['index', 'run_id', 'seed', 'status', 'reason', *keys, *METRICS, *MEASURED]


def _text(value):
    if isinstance(value, float):
        return repr(value)
    return '' if value is None else str(value)


def write_csv(rows, keys, path):
    """table.csv, complete or not at all (:func:`uk_controller.files.io_safety.atomic_write`)."""
    from ..files.io_safety import atomic_write

    cols = columns(keys)

    def write(fh):
        writer = csv.writer(fh)
        writer.writerow(cols)
        for row in rows:
            writer.writerow([_text(row.get(c)) for c in cols])

    atomic_write(path, write)


def read_csv(path):
    """The rows of a table written by :func:`write_csv` (numbers parsed back exactly)."""

    def value(text):
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return {'True': True, 'False': False}.get(text, text)

    with open(path, newline='', encoding='utf-8') as fh:
        return [{k: value(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def write_parquet(rows, keys, path):
    """The table as Parquet (pyarrow); returns False (and writes nothing) without pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    cols = columns(keys)
    data = {}
    for c in cols:
        values = [row.get(c) for row in rows]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and any(
            isinstance(v, float) for v in values
        ):
            values = [float(v) for v in values]
        data[c] = values
    from ..files.io_safety import atomic_write

    atomic_write(path, lambda fh: pq.write_table(pa.table(data), fh), binary=True)
    return True


# ----------------------------------------------------------------------------- best settings


def _ok(row, max_saturation):
    return (
        row['status'] == 'ok'
        and row['safe_effort_steps'] == 0
        and row['saturated_fraction'] <= max_saturation
        and not math.isnan(row['settling_time_s'])
    )


def criterion_text(metric, by, max_saturation):
    sat = 'no saturation' if max_saturation == 0 else f'saturated at most {100 * max_saturation:g}% of steps'
    goal = 'largest' if metric in MAXIMIZE else 'smallest'
    rule = (
        f'{goal} {metric}'
        if not by
        else f"{goal} worst-case {metric} over the other keys, per value of {', '.join(by)}"
    )
    return f'{rule}, among runs with status ok, no safe-effort steps, {sat} and a finite settling time' + (
        ' (every run of the group must qualify)' if by else ''
    )


def best(rows, metric='settling_time_s', by=(), max_saturation=0.0):
    """The best settings: ``(settings dict, value, runs)`` or None when no run qualifies.

    Without `by`: the qualifying run with the best `metric`. With `by` (a list of
    keys, e.g. the gains): rows are grouped by those keys; a group qualifies only if
    all its runs do (robust to the other keys, e.g. mass mismatch and rate), and is
    scored by its worst run; the best group wins.
    """
    sign = -1.0 if metric in MAXIMIZE else 1.0
    if not by:
        good = [r for r in rows if _ok(r, max_saturation) and not math.isnan(r[metric])]
        if not good:
            return None
        pick = min(good, key=lambda r: (sign * r[metric], r['index']))
        return pick, pick[metric], [pick]
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    scored = []
    for values, members in groups.items():
        if all(_ok(r, max_saturation) and not math.isnan(r[metric]) for r in members):
            worst = max(sign * r[metric] for r in members)
            scored.append((worst, min(r['index'] for r in members), values, members))
    if not scored:
        return None
    worst, _, values, members = min(scored, key=lambda s: (s[0], s[1]))
    return dict(zip(by, values)), sign * worst, members


# ----------------------------------------------------------------------------- heat maps


def _edges(values, log):
    v = np.log(values) if log else np.asarray(values, dtype=float)
    if v.size == 1:
        e = np.array([v[0] - 0.5, v[0] + 0.5]) if not log else np.array([v[0] - 0.1, v[0] + 0.1])
    else:
        mid = 0.5 * (v[1:] + v[:-1])
        e = np.concatenate(([v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]))
    return np.exp(e) if log else e


def _is_log(values):
    v = np.asarray(values, dtype=float)
    if v.size < 3 or np.any(v <= 0):
        return False
    d, r = np.diff(v), v[1:] / v[:-1]
    return np.ptp(r) < 1e-6 * r.mean() and np.ptp(d) > 1e-6 * abs(d.mean())


def heatmap(rows, x, y, metric, path, *, facet=None, reduce='max', marks=(), title=None, log_color=None, curves=()):
    """PNG of `metric` over keys `x` (columns) and `y` (rows).

    One panel per value of `facet` (another key), if given; runs that differ in any
    remaining key are reduced to one cell with `reduce` ('max' = worst case, 'mean',
    'min'). Cells whose runs are not all ok are hatched grey. `marks`: (label, x, y)
    points drawn on every panel; `curves`: (label, xs, ys) lines (e.g. critical damping).
    Returns ``(path, [(facet value, cells (len(y), len(x)), not-ok mask), ...])``.
    """
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm, Normalize

    xs = sorted({r[x] for r in rows})
    ys = sorted({r[y] for r in rows})
    fvals = sorted({r[facet] for r in rows}) if facet else [None]
    fn = {'max': np.max, 'mean': np.mean, 'min': np.min}[reduce]
    grids = []
    for fv in fvals:
        z = np.full((len(ys), len(xs)), np.nan)
        bad = np.zeros_like(z, dtype=bool)
        for i, yv in enumerate(ys):
            for j, xv in enumerate(xs):
                cell = [r for r in rows if r[x] == xv and r[y] == yv and (facet is None or r[facet] == fv)]
                if not cell:
                    continue
                if any(r['status'] != 'ok' or math.isnan(r[metric]) for r in cell):
                    bad[i, j] = True
                else:
                    z[i, j] = fn([r[metric] for r in cell])
        grids.append((fv, z, bad))
    finite = np.concatenate([g[1][np.isfinite(g[1])] for g in grids]) if grids else np.zeros(0)
    positive = finite[finite > 0]
    if log_color is None:
        log_color = positive.size > 1 and positive.size == finite.size and positive.max() / positive.min() > 50
    norm = (
        LogNorm(positive.min(), positive.max())
        if log_color and positive.size
        else Normalize(finite.min() if finite.size else 0, finite.max() if finite.size else 1)
    )
    xlog, ylog = _is_log(xs), _is_log(ys)
    xe, ye = _edges(xs, xlog), _edges(ys, ylog)
    fig, axes = plt.subplots(
        1, len(grids), figsize=(4.2 * len(grids) + 1.2, 3.8), squeeze=False, sharey=True, constrained_layout=True
    )
    mesh = None
    for ax, (fv, z, bad) in zip(axes[0], grids):
        mesh = ax.pcolormesh(xe, ye, np.ma.masked_invalid(z), norm=norm, cmap='viridis_r')
        for i, j in zip(*np.nonzero(bad)):
            ax.fill_between([xe[j], xe[j + 1]], ye[i], ye[i + 1], color='0.8', hatch='xx', edgecolor='0.5', linewidth=0)
        for label, cx, cy in curves:
            ax.plot(cx, cy, 'w--', lw=1.2, label=label)
        for k, (label, mx, my) in enumerate(marks):
            ax.plot(
                [mx],
                [my],
                marker='*^os'[k % 4],
                ms=13,
                mfc='red' if k == 0 else 'white',
                mec='k',
                ls='none',
                label=label,
            )
        ax.set_xscale('log' if xlog else 'linear')
        ax.set_yscale('log' if ylog else 'linear')
        ax.set_xlim(xe[0], xe[-1])
        ax.set_ylim(ye[0], ye[-1])
        ax.set_xlabel(x)
        if facet:
            ax.set_title(f'{facet} = {fv:g}' if isinstance(fv, float) else f'{facet} = {fv}', fontsize=9)
    axes[0][0].set_ylabel(y)
    if marks or curves:
        axes[0][-1].legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    if mesh is not None:
        fig.colorbar(mesh, ax=axes[0].tolist(), label=f'{metric} ({reduce} over other keys)', shrink=0.9)
    if title:
        fig.suptitle(title, fontsize=10)
    from ..files.io_safety import atomic_write

    try:
        atomic_write(path, lambda fh: fig.savefig(fh, format='png', dpi=80), binary=True)
    finally:
        plt.close(fig)
    return Path(path), grids
