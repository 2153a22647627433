"""The joint-space approach of a far target (``approach.*``, uk_controller/control/approach.py).

Checked against independent computations: the inverse kinematics' solution against Pinocchio's forward
kinematics of the unedited URDF and the URDF's limits; the re-timed quintic against the samples of the
trajectory it is followed with; the hand-over against the largest slope of the blend; the closed loop
against the URDF's speed and effort limits.
"""

import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arm_starts  # noqa: E402

from uk_controller.constraints.trajectories import Quintic  # noqa: E402
from uk_controller.control import approach  # noqa: E402

pytestmark = pytest.mark.skipif(not arm_starts.available(), reason='example-robot-data not installed')

#: the default of limits.margin: the position limits the control law holds are the URDF's shrunk by it
LIMITS_MARGIN = 0.02
#: UR5 seed 3 pose: without the approach the task descent ends in a local minimum (error 0.049) at the
#: stretched-elbow singularity; the target is reachable on another branch
CASE = ('ur5', 3, 'pose')


def _controller(case, overrides=None, duration=8.0):
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / 'case.yaml'
        path.write_text(arm_starts.setup_yaml(case, duration=duration, approach='on'))
        setup = load_robot(path, {'simulation.duration': duration, **(overrides or {})})
        return setup, ControllerCore(setup)


@pytest.fixture(scope='module')
def ur5():
    case = arm_starts.draw_case(*CASE)
    setup, ctrl = _controller(case)
    return case, setup, ctrl


@pytest.mark.slow
def test_the_ik_solution_reaches_the_target_inside_the_limits(ur5):
    """Pinocchio's forward kinematics of the solution is the target pose to 1e-8 (m and rad), and every
    joint is inside the URDF's limits shrunk by limits.margin."""
    import pinocchio as pin

    case, _, ctrl = ur5
    plan = ctrl.approach.plan
    model = arm_starts.pin_model(case.arm)
    p, R = arm_starts.tool_pose(model, plan.q_goal, arm_starts.ARMS[case.arm][1])
    assert np.linalg.norm(p - case.p_target) < 1e-8
    assert np.linalg.norm(pin.log3(case.R_target.T @ R)) < 1e-8
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    pad = LIMITS_MARGIN * (hi - lo)
    assert (plan.q_goal >= lo + pad - 1e-12).all() and (plan.q_goal <= hi - pad + 1e-12).all()
    # the start is not a solution: the approach has somewhere to go
    p0, R0 = arm_starts.tool_pose(model, case.q0, arm_starts.ARMS[case.arm][1])
    assert np.linalg.norm(p0 - case.p_target) + np.linalg.norm(pin.log3(case.R_target.T @ R0)) > 0.1


def test_quintic_duration_meets_the_speed_and_acceleration_bounds():
    """approach_duration against the sampled quintic the joint rows follow: every joint's peak speed and
    acceleration within its bound, and the limiting joint at its bound (the shortest such duration)."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        dq = rng.uniform(-3.0, 3.0, 6)
        speed = rng.uniform(0.2, 3.0, 6)
        accel = rng.uniform(1.0, 20.0)
        T = approach.approach_duration(dq, speed, accel)
        traj = Quintic([0.0, T], np.vstack((np.zeros(6), dq)))
        ts = np.linspace(0.0, T, 1001)
        v = np.array([traj(t)[1] for t in ts])
        a = np.array([traj(t)[2] for t in ts])
        assert (np.abs(v).max(axis=0) <= speed * (1 + 1e-9)).all()
        assert (np.abs(a).max(axis=0) <= accel * (1 + 1e-9)).all()
        # the shortest: one joint reaches its speed or its acceleration bound (sampling resolution 1e-3)
        ratio = max((np.abs(v).max(axis=0) / speed).max(), (np.abs(a).max(axis=0) / accel).max())
        assert ratio > 1.0 - 1e-3


@pytest.mark.slow
def test_handover_blends_the_effort_without_a_jump(ur5):
    """At a fixed state away from the goal (the two laws disagree there), the effort as a function of time
    across the hand-over changes per control period by at most the blend's largest slope, 15/8 dt / T_b,
    times the disagreement |u_task - u_joint|: continuous, where a switch would jump by the disagreement
    itself. Before the hand-over it is the joint law's effort, after the blend the task's."""
    from uk_controller.control.controller import ControllerCore

    case, setup, ctrl = ur5
    ap = ctrl.approach
    ctrl.reset(0.0)
    ctrl.step(np.array(setup.q0), np.zeros(ctrl.n), 0.0)  # starts the approach at t = 0
    rng = np.random.default_rng(1)
    q = ap.plan.q_goal + rng.uniform(-0.05, 0.05, ctrl.n)
    qd = rng.uniform(-0.2, 0.2, ctrl.n)
    dt, tb = ctrl.dt, ap.plan.blend
    ts = ap.t_handover + dt * np.arange(0, round((ap.t_end - ap.t_handover + 0.01) / dt))
    u = np.array([ctrl.step(q, qd, t).effort for t in ts])
    u_task = ControllerCore.step(ctrl, q, qd, ap.t_end).effort  # the task law at this state
    u_joint = ap.joint.step(q, qd, ap.t_handover).effort  # the approach law at its goal (held)
    gap = np.abs(u_task - u_joint)
    assert gap.max() > 0.1  # N m: the two laws disagree here, a switch would jump by this
    steps = np.abs(np.diff(u, axis=0))
    assert (steps <= 15.0 / 8.0 * dt / tb * gap + 1e-6).all()
    np.testing.assert_allclose(u[0], ap.joint.step(q, qd, ts[0]).effort, atol=1e-9)
    np.testing.assert_allclose(u[-1], u_task, atol=1e-9)


@pytest.mark.slow
def test_far_target_closed_loop_within_the_limits():
    """UR5 seed 3 pose closed loop: converged, joint speeds within the URDF's limits over the approach, the
    efforts within theirs, and the hand-over without a jump: no effort changes by more than 1 % of its limit
    in one period across it. (The blend's weight moves by at most 15/8 dt / T_b = 0.94 % per period at 1 kHz
    with T_b = 0.2 s, and both laws' efforts lie within their limits and nearly agree at the goal; a switch
    between disagreeing laws changes the effort by their disagreement in one period.)"""
    from uk_controller.sim.closed_loop import simulate

    case = arm_starts.draw_case(*CASE)
    setup, ctrl = _controller(case)
    res = simulate(setup)
    model = arm_starts.pin_model(case.arm)
    err = np.linalg.norm(res.task_error, axis=1)
    assert err[-1] < 1e-4  # the tracking error of a moving target at 1 kHz (the stock setup: the same order)
    vlim = np.array(model.velocityLimit)
    assert (np.abs(res.qd) <= vlim).all()
    elim = np.asarray(ctrl.effort_limits)
    assert (np.abs(res.effort) <= elim * (1 + 1e-12)).all()
    # the hand-over window (the run's approach starts at t = 0: the plan's re-timed duration)
    t_h = approach.approach_duration(
        ctrl.approach.plan.q_goal - setup.q0, ctrl.approach.plan.speed, ctrl.approach.plan.accel
    )
    window = (res.t >= t_h - 0.05) & (res.t <= t_h + ctrl.approach.plan.blend + 0.05)
    du = np.abs(np.diff(res.effort, axis=0))[window[1:]]
    assert (du <= 0.01 * elim).all(), f'{(du / elim).max():.3g} of the limit in one period'
    # the approach kept the speed well inside the limits the control law holds (0.9 of the URDF's)
    assert (np.abs(res.qd[res.t < t_h]) <= 0.9 * vlim).all()
    assert math.isfinite(res.t[-1])


@pytest.mark.slow
def test_a_moving_target_is_approached_at_its_start_and_tracked_from_the_handover():
    """The planar 3R's circle from a far start (the elbow bent the other way): the IK solution puts the
    tool at the circle's start, centre + r (1, 0) with the tool level (Pinocchio's forward kinematics); the
    task's clock starts at the hand-over, so the circle is tracked from there (below 1e-3 a second after it)."""
    import pinocchio as pin

    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    far = [1.2, -1.8, 0.4]
    overrides = {
        'approach.mode': 'on',
        'robot.initial_position': far,
        'robot.initial_velocity': [0.0, 0.0, 0.0],
        'simulation.duration': 6.0,
    }
    setup = load_robot('planar_3r', overrides)
    ctrl = ControllerCore(setup)
    plan = ctrl.approach.plan
    model = setup.model.model
    data = model.createData()
    pin.framesForwardKinematics(model, data, plan.q_goal)
    pose = data.oMf[model.getFrameId('tool')]
    np.testing.assert_allclose(pose.translation[[0, 2]], [0.45 + 0.1, 0.25], atol=1e-8)
    assert abs(math.atan2(pose.rotation[0, 2], pose.rotation[0, 0])) < 1e-8  # tool along +x: no turn about y
    assert plan.duration > 0.5  # a real move from the far start
    res = simulate(setup)
    err = np.linalg.norm(res.task_error, axis=1)
    assert err[res.t > plan.duration + plan.blend + 1.0].max() < 1e-3
    assert err[-1] < 1e-4  # the tracking error of a moving target at 1 kHz (the stock setup: the same order)


def test_closure_through_the_task_joints_is_refused():
    """A straight joint-space segment would open the five-bar's closure: the setup is refused, naming the key."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.files.parameter_file import ConfigError
    from uk_controller.robots import load_robot

    with pytest.raises(ConfigError, match='approach.mode'):
        ControllerCore(load_robot('five_bar', {'approach.mode': 'on'}))


@pytest.mark.slow
def test_steps_during_the_approach_report_the_task_rows_and_refuse_a_bad_state():
    """During the approach a step's rows are the task's (a log keeps one shape), the effort is the approach
    law's, and a non-finite state gives the safe effort with the task's row count, as without the approach."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    setup = load_robot(
        'planar_3r',
        {'approach.mode': 'on', 'robot.initial_position': [1.2, -1.8, 0.4], 'robot.initial_velocity': [0.0] * 3},
    )
    ctrl = ControllerCore(setup)
    q, qd = np.array(setup.q0), np.zeros(3)
    res = ctrl.step(q, qd, 0.0)
    assert ctrl.in_approach and res.ok
    assert res.phi.shape == (setup.servo.m,)
    np.testing.assert_allclose(res.effort, ctrl.approach.joint.step(q, qd, 0.0).effort, atol=1e-12)
    bad = ctrl.step(np.full(3, np.nan), qd, 0.001)
    assert not bad.ok and bad.phi.shape == (setup.servo.m,) and (bad.effort == 0.0).all()
