"""ControllerCore: one control step from a measured state to actuator efforts.

The same object runs in the embedded simulation, the ROS node and the serial
runner. Per step, with ``h = C(q, q') q' + G(q)`` from the model:

1. Passive rows (mechanism closures) and servo rows (tasks) are evaluated and
   their right-hand sides Baumgarte-stabilized (seed 000 eq 52 and the
   convention in the config).
2. Chen's servo control (seed 004 eq 35) is solved against the dynamics
   projected on the closures, :func:`uk_controller.uk.servo_control` with
   ``Q = -h`` and ``B`` the actuator map:

       u = (A_s N B)^+ (b_s - A_s (N Q + r_p))

3. Efforts are clipped to their limits. A bad input or a numerical failure
   never yields NaN: the configured safe effort (zero or hold) is returned with
   the reason.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from . import settings as _settings
from . import uk
from .constraints import CompiledRows
from .kernels import codes
from .kernels.packed import PackedStep
from .pinv import get_pinv

SAFE_EFFORTS = ('zero', 'hold')


@dataclass
class StepResult:
    """Efforts of one control step plus what a person needs to trust them.

    effort        actuator efforts (p,), in the order of ``actuator_names``
    ok            False when the safe effort was returned instead of a solution
    reason        empty when all is well, else why (safe effort or a degraded solve)
    phi, phidot   all constraint residuals, passive rows first, then servo rows
    task_error    the servo rows' phi (task-space error)
    rank          rank of the servo matrix C B_bar (0: not controllable)
    condition     condition number of C B_bar on its rank
    saturated     (p,) which efforts hit their limit
    compute_time  seconds spent in :meth:`ControllerCore.step`
    """

    effort: np.ndarray
    ok: bool
    reason: str
    phi: np.ndarray
    phidot: np.ndarray
    task_error: np.ndarray
    rank: int
    condition: float
    saturated: np.ndarray
    compute_time: float = 0.0
    passive_rank: int = 0
    extra: dict = field(default_factory=dict)


class ControllerCore:
    """Constraint-following servo controller for one robot setup."""

    def __init__(self, setup, *, stabilization=None, pinv=None, rcond=None, safe_effort=None, rate=None,
                 effort_limits=None):
        control = dict(setup.config.get('control', {}) or {})
        self.setup = setup
        self.model = setup.model
        self.joint_names = list(setup.joint_names)
        self.actuator_names = list(setup.actuators.names)
        self.n = self.model.n
        self.p = setup.actuators.p
        self.rate = float(rate if rate is not None else control.get('rate', _settings.default('control.rate')))
        if not self.rate > 0:
            raise ValueError(f'control.rate must be positive, got {self.rate}')
        self.dt = 1.0 / self.rate
        self.rcond = float(rcond if rcond is not None else control.get('rcond', _settings.default('control.rcond')))
        method = pinv or control.get('pinv', _settings.default('control.pinv'))
        pinv_fn = get_pinv(method)
        if method == 'damped':
            damping = float(control.get('damping', _settings.default('control.damping')))
            self._pinv = lambda A, rcond: pinv_fn(A, rcond, damping)
        else:
            self._pinv = pinv_fn
        self.pinv_method = method
        self.safe_effort = safe_effort or control.get('safe_effort', _settings.default('control.safe_effort'))
        self._stabilization = None
        limits = setup.actuators.effort_limits if effort_limits is None else effort_limits
        self.effort_limits = np.broadcast_to(np.asarray(limits, dtype=float), (self.p,)).copy()
        self.t0 = 0.0
        self._last_effort = np.zeros(self.p)
        self._mp = setup.passive.m
        self._ms = setup.servo.m
        self._bp = np.zeros(self._mp)
        self._bs = np.zeros(self._ms)
        self._Q = np.zeros(self.n)
        self._zero_n = np.zeros(self.n)
        self._shape = (self.n,)
        self._passive = setup.passive
        self._servo = setup.servo
        self._no_rows = setup.passive.rows            # empty (0, n) rows when there are no closures
        actuators = setup.actuators
        self._B_const = actuators.matrix(self.model).copy() if actuators.constant else None
        # The hot path: a preallocated servo solver (numba kernel when installed, else LAPACK). It
        # implements uk.servo_control with the SVD pseudo-inverse; other pinv methods use the general path.
        self._solver = None
        self._fused = None
        self._packed = None
        if method == 'svd':
            self._solver = uk.ServoSolver(self.n, self.p, self._mp, self._ms, rcond=self.rcond)
        self.stabilization = stabilization if stabilization is not None else setup.stabilization
        if method == 'svd':
            # Fastest path: rows, Baumgarte and the servo solve in ONE compiled call after Pinocchio's pass
            # (same equations as the ServoSolver path; None when a row type has no compiled form).
            B, between = actuators.compiled_form()
            self._fused = CompiledRows.build(self.model, self._passive, self._servo, p=self.p, B=B,
                                             between=between, gains=self._gains, rcond=self.rcond,
                                             consistency_tol=self._solver.consistency_tol,
                                             limits=self.effort_limits)
            if self._fused is not None:
                fz = self._fused
                o, m = int(fz.ip[codes.IH_PHI]), self._mp + self._ms
                assert int(fz.ip[codes.IH_PHID]) == o + m, 'phi and phidot must be adjacent in the workspace'
                fz.phi_phidot = fz.ws[o:o + 2 * m]
                self._run = self._fused.make_runner()
                # one compiled call on two packed arrays, own RNEA/CRBA instead of Pinocchio's pass (issue 13)
                self._packed = PackedStep.build(self.model, self._fused)
                if self._packed is not None:
                    self._run = self._packed.make_runner()
        self._warm_up()

    def _warm_up(self):
        """One solve at the initial state so that compiled kernels load (or compile) now, not in the
        first control period; errors are left for the real step to report."""
        try:
            self._solve(np.array(self.setup.q0, dtype=float), np.array(self.setup.qd0, dtype=float), 0.0)
        except Exception:  # noqa: BLE001 - the first real step reports any problem with its reason
            pass

    @property
    def safe_effort(self):
        """'zero' or 'hold' (the last good effort); assignable."""
        return self._safe_effort

    @safe_effort.setter
    def safe_effort(self, value):
        if value not in SAFE_EFFORTS:
            raise ValueError(f"control.safe_effort must be one of {SAFE_EFFORTS}, got {value!r}")
        self._safe_effort = value
        self._hold = value == 'hold'

    @property
    def stabilization(self):
        """The Baumgarte gains of the controller (assignable; per-row gains are rebuilt)."""
        return self._stabilization

    @stabilization.setter
    def stabilization(self, value):
        self._gains = uk.row_gains(value, self._passive.rows.order, self._servo.rows.order)
        self._stabilization = value
        if getattr(self, '_fused', None) is not None:
            self._fused.set_gains(self._gains)

    @classmethod
    def from_config(cls, name_or_path, *, mass_scale=1.0, **overrides):
        """Build from a robot name (``config/<name>.yaml``) or a YAML path."""
        from .robots import load_robot
        return cls(load_robot(name_or_path, mass_scale=mass_scale), **overrides)

    # ------------------------------------------------------------------ control

    def reset(self, t0=0.0):
        """Restart the trajectory clock at time t0 and forget the held effort."""
        self.t0 = float(t0)
        self._last_effort[:] = 0.0

    def remember_effort(self, effort):
        """Record `effort` as the last good one (what ``safe_effort: hold`` returns), for callers that
        computed it with this controller's program outside :meth:`step` (sim.compiled_loop)."""
        self._last_effort[:] = effort

    def safe(self, reason):
        """The configured safe effort (zero, or the last good effort held)."""
        effort = self._last_effort.copy() if self.safe_effort == 'hold' else np.zeros(self.p)
        nan = np.full(self._mp + self._ms, np.nan)
        return StepResult(effort, False, reason, nan, nan.copy(), np.full(self._ms, np.nan), 0,
                          float('nan'), np.zeros(self.p, dtype=bool))

    def step(self, q, qd, t):
        """Efforts for the measured state (q, q') at time t (seconds)."""
        start = time.perf_counter()
        fz = self._fused
        if fz is None or self._solver is None:
            return self._step(q, qd, t, start)
        if type(q) is not np.ndarray or q.dtype != np.float64 or not q.flags.c_contiguous:
            q = np.ascontiguousarray(q, dtype=float)
        if type(qd) is not np.ndarray or qd.dtype != np.float64 or not qd.flags.c_contiguous:
            qd = np.ascontiguousarray(qd, dtype=float)
        shape = self._shape
        if q.shape != shape or qd.shape != shape:
            return self._timed(self.safe(f'state has shape {q.shape}/{qd.shape}, expected ({self.n},)'), start)
        try:
            self._run(q, qd, float(t) - self.t0)     # the kernel checks that q, q' and t are finite first
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            return self._timed(self.safe(f'numerical failure: {exc}'), start)
        info = fz.info
        status = info[0]
        if status != 0.0:
            if status == 3.0:
                return self._timed(self.safe('non-finite state'), start)
            if status == 1.0:
                return self._timed(self.safe('numerical failure: mass matrix not positive definite'), start)
            return self._timed(self.safe('numerical failure: non-finite effort'), start)
        effort = fz.effort.copy()
        if self._hold:
            self._last_effort[:] = effort
        _, rank, condition, passive_rank, residual, consistent = info[:6].tolist()
        reason = ''
        if rank < 1:
            reason = 'servo constraint not controllable (rank C B_bar = 0)'
        elif not consistent:
            reason = f'servo constraint inconsistent: least-squares effort (residual {residual:.2e})'
        both = fz.phi_phidot.copy()          # phi and phi' are adjacent in the workspace: one copy
        m = self._mp + self._ms
        phi = both[:m]
        return StepResult(effort, True, reason, phi, both[m:], phi[self._mp:], int(rank), condition,
                          fz.saturated.copy(), time.perf_counter() - start, int(passive_rank))

    def _step(self, q, qd, t, start):
        """The reference step (ServoSolver or uk.servo_control after ConstraintStack.evaluate)."""
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        if q.shape != self._shape or qd.shape != self._shape:
            return self._timed(self.safe(f'state has shape {q.shape}/{qd.shape}, expected ({self.n},)'), start)
        # one dot product decides for finite states; the exact test only runs when it overflows
        if not math.isfinite(q @ q + qd @ qd + t) and not (
                np.isfinite(q).all() and np.isfinite(qd).all() and math.isfinite(t)):
            return self._timed(self.safe('non-finite state'), start)
        try:
            result = self._solve(q, qd, float(t) - self.t0)
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            return self._timed(self.safe(f'numerical failure: {exc}'), start)
        effort = result.effort
        if not math.isfinite(effort @ effort) and not np.isfinite(effort).all():
            return self._timed(self.safe('numerical failure: non-finite effort'), start)
        self._last_effort[:] = result.effort
        return self._timed(result, start)

    @staticmethod
    def _timed(result, start):
        result.compute_time = time.perf_counter() - start
        return result

    def _solve(self, q, qd, t):
        if self._solver is None:
            return self._solve_general(q, qd, t)
        model = self.model
        model.compute(q, qd)
        mp = self._mp
        passive = self._passive.evaluate(model, q, qd, t) if mp else self._no_rows
        servo = self._servo.evaluate(model, q, qd, t)
        B = self._B_const if self._B_const is not None else self.setup.actuators.matrix(model)
        sol = self._solver
        sol.solve_rows(model.M_lower, self._zero_n, model.h, B, servo.A, servo.b, servo.phi, servo.phidot,
                       passive.A, passive.b, passive.phi, passive.phidot, self._gains, self.effort_limits)
        info = sol.info
        if info[0] == 2.0:
            raise FloatingPointError('non-finite effort')
        rank = int(info[1])
        effort = sol.effort.copy()
        saturated = sol.saturated.copy()
        reason = ''
        if rank < 1:
            reason = 'servo constraint not controllable (rank C B_bar = 0)'
        elif not info[5]:
            reason = f'servo constraint inconsistent: least-squares effort (residual {info[4]:.2e})'
        if mp:
            phi = np.concatenate((passive.phi, servo.phi))
            phidot = np.concatenate((passive.phidot, servo.phidot))
        else:
            phi = servo.phi.copy()
            phidot = servo.phidot.copy()
        return StepResult(effort, True, reason, phi, phidot, phi[mp:], rank, float(info[2]), saturated,
                          passive_rank=int(info[3]))

    def _solve_general(self, q, qd, t):
        model = self.model
        model.compute(q, qd)
        passive = self.setup.passive.evaluate(model, q, qd, t) if self._mp else None
        servo = self.setup.servo.evaluate(model, q, qd, t)
        np.negative(model.h, out=self._Q)
        B = self.setup.actuators.matrix(model)
        bs = self.stabilization.stabilized_rhs(servo, out=self._bs)
        if passive is not None:
            bp = self.stabilization.stabilized_rhs(passive, out=self._bp)
            res = uk.servo_control(model.M, self._Q, B, servo.A, bs, A_passive=passive.A, b_passive=bp,
                                   rcond=self.rcond, pinv=self._pinv, on_infeasible='report')
            phi = np.concatenate((passive.phi, servo.phi))
            phidot = np.concatenate((passive.phidot, servo.phidot))
        else:
            res = uk.servo_control(model.M, self._Q, B, servo.A, bs, rcond=self.rcond, pinv=self._pinv,
                                   on_infeasible='report')
            phi = servo.phi.copy()
            phidot = servo.phidot.copy()
        effort = res.u
        saturated = np.abs(effort) > self.effort_limits
        if saturated.any():
            effort = np.clip(effort, -self.effort_limits, self.effort_limits)
        reason = ''
        if res.rank < 1:
            reason = 'servo constraint not controllable (rank C B_bar = 0)'
        elif not res.consistent:
            reason = f'servo constraint inconsistent: least-squares effort (residual {res.servo_residual:.2e})'
        return StepResult(effort, True, reason, phi, phidot, servo.phi.copy(), res.rank, res.condition,
                          saturated, passive_rank=res.passive_rank)
