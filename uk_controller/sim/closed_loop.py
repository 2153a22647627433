"""Closed-loop simulation: ControllerCore at a fixed rate on a plant, zero-order hold.

Shaped like ``scipy.integrate.solve_ivp``: one function, one result object.
As on a real robot the controller sees the state only at its own instants
``t_k = k / rate`` (optionally noisy and one or more periods late) and its
effort is held until the next instant, while the plant integrates the true
closed-chain dynamics in between.

Where numba is available the periods run in one compiled call per chunk
(:mod:`uk_controller.sim.compiled_loop`: the ControllerCore's own compiled
program and the UKPlant's RK4, ~3x faster than this module's Python loop);
the Python loop below stays the reference and the fallback (sensor noise,
measurement delay, the MuJoCo plant, ``compiled=False``, and any period in
which the compiled controller or plant reports a failure).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..baumgarte import Baumgarte
from .. import settings as S
from ..controller import ControllerCore
from . import compiled_loop


@dataclass
class SimulationResult:
    """Logged signals of one run (rows: control instants)."""

    robot: str
    plant: str
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    effort: np.ndarray
    task_error: np.ndarray
    phi: np.ndarray
    phidot: np.ndarray
    closure_residual: np.ndarray
    saturated: np.ndarray
    ok: np.ndarray
    compute_time: np.ndarray
    joint_names: list
    actuator_names: list
    task_row_names: list
    row_names: list
    wall_time: float
    rate: float
    settings: dict = field(default_factory=dict)
    status: np.ndarray = None            # per step, a uk_controller.status.StepClass (int8)
    servo_residual: np.ndarray = None    # residual of the servo equation where it is inconsistent
    interrupted: bool = False            # stopped early (Ctrl-C): the logs hold the steps that ran
    servo_rows: int = 0
    failure: str = ''                    # why the run ended early (plant diverged), else empty
    posture_error: np.ndarray = None     # |q - q_ref| per step (q_ref: posture.reference, default q(0))
    null_space: np.ndarray = None        # (steps, 2): null-space dimensions, motion and internal forces

    def after(self, transient):
        """Boolean mask of the samples after the transient (seconds)."""
        return self.t >= self.t[0] + transient

    def settling_time(self, tol=1e-3):
        """First time after which ``||task error||`` stays below `tol` (nan if it never does)."""
        err = np.linalg.norm(self.task_error, axis=1)
        above = np.nonzero(err >= tol)[0]
        if above.size == 0:
            return 0.0
        if above[-1] == err.size - 1:
            return float('nan')
        return float(self.t[above[-1] + 1] - self.t[0])

    def summary(self, transient=None, settle_tol=1e-3):
        """Figures of merit. `transient` defaults to a fifth of the run (at most 2 s)."""
        if self.t.size == 0:
            return {'robot': self.robot, 'plant': self.plant, 'duration_s': 0.0, 'steps': 0,
                    'interrupted': bool(self.interrupted), 'failure': self.failure,
                    'verdict': self.failure or 'no control step ran'}
        duration = float(self.t[-1] - self.t[0]) if self.t.size > 1 else 0.0
        if transient is None:
            transient = min(2.0, 0.2 * duration)
        mask = self.after(transient)
        err = np.linalg.norm(self.task_error[mask], axis=1) if mask.any() else np.zeros(1)
        closure = np.abs(self.closure_residual).max() if self.closure_residual.size else 0.0
        sim_time = duration + 1.0 / self.rate if self.t.size else 0.0
        from .status import counts, task_verdict
        codes = self.status if self.status is not None else np.zeros(self.t.size, dtype=np.int8)
        norm_all = np.linalg.norm(self.task_error, axis=1)
        saturated_steps = int(self.saturated.any(axis=1).sum())
        out = {
            'robot': self.robot,
            'plant': self.plant,
            'duration_s': sim_time,
            'transient_s': transient,
            'task_error_max': float(err.max()),
            'task_error_rms': float(np.sqrt(np.mean(err ** 2))),
            'task_error_final': float(np.linalg.norm(self.task_error[-1])),
            'settling_time_s': self.settling_time(settle_tol),
            'settle_tol': settle_tol,
            'closure_residual_max': float(closure),
            'effort_peak': float(np.abs(self.effort).max()),
            'saturated_fraction': float(self.saturated.any(axis=1).mean()),
            'safe_effort_steps': int((~self.ok).sum()),
            'step_time_median_us': float(np.median(self.compute_time) * 1e6),
            'wall_time_s': self.wall_time,
            'real_time_factor': sim_time / self.wall_time if self.wall_time > 0 else float('inf'),
            'steps': int(self.t.size),
            'steps_by_status': counts(codes),
            'saturated_steps': saturated_steps,
            'not_settled_steps': int(np.count_nonzero(norm_all[mask] >= settle_tol)) if mask.any() else 0,
            'interrupted': bool(self.interrupted),
            'failure': self.failure,
        }
        out.update(self._redundancy_figures())
        residual = self.servo_residual if self.servo_residual is not None else np.zeros(self.t.size)
        out['verdict'] = task_verdict(out, codes, residual, ms=self.servo_rows, p=len(self.actuator_names))
        if self.failure:
            out['verdict'] = f'FAILED: {self.failure}; ' + out['verdict']
        return out


    def _redundancy_figures(self):
        """Posture error, null-space dimensions and joint speeds (DESIGN.md "Redundancy")."""
        out = {}
        if self.posture_error is not None and self.posture_error.size:
            out['posture_error_final'] = float(self.posture_error[-1])
            out['posture_error_max'] = float(np.max(self.posture_error))
        if self.null_space is not None and self.null_space.size:
            out['null_space_motion'] = int(self.null_space[-1, 0])
            out['null_space_internal'] = int(self.null_space[-1, 1])
        last = self.after(max(0.0, float(self.t[-1] - self.t[0]) - 1.0)) if self.t.size else None
        if last is not None and last.any():
            out['joint_speed_max_last_s'] = float(np.abs(self.qd[last]).max())
        return out


def _row_names(stack):
    names = []
    for name in stack.names:
        sl = stack.slices[name]
        count = sl.stop - sl.start
        names += [name] if count == 1 else [f'{name}[{k}]' for k in range(count)]
    return names


def make_plant(kind, setup, *, mass_scale=1.0, integrator=None, substeps=None):
    """The plant a simulation runs on: 'uk' (embedded) or 'mujoco'."""
    options = {}
    if integrator is not None:
        options['integrator'] = integrator
    if substeps is not None:
        options['substeps'] = substeps
    if kind == 'uk':
        from .uk_plant import UKPlant
        return UKPlant.from_setup(setup, mass_scale=mass_scale, **options)
    if kind == 'mujoco':
        from .mujoco_plant import MujocoPlant
        return MujocoPlant.from_setup(setup, mass_scale=mass_scale, **options)
    raise ValueError(f"plant must be 'uk' or 'mujoco', got {kind!r}")


def simulate(setup, *, duration=None, rate=None, plant='uk', stabilization=None, mass_scale=1.0,
             sensor_noise=None, measurement_delay=None, integrator=None, substeps=None, seed=0,
             progress=None, controller_options=None, compiled=None, should_stop=None):
    """Run the closed loop and return a :class:`SimulationResult`.

    setup              a RobotSetup (see :func:`uk_controller.robots.load_robot`)
    duration, rate     seconds, Hz (defaults: config ``simulation.duration``, ``control.rate``)
    plant              'uk' or 'mujoco'
    stabilization      a :class:`Baumgarte` for the controller (default: from the config;
                       ``Baumgarte.none()`` switches stabilization off)
    mass_scale         plant inertias x this factor (model mismatch)
    sensor_noise       std of the Gaussian noise added to measured positions
    measurement_delay  whole control periods between measurement and use
    progress           callable(fraction) called about 100 times
    compiled           run the periods in one compiled call per chunk (:mod:`.compiled_loop`: same
                       controller program and plant RK4, results equal to round-off): None = when
                       available (numba, UK plant, no sensor noise or delay, compiled controller and
                       plant), False = always the Python loop, True = require it (ValueError if not
                       available). ``settings['loop']`` says which ran.
    should_stop        callable() -> bool checked between chunks of periods (Ctrl-C in the CLI): when
                       it answers True the run ends there and the result holds the periods that ran
                       (``interrupted``).
    """
    sim_cfg = dict(setup.config.get('simulation', {}) or {})
    duration = float(duration if duration is not None else sim_cfg.get('duration', S.default('simulation.duration')))
    mass_scale = float(mass_scale if mass_scale is not None else sim_cfg.get('mass_scale', S.default('simulation.mass_scale')))
    sensor_noise = float(sensor_noise if sensor_noise is not None else sim_cfg.get('sensor_noise', S.default('simulation.sensor_noise')))
    delay = int(measurement_delay if measurement_delay is not None else sim_cfg.get('measurement_delay', S.default('simulation.measurement_delay')))
    ctrl = ControllerCore(setup, stabilization=stabilization, rate=rate, **(controller_options or {}))
    the_plant = make_plant(plant, setup, mass_scale=mass_scale, integrator=integrator, substeps=substeps)
    rng = np.random.default_rng(seed)
    dt = ctrl.dt
    steps = int(round(duration * ctrl.rate))
    n, p = ctrl.n, ctrl.p
    mp, ms = setup.passive.m, setup.servo.m
    log = {
        't': np.zeros(steps), 'q': np.zeros((steps, n)), 'qd': np.zeros((steps, n)),
        'effort': np.zeros((steps, p)), 'task_error': np.zeros((steps, ms)),
        'phi': np.zeros((steps, mp + ms)), 'phidot': np.zeros((steps, mp + ms)),
        'closure_residual': np.zeros((steps, mp)), 'saturated': np.zeros((steps, p), dtype=bool),
        'ok': np.zeros(steps, dtype=bool), 'compute_time': np.zeros(steps),
        'status': np.zeros(steps, dtype=np.int8), 'servo_residual': np.zeros(steps),
        'null_space': np.zeros((steps, 2), dtype=np.int64),
    }
    from .status import classify, servo_residual, step_class
    history = []
    ctrl.reset(the_plant.t)
    every = max(1, steps // 100)
    # the loop touches only locals; task errors and closure residuals are slices of the phi log,
    # filled after the loop. The UK plant replaces (never mutates) its q/qd arrays each step, so
    # the controller may read them directly unless noise is added to a copy.
    ctrl_step, plant_step = ctrl.step, the_plant.step
    log_t, log_q, log_qd, log_u = log['t'], log['q'], log['qd'], log['effort']
    log_phi, log_phid, log_sat, log_ok, log_ct = (log['phi'], log['phidot'], log['saturated'], log['ok'],
                                                   log['compute_time'])
    copy_state = sensor_noise > 0 or plant != 'uk'
    log_null = log['null_space']

    def python_periods(k0, k1):
        for k in range(k0, k1):
            t = the_plant.t
            q_true, qd_true = the_plant.q, the_plant.qd
            if copy_state:
                q_meas, qd_meas = q_true.copy(), qd_true.copy()
                if sensor_noise > 0:
                    q_meas += rng.normal(0.0, sensor_noise, n)
            else:
                q_meas, qd_meas = q_true, qd_true
            if delay:
                history.append((q_meas, qd_meas, t))
                q_meas, qd_meas, _ = history[max(0, len(history) - 1 - delay)]
                del history[:-delay - 1]
            res = ctrl_step(q_meas, qd_meas, t)
            log_t[k] = t
            log_q[k] = q_true
            log_qd[k] = qd_true
            effort = res.effort
            log_u[k] = effort
            log_phi[k] = res.phi
            log_phid[k] = res.phidot
            log_sat[k] = res.saturated
            log_ok[k] = res.ok
            log_ct[k] = res.compute_time
            log['status'][k] = step_class(res, ms, p)
            log['servo_residual'][k] = servo_residual(res)
            log_null[k] = res.null_motion, res.null_internal
            plant_step(effort, dt)

    fast = None
    if compiled is None or compiled:
        if not (copy_state or delay):
            fast = compiled_loop.CompiledLoop.build(ctrl, the_plant)
        if fast is None and compiled:
            raise ValueError('compiled closed loop not available (needs numba, the UK plant with rk4 and '
                             'constant actuator columns, a compiled controller, no sensor noise or delay)')
    in_kernel = np.zeros(steps, dtype=bool) if fast is not None else None
    clock0 = compiled_loop.clock() if fast is not None else None
    start = time.perf_counter()
    k = 0
    interrupted = False
    while k < steps:
        if should_stop is not None and should_stop():
            interrupted = True
            break
        if progress is not None:
            progress(k / steps)
        stop = min(steps, k + every) if progress is not None or should_stop is not None else steps
        while k < stop:
            if fast is None:
                python_periods(k, stop)
                k = stop
                continue
            k0 = k
            k, code = fast.run(k0, stop, log)
            if code == compiled_loop.PLANT_STOP:          # logged; the plant's own step raises or gives NaN
                in_kernel[k0:k + 1] = True
                plant_step(log_u[k], dt)
                k += 1
            else:
                in_kernel[k0:k] = True
                if code == compiled_loop.CONTROLLER_STOP:  # ControllerCore.step answers (safe effort, reason)
                    python_periods(k, k + 1)
                    k += 1
    if interrupted:
        for key in list(log):
            log[key] = log[key][:k]
        log_phi, log_ct = log['phi'], log['compute_time']
        if in_kernel is not None:
            in_kernel = in_kernel[:k]
    failure = ''
    finite = np.isfinite(log['q']).all(axis=1) & np.isfinite(log['qd']).all(axis=1)
    if not finite.all():                # the plant diverged: keep the periods before it, say so
        bad = int(np.argmin(finite))
        failure = f'plant state not finite at t = {bad * dt:.4f} s: the simulation stopped there'
        for key in list(log):
            log[key] = log[key][:bad]
        log_phi, log_ct = log['phi'], log['compute_time']
        if in_kernel is not None:
            in_kernel = in_kernel[:bad]
        k = bad
    log['task_error'][:] = log_phi[:, mp:]
    if mp:
        log['closure_residual'][:] = log_phi[:, :mp]
    wall = time.perf_counter() - start
    if fast is not None:
        clock1 = compiled_loop.clock()
        compiled_loop.cycles_to_seconds(log_ct, in_kernel, clock1[1] - clock0[1], clock1[0] - clock0[0])
    if in_kernel is not None and in_kernel.any():
        idx = np.nonzero(in_kernel)[0]
        codes, resid = np.zeros(idx.size, dtype=np.int8), np.zeros(idx.size)
        classify(ctrl, log['t'][idx], log['q'][idx], log['qd'][idx], log['ok'][idx], codes, resid)
        log['status'][idx] = codes
        log['servo_residual'][idx] = resid
    if progress is not None and not interrupted:
        progress(1.0)
    if sensor_noise > 0 or delay or plant != 'uk':
        _true_errors(setup, ctrl, log)
    red = ctrl.redundancy
    if not red.active:                  # no null-space term runs: the dimensions at the initial state
        log['null_space'][:] = red.null_motion, red.null_internal
    dq = log['q'] - red.q_ref
    posture_error = np.sqrt(np.einsum('ij,ij->i', dq, dq))
    stab = ctrl.stabilization
    return SimulationResult(
        robot=setup.name, plant=plant, joint_names=ctrl.joint_names, actuator_names=ctrl.actuator_names,
        task_row_names=_row_names(setup.servo), row_names=_row_names(setup.passive) + _row_names(setup.servo),
        wall_time=wall, rate=ctrl.rate, interrupted=interrupted, servo_rows=ms, failure=failure,
        posture_error=posture_error,
        settings={'duration': duration, 'rate': ctrl.rate, 'mass_scale': mass_scale, 'sensor_noise': sensor_noise,
                  'measurement_delay': delay, 'pinv': ctrl.pinv_method,
                  'loop': 'compiled' if fast is not None else 'python',
                  'stabilization': {'kd': np.asarray(stab.kd).tolist(), 'kp': np.asarray(stab.kp).tolist()}},
        **log)


def _true_errors(setup, ctrl, log):
    """Replace logged errors (seen through noise/delay) by those of the true state."""
    model = setup.model
    for k in range(log['t'].size):
        q, qd, t = log['q'][k], log['qd'][k], log['t'][k] - ctrl.t0
        model.compute(q, qd)
        servo = setup.servo.evaluate(model, q, qd, t)
        log['task_error'][k] = servo.phi
        if setup.passive.m:
            passive = setup.passive.evaluate(model, q, qd, t)
            log['closure_residual'][k] = passive.phi
            log['phi'][k] = np.concatenate((passive.phi, servo.phi))
        else:
            log['phi'][k] = servo.phi


__all__ = ['simulate', 'SimulationResult', 'make_plant', 'Baumgarte']
