"""A far target reached in joint space first: inverse kinematics once, a re-timed joint approach, hand-over.

The task rows are followed by descending their error from the start (Chen's servo constraints with the
saturated Baumgarte term). That descent is local: from some starts the path runs into a joint limit or a
singularity and stops in a local minimum of the task error although the target is reachable inside the
limits on another branch of the inverse kinematics. The standard remedy (Siciliano, Sciavicco, Villani,
Oriolo, *Robotics: Modelling, Planning and Control*, Springer 2009: inverse kinematics ch. 2.12 and 3.7,
joint-space trajectories ch. 4.2) is to solve the inverse kinematics of the target once and move there in
joint space:

1. **Inverse kinematics, bounded** (:func:`solve_ik`). With ``r(q) = (phi_p(q), phi_s(q, t_0))`` the
   closure rows and the task rows at the task's start time (a moving target: where its trajectory starts),
   solve ``min |r(q)|^2  s.t.  q_lo <= q <= q_hi`` by ``scipy.optimize.least_squares`` (trust-region
   reflective, bounds kept), the Jacobian ``dr/dq = A`` being the rows' own ``A`` (a holonomic row at fixed
   t has ``phi' = A q'``). Started from the start and from ``approach.restarts`` seeded draws inside the
   bounds (only the joints the task depends on move); of the solutions with ``|r| <= approach.tolerance``
   the one reached soonest (the shortest re-timed approach below). The bounds are the position limits the
   control law holds (``limits.*``: the description's, shrunk by ``limits.margin``).
2. **A joint-space approach** (:func:`approach_duration`): per moving joint ``j`` the quintic rest-to-rest
   segment ``q_j(t) = q_j0 + (q_j* - q_j0) s(t/T)``, ``s(x) = 10 x^3 - 15 x^4 + 6 x^5``, whose largest speed
   is ``15/8 |dq_j| / T`` and largest acceleration ``10/sqrt(3) |dq_j| / T^2``; T is the smallest duration
   with both at most ``approach.speed_scale`` of the joint's speed limit and of ``limits.deceleration``.
   The path is the straight segment between two configurations inside the box of limits, so it stays
   inside. It is followed as servo rows ``q_j - q_j(t) = 0`` (``joint_linear`` rows with a ``polynomial``
   trajectory: seed 004's servo constraints on the joint coordinates) by a second controller with the same
   model, closures, actuators, effort and joint limits.
3. **Hand-over** over ``approach.blend_time`` from the end of the segment: the effort is
   ``u = (1 - w) u_joint + w u_task`` with ``w = s(tau / blend_time)`` (C2, zero slope at both ends), both
   efforts within their limits, so their blend is too and the effort has no jump. The task's clock starts
   at the hand-over (a moving target starts where the approach ended). Without ``posture.reference`` the
   posture of the null space is the inverse kinematics' solution, where the arm already is.

When (``approach.mode``, :func:`decide`): ``on`` always, ``off`` never, ``auto`` (the default) only where the
task law alone leaves its linear range at the start. The task rows' Baumgarte term is saturated
(:func:`uk_controller.core.baumgarte.correction`): ``kd phi' + kd sat_v(kp phi / kd)``, so a row whose
``|kp phi| > kd v`` at the start (``v`` the correction speed, ``stabilization.max_speed``) is approached at
the capped speed along the local descent, the case a joint limit or a singularity can stop short of; a start
with every row inside ``|phi| <= kd v / kp`` is the linear error equation's and is left to it. ``auto`` also
needs the approach to apply (position-level task rows and no closure through the task's joints) and the
inverse kinematics to solve the task within the limits (a target out of reach is left to the task law). The
decision is made at the planned start ``robot.initial_position`` and made again, with the inverse
kinematics, from the measured start when that differs (:data:`START_TOLERANCE`;
``ControllerCore.prepare``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..constraints import ConstraintStack
from ..constraints.terms import JointLinear
from ..constraints.trajectories import Quintic
from ..core.baumgarte import Baumgarte
from ..files.parameter_file import ConfigError

#: largest speed and acceleration of the quintic rest-to-rest segment over a unit step in unit time
QUINTIC_PEAK_SPEED = 15.0 / 8.0
QUINTIC_PEAK_ACCEL = 10.0 / math.sqrt(3.0)
#: a joint counts as one the task depends on when a row's derivative by it exceeds this
_COLUMN_TOL = 1e-12
#: a measured start farther than this from the planned one on some coordinate (rad or m) is planned again
START_TOLERANCE = 1e-3


def smoothstep(x):
    """``s(x) = 10 x^3 - 15 x^4 + 6 x^5`` clipped to [0, 1] (the quintic's normalised position)."""
    x = min(max(float(x), 0.0), 1.0)
    return x * x * x * (10.0 - 15.0 * x + 6.0 * x * x)


@dataclass
class IKResult:
    """The bounded inverse kinematics: ``q`` (the chosen solution), ``error`` ``|r(q)|``, ``converged`` (error
    within ``tolerance``), ``errors`` the error of every start tried, ``moving`` the joints it may move."""

    q: np.ndarray
    error: float
    converged: bool
    errors: list = field(default_factory=list)
    moving: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    tolerance: float = 0.0


def residual_functions(model, passive, servo, t=0.0):
    """``(r, dr)``: the closure and task rows' ``phi`` at (q, t) and their Jacobian ``A`` (module
    docstring), on private row buffers (the stacks' own are left alone)."""
    n = model.n
    zero = np.zeros(n)
    rows_p = passive.empty_rows() if passive.m else None
    rows_s = servo.empty_rows()
    last = {'q': None}

    def evaluate(q):
        q = np.asarray(q, dtype=float)
        if last['q'] is None or not np.array_equal(q, last['q']):
            model.compute(q, zero)
            if rows_p is not None:
                passive.evaluate(model, q, zero, t, out=rows_p)
            servo.evaluate(model, q, zero, t, out=rows_s)
            last['q'] = q.copy()

    def r(q):
        evaluate(q)
        return np.concatenate((rows_p.phi, rows_s.phi)) if rows_p is not None else rows_s.phi.copy()

    def dr(q):
        evaluate(q)
        return np.vstack((rows_p.A, rows_s.A)) if rows_p is not None else rows_s.A.copy()

    return r, dr


def task_joints(dr, points):
    """The joints some row depends on at any of `points` (a column of ``A`` not zero)."""
    out = None
    for q in points:
        used = np.abs(dr(q)).max(axis=0) > _COLUMN_TOL
        out = used if out is None else out | used
    return out


def nearest_turn(q, q0, lo, hi, revolute):
    """`q` with each `revolute` coordinate moved by whole turns (2 pi k: the same pose of every link) to the
    value inside [lo, hi] nearest to `q0`."""
    q = np.array(q, dtype=float)
    for j in np.nonzero(revolute)[0]:
        k = np.round((q0[j] - q[j]) / (2.0 * math.pi))
        for cand in (q[j] + 2.0 * math.pi * k, q[j] + 2.0 * math.pi * (k - 1), q[j] + 2.0 * math.pi * (k + 1)):
            if lo[j] <= cand <= hi[j] and abs(cand - q0[j]) < abs(q[j] - q0[j]):
                q[j] = cand
    return q


def solve_ik(r, dr, q0, lo, hi, *, restarts=8, tolerance=1e-8, seed=0, cost=None, revolute=None, moving=None):
    """Bounded least squares ``min |r(q)|^2``, ``lo <= q <= hi``, from `q0` and `restarts` seeded draws
    (module docstring, step 1). Only the joints `moving` move (default: those some row depends on; the
    others keep `q0`); a
    `revolute` joint's solution is taken the whole turns nearest to `q0` that stay in the bounds
    (:func:`nearest_turn`). `cost(q)` ranks the converged solutions (default: the largest joint move); the
    lowest wins, the start's own solution on a tie. Bounds may be infinite (a draw then spans q0 +- pi)."""
    from scipy.optimize import least_squares

    q0 = np.asarray(q0, dtype=float)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    start = np.clip(q0, lo, hi)
    rng = np.random.default_rng(seed)
    draw_lo = np.where(np.isfinite(lo), lo, start - math.pi)
    draw_hi = np.where(np.isfinite(hi), hi, start + math.pi)
    if moving is None:
        moving = task_joints(dr, [start, rng.uniform(draw_lo, draw_hi)])
    moving = np.asarray(moving, dtype=bool)
    if not moving.any():
        e = float(np.linalg.norm(r(start)))
        return IKResult(start, e, e <= tolerance, [e], moving, tolerance)
    idx = np.nonzero(moving)[0]
    cost = cost or (lambda q: float(np.abs(q - q0).max()))

    def full(x):
        q = start.copy()
        q[idx] = x
        return q

    starts = [start[idx]] + [rng.uniform(draw_lo[idx], draw_hi[idx]) for _ in range(int(restarts))]
    best, errors = None, []
    for x0 in starts:
        sol = least_squares(
            lambda x: r(full(x)),
            x0,
            jac=lambda x: dr(full(x))[:, idx],
            bounds=(lo[idx], hi[idx]),
            method='trf',
            xtol=1e-15,
            ftol=1e-15,
            gtol=1e-15,
            max_nfev=200,
        )
        q = np.clip(full(sol.x), lo, hi)
        if revolute is not None:
            q = nearest_turn(q, q0, lo, hi, revolute & moving)
        e = float(np.linalg.norm(r(q)))
        errors.append(e)
        key = (e > tolerance, cost(q) if e <= tolerance else e)
        if best is None or key < best[0]:
            best = (key, q, e)
    _, q, e = best
    return IKResult(q, e, e <= tolerance, errors, moving, tolerance)


def approach_duration(dq, speed, accel, minimum=0.0):
    """The shortest T of the quintic segment over `dq` (per joint) with peak speeds at most `speed` and peak
    accelerations at most `accel` (per joint or scalar; an infinite or non-positive limit does not bound)."""
    dq = np.abs(np.asarray(dq, dtype=float))
    speed = np.broadcast_to(np.asarray(speed, dtype=float), dq.shape)
    accel = np.broadcast_to(np.asarray(accel, dtype=float), dq.shape)
    t = float(minimum)
    ok_v = np.isfinite(speed) & (speed > 0.0)
    ok_a = np.isfinite(accel) & (accel > 0.0)
    if ok_v.any():
        t = max(t, float((QUINTIC_PEAK_SPEED * dq[ok_v] / speed[ok_v]).max()))
    if ok_a.any():
        t = max(t, float(np.sqrt(QUINTIC_PEAK_ACCEL * dq[ok_a] / accel[ok_a]).max()))
    return t


@dataclass
class ApproachPlan:
    """What the approach does: from ``q_start`` to ``q_goal`` (the IK solution) in ``duration`` seconds on
    the joints ``moving``, then the hand-over over ``blend``; ``ik`` the solve."""

    q_start: np.ndarray
    q_goal: np.ndarray
    duration: float
    blend: float
    moving: np.ndarray
    ik: IKResult
    speed: np.ndarray
    accel: float


def bounds_and_speeds(setup, stage):
    """Position bounds and speed limits the approach keeps: the joint-limit stage's (``limits.*``), or the
    description's when the stage is off."""
    if stage is not None:
        lower, upper, vmax = (np.array(v, dtype=float) for v in stage.table)
        return lower, upper, vmax, float(stage.brake)
    lower, upper = (np.array(v, dtype=float) for v in setup.model.position_limits)
    vmax = np.array(setup.model.velocity_limits, dtype=float)
    vmax = np.where(vmax > 0.0, vmax, np.inf)
    return lower, upper, vmax, float(setup.settings.limits.deceleration)


def revolute_joints(model):
    """Per coordinate of `model` (a RobotModel): True for a revolute joint (Pinocchio's R* joint models)."""
    pm = model.model
    return np.array(
        [pm.joints[pm.getJointId(name)].shortname().startswith('JointModelR') for name in model.joint_names]
    )


def _task_columns(setup, model, dr, lower, upper, q0):
    """``(moving, shared)``: the joints the task rows depend on, and those of them a closure row depends on."""
    mp = setup.passive.m
    finite = np.isfinite(lower) & np.isfinite(upper)
    points = [q0, np.where(finite, 0.5 * (np.where(finite, lower, 0.0) + np.where(finite, upper, 0.0)), q0)]
    moving = task_joints(lambda q: dr(q)[mp:], points)
    shared = moving & task_joints(lambda q: dr(q)[:mp], points) if mp else np.zeros_like(moving)
    return moving, shared


def not_applicable(setup, model, stage, q0):
    """Why the approach does not apply to `setup` (text), or '' when it does: the task rows must be
    position-level (order 2) and share no joint with a closure row (a straight joint-space segment would
    open the closure)."""
    if (np.asarray(setup.servo.rows.order) != 2).any():
        return 'the task has velocity-level rows (the inverse kinematics solves position-level rows)'
    lower, upper, _, _ = bounds_and_speeds(setup, stage)
    _, dr = residual_functions(model, setup.passive, setup.servo, 0.0)
    _, shared = _task_columns(setup, model, dr, lower, upper, np.asarray(q0, dtype=float))
    return _closure_reason(model, shared)


def _closure_reason(model, shared):
    """The text of a closure through the task joints `shared` (mask), '' for none."""
    if not shared.any():
        return ''
    names = ', '.join(name for name, s in zip(model.joint_names, shared) if s)
    return f'closure through {names}'


def start_saturation(setup, model, q, speed):
    """The task rows at `q` (the task's start time): ``(phi, reach, capped)``, per row its error, its linear
    range ``kd v / kp`` (inf where nothing caps it) and whether the saturated Baumgarte term caps its
    stiffness part there (``np.clip(kp phi, -kd v, kd v) != kp phi``, exactly as
    :func:`uk_controller.core.baumgarte.correction` saturates; `speed` is v)."""
    from ..core.uk import row_gains

    r, _ = residual_functions(model, setup.passive, setup.servo, 0.0)
    phi = np.asarray(r(np.asarray(q, dtype=float)), dtype=float)[setup.passive.m :]
    kd, kp = row_gains(setup.stabilization, setup.servo.rows.order)
    stiff = kp * phi
    positive = kd > 0.0
    cap = np.where(positive, np.where(positive, kd, 1.0) * speed, np.inf)
    capped = np.clip(stiff, -cap, cap) != stiff
    with np.errstate(divide='ignore', invalid='ignore'):
        reach = np.where(kp > 0.0, cap / np.where(kp > 0.0, kp, 1.0), np.inf)
    return phi, reach, capped


def decide(setup, model, stage, q, speed):
    """``(plan, text)``: the :class:`ApproachPlan` from the start `q` or None, and why, with the numbers
    (module docstring, "When"); `speed` the task rows' correction speed. ``on`` where the approach does not
    apply raises ConfigError (:func:`plan`). Under ``auto`` task rows that cannot be evaluated on the way (a
    user's callable row that raises or returns a non-finite value: a ValueError naming the row) leave the
    start to the task law, whose step reports them with the safe effort."""
    if setup.settings.approach.mode != 'auto':
        return _decide(setup, model, stage, q, speed)
    try:
        return _decide(setup, model, stage, q, speed)
    except ConfigError:
        raise
    except ValueError as exc:
        return None, f'not used: the task rows cannot be evaluated ({exc})'


def _decide(setup, model, stage, q, speed):
    mode = setup.settings.approach.mode
    if mode == 'off':
        return None, 'not used: approach.mode off'
    if not setup.servo.m:
        return None, 'not used: no task rows'
    q = np.asarray(q, dtype=float)
    if not np.isfinite(q).all():
        return None, 'not used: the start is not finite'
    why = ''
    if mode == 'auto':
        reason = not_applicable(setup, model, stage, q)
        if reason:
            return None, f'not applicable: {reason}'
        phi, reach, capped = start_saturation(setup, model, q, speed)
        with np.errstate(divide='ignore', invalid='ignore'):
            ratio = np.where(np.isfinite(reach), np.abs(phi) / reach, 0.0)
        i = int(np.argmax(ratio))
        row = next(
            f'{name}[{i - sl.start}]' if sl.stop - sl.start > 1 else name
            for name, sl in setup.servo.slices.items()
            if sl.start <= i < sl.stop
        )
        if not capped.any():
            if not np.isfinite(reach).any():
                return None, 'not used: the task correction is not capped (stabilization.max_speed)'
            return None, f'not used: start error {abs(phi[i]):.3g} within the linear range {reach[i]:.3g} ({row})'
        why = f' (start error {abs(phi[i]):.3g} outside the linear range {reach[i]:.3g}, {row})'
    found = plan(setup, model, stage, q)
    if found is None:
        return None, 'not used: the inverse kinematics found no configuration closer to the target than the start'
    if mode == 'auto' and not found.ik.converged:  # out of reach: the task law reports it from the start
        return None, (
            f'not used: the inverse kinematics found no solution within the limits (residual '
            f'{found.ik.error:.3g} > approach.tolerance)' + why
        )
    return found, (
        f'planned: {found.duration:.2f} s to the inverse kinematics solution (residual {found.ik.error:.2g})' + why
    )


def plan(setup, model, stage, q0=None):
    """The :class:`ApproachPlan` of `setup` (``approach.*``) from the start `q0` (default ``setup.q0``), or
    None when the IK finds no configuration closer to the target than the start."""
    settings = setup.settings.approach
    q0 = np.array(setup.q0 if q0 is None else q0, dtype=float)

    def refuse(reason):
        text = f'the joint-space approach does not apply: {reason}'
        return ConfigError(text, file=setup.config_path, key='approach.mode')

    if (np.asarray(setup.servo.rows.order) != 2).any():
        raise refuse(not_applicable(setup, model, stage, q0))
    lower, upper, vmax, brake = bounds_and_speeds(setup, stage)
    r, dr = residual_functions(model, setup.passive, setup.servo, 0.0)
    scale = float(settings.speed_scale)
    speed, accel = scale * vmax, scale * brake
    # the joints the task depends on move; a straight joint-space segment would open a closure through them
    moving, shared = _task_columns(setup, model, dr, lower, upper, q0)
    if shared.any():
        raise refuse(_closure_reason(model, shared) + ' (a straight joint-space segment would open it)')
    ik = solve_ik(
        r,
        dr,
        q0,
        lower,
        upper,
        restarts=int(settings.restarts),
        tolerance=float(settings.tolerance),
        cost=lambda q: approach_duration(q - q0, speed, accel),
        revolute=revolute_joints(model),
        moving=moving,
    )
    if not ik.converged and ik.error >= float(np.linalg.norm(r(q0))):
        return None
    goal = q0.copy()
    goal[ik.moving] = ik.q[ik.moving]
    ik.q = goal
    return ApproachPlan(
        q0,
        goal,
        approach_duration(goal - q0, speed, accel),
        float(settings.blend_time),
        ik.moving,
        ik,
        speed,
        accel,
    )


def joint_rows(model, plan_, q_start):
    """The approach's servo rows: ``q_j - q_j(t) = 0`` per moving joint, the quintic from `q_start` to the
    goal over the re-timed duration (from `q_start`, which may differ from the planned start)."""
    duration = max(approach_duration(plan_.q_goal - q_start, plan_.speed, plan_.accel), 1e-3)
    eye = np.eye(model.n)
    names = model.joint_names
    terms = []
    for j in np.nonzero(plan_.moving)[0]:
        traj = Quintic([0.0, duration], [[q_start[j]], [plan_.q_goal[j]]])
        terms.append(JointLinear(f'approach.{names[j]}', eye[j], traj))
    return ConstraintStack(terms, model.n), duration


def joint_setup(setup, servo):
    """`setup` with `servo` as its task rows (the approach controller's setup); per-row stabilization gains
    of the task do not fit the joint rows: their stiffest row's gains are used for every joint row."""
    stab = setup.stabilization
    if any(np.ndim(g) for g in (stab.kd, stab.kp, stab.k1)):
        i = int(np.argmax(np.broadcast_to(np.asarray(stab.kp, dtype=float), (setup.servo.m,))))
        pick = lambda g: float(np.broadcast_to(np.asarray(g, dtype=float), (setup.servo.m,))[i])  # noqa: E731
        stab = Baumgarte(kd=pick(stab.kd), kp=pick(stab.kp), k1=pick(stab.k1))
    return replace(setup, servo=servo, stabilization=stab)


class Approach:
    """The approach of one :class:`~uk_controller.control.controller.ControllerCore` (module docstring):
    ``plan`` and, once started, the joint controller ``joint`` and the times ``t_start`` (first step),
    ``t_handover`` (end of the segment) and ``t_end`` (end of the blend). ``done`` after the blend."""

    def __init__(self, core, plan_, controller_class):
        self.plan = plan_
        self._core = core
        self._class = controller_class
        self.joint = None
        self._joint_from = None
        self.done = False
        self.started = False
        self.t_start = self.t_handover = self.t_end = math.inf

    def reset(self):
        """Re-arm: the next step starts the approach again from the state it measures."""
        self.done = False
        self.started = False
        self.t_start = self.t_handover = self.t_end = math.inf

    def prepare(self, q):
        """Build the approach's controller from the start `q` (its joint rows run from there), unless it is
        built from there already."""
        core = self._core
        q_start = np.array(q, dtype=float)
        if self.joint is None or not np.allclose(q_start, self._joint_from, rtol=0.0, atol=1e-6):
            servo, duration = joint_rows(core.model, self.plan, q_start)
            self.joint = self._class(joint_setup(core.setup, servo), backend=core.backend_choice, _approach=False)
            self._joint_from, self._duration = q_start, duration

    def _start(self, q, t):
        core = self._core
        self.prepare(q)
        self.t_start = float(t)
        self.t_handover = self.t_start + self._duration
        self.t_end = self.t_handover + self.plan.blend
        self.joint.reset(self.t_start)
        core.t0 = self.t_handover  # the task's clock starts at the hand-over
        self.started = True

    def weight(self, t):
        """The task's weight w in the blended effort at time t (0 on the approach, 1 after the blend)."""
        if t < self.t_handover:
            return 0.0
        if self.plan.blend <= 0.0 or t >= self.t_end:
            return 1.0
        return smoothstep((t - self.t_handover) / self.plan.blend)

    def step(self, task_step, q, qd, t):
        """The blended step at (q, q', t): `task_step` is the task controller's own step."""
        if not self.started:
            self._start(q, t)
        w = self.weight(t)
        if w >= 1.0:
            if t >= self.t_end:
                self.done = True
            return task_step(q, qd, t)
        core = self._core
        task = task_step(q, qd, max(float(t), core.t0))
        joint = self.joint.step(q, qd, t)
        if not joint.ok:  # the approach's safe effort, reported on the task's rows (the log's shape)
            return task if not task.ok else _with_effort(task, joint, joint.effort, core.effort_limits)
        if not task.ok:  # the task rows refused (e.g. a singular start): the approach effort, task fields NaN
            return _with_effort(task, joint, joint.effort, core.effort_limits, ok=True)
        effort = joint.effort if w == 0.0 else (1.0 - w) * joint.effort + w * task.effort
        core.remember_effort(effort)  # what safe_effort 'hold' holds: the effort applied
        return _with_effort(task, joint if w < 0.5 else task, effort, core.effort_limits)


def _with_effort(task, lead, effort, limits, ok=None):
    """The task's StepResult (its rows' errors: what a log of the task shows) with `effort`, and the status,
    rank and residual of the controller that leads the blend."""
    task.effort = np.array(effort, dtype=float)
    task.saturated = np.abs(task.effort) >= limits * (1.0 - 1e-12)
    if lead is not task:
        task.status, task.reason, task.residual = lead.status, lead.reason, lead.residual
        task.rank, task.condition = lead.rank, lead.condition
        task.ok = lead.ok if ok is None else ok
    return task


__all__ = [
    'START_TOLERANCE',
    'Approach',
    'ApproachPlan',
    'IKResult',
    'approach_duration',
    'decide',
    'joint_rows',
    'not_applicable',
    'plan',
    'residual_functions',
    'smoothstep',
    'solve_ik',
    'start_saturation',
]
