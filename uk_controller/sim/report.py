"""Write a simulation's CSV log, PNG figures and printed summary."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ..control.status import STEP_CLASSES
from ..files.io_safety import strict_json  # noqa: F401 - re-exported (summary.json's rule)


def csv_header(result):
    """The header row of log.csv: t, q, q', efforts, residuals, task errors, the posture error ``|q - q_ref|``
    and the null-space dimensions (motion, internal forces; DESIGN.md "Redundancy"), ok, status."""
    return (
        ['t']
        + [f'q_{j}' for j in result.joint_names]
        + [f'qd_{j}' for j in result.joint_names]
        + [f'u_{a}' for a in result.actuator_names]
        + [f'phi_{r}' for r in result.row_names]
        + [f'phidot_{r}' for r in result.row_names]
        + [f'task_{r}' for r in result.task_row_names]
        + ['posture_error', 'null_motion', 'null_internal', 'ok', 'status']
    )


def csv_rows(result, every=1, first=0):
    """The rows of log.csv for `result` (the rows of index ``first, first + every, ...``), as text cells;
    a non-finite value (the unknown task error of a safe-effort step) is an empty cell."""
    sel = slice(first, None, every)
    steps = result.t.size
    posture = result.posture_error if result.posture_error is not None else np.full(steps, np.nan)
    null = result.null_space if result.null_space is not None else np.full((steps, 2), np.nan)
    data = np.column_stack(
        (
            result.t[sel],
            result.q[sel],
            result.qd[sel],
            result.effort[sel],
            result.phi[sel],
            result.phidot[sel],
            result.task_error[sel],
            posture[sel],
            null[sel],
            result.ok[sel].astype(float),
        )
    )
    codes = result.status[sel] if result.status is not None else np.zeros(data.shape[0], dtype=np.int8)
    rows = np.char.mod('%.9g', data).tolist() if data.size else []
    if data.size and not np.isfinite(data).all():
        for r, c in zip(*np.nonzero(~np.isfinite(data))):
            rows[r][c] = ''
    return [row + [STEP_CLASSES[c]] for row, c in zip(rows, codes)]


def write_csv(result, path):
    """One row per control instant: t, q, q', efforts, residuals, task errors (whole result at once)."""
    with open(path, 'w', newline='') as fh:
        writer = csv.writer(fh)
        writer.writerow(csv_header(result))
        writer.writerows(csv_rows(result))


class CsvLog:
    """log.csv written while the run goes (the ``sink`` of :func:`~uk_controller.sim.closed_loop.simulate`):
    chunks of rows to a :class:`~uk_controller.files.io_safety.StreamingFile`, every `every`-th control step
    (``simulation.log_every``). :meth:`close` renames it complete, or raises ConfigError saying which
    steps were kept and which lost after a write error."""

    def __init__(self, path, every=1, flag='--out'):
        from ..files.io_safety import StreamingFile

        self.file = StreamingFile(path, flag=flag)
        self.every = max(1, int(every))
        self.header = False
        self.steps_seen = 0  # control steps handed to the log

    def __call__(self, chunk):
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer)
        if not self.header:
            writer.writerow(csv_header(chunk))
            self.header = True
        first = (-chunk.first_step) % self.every
        rows = csv_rows(chunk, self.every, first)
        writer.writerows(rows)
        self.file.write(buffer.getvalue(), rows=len(rows))
        self.steps_seen += int(chunk.t.size)

    @property
    def failed(self):
        return self.file.error is not None

    def close(self, planned_steps=None):
        """Rename log.csv complete, or raise ConfigError (rows kept in log.csv.part, the rest lost)."""
        total = planned_steps if planned_steps is not None else self.steps_seen
        self.file.close(
            f'the rows after them, of {total} control steps (a header line, then one row per '
            f'{"" if self.every == 1 else f"{self.every}th "}step)'
        )

    def abandon(self):
        self.file.abandon()


def task_paths(result, setup):
    """(name, axes, actual (N, d), desired (N, d)) for each frame_position servo constraint.

    The desired point is recovered from the logged residual, ``p_des = p - phi``,
    so the figure shows exactly what the controller was asked to follow.
    """
    model = setup.model
    paths = []
    cfg = setup.constraints
    for name in setup.servo.names:
        sl = setup.servo.slices[name]
        spec = cfg.get(name)
        if spec is None or spec.type != 'frame_position':
            continue
        axes = list(spec.axes)
        idx = ['xyz'.index(a) for a in axes]
        actual = np.zeros((result.t.size, len(idx)))
        for k in range(result.t.size):
            model.compute(result.q[k], result.qd[k])
            actual[k] = np.asarray(model.frame_position(spec.frame))[idx]
        offset = sl.start
        desired = actual - result.task_error[:, offset : offset + len(idx)]
        paths.append((name, axes, actual, desired))
    return paths


def plot_all(result, setup, out_dir, transient=None):
    """Save the figures; returns their paths."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    files = []
    t = result.t

    def save(fig, name):
        from ..files.io_safety import atomic_write

        fig.tight_layout()
        path = out_dir / name
        try:
            atomic_write(path, lambda fh: fig.savefig(fh, format='png', dpi=110), binary=True)
        finally:
            plt.close(fig)
        files.append(path)

    fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for j, name in enumerate(result.task_row_names):
        axes[0].plot(t, result.task_error[:, j], label=name)
    axes[0].set_ylabel('task error (SI)')
    axes[0].legend(fontsize=7, ncol=3)
    norm = np.linalg.norm(result.task_error, axis=1)
    axes[1].semilogy(t, np.maximum(norm, 1e-16))
    axes[1].set_ylabel('|task error|')
    axes[1].set_xlabel('t [s]')
    fig.suptitle(f'{result.robot}: task-space error ({result.plant} plant)')
    save(fig, 'task_error.png')

    joint_err = _joint_errors(result, setup)
    fig, ax = plt.subplots(figsize=(8, 4))
    for j, name in enumerate(result.joint_names):
        ax.plot(t, joint_err[:, j], label=name)
    ax.set_xlabel('t [s]')
    ax.set_ylabel('joint error [rad or m]')
    ax.set_title('joint-space error: minimum-norm dq with A_s dq = task error')
    ax.legend(fontsize=7, ncol=3)
    save(fig, 'joint_error.png')

    fig, ax = plt.subplots(figsize=(8, 4))
    for j, name in enumerate(result.actuator_names):
        ax.plot(t, result.effort[:, j], label=name)
    ax.set_xlabel('t [s]')
    ax.set_ylabel('effort [N m or N]')
    ax.set_title(f'{result.robot}: actuator efforts')
    ax.legend(fontsize=7, ncol=3)
    save(fig, 'efforts.png')

    if result.closure_residual.size:
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.semilogy(t, np.maximum(np.abs(result.closure_residual).max(axis=1), 1e-16))
        ax.set_xlabel('t [s]')
        ax.set_ylabel('max |closure residual| [m]')
        ax.set_title('mechanism closure residuals')
        save(fig, 'closure_residual.png')

    for name, axes_names, actual, desired in task_paths(result, setup):
        if len(axes_names) >= 3:
            fig = plt.figure(figsize=(6, 6))
            ax = fig.add_subplot(projection='3d')
            ax.plot(*desired[:, :3].T, '--', label='desired')
            ax.plot(*actual[:, :3].T, label='actual')
        elif len(axes_names) == 2:
            fig, ax = plt.subplots(figsize=(6, 6))
            ax.plot(*desired.T, '--', label='desired')
            ax.plot(*actual.T, label='actual')
            ax.set_aspect('equal', adjustable='datalim')
        else:
            fig, ax = plt.subplots(figsize=(8, 4))
            ax.plot(t, desired[:, 0], '--', label='desired')
            ax.plot(t, actual[:, 0], label='actual')
        ax.set_title(f'{name}: end-effector path')
        ax.legend()
        save(fig, f'path_{name}.png')
    return files


def _joint_errors(result, setup):
    """Minimum-norm joint displacement that would cancel the task error: ``A_s^+ phi``."""
    model = setup.model
    out = np.zeros_like(result.q)
    for k in range(result.t.size):
        model.compute(result.q[k], result.qd[k])
        try:
            rows = setup.servo.evaluate(model, result.q[k], result.qd[k], result.t[k] - result.t[0])
        except ValueError:  # a callable constraint failed at this state: unknown
            out[k] = np.nan
            continue
        if not (np.isfinite(rows.A).all() and np.isfinite(result.task_error[k]).all()):
            out[k] = np.nan
            continue
        out[k] = np.linalg.lstsq(rows.A, result.task_error[k], rcond=None)[0]
    return out


def format_summary(summary):
    """Human-readable lines of :meth:`SimulationResult.summary`."""
    s = summary
    if not s.get('steps'):
        return f"robot {s['robot']}: {s['verdict']}" + (' (interrupted)' if s.get('interrupted') else '')
    by = s['steps_by_status']
    return '\n'.join(
        [
            ('INTERRUPTED: partial run. ' if s['interrupted'] else '') + s['verdict'],
            f"robot {s['robot']} on the {s['plant']} plant, {s['duration_s']:.3f} s simulated",
            f"task error after {s['transient_s']:.2f} s: max {_e(s['task_error_max'])}, "
            f"RMS {_e(s['task_error_rms'])}, final {_e(s['task_error_final'])}"
            + (
                f" ({s['task_error_unknown_steps']} steps without a task error: safe effort)"
                if s.get('task_error_unknown_steps')
                else ''
            )
            + '; '
            + (
                f"settles below {s['settle_tol']:g} at {s['settling_time_s']:.3f} s"
                if _finite(s['settling_time_s'])
                else f"does not settle below {s['settle_tol']:g}"
            ),
            f"max closure residual {s['closure_residual_max']:.3e}; peak effort {s['effort_peak']:.3f}; "
            f"saturated {100 * s['saturated_fraction']:.1f}% of steps; safe-effort steps {s['safe_effort_steps']}",
            f"control step median {s['step_time_median_us']:.1f} us; wall time {s['wall_time_s']:.2f} s; "
            f"real-time factor {s['real_time_factor']:.1f}x" + (f"; {s['plant_note']}" if s.get('plant_note') else ''),
            f"steps {s['steps']}: "
            + ', '.join(f'{k.replace("_", " ")} {v}' for k, v in by.items())
            + f"; not settled (after the transient) {s['not_settled_steps']}",
        ]
        + (
            [
                f"null space of the task: {s['null_space_motion']} moving, {s['null_space_internal']} internal-force "
                f"directions; posture error final {s['posture_error_final']:.3e} (max {s['posture_error_max']:.3e}); "
                f"max joint speed in the last second {s.get('joint_speed_max_last_s', float('nan')):.3g}"
            ]
            # only where the task leaves freedom: elsewhere |q - q(0)| is no posture error of anything
            if s.get('null_space_motion') or s.get('null_space_internal')
            else []
        )
    )


def _finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def _e(value):
    """A figure in %.3e, or 'unknown' when it is not a finite number."""
    return f'{value:.3e}' if _finite(value) else 'unknown'


def write_summary(summary, path):
    """summary.json, strict JSON (NaN/inf written as null), written whole or not at all."""
    from ..files.io_safety import atomic_write, dumps_strict

    atomic_write(path, lambda fh: fh.write(dumps_strict(summary, indent=2) + '\n'))
