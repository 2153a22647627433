"""approach.mode's default (auto) and the measured start (uk_controller/control/approach.py).

auto plans the joint-space approach only where some task row's correction is capped at the start: the
saturated Baumgarte term ``kd phi' + kd sat_v(kp phi / kd)`` leaves its linear range where
``|kp phi| > kd v``. Checked against an independent computation: the task error at the start from
Pinocchio's own frame placement (and the rows' formulas read from the setup file), the gains from the
file's ``stabilization`` section. A controller built at one start and first prepared at another far away
plans from the measured one: the goal's task error by Pinocchio's frame placement within
``approach.tolerance``, the goal inside the joint limits.
"""

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p for p in (ROOT / 'config').glob('*.yaml') if not p.name.startswith('controllers')) + sorted(
    (ROOT / 'config' / 'examples').glob('*.yaml')
)
#: stabilization.max_speed's default with damped gains (the correction speed v)
DEFAULT_SPEED = 1.0
AXES = {'x': 0, 'y': 1, 'z': 2}


def _params(path):
    raw = yaml.safe_load(path.read_text())
    return raw['/**']['ros__parameters']


def _q_pin(model, names, q):
    """`q` in the controller's joint order as Pinocchio's configuration vector (one coordinate per joint)."""
    out = np.zeros(model.nq)
    for name, value in zip(names, q):
        out[model.joints[model.getJointId(name)].idx_q] = value
    return out


def _start_errors(setup, params):
    """The task rows' errors at the start, from Pinocchio's frame placement and the file's row formulas."""
    import pinocchio as pin

    model = setup.model.model
    data = model.createData()
    q0 = np.array(setup.q0, dtype=float)
    qp = _q_pin(model, setup.joint_names, q0)
    pin.framesForwardKinematics(model, data, qp)
    constraints = params['constraints']
    errors = []
    for term in setup.servo.terms:
        spec = constraints[term.name]
        kind = spec['type']
        if kind == 'frame_position':
            p = data.oMf[model.getFrameId(spec['frame'])].translation
            idx = [AXES[a] for a in spec.get('axes', ['x', 'y', 'z'])]
            errors += list(p[idx] - term.traj(0.0)[0])  # the target: the file's trajectory at t = 0
        elif kind == 'joint_linear':
            c = np.zeros(len(q0))
            names = spec.get('joints', setup.joint_names)
            for name, k in zip(names, spec['coefficients']):
                c[list(setup.joint_names).index(name)] = k
            errors.append(float(c @ q0 - spec['value']))
        elif kind == 'frame_orientation' and spec.get('mode') == 'planar' and spec['axis'] == [0.0, 1.0, 0.0]:
            R = data.oMf[model.getFrameId(spec['frame'])].rotation
            errors.append(math.atan2(R[0, 2], R[0, 0]) - spec['trajectory']['value'][0])  # turn about +y from +x
        else:
            pytest.fail(f'{setup.name}: no independent formula for a {kind} row')
    return np.array(errors)


def _task_support(setup, params):
    """The joints the task rows' frames hang from (Pinocchio's support chain) and a joint_linear row names."""
    model = setup.model.model
    out = set()
    for term in setup.servo.terms:
        spec = params['constraints'][term.name]
        if 'frame' in spec:
            joint = model.frames[model.getFrameId(spec['frame'])].parentJoint
            out |= {model.names[j] for j in model.supports[joint]}
        else:
            out |= set(spec.get('joints', setup.joint_names))
    return out


def _linear_range(params):
    """kd v / kp from the file's stabilization section (critical: kd = 2 w, kp = w^2)."""
    stab = params.get('stabilization', {})
    assert stab.get('convention', 'critical') == 'critical', 'the shipped setups are critically damped'
    w = float(stab['omega'])
    speed = stab.get('max_speed', DEFAULT_SPEED)
    return math.inf if speed == 0 else 2.0 * w * speed / (w * w)


@pytest.mark.slow
@pytest.mark.parametrize('path', SHIPPED, ids=lambda p: p.stem)
def test_auto_engages_exactly_outside_the_linear_range(path):
    """Every shipped setup with approach.mode auto: planned exactly where the largest task error at the start
    exceeds the linear range; never with a closure (the five-bars, the dual arm, Cassie: a straight segment
    would open it). As shipped, none plans (scara_printed_start says off: the paper's start and law)."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    params = _params(path)
    setup = load_robot(path, {'approach.mode': 'auto'})
    ctrl = ControllerCore(setup)
    if ctrl.approach_decision.startswith('not applicable: closure through '):
        # the joints named are closure joints the task's frames hang from (Pinocchio's support chains)
        named = ctrl.approach_decision.removeprefix('not applicable: closure through ').split(', ')
        assert setup.passive.m and ctrl.approach is None
        assert set(named) <= _task_support(setup, params), ctrl.approach_decision
    else:
        outside = np.abs(_start_errors(setup, params)).max() > _linear_range(params)
        assert (ctrl.approach is not None) == outside, ctrl.approach_decision
        assert ctrl.approach_decision.startswith('planned' if outside else 'not used'), ctrl.approach_decision
    assert ControllerCore(load_robot(path)).approach is None  # as shipped


def test_the_printed_start_is_outside_the_linear_range():
    """The one shipped start far from its task (1.9 rad on q1 + q2 + q3) is outside the linear range 2/15: the
    check above has a setup on each side."""
    path = ROOT / 'config' / 'scara_printed_start.yaml'
    from uk_controller.robots import load_robot

    setup = load_robot(path)
    assert np.abs(_start_errors(setup, _params(path))).max() > 1.0 > _linear_range(_params(path))


def _pose_error(setup, q):
    """Task error of planar_3r's rows at q: the tool point against the circle's start, the tool angle."""
    import pinocchio as pin

    model = setup.model.model
    data = model.createData()
    pin.framesForwardKinematics(model, data, _q_pin(model, setup.joint_names, q))
    pose = data.oMf[model.getFrameId('tool')]
    point = pose.translation[[0, 2]] - np.array([0.45 + 0.1, 0.25])  # centre + r (cos 0, sin 0)
    angle = math.atan2(pose.rotation[0, 2], pose.rotation[0, 0])
    return np.hypot(*point) + abs(angle)


@pytest.mark.slow
@pytest.mark.parametrize('first', ['prepare', 'step'])
def test_a_measured_start_far_from_the_planned_one_is_planned_from(first):
    """planar_3r built at its shipped start A (on the circle: auto plans nothing) and first prepared, or
    re-armed (reset) and stepped, at B with the elbow bent the other way: the approach starts at B and its
    goal solves the task
    (Pinocchio's frame placement) within approach.tolerance, inside the joint limits; the joint rows run
    from B. The controller's steps stay within the effort limits."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    setup = load_robot('planar_3r')
    ctrl = ControllerCore(setup)
    assert ctrl.approach is None and ctrl.approach_decision.startswith('not used')
    far = np.array([1.2, -1.8, 0.4])
    assert _pose_error(setup, far) > 0.2
    qd = np.zeros(3)
    if first == 'prepare':
        text = ctrl.prepare(far)
        assert ctrl.prepared and text.startswith('planned')
    else:
        ctrl.reset(0.0)
        assert not ctrl.prepared and ctrl.in_approach  # the next step checks the start first
    res = ctrl.step(far, qd, 0.0)
    assert res.ok and ctrl.in_approach
    plan = ctrl.approach.plan
    np.testing.assert_array_equal(plan.q_start, far)
    assert _pose_error(setup, plan.q_goal) <= setup.settings.approach.tolerance
    lo, hi = (np.array(v, dtype=float) for v in setup.model.position_limits)
    assert (plan.q_goal >= lo).all() and (plan.q_goal <= hi).all()
    # the joint rows' quintic starts at B: their error there is zero
    np.testing.assert_allclose(ctrl.approach.joint.step(far, qd, 0.0).phi, 0.0, atol=1e-12)
    assert (np.abs(res.effort) <= ctrl.effort_limits * (1 + 1e-12)).all()
    # the null space rests at the goal: the posture reference is where the approach ends
    np.testing.assert_array_equal(ctrl.redundancy.q_ref, plan.q_goal) if ctrl.redundancy.terms else None


@pytest.mark.slow
def test_a_measured_start_at_the_planned_one_keeps_the_plan():
    """Prepared within the tolerance of the planned start: nothing is planned again (the same plan object)."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    far = [1.2, -1.8, 0.4]
    setup = load_robot('planar_3r', {'robot.initial_position': far, 'robot.initial_velocity': [0.0] * 3})
    ctrl = ControllerCore(setup)
    plan = ctrl.approach.plan
    ctrl.prepare(np.array(far) + 1e-5)
    assert ctrl.approach.plan is plan
    # and a re-arm at a start near the task plans nothing: the task law alone from there
    ctrl.reset(0.0)
    near = np.array(load_robot('planar_3r').q0)
    assert ctrl.prepare(near).startswith('not used') and ctrl.approach is None and not ctrl.in_approach


@pytest.mark.ros
@pytest.mark.slow
def test_the_node_plans_from_the_first_joint_state():
    """The ROS controller node on planar_3r (shipped start on the circle): its first complete joint state puts
    the arm far away; the node decides and plans from that state before its first step (the approach starts
    there), and its first efforts are finite and within their limits."""
    rclpy = pytest.importorskip('rclpy')
    from rclpy.parameter import Parameter

    from uk_controller.ros.controller_node import ControllerNode

    rclpy.init()
    node = None
    try:
        node = ControllerNode(
            parameter_overrides=[
                Parameter('config', value='planar_3r'),
                Parameter('ros.trigger', value='state'),
                Parameter('ros.loop.mode', value='timer'),
            ]
        )
        core = node.core
        assert core.approach is None
        far = np.array([1.2, -1.8, 0.4])
        now = node.now_ns()
        names = list(core.joint_names)
        assert node.accept_state(node.merger.match(names), far, np.zeros(3), now, now)
        assert node.running and core.prepared and core.approach_decision.startswith('planned')
        assert node.core is core and core.approach is not None
        np.testing.assert_array_equal(core.approach.plan.q_start, far)
        node.control(now, now)
        assert not node.fault and core.in_approach
        assert core.approach.t_start < math.inf
        np.testing.assert_allclose(
            core.approach.joint.step(far, np.zeros(3), core.approach.t_start).phi, 0.0, atol=1e-12
        )
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
