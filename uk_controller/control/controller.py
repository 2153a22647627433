"""ControllerCore: one control step from a measured state to actuator efforts.

The same object runs in the embedded simulation, the ROS node and the serial
runner. Per step, with ``h = C(q, q') q' + G(q)`` from the model:

1. Passive rows (mechanism closures) and servo rows (tasks) are evaluated and
   their right-hand sides Baumgarte-stabilized (seed 000 eq 52 and the
   convention in the config).
2. Chen's servo control (seed 004 eq 35) is solved against the dynamics
   projected on the closures, :func:`uk_controller.core.uk.servo_control` with
   ``Q = -h`` and ``B`` the actuator map:

       u = (A_s N B)^+ (b_s - A_s (N Q + r_p))

   plus, where the task leaves the robot free, the null-space term of DESIGN.md "Redundancy"
   (:mod:`uk_controller.control.redundancy`, :func:`uk_controller.core.uk.redundancy_effort`): a posture with
   joint-limit avoidance in what the task and the closures leave, ``u += P z``; with redundant
   actuation an optional internal-force target. Where the joints have damping or friction the solve
   takes them over the control period (:mod:`uk_controller.core.implicit_dissipation`: M + dt D, and a
   second solve with the friction's change up to the speed the first one asks for).

3. Efforts are clipped to their limits. A bad input or a numerical failure
   never yields NaN: the configured safe effort (zero or hold) is returned with
   the reason.

With a joint-space approach (``approach.mode``, :mod:`uk_controller.control.approach`: ``auto`` where the
task's saturated correction is capped at the start) the first steps follow a joint-space approach to an
inverse-kinematics solution of the task by a second ControllerCore on joint rows, and blend its effort into
this one's; :meth:`ControllerCore.step` and ``step_view`` go through it until the hand-over ends
(``in_approach``), and the task's clock starts there. It is decided and planned at construction from
``robot.initial_position``, and again from the measured start when that differs
(:meth:`ControllerCore.prepare`, called by the caller before the first step; after :meth:`ControllerCore.reset`
-- a run's start, a re-arm -- by the first step otherwise).

Backends (chosen ONCE, at construction; ``ControllerCore.backend``, its ``name``):

- :class:`CompiledBackend` ``'compiled'``: steps 1-3 in one compiled call. With the packed form
  (``dynamics == 'kernels'``) the call also computes M and h by the kernels' own RNEA/CRBA
  (``uk_controller.kernels.packed``); otherwise Pinocchio's pass runs first (``dynamics == 'pinocchio'``)
  and the kernel reads its Data (also when a ``callable`` row's user function fills its rows in Python
  first, and with a ``robot.joints`` order that permutes Pinocchio's: ``model.compute``'s M and h). The program is the
  stacks' :class:`~uk_controller.constraints.CompiledRows`.
- :class:`ReferenceBackend` ``'reference'``: Pinocchio's pass (:meth:`RobotModel.compute`),
  :meth:`ConstraintStack.evaluate` and the preallocated :class:`uk_controller.core.uk.ServoSolver`: the
  reference of the compiled backend (used when numba is missing).
- :class:`GeneralBackend` ``'general'``: :func:`uk_controller.core.uk.servo_control` with any
  pseudo-inverse method (``control.pinv`` other than 'svd').

:meth:`ControllerCore.step` is the template over them (as scipy's ``OdeSolver.step`` over
``_step_impl``): it checks the input, calls ``backend.run(q, q', t)`` (through ``backend.call``: on the
packed compiled backend the compiled entry point itself, its arrays bound once) which leaves the status in
``backend.info[INFO_STATUS]`` and the solution in ``backend.effort``, ``saturated``, ``phi`` and ``phidot``,
and builds the :class:`StepResult` in one place with the reason from
:mod:`uk_controller.control.status`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constraints import ConstraintStack
from ..core import uk
from ..core.baumgarte import correction
from ..core.implicit_dissipation import friction_change, period_dissipation, period_mass
from ..core.pinv import get_pinv
from ..kernels import codes
from ..kernels.codes import (
    INFO_CONDITION,
    INFO_CONSISTENT,
    INFO_LIMITED,
    INFO_PASSIVE_RANK,
    INFO_RANK,
    INFO_RESIDUAL,
    INFO_STATUS,
)
from ..kernels.packed import PackedStep
from ..robots.setup import stabilization_gains
from ..settings.resolve import refuse_fixed
from ..settings.types import Settings
from . import approach as _approach_mod
from . import redundancy as _redundancy
from .limits import joint_limit_stage
from .status import Status
from .status import reason as status_reason

SAFE_EFFORTS = ('zero', 'hold')
# step() unpacks info[:_INFO_READ] in this order, and with the null-space term info[_INFO_NULL] (one tolist() each)
_INFO_READ = INFO_CONSISTENT + 1
assert (INFO_STATUS, INFO_RANK, INFO_CONDITION, INFO_PASSIVE_RANK, INFO_RESIDUAL, INFO_CONSISTENT) == tuple(range(6))
_INFO_NULL = slice(codes.INFO_NULL_MOTION, codes.INFO_NULL_INTERNAL + 1)
assert codes.INFO_NULL_INTERNAL == codes.INFO_NULL_MOTION + 1
_clock = time.perf_counter
_new = object.__new__
_ndarray, _F64, _C1 = np.ndarray, np.dtype(np.float64), (8,)  # a C-contiguous float64 vector's strides
BACKENDS = ('auto', 'compiled', 'reference', 'general')
_OK, _NOT_CONTROLLABLE, _INCONSISTENT, _LIMITED = (
    Status.OK,
    Status.NOT_CONTROLLABLE,
    Status.SERVO_INCONSISTENT,
    Status.LIMITED,
)
_NOT_CONTROLLABLE_REASON = status_reason(Status.NOT_CONTROLLABLE)


@dataclass(slots=True, eq=False)
class StepResult:
    """Efforts of one control step plus what a person needs to trust them.

    effort        actuator efforts (p,), in the order of ``actuator_names``
    ok            False when the safe effort was returned instead of a solution
    reason        empty when all is well, else why (safe effort or a degraded solve); the text of `status`
    phi, phidot   all constraint residuals, passive rows first, then servo rows
    task_error    the servo rows' phi (task-space error)
    rank          rank of the servo matrix C B_bar (0: not controllable)
    condition     condition number of C B_bar on its rank
    saturated     (p,) which efforts hit their limit
    compute_time  seconds spent in :meth:`ControllerCore.step`
    passive_rank  rank of the closures' Gram matrix A_p M^-1 A_p^T
    status        the :class:`uk_controller.control.status.Status` of the step (its row in the table of reasons)
    residual      ``|A_s q'' - b_s|`` of Chen's servo equation (non-zero when it is inconsistent)
    posture_error ``|q - q_ref|`` of the posture term (NaN when the controller has none)
    null_motion   dimension of the task's null space that moves the robot (rank N B P)
    null_internal dimension of the efforts that move nothing (internal forces)

    The arrays are the result's own (views of one copy made by the step; without passive rows
    ``task_error`` is ``phi`` itself). :meth:`ControllerCore.step` fills the slots one by one instead of
    calling ``__init__`` (its hot path): a new field needs its line there too (test/test_controller_step.py
    fails on an empty slot).
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
    status: Status = Status.OK
    residual: float = 0.0
    posture_error: float = float('nan')
    null_motion: int = 0
    null_internal: int = 0


# ----------------------------------------------------------------------------- backends


def _call_run(q, qd, t, run, _b, _c):
    """A backend's ``run(q, qd, t)`` in the form of :attr:`ControllerBackend.call`."""
    run(q, qd, t)


class ControllerBackend:
    """How a :class:`ControllerCore` computes a step (see the module docstring).

    ``run(q, qd, t)`` (q, q' C-contiguous float64 of length n, t the trajectory time) leaves the
    status in ``info[INFO_STATUS]`` (0: a solution; the kernels' codes of :class:`~uk_controller.control.status.Status`)
    and, on success, the solution in ``effort`` (p,), ``saturated`` (p,) bool, ``phi`` and ``phidot``
    (m,: passive rows first) and ``info[INFO_RANK:INFO_CONSISTENT + 1]`` = rank, condition, passive rank, servo
    residual, consistent (``kernels.codes.INFO_*``). ``phi``, ``phidot`` and ``effort`` are views of ONE
    array ``outputs`` (phi | phi' | effort), which :meth:`ControllerCore.step` copies in one go. It may raise
    LinAlgError, ValueError or FloatingPointError (the step then reports a numerical failure).
    """

    name = ''
    run: Callable[[Any, Any, float], None]  # one solve at (q, q', t) into outputs (each backend gives it)

    def __init__(self, core, outputs=None):
        self.core = core
        m, p = core.passive.m + core.servo.m, core.p
        self.outputs = np.zeros(2 * m + p) if outputs is None else outputs
        # rows per part of the block: a compiled program's posture rows follow the task's (not reported)
        self.rows = mb = (self.outputs.size - p) // 2
        self.phi, self.phidot, self.effort = self.outputs[:m], self.outputs[mb : mb + m], self.outputs[2 * mb :]
        self.saturated = np.zeros(core.p, dtype=bool)
        self.info = np.zeros(codes.INFO_SIZE)

    @property
    def call(self):
        """``(f, a, b, c)``: ``f(q, qd, t, a, b, c)`` is one :meth:`run`, with arguments bound once
        (:meth:`ControllerCore.step` calls it so; the compiled backend's packed form gives its compiled entry
        point itself, one Python frame fewer than its runner closure)."""
        return _call_run, self.run, None, None

    def set_gains(self, gains):
        """New per-row Baumgarte gains (2, m) (see :func:`uk_controller.core.uk.row_gains`)."""

    def set_limits(self, limits):
        """New effort limits (p,); the NumPy backends read ``core.effort_limits`` at every step."""

    def _non_finite_state(self, q, qd, t):
        """True (and the status written) when q, q' or t is not finite; one dot product decides for
        finite states, the exact test only runs when it overflows."""
        if not math.isfinite(q @ q + qd @ qd + t) and not (
            np.isfinite(q).all() and np.isfinite(qd).all() and math.isfinite(t)
        ):
            self.info[INFO_STATUS] = Status.NON_FINITE_STATE
            return True
        return False

    def _gather_rows(self, passive, servo):
        """phi and phi' of the passive and servo rows into ``phi``, ``phidot`` (passive first)."""
        mp = self.core.passive.m
        if mp:
            self.phi[:mp] = passive.phi
            self.phidot[:mp] = passive.phidot
        ms = self.core.servo.m  # the task rows (posture rows follow them in servo_all)
        self.phi[mp:] = servo.phi[:ms]
        self.phidot[mp:] = servo.phidot[:ms]

    def __repr__(self):
        return f'{type(self).__name__}({self.name!r})'


class CompiledBackend(ControllerBackend):
    """Rows, Baumgarte, the servo solve and clipping in one compiled call (module docstring).

    ``program`` is the :class:`~uk_controller.constraints.CompiledRows` (``ip``, ``fp``, ``ws``);
    ``packed`` its :class:`~uk_controller.kernels.packed.PackedStep` (None: Pinocchio's pass runs first);
    ``dynamics`` 'kernels' or 'pinocchio' says which computes M and h.
    """

    name = 'compiled'

    def __init__(self, core, program):
        self.program = program
        self.packed = PackedStep.build(core.model, program)  # re-points the program's arrays
        if self.packed is None:  # Pinocchio's pass + the program's own kernel run each step: compile it now
            program.warm_up()
        super().__init__(core, program.outputs)  # views of the (packed) workspace
        self.dynamics = 'pinocchio' if self.packed is None else 'kernels'
        self.run = (program if self.packed is None else self.packed).make_runner()
        self.saturated, self.info = program.saturated, program.info

    @classmethod
    def build(cls, core, gains):
        """The compiled backend of `core`, or None when a row type has no compiled form (or no numba)."""
        B, between = core.setup.actuators.compiled_form()
        red = core.redundancy
        program = core.passive.create_data(
            core.model,
            core.servo_all,
            p=core.p,
            B=B,
            between=between,
            gains=gains,
            rcond=core.rcond,
            consistency_tol=uk.CONSISTENCY_TOL,
            limits=core.effort_limits,
            secondary=red.secondary,
            one_sided=red.one_sided,
            internal_effort=red.internal_effort,
            external_rows=True,
            any_order=True,
            dissipation=core.dissipation,
            warm_up=False,  # the packed step (or __init__, without one) compiles what the steps call
            **core.solver_options,
        )
        return None if program is None else cls(core, program)

    @property
    def call(self):
        if self.packed is None:
            return super().call
        packed = self.packed  # the arguments of make_runner's closure, without the closure
        return packed.entry, packed.I, packed.F, packed.fz.saturated

    def set_gains(self, gains):
        self.program.set_gains(gains)

    def set_limits(self, limits):
        self.program.set_limits(limits)


class ReferenceBackend(ControllerBackend):
    """Pinocchio's pass, :meth:`ConstraintStack.evaluate` and :class:`uk_controller.core.uk.ServoSolver`
    (the SVD pseudo-inverse); ``solver`` the ServoSolver, ``B`` the constant actuator columns (None when
    they depend on q), ``gains`` the per-row Baumgarte gains."""

    name = 'reference'

    def __init__(self, core, gains):
        super().__init__(core)
        n, p, mp, ms = core.n, core.p, core.passive.m, core.servo_all.m
        red = core.redundancy
        self.solver = uk.ServoSolver(
            n,
            p,
            mp,
            ms,
            rcond=core.rcond,
            secondary=red.secondary,
            one_sided=red.one_sided,
            internal_effort=red.internal_effort,
            **core.solver_options,
        )
        self.saturated, self.info = self.solver.saturated, self.solver.info
        actuators = core.setup.actuators
        self.B = actuators.matrix(core.model).copy() if actuators.constant else None
        # row-major, as the solver's warm-up compiled it (a column-major copy would compile a second version)
        self.gains = np.array(gains, dtype=float, order='C')
        self._zero_n = np.zeros(n)
        self._bounds = None if core.joint_limits is None else (np.zeros(n), np.zeros(n))
        # the dissipation over the period (core/implicit_dissipation.py): M + dt D, h + dF, a scratch
        self._period = None if core.dissipation is None else (np.zeros((n, n)), np.zeros(n), np.zeros(n))

    def set_gains(self, gains):
        self.gains = np.array(gains, dtype=float, order='C')

    def run(self, q, qd, t):
        if self._non_finite_state(q, qd, t):
            return
        core = self.core
        model = core.model
        model.compute(q, qd)
        passive = core.passive.evaluate(model, q, qd, t) if core.passive.m else core.passive.rows
        servo = core.servo_all.evaluate(model, q, qd, t)
        B = self.B if self.B is not None else core.setup.actuators.matrix(model)
        bounds = self._bounds
        if bounds is not None:
            core.joint_limits.bounds(q, qd, *bounds)
        M, h, period = model.M_lower, model.h, self._period
        if period is not None:  # the dissipation over the period: the solve on M + dt D
            M = period_mass(M, core.dissipation, out=period[0])
        try:
            self._solve(M, h, B, servo, passive, bounds)
            if period is not None and core.dissipation.has_friction and self.info[INFO_STATUS] == Status.OK:
                # once more with the friction's change up to the speed the first solve asks for
                h = np.add(h, friction_change(qd, self.solver.qdd, core.dissipation, *period[1:]), out=period[1])
                self._solve(M, h, B, servo, passive, bounds)
        except uk.NotPositiveDefiniteError:
            return  # info[INFO_STATUS] says so
        self.effort[:] = self.solver.effort
        self._gather_rows(passive, servo)

    def _solve(self, M, h, B, servo, passive, bounds):
        self.solver.solve_rows(
            M,
            self._zero_n,
            h,
            B,
            servo.A,
            servo.b,
            servo.phi,
            servo.phidot,
            passive.A,
            passive.b,
            passive.phi,
            passive.phidot,
            self.gains,
            self.core.effort_limits,
            bounds,
        )


class GeneralBackend(ControllerBackend):
    """:func:`uk_controller.core.uk.servo_control` with the configured pseudo-inverse (any ``control.pinv``),
    the right-hand sides stabilized by :meth:`Baumgarte.stabilized_rhs`, the joint-limit stage by the NumPy
    reference (:func:`uk_controller.core.joint_limits.bounded_stage`)."""

    name = 'general'

    def __init__(self, core, pinv):
        super().__init__(core)
        self.pinv = pinv
        self._Q = np.zeros(core.n)
        self._bp = np.zeros(core.passive.m)
        self._bs = np.zeros(core.servo.m)
        self.metric = 'joint' if core.solver_options['joint_metric'] else 'mass'
        self._bounds = (np.zeros(core.n), np.zeros(core.n))
        n = core.n
        self._period = None if core.dissipation is None else (np.zeros((n, n)), np.zeros(n), np.zeros(n))
        # the correction speed of each posture row (the joint-limit rows, last, are not capped)
        red = core.redundancy
        self._posture_speeds = np.full(red.secondary, core.solver_options['posture_speed'])
        if red.one_sided:
            self._posture_speeds[red.secondary - red.one_sided :] = np.inf

    def run(self, q, qd, t):
        if self._non_finite_state(q, qd, t):
            return
        core = self.core
        model = core.model
        stab = core.stabilization
        model.compute(q, qd)
        passive = core.passive.evaluate(model, q, qd, t) if core.passive.m else None
        servo = core.servo.evaluate(model, q, qd, t)
        np.negative(model.h, out=self._Q)
        B = core.setup.actuators.matrix(model)
        bs = stab.stabilized_rhs(servo, out=self._bs, speed=core.solver_options['task_speed'])
        red = core.redundancy
        extra: dict = {}
        stage = core.joint_limits
        if stage is not None:
            lo, hi = stage.bounds(q, qd, *self._bounds)
            extra['bounded'] = (core.effort_limits, lo, hi, stage.weight, stage.eps, *stage.singular)
        if red.active:
            extra.update(
                posture_accel=self._posture_accel(model, q, qd, t) if red.secondary else None,
                internal_effort=red.internal_effort,
            )
        if passive is not None:
            extra.update(A_passive=passive.A, b_passive=stab.stabilized_rhs(passive, out=self._bp))
        M, period = model.M, self._period
        if period is not None:  # the dissipation over the period (core/implicit_dissipation.py): M + dt D
            M = period_mass(M, core.dissipation, out=period[0])

        def solve():
            return uk.servo_control(
                M,
                self._Q,
                B,
                servo.A,
                bs,
                rcond=core.rcond,
                pinv=self.pinv,
                on_infeasible='report',
                metric=self.metric,
                **extra,
            )

        res = solve()
        if period is not None and core.dissipation.has_friction and np.isfinite(res.qdd).all():
            # once more with the friction's change up to the speed the first solve asks for
            self._Q -= friction_change(qd, res.qdd, core.dissipation, *period[1:])
            res = solve()
        info_null = (res.null_motion, res.null_internal)
        limits = core.effort_limits
        np.greater(np.abs(res.u), limits, out=self.saturated)
        if stage is not None:  # held at its limit by the bounded stage
            self.saturated |= np.abs(res.u) >= limits * (1.0 - 1e-12)
        if self.saturated.any():
            np.clip(res.u, -limits, limits, out=self.effort)
        else:
            self.effort[:] = res.u
        info = self.info
        info[INFO_STATUS] = (
            Status.OK
            if math.isfinite(self.effort @ self.effort) or np.isfinite(self.effort).all()
            else Status.NON_FINITE_EFFORT
        )
        info[INFO_RANK], info[INFO_CONDITION], info[INFO_PASSIVE_RANK] = res.rank, res.condition, res.passive_rank
        info[INFO_RESIDUAL], info[INFO_CONSISTENT] = res.servo_residual, 1.0 if res.consistent else 0.0
        if red.active:
            info[codes.INFO_NULL_MOTION], info[codes.INFO_NULL_INTERNAL] = info_null
        info[INFO_LIMITED] = info[codes.INFO_LIMIT_ITERATIONS] = info[codes.INFO_LIMIT_VIOLATION] = 0.0
        if res.limited is not None:
            info[codes.INFO_LIMIT_ITERATIONS], info[codes.INFO_LIMIT_VIOLATION], exact = res.limited
            info[INFO_LIMITED] = 1.0 if exact else 0.0
        self._gather_rows(passive, servo)

    def _posture_accel(self, model, q, qd, t):
        """``a_p = sum_i A_i^T (b_i - kd_i phi'_i - kp_i phi_i)`` over the posture rows (one-sided rows only
        where phi < 0; :class:`uk_controller.core.uk.ServoSolver`)."""
        red = self.core.redundancy
        rows = self.core.posture_rows.evaluate(model, q, qd, t)
        rhs = rows.b - correction(red.gains[0], red.gains[1], rows.phi, rows.phidot, self._posture_speeds)
        if red.one_sided:
            tail = rhs[red.secondary - red.one_sided :]
            tail[rows.phi[red.secondary - red.one_sided :] >= 0.0] = 0.0
        return rows.A.T @ rhs


# ----------------------------------------------------------------------------- the controller

#: the task rows' correction speed when ``stabilization.max_speed`` is not set and the gains are well damped
DEFAULT_CORRECTION_SPEED = 1.0


def correction_speed(setting, stabilization):
    """The cap of the saturated Baumgarte term (:func:`uk_controller.core.baumgarte.correction`) on the task
    rows: ``stabilization.max_speed`` when set (0: no cap); unset, DEFAULT_CORRECTION_SPEED when every
    row's error equation is damped at least at ratio 0.5 (``kd >= sqrt(kp)``: the critical default and
    the seeds' squared form with alpha = beta), else no cap: lightly damped gains such as seed 000's
    (alpha 0.5, beta 200: ratio 0.018) oscillate at their own frequency, ``kp phi / kd`` is no approach
    speed there, and the seeds' linear error equations are reproduced exactly."""
    if setting is not None:
        return float(setting) if setting > 0.0 else math.inf
    kd = np.atleast_1d(np.asarray(stabilization.kd, dtype=float))
    kp = np.atleast_1d(np.asarray(stabilization.kp, dtype=float))
    kd, kp = np.broadcast_arrays(kd, kp)
    damped = (kd > 0.0) & (kd * kd >= kp)
    return DEFAULT_CORRECTION_SPEED if damped.all() else math.inf


class ControllerCore:
    """Constraint-following servo controller for one robot setup.

    ``backend`` ('auto', 'compiled', 'reference', 'general'; module docstring) is chosen here once:
    'auto' = compiled when every row has a compiled form and numba is installed, else reference, and
    general whenever ``pinv`` is not 'svd'. The chosen object is :attr:`backend` (``backend.name``).
    ``_approach=False`` builds it without the joint-space approach (the approach's own controller); ``_start``
    is the start the approach is decided from (default ``setup.q0``; :meth:`prepare`), ``_decided`` that
    decision when made already (``approach.decide``'s plan and text).
    """

    def __init__(self, setup, *, backend='auto', _approach=True, _start=None, _decided=None):
        # every value from the setup's resolved settings (uk_controller.settings.resolve): a variant is a
        # setup resolved with overrides, so the cross-key rules see the values that run
        control = setup.settings.control
        self.setup = setup
        self.model = setup.controller_model()  # setup.model, without friction if not compensated
        self.joint_names = list(setup.joint_names)
        self.actuator_names = list(setup.actuators.names)
        self.n = self.model.n
        self.p = setup.actuators.p
        self.passive, self.servo = setup.passive, setup.servo
        self.rcond = float(control.rcond)
        self.backend_choice = backend
        # a far target reached in joint space first (uk_controller.control.approach): decided and planned from
        # the planned start, again from the measured one when it differs (prepare)
        plan = None
        self.planned_start = np.array(setup.q0 if _start is None else _start, dtype=float)
        self._may_plan = bool(_approach and setup.settings.approach.mode != 'off' and setup.servo.m)
        self.approach_decision = ''
        if _decided is not None:
            plan, self.approach_decision = _decided
        elif _approach:
            plan, self.approach_decision = self._decide(self.planned_start)
        # the task's null space: posture rows after the task rows (uk_controller.control.redundancy); after an
        # approach the posture is where it ended (unless posture.reference says otherwise)
        self.redundancy = _redundancy.build(setup, self.rcond, reference=None if plan is None else plan.q_goal)
        red = self.redundancy
        self.posture_rows = ConstraintStack(red.terms, self.model.n)
        self.servo_all = (
            ConstraintStack(list(setup.servo.terms) + red.terms, self.model.n) if red.terms else setup.servo
        )
        self._q_ref = red.q_ref.copy()
        self.rate = float(control.rate)
        if not self.rate > 0:
            raise ValueError(f'control.rate must be positive, got {self.rate}')
        self.dt = 1.0 / self.rate
        # the joints' damping and friction taken over the period (core/implicit_dissipation.py); None: neither
        jd = self.model.joint_dynamics
        self.dissipation = (
            None if jd is None else period_dissipation(self.dt, jd.damping, jd.friction, jd.friction_velocity)
        )
        method = control.pinv
        pinv_fn = get_pinv(method)
        if method == 'damped':
            damping = control.damping
            pinv_fn = (lambda f: lambda A, rcond: f(A, rcond, damping))(pinv_fn)
        self.pinv_method = method
        self.safe_effort = control.safe_effort
        self.effort_limits = np.broadcast_to(np.asarray(setup.actuators.effort_limits, dtype=float), (self.p,)).copy()
        self.t0 = 0.0
        self._last_effort = np.zeros(self.p)
        self._m, self._mp, self._ms = self.passive.m + self.servo.m, self.passive.m, self.servo.m
        self._shape = (self.n,)
        self.backend: ControllerBackend = None  # type: ignore[assignment]  # (_choose_backend, below)
        self.stabilization = setup.stabilization
        settings = setup.settings
        # the saturated Baumgarte term (task and posture rows) and the null-space metric, for every backend
        self.solver_options = {
            'task_speed': correction_speed(settings.stabilization.max_speed, self.stabilization),
            'posture_speed': settings.posture.max_speed or math.inf,
            'joint_metric': settings.posture.metric == 'joint',
            'joint_limits': joint_limit_stage(setup, self.rate),
        }
        self.joint_limits = self.solver_options['joint_limits']
        self.backend = self._choose_backend(backend, method, pinv_fn)
        b = self.backend
        # what _solved() reads, unpacked in one go: backend.call (the function and its three bound arguments) and
        # the bound tolist of info[:6]; what step() reads: the copy methods of the outputs block (phi | phi' |
        # effort, each part `b.rows` long: a compiled program keeps its posture rows after the task's) and of the
        # saturated flags, the slices of the reported parts in the copy (task_error's None without passive rows:
        # it is phi itself)
        m, mb = self._m, b.rows
        self._call = (*b.call, b.info[:_INFO_READ].tolist)
        self._hot = (
            b.outputs.copy,
            b.saturated.copy,
            slice(2 * mb, 2 * mb + self.p),
            slice(0, m),
            slice(mb, mb + m),
            slice(self._mp, m) if self._mp else None,
        )
        # With the null-space term the posture error |q - q_ref|: a compiled program's first n posture rows are
        # phi_j = q_j - q_ref_j (unit rows, redundancy.build), the same floats as np.subtract(q, q_ref): the view
        # reads them from the live block instead of subtracting again; the NumPy backends subtract in
        # _solved (into a scratch: the step allocates no vector). _null_hot: info[_INFO_NULL]'s tolist (the
        # null-space dimensions), None without the term (the dimensions at the initial state hold)
        posture = b.outputs[m : m + self.n] if red.terms and b.name == 'compiled' and mb >= m + self.n else None
        self._subtract_posture = bool(red.active and red.terms and posture is None)
        self._posture_scratch = np.empty(self.n)
        self._null_hot = b.info[_INFO_NULL].tolist if red.active else None
        self._null_initial = (red.null_motion, red.null_internal)
        self._view = StepView(b, m, self._mp, self.p, posture, None if red.active else self._null_initial)
        self._warm_up()
        self.approach = None if plan is None else _approach_mod.Approach(self, plan, ControllerCore)
        # built, the controller starts where it was planned from; reset() (a run's start, a re-arm) has the
        # next step or prepare() check the start against the one measured
        self.prepared = True
        self._bind_steps()

    def _bind_steps(self):
        """step and step_view go through the approach until the start is checked (:meth:`prepare`) and while
        the approach runs; otherwise they are the class's own."""
        if not self.prepared or self.approach is not None:
            self.step, self.step_view = self._approach_step, self._approach_step_view  # type: ignore[method-assign]
        else:
            self.__dict__.pop('step', None)
            self.__dict__.pop('step_view', None)

    def prepare(self, q):
        """Check the start the approach was decided from against the measured start `q` before the first
        step: farther than ``approach.START_TOLERANCE`` on some coordinate, the decision (``approach.mode:
        auto``) and the inverse kinematics are made again from `q` (with a plan the controller is rebuilt:
        seconds, so a caller with a deadline calls this before its first control period; after
        :meth:`reset` the first step calls it otherwise). Then the approach's own controller is built from
        `q`. Returns the decision's text (:attr:`approach_decision`)."""
        q = np.array(q, dtype=float)
        if not self._may_plan:
            return self.approach_decision
        self.prepared = False  # checked now, whatever came before
        if q.shape != self.planned_start.shape or not np.isfinite(q).all():
            self._bind_steps()  # a bad state is the step's to refuse; the next one is checked
            return self.approach_decision
        if np.abs(q - self.planned_start).max() > _approach_mod.START_TOLERANCE:
            self._replan(q)
        if self.approach is not None:
            self.approach.prepare(q)
        self.prepared = True
        self._bind_steps()
        return self.approach_decision

    def _decide(self, q):
        """``approach.decide`` at the start `q`: (plan or None, text)."""
        setup = self.setup
        return _approach_mod.decide(
            setup,
            self.model,
            joint_limit_stage(setup, float(setup.settings.control.rate)),
            q,
            correction_speed(setup.settings.stabilization.max_speed, setup.stabilization),
        )

    def _replan(self, q):
        """The approach decided again at the start `q`. Without a plan before or now only the text changes;
        else the controller is rebuilt (the approach planned there, the posture reference its goal), keeping
        what was set on it since: settings applied, gains, safe effort, effort limits, the clock and the held
        effort."""
        decided = self._decide(q)
        if decided[0] is None and self.approach is None:
            self.planned_start, self.approach_decision = q, decided[1]
            return
        applied, gains, safe = self._applied, self._stabilization, self._safe_effort
        limits, t0, held = self.effort_limits.copy(), self.t0, self._last_effort.copy()
        self.__init__(self.setup, backend=self.backend_choice, _start=q, _decided=decided)  # type: ignore[misc]
        self._applied, self.stabilization, self.safe_effort = applied, gains, safe
        self.set_effort_limits(limits)
        self.t0 = t0
        self._last_effort[:] = held

    def _approach_step(self, q, qd, t):
        return self._through_approach(ControllerCore.step, q, qd, t)

    def _approach_step_view(self, q, qd, t):
        return self._through_approach(ControllerCore.step_view, q, qd, t)

    def _through_approach(self, own, q, qd, t):
        """The step at (q, q', t): the start checked first when it was not (:meth:`prepare`: planned inside
        this step when the caller did not prepare), then the approach's blended step while it runs, else the
        class's own step `own` (step or step_view)."""
        if not self.prepared:
            self.prepare(q)
        approach = self.approach
        if approach is None or approach.done:
            return own(self, q, qd, t)
        return approach.step(self._plain_step, q, qd, t)

    def _plain_step(self, q, qd, t):
        return ControllerCore.step(self, q, qd, t)

    @property
    def in_approach(self):
        """True until the start is checked (:meth:`prepare`) and while the joint-space approach or its hand-over
        runs: a step then also checks the start or runs the approach's controller, so a caller's compiled loop
        must leave these periods to :meth:`step`."""
        return not self.prepared or (self.approach is not None and not self.approach.done)

    #: the Settings applied by :meth:`apply_settings` (None: the setup's own, ``setup.settings``)
    _applied: Settings | None = None
    #: the joint-space approach (uk_controller.control.approach.Approach), None when none is planned
    #: (:attr:`approach_decision` says why)
    approach: _approach_mod.Approach | None = None

    @property
    def settings(self) -> Settings:
        """The resolved setup this controller runs on now: the setup's, or the last one applied."""
        return self._applied if self._applied is not None else self.setup.settings

    def apply_settings(self, settings: Settings) -> list[str]:
        """Take a new resolved setup while running (live parameters: ``ros2 param set`` resolves one
        more override and hands the result here). Only live keys may differ from :attr:`settings`
        (ConfigError naming the first that does not); a changed ``control.safe_effort`` and changed
        ``stabilization`` gains are taken, the gains checked against the rows before anything changes.
        Returns the changed keys."""
        changed = refuse_fixed(self.settings, settings, source=settings.file)
        gains = None
        if any(key.startswith('stabilization.') for key in changed):
            gains = stabilization_gains(settings.stabilization, settings.file)
            uk.row_gains(gains, self.passive.rows.order, self.servo.rows.order)  # one per row: ValueError
        if gains is not None:
            self.stabilization = gains
        if 'control.safe_effort' in changed:
            self.safe_effort = settings.control.safe_effort
        self._applied = settings
        return changed

    def set_effort_limits(self, limits):
        """Clip the efforts to `limits` (p,) from now on, e.g. the limits the motors enforce, read from
        the devices at connect (uk_controller.hardware.calibration.HardwareConfig.apply_device_limits):
        a step beyond them is reported ``saturated`` with the clipped effort."""
        self.effort_limits[:] = np.broadcast_to(np.asarray(limits, dtype=float), (self.p,))
        self.backend.set_limits(self.effort_limits)

    def _choose_backend(self, backend, method, pinv_fn):
        if backend not in BACKENDS:
            raise ValueError(f'backend must be one of {BACKENDS}, got {backend!r}')
        if method != 'svd':
            if backend not in ('auto', 'general'):
                raise ValueError(
                    f"backend {backend!r} needs control.pinv 'svd' (got {method!r}); "
                    "other pseudo-inverses run on backend 'general'"
                )
            return GeneralBackend(self, pinv_fn)
        if backend == 'general':
            return GeneralBackend(self, pinv_fn)
        if backend in ('auto', 'compiled'):
            compiled = CompiledBackend.build(self, self._gains)
            if compiled is not None:
                return compiled
            if backend == 'compiled':
                raise ValueError(
                    'backend compiled not available: numba missing, or a constraint or trajectory '
                    'without a compiled form'
                )
        return ReferenceBackend(self, self._gains)

    def _warm_up(self):
        """One solve at the initial state so that compiled kernels load (or compile) now, not in the
        first control period (the compiled backend already ran its program when it was built); errors
        are left for the real step to report."""
        if self.backend.name == 'compiled':
            return
        try:
            self.backend.run(np.array(self.setup.q0, dtype=float), np.array(self.setup.qd0, dtype=float), 0.0)
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
        self._gains = uk.row_gains(value, self.passive.rows.order, self.servo.rows.order)
        if self.redundancy.terms:
            self._gains = np.hstack((self._gains, self.redundancy.gains))
        self._stabilization = value
        if self.backend is not None:
            self.backend.set_gains(self._gains)

    @property
    def view(self):
        """The :class:`StepView` that :meth:`step_view` returns (one object per controller)."""
        return self._view

    @property
    def held_effort(self):
        """The last good effort (what ``safe_effort: hold`` returns), a copy."""
        return self._last_effort.copy()

    @classmethod
    def from_config(cls, name_or_path, overrides=None, *, backend='auto'):
        """Build from a robot name (``config/<name>.yaml``) or a YAML path with dotted `overrides`
        (``{'control.rate': 500.0}``), resolved and checked as every command resolves them.

        The controller's model is the description as written: ``simulation.mass_scale`` is the plant's
        model mismatch and never scales the controller.
        """
        from ..robots import load_robot

        return cls(load_robot(name_or_path, overrides), backend=backend)

    # ------------------------------------------------------------------ control

    def reset(self, t0=0.0):
        """Restart the trajectory clock at time t0 and forget the held effort."""
        self.t0 = float(t0)
        self._last_effort[:] = 0.0
        if self.approach is not None:  # the next step starts the approach again from where the robot is
            self.approach.reset()
        if self._may_plan:  # and the start is checked again (prepare): a re-arm plans from what it measures
            self.prepared = False
            self._bind_steps()

    def remember_effort(self, effort):
        """Record `effort` as the last good one (what ``safe_effort: hold`` returns), for callers that
        computed it with this controller's program outside :meth:`step` (sim.compiled_loop)."""
        self._last_effort[:] = effort

    def safe(self, reason):
        """The configured safe effort (zero, or the last good effort held) for the caller's `reason`
        (status SAFE_REQUESTED: stale state, stopped, ...)."""
        return self._refuse(Status.SAFE_REQUESTED, None, reason=reason)

    def _refuse(self, status, start, **details):
        """The safe-effort StepResult of `status` (its reason from uk_controller.control.status)."""
        effort = self._last_effort.copy() if self._hold else np.zeros(self.p)
        nan = np.full(self._m, np.nan)
        return StepResult(
            effort,
            False,
            status_reason(status, **details),
            nan,
            nan.copy(),
            np.full(self._ms, np.nan),
            0,
            float('nan'),
            np.zeros(self.p, dtype=bool),
            0.0 if start is None else time.perf_counter() - start,
            0,
            status,
        )

    def _solved(self, q, qd, t, start):
        """Check the state, run the backend; when it solved, ``info[:6]`` as a list (status, rank, condition,
        passive rank, residual, consistent; the solution in the backend's block, ``safe_effort: hold``
        remembers it), else the refusing StepResult. Shared by :meth:`step` and :meth:`step_view`.

        Anything but a 1-D float64 ndarray of length n with 8-byte strides is converted or refused (the
        compiled entry trusts the types it was compiled for); strides == (8,) already means 1-D, so len()
        checks the shape without building its tuple."""
        n = self.n
        if (
            type(q) is not _ndarray
            or type(qd) is not _ndarray
            or q.dtype is not _F64
            or qd.dtype is not _F64
            or q.strides != _C1
            or qd.strides != _C1
            or len(q) != n
            or len(qd) != n
        ):
            q, qd = np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(qd, dtype=float)
            if q.shape != self._shape or qd.shape != self._shape:
                return self._refuse(Status.BAD_STATE_SHAPE, start, q=q.shape, qd=qd.shape, n=n)
        call, a1, a2, a3, info_list = self._call
        try:
            call(q, qd, float(t) - self.t0, a1, a2, a3)  # a non-finite q, q' or t gives NON_FINITE_STATE
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            return self._refuse(Status.NUMERICAL_ERROR, start, error=exc)
        head = info_list()
        if head[0]:  # not Status.OK (0)
            return self._refuse(Status(int(head[0])), start)
        if self._hold:
            self._last_effort[:] = self._view.effort
        if self._subtract_posture:  # NumPy backends with the posture term: |q - q_ref| now
            d = np.subtract(q, self._q_ref, out=self._posture_scratch)
            self._view.posture_value = math.sqrt(d.dot(d))
        return head

    def step(self, q, qd, t):
        """Efforts for the measured state (q, q') at time t (seconds): the template over the backend.

        The result owns its arrays (views of one copy of the backend's block): keep it as long as you like.
        A loop that only reads this period's result can call :meth:`step_view` instead, which copies
        nothing. Locals bound once in ``_hot``, the StepResult filled slot by slot (see below)."""
        start = _clock()
        head = self._solved(q, qd, t, start)
        if type(head) is not list:
            return head  # refused
        copy_outputs, copy_saturated, effort_part, phi_part, phidot_part, task_part = self._hot
        code, rank, condition, passive_rank, residual, consistent = head
        outputs = copy_outputs()  # one copy; the result's arrays are views of it
        if rank >= 1 and consistent:  # _status's last case, without the call on the common path
            status, reason = _OK, ''
        else:
            status, reason = _status(rank, consistent, residual, self._view._info[INFO_LIMITED])
        null = self._null_hot
        if null is None:  # no null-space term: the dimensions at the initial state
            posture_error = math.nan
            null_motion, null_internal = self._null_initial
        else:
            null_motion, null_internal = null()
            null_motion, null_internal = int(null_motion), int(null_internal)
            posture_error = self._view.posture_error
        phi = outputs[phi_part]
        # StepResult's own __init__ (a type call with 16 arguments) costs about twice these slot stores; every
        # field is set (test_controller_step.py::test_compiled_step_result_sets_every_field_like_the_reference)
        r = _new(StepResult)
        r.effort = outputs[effort_part]
        r.ok = True
        r.reason = reason
        r.phi = phi
        r.phidot = outputs[phidot_part]
        r.task_error = phi if task_part is None else outputs[task_part]  # no passive rows: phi is the task's
        r.rank = int(rank)
        r.condition = condition
        r.saturated = copy_saturated()
        r.passive_rank = int(passive_rank)
        r.status = status
        r.residual = residual
        r.posture_error = posture_error
        r.null_motion = null_motion
        r.null_internal = null_internal
        r.compute_time = _clock() - start
        return r

    def step_view(self, q, qd, t):
        """:meth:`step` without its copies: the result is :attr:`view`, a :class:`StepView` of the backend's
        own block, **valid until this controller's next step** (it then shows the next step's numbers), or
        the refusing StepResult (``ok`` False), which is the caller's.

        For a control loop that uses this period's efforts and lets them go (the serial runner, the ROS node):
        no array is allocated and no field is computed before it is read. The numbers are those :meth:`step` returns for
        the same call (test/test_controller_step.py); ``view.copy()`` gives them as a StepResult to keep."""
        start = _clock()
        head = self._solved(q, qd, t, start)
        if type(head) is not list:
            return head  # refused
        view = self._view
        view.compute_time = _clock() - start
        return view


def _status(rank, consistent, residual, limited=0.0):
    """(Status, reason) of a solved step from its rank and consistency (control/status.py); `limited`:
    the joint-limit stage replaced the unbounded effort (info[INFO_LIMITED])."""
    if rank < 1:
        return _NOT_CONTROLLABLE, _NOT_CONTROLLABLE_REASON
    if not consistent:
        if limited:
            return _LIMITED, status_reason(_LIMITED, residual=residual)
        return _INCONSISTENT, status_reason(_INCONSISTENT, residual=residual)
    return _OK, ''


class StepView:
    """The result of :meth:`ControllerCore.step_view`: the fields of :class:`StepResult`, read where the
    backend left them. ``effort``, ``phi``, ``phidot``, ``task_error`` and ``saturated`` are views of the
    backend's block; the scalars are computed from its info when read. Valid until the controller's next
    step; :meth:`copy` keeps them. ``ok`` is True (a refused step returns a StepResult instead)."""

    __slots__ = (
        'effort',
        'phi',
        'phidot',
        'task_error',
        'saturated',
        'compute_time',
        'posture_value',
        '_info',
        '_posture',
        '_null_initial',
    )
    ok = True

    def __init__(self, backend, m, mp, p, posture, null_initial):
        out, mb = backend.outputs, backend.rows
        self.effort, self.phi, self.phidot = out[2 * mb : 2 * mb + p], out[:m], out[mb : mb + m]
        self.task_error = out[mp:m]
        self.saturated = backend.saturated
        self.compute_time = 0.0
        self.posture_value = math.nan  # |q - q_ref| when no posture block can be read (NumPy backends)
        self._info, self._posture, self._null_initial = backend.info, posture, null_initial

    rank = property(lambda self: int(self._info[INFO_RANK]), doc='rank of C B_bar')
    condition = property(lambda self: float(self._info[INFO_CONDITION]), doc='condition number of C B_bar')
    passive_rank = property(lambda self: int(self._info[INFO_PASSIVE_RANK]), doc='rank of A_p M^-1 A_p^T')
    residual = property(lambda self: float(self._info[INFO_RESIDUAL]), doc='|A_s q\'\' - b_s|')

    @property
    def status(self):
        return _status(self.rank, self._info[INFO_CONSISTENT], self.residual, self._info[INFO_LIMITED])[0]

    @property
    def reason(self):
        return _status(self.rank, self._info[INFO_CONSISTENT], self.residual, self._info[INFO_LIMITED])[1]

    @property
    def posture_error(self):
        """|q - q_ref|: on the compiled backend the posture rows' phi (q - q_ref, the same floats)."""
        posture = self._posture
        # d.dot(d): the same DOUBLE_dot as d @ d (NumPy's matmul calls it for vector @ vector), the same bits
        return math.sqrt(posture.dot(posture)) if posture is not None else self.posture_value

    @property
    def null_motion(self):
        return self._null_initial[0] if self._null_initial else int(self._info[codes.INFO_NULL_MOTION])

    @property
    def null_internal(self):
        return self._null_initial[1] if self._null_initial else int(self._info[codes.INFO_NULL_INTERNAL])

    def copy(self):
        """The numbers as a :class:`StepResult` that owns its arrays."""
        phi = self.phi.copy()
        return StepResult(
            self.effort.copy(),
            True,
            self.reason,
            phi,
            self.phidot.copy(),
            self.task_error.copy() if self.task_error.size != phi.size else phi,
            self.rank,
            self.condition,
            self.saturated.copy(),
            self.compute_time,
            self.passive_rank,
            self.status,
            self.residual,
            self.posture_error,
            self.null_motion,
            self.null_internal,
        )

    def __repr__(self):
        return (
            f'StepView(effort={self.effort!r}, status={self.status.name}, rank={self.rank}, '
            f'condition={self.condition:.3g})'
        )


__all__ = [
    'ControllerCore',
    'StepResult',
    'StepView',
    'ControllerBackend',
    'CompiledBackend',
    'ReferenceBackend',
    'GeneralBackend',
    'SAFE_EFFORTS',
    'BACKENDS',
]
