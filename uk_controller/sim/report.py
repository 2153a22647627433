"""Write a simulation's CSV log, PNG figures and printed summary."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..status import STEP_CLASSES


def write_csv(result, path):
    """One row per control instant: t, q, q', efforts, residuals, task errors, the posture error
    ``|q - q_ref|`` and the null-space dimensions (motion, internal forces; DESIGN.md "Redundancy")."""
    steps = result.t.size
    posture = result.posture_error if result.posture_error is not None else np.full(steps, np.nan)
    null = result.null_space if result.null_space is not None else np.full((steps, 2), np.nan)
    header = (['t'] + [f'q_{j}' for j in result.joint_names] + [f'qd_{j}' for j in result.joint_names]
              + [f'u_{a}' for a in result.actuator_names] + [f'phi_{r}' for r in result.row_names]
              + [f'phidot_{r}' for r in result.row_names] + [f'task_{r}' for r in result.task_row_names]
              + ['posture_error', 'null_motion', 'null_internal', 'ok', 'status'])
    data = np.column_stack((result.t, result.q, result.qd, result.effort, result.phi, result.phidot,
                            result.task_error, posture, null, result.ok.astype(float)))
    codes = result.status if result.status is not None else np.zeros(result.t.size, dtype=np.int8)
    rows = np.char.mod('%.9g', data).tolist() if data.size else []
    if data.size and not np.isfinite(data).all():      # unknown values (safe-effort steps): empty cells
        for r, c in zip(*np.nonzero(~np.isfinite(data))):
            rows[r][c] = ''
    with open(path, 'w', newline='') as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(row + [STEP_CLASSES[c]] for row, c in zip(rows, codes))


def task_paths(result, setup):
    """(name, axes, actual (N, d), desired (N, d)) for each frame_position servo constraint.

    The desired point is recovered from the logged residual, ``p_des = p - phi``,
    so the figure shows exactly what the controller was asked to follow.
    """
    model = setup.model
    paths = []
    cfg = setup.config.get('constraints', {}) or {}
    for name in setup.servo.names:
        sl = setup.servo.slices[name]
        spec = cfg.get(name, {}) or {}
        if spec.get('type') != 'frame_position':
            continue
        axes = list(spec.get('axes', ['x', 'y', 'z']))
        idx = ['xyz'.index(a) for a in axes]
        actual = np.zeros((result.t.size, len(idx)))
        for k in range(result.t.size):
            model.compute(result.q[k], result.qd[k])
            actual[k] = np.asarray(model.frame_position(spec['frame']))[idx]
        offset = sl.start
        desired = actual - result.task_error[:, offset:offset + len(idx)]
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
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=110)
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
        rows = setup.servo.evaluate(model, result.q[k], result.qd[k], result.t[k] - result.t[0])
        out[k] = np.linalg.lstsq(rows.A, result.task_error[k], rcond=None)[0]
    return out


def format_summary(summary):
    """Human-readable lines of :meth:`SimulationResult.summary`."""
    s = summary
    if not s.get('steps'):
        return f"robot {s['robot']}: {s['verdict']}" + (' (interrupted)' if s.get('interrupted') else '')
    by = s['steps_by_status']
    return '\n'.join([
        ('INTERRUPTED: partial run. ' if s['interrupted'] else '') + s['verdict'],
        f"robot {s['robot']} on the {s['plant']} plant, {s['duration_s']:.3f} s simulated",
        f"task error after {s['transient_s']:.2f} s: max {s['task_error_max']:.3e}, "
        f"RMS {s['task_error_rms']:.3e}, final {s['task_error_final']:.3e}; "
        f"settles below {s['settle_tol']:g} at {s['settling_time_s']:.3f} s",
        f"max closure residual {s['closure_residual_max']:.3e}; peak effort {s['effort_peak']:.3f}; "
        f"saturated {100 * s['saturated_fraction']:.1f}% of steps; safe-effort steps {s['safe_effort_steps']}",
        f"control step median {s['step_time_median_us']:.1f} us; wall time {s['wall_time_s']:.2f} s; "
        f"real-time factor {s['real_time_factor']:.1f}x",
        f"steps {s['steps']}: " + ', '.join(f'{k.replace("_", " ")} {v}' for k, v in by.items())
        + f"; not settled (after the transient) {s['not_settled_steps']}",
    ] + ([f"null space of the task: {s['null_space_motion']} moving, {s['null_space_internal']} internal-force "
          f"directions; posture error final {s['posture_error_final']:.3e} (max {s['posture_error_max']:.3e}); "
          f"max joint speed in the last second {s.get('joint_speed_max_last_s', float('nan')):.3g}"]
         if 'null_space_motion' in s and 'posture_error_final' in s else []))


def strict_json(value):
    """`value` with NaN and infinities replaced by None (JSON has neither)."""
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def write_summary(summary, path):
    """summary.json, strict JSON (NaN/inf written as null)."""
    Path(path).write_text(json.dumps(strict_json(summary), indent=2, allow_nan=False) + '\n')
