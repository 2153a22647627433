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
from typing import Any

import numpy as np

from ..control.controller import ControllerCore
from ..core.baumgarte import Baumgarte
from . import compiled_loop
from .plants import plant_class

#: Control periods per chunk of the log when a run is streamed (``simulate(sink=...)``): the memory of
#: the log is one chunk plus :class:`RunStats` (27 bytes per period) and the rows kept for plots.
CHUNK_STEPS = 8192


@dataclass
class RunStats:
    """What the summary of a run needs, per control step (27 bytes) and as running extremes.

    Kept for the whole run when the log itself is streamed (:func:`simulate` with a ``sink``) and
    computed from the log otherwise (:meth:`of_log`), so both summaries are the same function of the
    same numbers. ``error_norm`` is ``||task error||`` (NaN where unknown: a safe-effort step has no
    solution and no task error)."""

    t: np.ndarray
    error_norm: np.ndarray
    compute_time: np.ndarray
    status: np.ndarray
    ok: np.ndarray
    saturated: np.ndarray  # any effort clipped at this step
    speed: np.ndarray | None = None  # max |q'_j| at this step (the summary's last-second joint speed)
    closure_max: float = 0.0
    effort_peak: float = 0.0
    residual_max: float = 0.0
    final_error: float = float('nan')
    posture_max: float = float('nan')  # max and last |q - q_ref| (DESIGN.md "Redundancy")
    posture_final: float = float('nan')
    null_final: tuple | None = None  # null-space dimensions (motion, internal) at the last step

    @classmethod
    def of_log(cls, log, codes=None, residual=None):
        """From whole-run (or one chunk's) log arrays: t, task_error, compute_time, ok, saturated,
        closure_residual, effort, and the step classes `codes` and servo residuals `residual`."""
        t = log['t']
        size = t.size
        codes = np.zeros(size, dtype=np.int8) if codes is None else codes
        residual = np.zeros(size) if residual is None else residual
        closure, effort, task = log['closure_residual'], log['effort'], log['task_error']
        qd, posture, null = log.get('qd'), log.get('posture_error'), log.get('null_space')
        return cls(
            t=t,
            error_norm=np.linalg.norm(task, axis=1),
            compute_time=log['compute_time'],
            status=codes,
            ok=log['ok'],
            saturated=log['saturated'].any(axis=1),
            speed=np.abs(qd).max(axis=1) if qd is not None and qd.size else np.zeros(size),
            closure_max=float(np.abs(closure).max()) if closure.size else 0.0,
            effort_peak=float(np.abs(effort).max()) if effort.size else 0.0,
            residual_max=float(np.max(residual, initial=0.0)),
            final_error=float(np.linalg.norm(task[-1])) if size else float('nan'),
            posture_max=float(np.max(posture)) if posture is not None and size else float('nan'),
            posture_final=float(posture[-1]) if posture is not None and size else float('nan'),
            null_final=(int(null[-1, 0]), int(null[-1, 1])) if null is not None and size else None,
        )

    @classmethod
    def concatenate(cls, parts):
        """The stats of consecutive chunks as one (extremes combined; NaN propagates as in one array)."""
        parts = [p for p in parts if p.t.size]
        per_step = {
            't': float,
            'error_norm': float,
            'compute_time': float,
            'status': np.int8,
            'ok': bool,
            'saturated': bool,
            'speed': float,
        }
        if not parts:
            empty: dict[str, Any] = {f: np.zeros(0, dtype=d) for f, d in per_step.items()}
            return cls(**empty)
        if len(parts) == 1:
            return parts[0]
        cat = {f: np.concatenate([getattr(p, f) for p in parts]) for f in per_step}
        return cls(
            **cat,
            closure_max=float(np.max([p.closure_max for p in parts])),
            effort_peak=float(np.max([p.effort_peak for p in parts])),
            residual_max=float(np.max([p.residual_max for p in parts])),
            final_error=parts[-1].final_error,
            posture_max=float(np.max([p.posture_max for p in parts])),
            posture_final=parts[-1].posture_final,
            null_final=parts[-1].null_final,
        )


def settling_time(t, error_norm, tol):
    """First time after which ``||task error||`` stays below `tol`; nan if it never does. A step whose
    error is unknown (NaN: safe effort) or infinite counts as not settled."""
    above = np.nonzero(~(error_norm < tol))[0]
    if above.size == 0:
        return 0.0 if error_norm.size else float('nan')
    if above[-1] == error_norm.size - 1:
        return float('nan')
    return float(t[above[-1] + 1] - t[0])


@dataclass
class SimulationResult:
    """Logged signals of one run (rows: control instants).

    When the run was streamed (:func:`simulate` with a ``sink``) the arrays hold every
    ``settings['kept_every']``-th step (for the figures) and :attr:`stats` the whole run (for the summary)."""

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
    status: np.ndarray | None = None  # per step, a uk_controller.control.status.StepClass (int8)
    servo_residual: np.ndarray | None = None  # residual of the servo equation where it is inconsistent
    interrupted: bool = False  # stopped early (Ctrl-C): the logs hold the steps that ran
    servo_rows: int = 0
    failure: str = ''  # why the run ended early (plant diverged or failed), else empty
    stats: RunStats | None = None  # the whole run's per-step summary figures (None: from the arrays)
    first_step: int = 0  # index of the first row (a chunk of a streamed run)
    planned_steps: int = 0  # control periods the run was asked for
    posture_error: np.ndarray | None = None  # |q - q_ref| per step (q_ref: posture.reference, default q(0))
    null_space: np.ndarray | None = None  # (steps, 2): null-space dimensions, motion and internal forces

    def after(self, transient):
        """Boolean mask of the samples after the transient (seconds)."""
        return self.t >= self.t[0] + transient

    def run_stats(self):
        """:attr:`stats`, or the same figures computed from the arrays."""
        if self.stats is not None:
            return self.stats
        return RunStats.of_log(vars(self), self.status, self.servo_residual)

    def settling_time(self, tol=1e-3):
        """First time after which ``||task error||`` stays below `tol` (nan if it never does or is unknown)."""
        stats = self.run_stats()
        return settling_time(stats.t, stats.error_norm, tol)

    def summary(self, transient=None, settle_tol=1e-3):
        """Figures of merit. `transient` defaults to a fifth of the run (at most 2 s).

        Error statistics are over the steps after the transient whose error is known (finite);
        ``task_error_unknown_steps`` counts the others (safe-effort steps have no task error). A figure
        that cannot be computed is NaN (null in summary.json), never a number that reads as success."""
        st = self.run_stats()
        t = st.t
        if t.size == 0:
            verdict = f'FAILED: {self.failure}' if self.failure else 'no control step ran'
            return {
                'robot': self.robot,
                'plant': self.plant,
                'duration_s': 0.0,
                'steps': 0,
                'interrupted': bool(self.interrupted),
                'failure': self.failure,
                'verdict': verdict,
            }
        duration = float(t[-1] - t[0]) if t.size > 1 else 0.0
        if transient is None:
            transient = min(2.0, 0.2 * duration)
        mask = t >= t[0] + transient
        norm_all = st.error_norm
        known = np.isfinite(norm_all)
        err = norm_all[mask & known]
        sim_time = duration + 1.0 / self.rate
        from .status import counts, task_verdict

        codes = st.status
        out = {
            'robot': self.robot,
            'plant': self.plant,
            'duration_s': sim_time,
            'transient_s': transient,
            'task_error_max': float(err.max()) if err.size else float('nan'),
            'task_error_rms': float(np.sqrt(np.mean(err**2))) if err.size else float('nan'),
            'task_error_final': st.final_error,
            'task_error_unknown_steps': int(np.count_nonzero(mask & ~known)),
            'settling_time_s': float('nan') if self.failure else settling_time(t, norm_all, settle_tol),
            'settle_tol': settle_tol,
            'closure_residual_max': st.closure_max,
            'effort_peak': st.effort_peak,
            'saturated_fraction': float(st.saturated.mean()),
            'safe_effort_steps': int((~st.ok).sum()),
            'step_time_median_us': float(np.median(st.compute_time) * 1e6),
            'wall_time_s': self.wall_time,
            'real_time_factor': sim_time / self.wall_time if self.wall_time > 0 else float('inf'),
            'steps': int(t.size),
            'plant_note': self.settings.get('plant_note', ''),
            'steps_by_status': counts(codes),
            'saturated_steps': int(st.saturated.sum()),
            'not_settled_steps': int(np.count_nonzero(~(norm_all[mask] < settle_tol))) if mask.any() else 0,
            'interrupted': bool(self.interrupted),
            'failure': self.failure,
        }
        out.update(self._redundancy_figures())
        if self.failure:
            planned = self.planned_steps or int(t.size)
            out['verdict'] = (
                f'FAILED: {self.failure}; task NOT tracked (the run stopped after {t.size} of {planned} control steps)'
            )
        else:
            out['verdict'] = task_verdict(
                out, codes, np.array([st.residual_max]), ms=self.servo_rows, p=len(self.actuator_names)
            )
        return out

    def _redundancy_figures(self):
        """Posture error, null-space dimensions and the joint speed of the last second (DESIGN.md
        "Redundancy"), of the whole run (:class:`RunStats`, also when the run was streamed)."""
        st = self.run_stats()
        out = {}
        if st.t.size and not np.isnan(st.posture_final):
            out['posture_error_final'] = st.posture_final
            out['posture_error_max'] = st.posture_max
        if st.null_final is not None:
            out['null_space_motion'], out['null_space_internal'] = st.null_final
        if st.t.size and st.speed is not None and st.speed.size:
            last = st.t >= st.t[-1] - 1.0
            out['joint_speed_max_last_s'] = float(st.speed[last].max())
        return out


def _row_names(stack):
    names = []
    for name in stack.names:
        sl = stack.slices[name]
        count = sl.stop - sl.start
        names += [name] if count == 1 else [f'{name}[{k}]' for k in range(count)]
    return names


def make_plant(setup):
    """The plant a simulation runs on, as the setup's resolved settings say: ``simulation.plant``, a name
    of :data:`~uk_controller.sim.plants.PLANTS` ('uk' embedded, 'mujoco'), with its ``simulation.*``
    settings (mass_scale, integrator, substeps, ...)."""
    return plant_class(setup.settings.simulation.plant).from_setup(setup)


def _new_log(steps, n, p, mp, ms):
    return {
        't': np.zeros(steps),
        'q': np.zeros((steps, n)),
        'qd': np.zeros((steps, n)),
        'effort': np.zeros((steps, p)),
        'task_error': np.zeros((steps, ms)),
        'phi': np.zeros((steps, mp + ms)),
        'phidot': np.zeros((steps, mp + ms)),
        'closure_residual': np.zeros((steps, mp)),
        'saturated': np.zeros((steps, p), dtype=bool),
        'ok': np.zeros(steps, dtype=bool),
        'compute_time': np.zeros(steps),
        'status': np.zeros(steps, dtype=np.int8),
        'servo_residual': np.zeros(steps),
        'null_space': np.zeros((steps, 2), dtype=np.int64),
        'posture_error': np.zeros(steps),
    }


def _redundancy_columns(ctrl, log):
    """The posture error ``|q - q_ref|`` of each logged step, and the null-space dimensions where no
    null-space term runs (those of the initial state; DESIGN.md "Redundancy")."""
    red = ctrl.redundancy
    if not red.active:
        log['null_space'][:] = red.null_motion, red.null_internal
    dq = log['q'] - red.q_ref
    log['posture_error'][:] = np.sqrt(np.einsum('ij,ij->i', dq, dq))


class _PlantFailed(Exception):
    """The plant's step raised at period `k` (control flow inside :func:`simulate` only)."""

    def __init__(self, k, error):
        super().__init__(k, error)
        self.k, self.error = k, error


def simulate(
    setup,
    *,
    seed=0,
    progress=None,
    compiled=None,
    should_stop=None,
    sink=None,
    keep_every=1,
    announce=None,
):
    """Run the closed loop and return a :class:`SimulationResult`.

    setup              a RobotSetup (see :func:`uk_controller.robots.load_robot`)

    Every setting of the run is the setup's resolved settings (the file with its overrides:
    ``load_robot('scara', {'control.rate': 500.0, 'simulation.duration': 2.0})``), so the cross-key rules
    checked the values that run: ``simulation.duration``, ``control.*`` and ``stabilization.*`` (the
    controller), ``simulation.plant``, ``simulation.mass_scale``, ``simulation.sensor_noise``,
    ``simulation.measurement_delay`` (whole control periods between measurement and use; the first
    periods have no measurement yet and return the safe effort, reason says so),
    ``simulation.integrator`` and ``simulation.substeps`` (the UK plant's). The keywords say how the run
    is carried out, not what it computes:

    seed               seed of the sensor noise
    progress           callable(fraction) called about 100 times
    compiled           run the periods in one compiled call per chunk (:mod:`.compiled_loop`: same
                       controller program and plant RK4, results equal to round-off): None = when
                       available (numba, UK plant, no sensor noise or delay, compiled controller and
                       plant), False = always the Python loop, True = require it (ValueError if not
                       available). ``settings['loop']`` says which ran.
    should_stop        callable() -> bool checked between chunks of periods (Ctrl-C in the CLI): when
                       it answers True the run ends there and the result holds the periods that ran
                       (``interrupted``).
    sink               callable(chunk) streaming the log: the run is logged in chunks of
                       :data:`CHUNK_STEPS` periods and each finished chunk (a SimulationResult of those
                       rows, ``first_step`` its index; its arrays are views of a buffer the next chunk
                       reuses: a sink copies what it keeps) is passed to `sink` and then forgotten, so
                       memory does not grow with the run; the returned result keeps every `keep_every`-th row
                       and :class:`RunStats` of all of them (its summary is the whole run's).
    keep_every         with a sink: rows kept in the returned result (1 = all).
    announce           callable(text) told once, before the first period, whether the controller
                       approaches the target in joint space first and why (``approach.mode``;
                       ``ControllerCore.approach_decision``, also ``settings['approach']``).

    A plant whose state stops being finite, or whose step raises, ends the run there: the result holds
    the periods before it and ``failure`` says why (the summary's verdict is ``FAILED: ...``).
    """
    sim = setup.settings.simulation  # resolved once (uk_controller.settings.resolve)
    plant = sim.plant
    duration = float(sim.duration)
    mass_scale = float(sim.mass_scale)
    sensor_noise = float(sim.sensor_noise)
    delay = int(sim.measurement_delay)
    ctrl = ControllerCore(setup)
    the_plant = make_plant(setup)
    fit = getattr(the_plant, 'fit_substeps', None)
    plant_note = fit(1.0 / ctrl.rate) if fit is not None else None
    rng = np.random.default_rng(seed)
    dt = ctrl.dt
    steps = int(round(duration * ctrl.rate))
    n, p = ctrl.n, ctrl.p
    mp, ms = setup.passive.m, setup.servo.m
    keep_every = max(1, int(keep_every))
    streaming = sink is not None or keep_every > 1
    chunk_steps = min(steps, CHUNK_STEPS) if streaming else steps
    log = _new_log(chunk_steps, n, p, mp, ms)
    from .status import classify, servo_residual, step_class

    history = []
    no_measurement = f'no measurement yet (measurement_delay = {delay} periods)'
    ctrl.reset(the_plant.t)
    ctrl.prepare(the_plant.q)  # the approach decided at the plant's start, before the first period
    if announce is not None:
        announce(ctrl.approach_decision)
    every = max(1, steps // 100)
    # the loop touches only locals; task errors and closure residuals are slices of the phi log,
    # filled after each chunk. The UK plant replaces (never mutates) its q/qd arrays each step, so
    # the controller may read them directly unless noise is added to a copy.
    ctrl_step, plant_step = ctrl.step, the_plant.step
    log_t, log_q, log_qd, log_u = log['t'], log['q'], log['qd'], log['effort']
    log_phi, log_phid, log_sat, log_ok, log_ct = (
        log['phi'],
        log['phidot'],
        log['saturated'],
        log['ok'],
        log['compute_time'],
    )
    log_status, log_resid, log_null = log['status'], log['servo_residual'], log['null_space']
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
                if len(history) <= delay:  # the first measurement arrives `delay` periods late
                    res = ctrl.safe(no_measurement)
                    q_meas = None
                else:
                    q_meas, qd_meas, _ = history[len(history) - 1 - delay]
                    del history[: -delay - 1]
            if q_meas is not None:
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
            log_status[k] = step_class(res, ms, p)
            log_resid[k] = servo_residual(res)
            log_null[k] = res.null_motion, res.null_internal
            try:
                plant_step(effort, dt)
            except Exception as exc:  # noqa: BLE001 - the plant failed: the run ends, its log is kept
                raise _PlantFailed(k, exc) from None

    fast = None
    if compiled is None or compiled:
        if not (copy_state or delay):
            fast = compiled_loop.CompiledLoop.build(ctrl, the_plant)
        if fast is None and compiled:
            raise ValueError(
                'compiled closed loop not available (needs numba, the UK plant with rk4 and '
                'constant actuator columns, a compiled controller, no sensor noise or delay)'
            )
    in_kernel: Any = np.zeros(chunk_steps, dtype=bool) if fast is not None else None
    wall = 0.0
    base = 0  # index of the log buffer's first row in the run
    interrupted = False
    failure = ''
    stats, kept = [], []
    while True:
        size = min(chunk_steps, steps - base)
        clock0: Any = compiled_loop.clock() if fast is not None else None
        if in_kernel is not None:
            in_kernel[:] = False
        start = time.perf_counter()
        k = 0
        try:
            while k < size:
                if should_stop is not None and should_stop():
                    interrupted = True
                    break
                if progress is not None:
                    progress((base + k) / steps)
                stop = min(size, k + every) if progress is not None or should_stop is not None else size
                while k < stop:
                    if fast is None:
                        python_periods(k, stop)
                        k = stop
                        continue
                    if ctrl.in_approach:  # the joint-space approach runs two controllers: ControllerCore.step
                        python_periods(k, k + 1)
                        k += 1
                        continue
                    k0 = k
                    k, code = fast.run(k0, stop, log)
                    if code == compiled_loop.PLANT_STOP:  # logged; the plant's own step raises or gives NaN
                        in_kernel[k0 : k + 1] = True
                        try:
                            plant_step(log_u[k], dt)
                        except Exception as exc:  # noqa: BLE001 - as in python_periods
                            raise _PlantFailed(k, exc) from None
                        k += 1
                    else:
                        in_kernel[k0:k] = True
                        if code == compiled_loop.CONTROLLER_STOP:  # ControllerCore.step answers (safe effort, reason)
                            python_periods(k, k + 1)
                            k += 1
        except _PlantFailed as exc:
            k = exc.k + 1  # period k is logged (its state is finite); integrating it failed
            failure = (
                f'plant step failed at t = {(base + exc.k) * dt:.4f} s ({type(exc.error).__name__}: '
                f'{exc.error}): the simulation stopped there'
            )
        rows = {key: value[:k] for key, value in log.items()} if k < chunk_steps else dict(log)
        finite = np.isfinite(rows['q']).all(axis=1) & np.isfinite(rows['qd']).all(axis=1)
        if not finite.all():  # the plant diverged: keep the periods before it, say so
            k = int(np.argmin(finite))
            failure = f'plant state not finite at t = {(base + k) * dt:.4f} s: the simulation stopped there'
            rows = {key: value[:k] for key, value in log.items()}
        rows['task_error'][:] = rows['phi'][:, mp:]
        if mp:
            rows['closure_residual'][:] = rows['phi'][:, :mp]
        wall += time.perf_counter() - start
        if fast is not None:
            clock1 = compiled_loop.clock()
            compiled_loop.cycles_to_seconds(
                rows['compute_time'], in_kernel[:k], clock1[1] - clock0[1], clock1[0] - clock0[0]
            )
        if in_kernel is not None and in_kernel[:k].any():
            idx = np.nonzero(in_kernel[:k])[0]
            codes, resid = np.zeros(idx.size, dtype=np.int8), np.zeros(idx.size)
            classify(ctrl, rows['t'][idx], rows['q'][idx], rows['qd'][idx], rows['ok'][idx], codes, resid)
            rows['status'][idx] = codes
            rows['servo_residual'][idx] = resid
        if sensor_noise > 0 or delay or plant != 'uk':
            _true_errors(setup, ctrl, rows)
        _redundancy_columns(ctrl, rows)
        if not streaming:
            kept.append(rows)
        else:
            stats.append(
                RunStats.of_log(
                    {key: v.copy() for key, v in rows.items() if key in ('t', 'compute_time', 'ok')}
                    | {
                        key: rows[key]
                        for key in (
                            'task_error',
                            'effort',
                            'closure_residual',
                            'saturated',
                            'qd',
                            'posture_error',
                            'null_space',
                        )
                    },
                    rows['status'].copy(),
                    rows['servo_residual'],
                )
            )
            first = (-base) % keep_every
            kept.append({key: v[first::keep_every].copy() for key, v in rows.items()})
            if sink is not None and k:
                sink(
                    _result(
                        setup,
                        ctrl,
                        plant,
                        rows,
                        wall,
                        interrupted,
                        failure,
                        duration,
                        mass_scale,
                        sensor_noise,
                        delay,
                        fast,
                        first_step=base,
                        planned=steps,
                    )
                )
        base += k
        if interrupted or failure or base >= steps:
            break
    if progress is not None and not interrupted:
        progress(1.0)
    final = kept[0] if len(kept) == 1 else {key: np.concatenate([c[key] for c in kept]) for key in log}
    result = _result(
        setup,
        ctrl,
        plant,
        final,
        wall,
        interrupted,
        failure,
        duration,
        mass_scale,
        sensor_noise,
        delay,
        fast,
        planned=steps,
    )
    if plant_note:
        result.settings['plant_note'] = plant_note
    result.settings['approach'] = ctrl.approach_decision
    if streaming:
        result.stats = RunStats.concatenate(stats)
        result.settings['kept_every'] = keep_every
    return result


def _result(
    setup,
    ctrl,
    plant,
    log,
    wall,
    interrupted,
    failure,
    duration,
    mass_scale,
    sensor_noise,
    delay,
    fast,
    first_step=0,
    planned=0,
):
    stab = ctrl.stabilization
    return SimulationResult(
        robot=setup.name,
        plant=plant,
        joint_names=ctrl.joint_names,
        actuator_names=ctrl.actuator_names,
        task_row_names=_row_names(setup.servo),
        row_names=_row_names(setup.passive) + _row_names(setup.servo),
        wall_time=wall,
        rate=ctrl.rate,
        interrupted=interrupted,
        servo_rows=setup.servo.m,
        failure=failure,
        first_step=first_step,
        planned_steps=planned,
        settings={
            'duration': duration,
            'rate': ctrl.rate,
            'mass_scale': mass_scale,
            'sensor_noise': sensor_noise,
            'measurement_delay': delay,
            'pinv': ctrl.pinv_method,
            'loop': 'compiled' if fast is not None else 'python',
            'stabilization': {'kd': np.asarray(stab.kd).tolist(), 'kp': np.asarray(stab.kp).tolist()},
        },
        **log,
    )


def _true_errors(setup, ctrl, log):
    """Replace logged errors (seen through noise/delay) by those of the true state."""
    model = setup.model
    for k in range(log['t'].size):
        q, qd, t = log['q'][k], log['qd'][k], log['t'][k] - ctrl.t0
        model.compute(q, qd)
        try:
            servo = setup.servo.evaluate(model, q, qd, t)
        except ValueError:  # a callable constraint failed here: the error is unknown
            log['task_error'][k] = np.nan
            log['phi'][k] = np.nan
            continue
        log['task_error'][k] = servo.phi
        if setup.passive.m:
            passive = setup.passive.evaluate(model, q, qd, t)
            log['closure_residual'][k] = passive.phi
            log['phi'][k] = np.concatenate((passive.phi, servo.phi))
        else:
            log['phi'][k] = servo.phi


__all__ = ['simulate', 'SimulationResult', 'make_plant', 'Baumgarte']
