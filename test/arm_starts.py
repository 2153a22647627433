"""Real arms from seeded random starts inside their limits: setup files and figures of merit.

For an arm of the ``example-robot-data`` wheel (URDF unedited) this module writes the setup file a user
would write from ``docs/config.md``: the arm at a start drawn uniformly inside its joint position limits
(shrunk by :data:`MARGIN` of each range; a continuous joint or a range wider than 2 pi is drawn in
[-pi, pi]; a ``<mimic>`` joint where its leader puts it: :func:`on_mimic`), and a task on the tool frame that holds
still at a target:

- ``position``: ``frame_position`` (3 rows), ``hold`` at a target point;
- ``pose``: ``frame_position`` + ``frame_orientation`` (``mode: so3``), both ``hold``.

The setups write no ``approach`` section (:data:`APPROACH`): the default ``approach.mode: auto`` solves the
bounded inverse kinematics of the target, moves there in joint space within the speed limits and hands over
to the task rows (uk_controller/control/approach.py) where the start lies outside the linear range of the task's
saturated correction, as every far start here does.

Targets are reachable within the limits by construction: the tool pose at another configuration drawn
inside the same shrunk limits, accepted when its point is at most :data:`MAX_DISTANCE` (0.3 m) from the
start's tool point (any attitude change, which is at most pi by definition of the so3 distance). One
case per arm (``seed`` = :data:`PI_SEED`) asks for an attitude change of exactly pi: the target attitude is
``R_start Exp(pi a)`` for a seeded random unit axis ``a``, and the target point a drawn reachable point
as above; it is kept only when a damped least-squares inverse kinematics (Pinocchio's frame Jacobian,
joints clipped to the shrunk limits after each iteration) finds a configuration inside the limits with
that pose to 1e-6 (position, m) and 1e-6 (attitude, rad); otherwise another axis/point is drawn, up to
300 draws. An arm whose tool has fewer than 6 degrees of freedom (the SO-101: 5 joints move its gripper
frame, the sixth is the jaw) reaches no such pose: its pi case is then the reachable drawn pose with the
largest attitude change among the next 200 draws (Metrics.angle_deg says which).

:func:`run_case` runs the setup closed loop on the embedded UK plant at its default 1 kHz
(:func:`uk_controller.sim.closed_loop.simulate`) and returns :class:`Metrics`. Joint velocity limits of
zero or absent in the URDF (Pinocchio reads them as 0 or inf) are treated as no limit: that joint's
``|q'|/limit`` ratio is left out (and :attr:`Metrics.unlimited_speed` names it).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from uk_controller.robots import example_robot_data as erd

#: start and target configurations are drawn this fraction of each joint range inside the limits
MARGIN = 0.05
#: largest distance between the start's tool point and the target point [m]
MAX_DISTANCE = 0.3
#: the seed whose pose task asks for an attitude change of exactly pi
PI_SEED = 0
#: the task counts as converged when its error norm stays below this (metres and radians mixed, as
#: ``uk-controller simulate``'s settling time)
TOL = 1e-3
#: the ``approach.mode`` a setup writes (None: no approach section, the default auto): the task descent alone
#: stops short of some targets against a joint limit or a singularity, though they are reachable inside the limits
APPROACH = None

#: name -> (URDF under robots/, tool frame)
ARMS = {
    'ur5': ('ur_description/urdf/ur5_robot.urdf', 'tool0'),
    'ur10': ('ur_description/urdf/ur10_robot.urdf', 'tool0'),
    'panda': ('panda_description/urdf/panda.urdf', 'panda_hand_tcp'),
    'xarm7': ('xarm_description/urdf/xarm7.urdf', 'link_eef'),
    'z1': ('z1_description/urdf/z1.urdf', 'gripperStator'),
    'so101': ('so_arm_description/urdf/so101.urdf', 'gripper_frame_link'),
}
TASKS = ('position', 'pose')


def available():
    """True when the example-robot-data wheel is installed."""
    return erd.robots_dir() is not None


def pin_model(arm):
    """Pinocchio model of the arm's unedited URDF."""
    import pinocchio as pin

    return pin.buildModelFromUrdf(str(erd.description(ARMS[arm][0])))


def sampling_box(model, margin=MARGIN):
    """(lo, hi) per configuration coordinate the starts and targets are drawn in: the URDF limits shrunk
    by `margin` of each range; [-pi, pi] for a joint without finite limits or with a range over 2 pi.
    Only 1-coordinate joints (revolute, prismatic) are supported."""
    if model.nq != model.nv:
        raise ValueError('continuous (cos/sin) joints are not supported by this harness')
    lo = np.array(model.lowerPositionLimit, dtype=float)
    hi = np.array(model.upperPositionLimit, dtype=float)
    wide = ~np.isfinite(lo) | ~np.isfinite(hi) | (hi - lo > 2 * math.pi + 1e-9) | (hi <= lo)
    lo, hi = np.where(wide, -math.pi, lo), np.where(wide, math.pi, hi)
    pad = margin * (hi - lo) * ~wide
    return lo + pad, hi - pad


def frame_id(model, name):
    """The frame `name` as the controller resolves it (the body frame first: a URDF may name a joint
    and a link alike, as the Z1's gripperStator)."""
    import pinocchio as pin

    if model.existFrame(name, pin.FrameType.BODY):
        return model.getFrameId(name, pin.FrameType.BODY)
    return model.getFrameId(name)


def tool_pose(model, q, tool):
    import pinocchio as pin

    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(q, dtype=float))
    pose = data.oMf[frame_id(model, tool)]
    return pose.translation.copy(), pose.rotation.copy()


def _ik(model, tool, p_want, R_want, q_init, lo, hi, iters=400):
    """Damped least squares on the frame's local 6D error (Pinocchio log6), clipped to [lo, hi]."""
    import pinocchio as pin

    data = model.createData()
    fid = frame_id(model, tool)
    want = pin.SE3(R_want, p_want)
    q = np.array(q_init, dtype=float)
    for _ in range(iters):
        pin.framesForwardKinematics(model, data, q)
        iMd = data.oMf[fid].actInv(want)
        err = pin.log6(iMd).vector
        if np.linalg.norm(err) < 1e-9:
            break
        J = -pin.Jlog6(iMd.inverse()) @ pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL)
        dq = -J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(6), err)
        q = np.clip(q + 0.5 * dq, lo, hi)
    p, R = tool_pose(model, q, tool)
    ok = np.linalg.norm(p - p_want) < 1e-6 and np.linalg.norm(pin.log3(R_want.T @ R)) < 1e-6
    return q, ok


@dataclass
class Case:
    arm: str
    seed: int
    task: str
    q0: np.ndarray
    p_target: np.ndarray
    R_target: np.ndarray
    distance: float  # |p_target - p(q0)| [m]
    angle: float  # attitude change [rad]
    q_target: np.ndarray  # a configuration inside the limits reaching the target


def mimic_joints(arm, model):
    """``[(follower index, leader index, multiplier, offset)]`` of the URDF's ``<mimic>`` joints (indices
    into q of the Pinocchio model)."""
    import xml.etree.ElementTree as ET

    out = []
    for joint in ET.parse(str(erd.description(ARMS[arm][0]))).getroot().iter('joint'):
        mimic = joint.find('mimic')
        if mimic is None:
            continue
        index = lambda name: model.joints[model.getJointId(name)].idx_q  # noqa: E731
        out.append(
            (
                index(joint.get('name')),
                index(mimic.get('joint')),
                float(mimic.get('multiplier', 1.0)),
                float(mimic.get('offset', 0.0)),
            )
        )
    return out


def on_mimic(arm, model, q):
    """`q` with each mimic joint where its leader puts it (``q_f = m q_l + o``): the robot's passive rows
    hold the pair together, so a start off them is a state the arm is never in (the plant's closure
    stabilization would snap the pair together at speeds no effort acts on)."""
    for follower, leader, multiplier, offset in mimic_joints(arm, model):
        q[follower] = multiplier * q[leader] + offset
    return q


def draw_case(arm, seed, task, *, margin=MARGIN, max_distance=MAX_DISTANCE):
    """The start and a reachable target for (arm, seed, task), from ``numpy.random.default_rng(seed)``
    (same start for both tasks of a seed)."""
    import pinocchio as pin

    model = pin_model(arm)
    tool = ARMS[arm][1]
    lo, hi = sampling_box(model, margin)
    rng = np.random.default_rng([seed, 7])
    q0 = on_mimic(arm, model, rng.uniform(lo, hi))
    p0, R0 = tool_pose(model, q0, tool)
    want_pi = task == 'pose' and seed == PI_SEED
    best = None
    for attempt in range(2000):
        qt = rng.uniform(lo, hi)
        pt, Rt = tool_pose(model, qt, tool)
        if np.linalg.norm(pt - p0) > max_distance:
            continue
        angle = float(np.linalg.norm(pin.log3(R0.T @ Rt)))
        if want_pi and attempt < 300:
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            Rpi = R0 @ pin.exp3(math.pi * axis)
            qpi, ok = _ik(model, tool, pt, Rpi, qt, lo, hi)
            if ok:  # exact by construction (log3 of the product rounds to pi - 1e-8)
                return Case(arm, seed, task, q0, pt, Rpi, float(np.linalg.norm(pt - p0)), math.pi, qpi)
            continue
        if want_pi:  # no pi rotation reachable (a 5-DOF wrist): the largest of 200 drawn reachable poses
            if best is None or angle > best.angle:
                best = Case(arm, seed, task, q0, pt, Rt, float(np.linalg.norm(pt - p0)), angle, qt)
            if attempt < 500:
                continue
            return best
        return Case(arm, seed, task, q0, pt, Rt, float(np.linalg.norm(pt - p0)), angle, qt)
    if best is not None:
        return best
    raise RuntimeError(f'{arm} seed {seed}: no reachable target within {max_distance} m')


def setup_yaml(case, *, duration=4.0, name=None, approach=APPROACH):
    """Text of the setup file (docs/config.md format) for `case`: one actuator per joint, the task held at
    the target, the repository's usual stabilization (critical, omega 20) and 1 kHz control; `approach` the
    ``approach.mode`` written ('auto', 'on', 'off'; None: no approach section, the default)."""
    import pinocchio as pin

    relative, tool = ARMS[case.arm]
    model = pin_model(case.arm)
    joints = [model.names[j] for j in range(1, model.njoints)]
    rows = erd.hold_rows(tool, case.p_target, pin.log3(case.R_target) if case.task == 'pose' else None)
    return erd.arm_setup_yaml(
        name or f'{case.arm}_{case.task}_{case.seed}',
        relative,
        joints,
        case.q0,
        rows,
        simulation=f'duration: {duration!r}',
        sections=f"    approach: {{mode: '{approach}'}}\n" if approach else '',
    )


@dataclass
class Metrics:
    arm: str
    seed: int
    task: str
    distance: float
    angle_deg: float
    finite: bool
    failure: str
    converged: bool
    t_converge: float  # first time after which |task error| < TOL stays (nan: never)
    final_error: float
    speed_ratio: float  # max over the run and joints of |q'_i| / velocity limit_i
    limit_margin_pct: float  # closest approach to a position limit, % of the joint's range (<0: past it)
    effort_ratio: float  # max |u_i| / effort limit_i (commanded, after the controller's clip)
    saturated_fraction: float
    last_s_speed: float  # max |q'_i| over the last second [rad/s]
    sign_flips: int  # max over efforts of step-to-step sign flips while at the limit
    step_us: float  # median control step [us] (simulate's compute_time)
    steps: int
    unlimited_speed: list = field(default_factory=list)

    def row(self):
        return asdict(self)


def sign_flips_at_limit(effort, limits, frac=0.999):
    """Per actuator, the count of steps k where u_k and u_{k-1} are both at their limit (|u| >= frac*limit)
    with opposite signs (a bang-bang effort); the largest count."""
    if effort.shape[0] < 2:
        return 0
    lim = np.where(np.isfinite(limits) & (limits > 0), limits, np.inf)
    at = np.abs(effort) >= frac * lim
    flips = at[1:] & at[:-1] & (np.sign(effort[1:]) * np.sign(effort[:-1]) < 0)
    return int(flips.sum(axis=0).max())


def metrics_of(case, res, ctrl, model):
    """Figures of merit of one closed-loop run (see :class:`Metrics`)."""
    q, qd, u = res.q, res.qd, res.effort
    finite = not res.failure and bool(np.isfinite(q).all() and np.isfinite(qd).all() and np.isfinite(u).all())
    t = res.t
    err = np.linalg.norm(res.task_error, axis=1) if res.task_error.size else np.zeros(t.size)
    from uk_controller.sim.closed_loop import settling_time

    ts = settling_time(t, err, TOL) if t.size else float('nan')
    planned = res.planned_steps or t.size
    converged = finite and t.size == planned and not math.isnan(ts)
    vlim = np.array(model.velocityLimit, dtype=float)
    limited = np.isfinite(vlim) & (vlim > 0)
    unlimited = [model.names[j + 1] for j in np.nonzero(~limited)[0]]
    speed_ratio = float((np.abs(qd[:, limited]) / vlim[limited]).max()) if t.size and limited.any() else float('nan')
    lo = np.array(model.lowerPositionLimit, dtype=float)
    hi = np.array(model.upperPositionLimit, dtype=float)
    bounded = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    if t.size and bounded.any():
        rng_ = (hi - lo)[bounded]
        margin = np.minimum(q[:, bounded] - lo[bounded], hi[bounded] - q[:, bounded]) / rng_
        limit_margin = float(100.0 * margin.min())
    else:
        limit_margin = float('nan')
    elim = np.asarray(ctrl.effort_limits, dtype=float)
    elim_ok = np.where(np.isfinite(elim) & (elim > 0), elim, np.inf)
    effort_ratio = float((np.abs(u) / elim_ok).max()) if t.size else float('nan')
    last = t >= t[-1] - 1.0 if t.size else np.zeros(0, dtype=bool)
    last_speed = float(np.abs(qd[last]).max()) if t.size else float('nan')
    return Metrics(
        arm=case.arm,
        seed=case.seed,
        task=case.task,
        distance=case.distance,
        angle_deg=math.degrees(case.angle),
        finite=finite,
        failure=res.failure,
        converged=converged,
        t_converge=ts,
        final_error=float(err[-1]) if t.size else float('nan'),
        speed_ratio=speed_ratio,
        limit_margin_pct=limit_margin,
        effort_ratio=effort_ratio,
        saturated_fraction=float(res.saturated.mean()) if t.size else float('nan'),
        last_s_speed=last_speed,
        sign_flips=sign_flips_at_limit(u, elim),
        steps=int(t.size),
        step_us=float(np.median(res.compute_time) * 1e6) if t.size else float('nan'),
        unlimited_speed=unlimited,
    )


def run_yaml(path, duration, overrides=None):
    """Load a setup file (with dotted `overrides`) and run it closed loop on the embedded UK plant: (result,
    controller, model)."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    setup = load_robot(path, {'simulation.duration': duration, **(overrides or {})})
    ctrl = ControllerCore(setup, _approach=False)  # for its effort limits: simulate plans its own approach
    res = simulate(setup)
    return res, ctrl, setup.model.model


def run_case(arm, seed, task, *, duration=4.0, folder=None, approach=APPROACH):
    """Draw, write (into `folder` or a temporary folder), run and measure one case: :class:`Metrics`."""
    case = draw_case(arm, seed, task)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(folder or tmp) / f'{arm}_{task}_{seed}.yaml'
        path.write_text(setup_yaml(case, duration=duration, approach=approach))
        res, ctrl, model = run_yaml(path, duration)
    return metrics_of(case, res, ctrl, model)
