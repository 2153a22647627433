"""Every key of the schema reaches the object that runs with it.

For each key a user can write in a setup file (:func:`uk_controller.settings.schema.all_settings`) the
table :data:`PROBES` holds one probe: a robot, the key set to a value other than its default (dotted
overrides, resolved as the file would be: ``resolve(file, overrides)``), and a function that reads the
value back off the objects built from those settings -- the :class:`ControllerCore`, the plant
(``make_plant``), the hardware calibration and its bus (``make_bus``, not opened), the node's settings and
loop settings. The test asserts the value read is the one set and that the same read of the setup
without the change gives something else, so a key that no longer reaches its reader fails here. A key
added to the schema without a probe fails :func:`test_every_key_has_a_probe`.

A probe without ``expect`` compares behaviour instead: what it reads (the controller's rows and efforts
at one state, the plant's state after one period) must differ between the setup with and without the
change. Keys read only by the ROS nodes are probed here on the settings the node reads
(``ros/node_setup.read_settings`` resolves them the same way) and on ``loop_settings``.

The same probes run through the entry points a user starts (test/reach_entry.py): every key written in
a setup file reaches what ``uk-controller simulate`` / ``run`` builds (test/test_settings_reach_cli.py)
and the running ROS nodes started from that file as their params file (test/test_settings_reach_ros.py).
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from uk_controller.control.loop_timing import loop_cpus
from uk_controller.settings import schema as S

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / 'data'


class Built:
    """The objects a run builds from ``resolve(robot, overrides)``, each made when first read."""

    def __init__(self, robot, overrides):
        from uk_controller.settings.resolve import resolve

        self.settings = resolve(robot, overrides)

    @functools.cached_property
    def setup(self):
        from uk_controller.robots import setup_from_settings

        return setup_from_settings(self.settings)

    @functools.cached_property
    def ctrl(self):
        from uk_controller.control.controller import ControllerCore

        return ControllerCore(self.setup)

    @functools.cached_property
    def plant(self):
        from uk_controller.sim.closed_loop import make_plant

        return make_plant(self.setup)

    @functools.cached_property
    def hw(self):
        from uk_controller.hardware.calibration import HardwareConfig

        return HardwareConfig.from_setup(self.setup)

    @functools.cached_property
    def bus(self):
        from uk_controller.hardware import registry

        return registry.make_bus(self.hw)

    @functools.cached_property
    def loop(self):
        from uk_controller.control.loop_timing import overrun_policy

        return self.settings.ros.loop, overrun_policy(self.settings.ros.overrun)

    def step(self, t=0.7):
        """The controller's rows, their rates and the efforts at one state near the start."""
        q = np.asarray(self.setup.q0, float) + 0.01
        res = self.ctrl.step(q, np.asarray(self.setup.qd0, float) + 0.02, t)
        return np.concatenate((res.phi, res.phidot, res.effort))

    def period(self):
        """The plant's state after one control period of a fixed effort."""
        plant = self.plant
        plant.step(np.full(self.setup.actuators.p, 0.3), 1.0 / self.settings.control.rate)
        return np.concatenate((plant.q, plant.qd))


@dataclass
class Probe:
    """`change` (dotted overrides, or a callable(tmp_path) -> them) on `robot` with `base` applied to both
    sides; `read(built)`; `expect` the value read with the change (None: it differs from the base)."""

    robot: str
    change: object
    read: object
    expect: object = None
    base: dict = field(default_factory=dict)


def _equal(a, b):
    try:
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.dtype.kind in 'fciub' and b_arr.dtype.kind in 'fciub':
            return a_arr.shape == b_arr.shape and np.allclose(a_arr, b_arr, rtol=1e-12, atol=0.0, equal_nan=True)
    except (TypeError, ValueError):
        pass
    return a == b


# ----------------------------------------------------------------------------- setups the probes need


def _copy(source, tmp_path, name):
    target = tmp_path / name
    shutil.copy(source, target)
    return str(target)


def _xacro_arm(tmp_path):
    """planar_3r's URDF as a xacro whose first link mass is the argument ``m`` (default: the URDF's)."""
    import re

    from uk_controller.paths import share_dir

    # the gz_ros2_control path: xacro would resolve $(find uk_controller) through the ament index
    text = (ROOT / 'urdf' / 'planar_3r.urdf').read_text().replace('$(find uk_controller)', str(share_dir()))
    match = re.search(r'<mass value="([^"]+)"', text)
    text = text.replace(match.group(0), '<mass value="$(arg m)"', 1)
    text = re.sub(
        r'<robot ([^>]*)>',
        lambda m: (
            f'<robot {m.group(1)} xmlns:xacro="http://www.ros.org/wiki/xacro">'
            f'<xacro:arg name="m" default="{match.group(1)}"/>'
        ),
        text,
        count=1,
    )
    path = tmp_path / 'arm.urdf.xacro'
    path.write_text(text)
    return str(path)


def _mass(built):
    return sum(i.mass for i in built.plant.model.model.inertias)


def _source(built):
    return Path(str(built.setup.model.source)).name


def _joint(name):
    """The ControllerCore's joint index of `name` (scara)."""
    return ['joint1', 'joint2', 'joint3', 'joint4'].index(name)


SCARA_LINE = {  # the tool of the scara on a line (the line trajectory's keys)
    'constraints.tool_path.trajectory': {
        'type': 'line',
        'centre': [0.0, 0.35, 0.0],
        'direction': [1.0, 0.0, 0.0],
        'amplitude': 0.02,
        'omega': 1.0,
    }
}
SCARA_CIRCLE = {
    'constraints.tool_path.trajectory': {
        'type': 'circle',
        'centre': [0.0, 0.35, 0.0],
        'radius': 0.05,
        'omega': 1.0,
        'u': [1.0, 0.0, 0.0],
        'v': [0.0, 1.0, 0.0],
    }
}
SCARA_SPLINE = {
    'constraints.tool_path.trajectory': {
        'type': 'spline',
        'times': [0.0, 1.0, 2.0],
        'waypoints': [0.0, 0.35, 0.0, 0.02, 0.36, 0.01, 0.03, 0.35, 0.02],
        'dim': 3,
    }
}
SCARA_POLYNOMIAL = {
    'constraints.tool_path.trajectory': {
        'type': 'polynomial',
        'times': [0.0, 1.0, 2.0],
        'waypoints': [0.0, 0.35, 0.0, 0.02, 0.36, 0.01, 0.03, 0.35, 0.02],
        'dim': 3,
    }
}
DUAL = 'constraints.object_position.trajectory'
PLANAR_ORIENTATION = 'constraints.tool_level'
SCARA_ORIENTATION = {  # the scara's tool angle as a frame_orientation row instead of joint_linear
    'constraints.tool_orientation': {
        'role': 'servo',
        'type': 'frame_orientation',
        'mode': 'planar',
        'frame': 'tool',
        'axis': [0.0, 0.0, 1.0],
        'trajectory': {'type': 'hold', 'value': [0.0]},
    }
}
SCARA_POLY_JOINTS = {  # joint1 follows joint2 by a polynomial
    'constraints.tool_orientation': {
        'role': 'servo',
        'type': 'joint_polynomial',
        'joints': ['joint1', 'joint2'],
        'polycoef': [0.0, 0.5, 0.0, 0.0, 0.0],
        'reference': [0.0, 0.0],
    }
}
CALLABLE = {
    'constraints.tool_orientation': {
        'role': 'servo',
        'type': 'callable',
        'function': 'test_settings_reach:angle_row',
        'params': {'value': 0.0},
        'rows': 1,
        'order': 2,
    }
}
FREE = {
    'constraints.names': ['tool_circle'],
    'constraints.tool_level': None,
}  # planar_3r without its orientation row: one free direction
#: planar_3r from a start far from its circle (the elbow bent the other way), reached by the joint-space approach
APPROACH = {
    'approach.mode': 'on',
    'robot.initial_position': [1.2, -1.8, 0.4],
    'robot.initial_velocity': [0.0, 0.0, 0.0],
}
DYNAMIXEL = {'hardware.protocol': 'dynamixel'}
ODRIVE = {'hardware.protocol': 'odrive'}
CAN_MIT = {'hardware.protocol': 'can_mit'}
MOTORS = {'hardware.motors': ['motor1', 'motor2', 'motor3', 'motor4']}
TEN = 0.1  # 10 Hz .. 1 kHz: a value every rate-like key accepts


def angle_row(model, q, qd, t, params, weight=1.0):
    """A callable constraint (docs/config.md): ``weight (q1 + q2 + q3) = params['value']``, repeated
    ``params['copies']`` times (default once)."""
    copies = int(params.get('copies', 1))
    a = weight * np.array([1.0, 1.0, 1.0, 0.0])
    phi = np.full(copies, a @ q - params['value'])
    return phi, np.full(copies, a @ qd), np.tile(a, (copies, 1)), np.zeros(copies)


def doubled_row(model, q, qd, t, params):
    """:func:`angle_row` with twice the weight."""
    return angle_row(model, q, qd, t, params, weight=2.0)


def _settings(path):
    """The value of dotted `path` in the resolved settings the objects were built from."""

    def read(built):
        node = built.settings
        for part in path.split('.'):
            node = node.items[part] if part not in getattr(node, '__dataclass_fields__', {}) else getattr(node, part)
        return node

    return read


PROBES = {
    # ------------------------------------------------------------------ robot
    'robot.name': Probe('scara', {'robot.name': 'renamed'}, lambda b: b.plant.model.name, 'renamed'),
    'robot.urdf': Probe(
        'planar_3r',
        lambda tmp: {'robot.urdf': _copy(ROOT / 'urdf' / 'planar_3r.urdf', tmp, 'copy.urdf')},
        _source,
        'copy.urdf',
    ),
    'robot.xacro_args': Probe(
        'planar_3r', {'robot.xacro_args': {'m': 9.0}}, _mass, None, base=lambda tmp: {'robot.urdf': _xacro_arm(tmp)}
    ),
    'robot.mjcf': Probe(
        'five_bar_mjcf',
        lambda tmp: {'robot.mjcf': _copy(ROOT / 'mjcf' / 'five_bar.xml', tmp, 'copy.xml')},
        _source,
        'copy.xml',
    ),
    'robot.sdf': Probe(
        str(DATA / 'biped_standing.yaml'),
        lambda tmp: {'robot.sdf': _copy(DATA / 'biped_free.sdf', tmp, 'copy.sdf')},
        _source,
        'copy.sdf',
    ),
    'robot.base': Probe(str(DATA / 'biped_standing.yaml'), {'robot.base': 'fixed'}, lambda b: b.ctrl.n, None),
    'robot.joints': Probe(
        'planar_3r',
        {'robot.joints': ['wrist', 'elbow', 'shoulder'], 'ros.effort_joints': None},
        lambda b: b.ctrl.joint_names,
        ['wrist', 'elbow', 'shoulder'],
    ),
    'robot.initial_position': Probe(
        'planar_3r', {'robot.initial_position': [0.1, 0.2, 0.3]}, lambda b: b.plant.q, [0.1, 0.2, 0.3]
    ),
    'robot.initial_velocity': Probe(
        'planar_3r', {'robot.initial_velocity': [0.1, 0.2, 0.3]}, lambda b: b.plant.qd, [0.1, 0.2, 0.3]
    ),
    'robot.gravity': Probe(
        'planar_3r', {'robot.gravity': [0.0, 0.0, -3.0]}, lambda b: b.ctrl.model.gravity, [0.0, 0.0, -3.0]
    ),
    'robot.joint_dynamics': Probe(
        str(DATA / 'mimic_gripper.yaml'), {'robot.joint_dynamics': 'none'}, lambda b: b.period(), None
    ),
    'robot.friction_velocity': Probe(
        str(DATA / 'mimic_gripper.yaml'), {'robot.friction_velocity': 0.5}, lambda b: b.period(), None
    ),
    'robot.allow_nonphysical': Probe(
        'scara', {'robot.allow_nonphysical': True}, _settings('robot.allow_nonphysical'), True
    ),
    # ------------------------------------------------------------------ actuators
    'actuators.names': Probe(
        'scara',
        {
            'actuators.names': ['a', 'b', 'c', 'd'],
            **{f'actuators.{n}': {'joint': f'joint{k + 1}'} for k, n in enumerate('abcd')},
            **{f'actuators.motor{k}': None for k in range(1, 5)},
            'hardware.motors': None,
        },
        lambda b: b.ctrl.actuator_names,
        ['a', 'b', 'c', 'd'],
    ),
    'actuators.<name>.joint': Probe(
        'scara',
        {'actuators.motor1.joint': 'joint2', 'actuators.motor2.joint': 'joint1'},
        lambda b: b.setup.actuators.matrix(b.setup.model)[:, 0],
        [0.0, 1.0, 0.0, 0.0],
    ),
    'actuators.<name>.between': Probe(
        'dual_arm',
        {'actuators.motor6.between': ['world', 'link5']},
        lambda b: b.step(),
        None,
    ),
    'actuators.<name>.tendon': Probe(
        str(DATA / 'gripper_mjcf.yaml'),
        {'actuators.fingers.tendon': None, 'actuators.fingers.joint': 'right_driver_joint'},
        lambda b: b.setup.actuators.matrix(b.setup.model)[:, 0],
        None,
    ),
    'actuators.<name>.axis': Probe(
        'dual_arm',
        {'actuators.motor6.axis': [0.0, 1.0, 0.0]},
        lambda b: b.step(),
        None,
    ),
    'actuators.<name>.effort_limit': Probe(
        'scara', {'actuators.motor1.effort_limit': 1.5}, lambda b: b.ctrl.effort_limits[0], 1.5
    ),
    # ------------------------------------------------------------------ constraints
    'constraints.names': Probe(
        'scara',
        {'constraints.names': ['tool_path'], 'constraints.tool_orientation': None},
        lambda b: b.ctrl.servo.names,
        ['tool_path'],
    ),
    'constraints.<name>.type': Probe(
        'scara', SCARA_ORIENTATION, lambda b: [type(t).__name__ for t in b.ctrl.servo.terms], None
    ),
    'constraints.<name>.role': Probe(
        'scara', {'constraints.tool_orientation.role': 'passive'}, lambda b: b.ctrl.passive.names, ['tool_orientation']
    ),
    'constraints.<name>.frame': Probe('scara', {'constraints.tool_path.frame': 'link3'}, lambda b: b.step(), None),
    'constraints.<name>.axes': Probe(
        'scara',
        {'constraints.tool_path.axes': ['x', 'y'], 'constraints.tool_path.trajectory.components': [0, 1]},
        lambda b: b.ctrl.servo.m,
        3,
    ),
    'constraints.<name>.mode': Probe(
        'dual_arm',
        {'constraints.arm2_ground_hinge.mode': 'weld', 'constraints.arm2_ground_hinge.axes': None},
        lambda b: b.ctrl.passive.m,
        None,
    ),
    'constraints.<name>.axis': Probe(
        'planar_3r', {f'{PLANAR_ORIENTATION}.axis': [0.0, -1.0, 0.0]}, lambda b: b.step(), None
    ),
    'constraints.<name>.reference': Probe(
        'scara',
        {'constraints.tool_orientation.reference': [0.3, 0.0]},
        lambda b: b.step(),
        None,
        base=SCARA_POLY_JOINTS,
    ),
    'constraints.<name>.zero_direction': Probe(
        'planar_3r', {f'{PLANAR_ORIENTATION}.zero_direction': [0.0, 0.0, 1.0]}, lambda b: b.step(), None
    ),
    'constraints.<name>.coefficients': Probe(
        'scara', {'constraints.tool_orientation.coefficients': [1.0, 2.0, 1.0, 0.0]}, lambda b: b.step(), None
    ),
    'constraints.<name>.joints': Probe(
        'scara',
        {'constraints.tool_orientation.joints': ['joint3', 'joint2']},
        lambda b: b.step(),
        None,
        base=SCARA_POLY_JOINTS,
    ),
    'constraints.<name>.polycoef': Probe(
        'scara',
        {'constraints.tool_orientation.polycoef': [0.0, 0.9, 0.1, 0.0, 0.0]},
        lambda b: b.step(),
        None,
        base=SCARA_POLY_JOINTS,
    ),
    'constraints.<name>.value': Probe('scara', {'constraints.tool_orientation.value': 0.2}, lambda b: b.step(), None),
    'constraints.<name>.frames': Probe(
        'dual_arm', {'constraints.arm2_ground_hinge.frames': ['arm2_base', 'link5_tip']}, lambda b: b.step(), None
    ),
    'constraints.<name>.angle_axis': Probe(
        'dual_arm',
        {'constraints.arm2_ground_hinge.angle_axis': [0.0, 1.0, 0.0]},
        lambda b: b.step(),
        None,
        base={'constraints.arm2_ground_hinge.angle_axis': [0.0, -1.0, 0.0]},
    ),
    'constraints.<name>.function': Probe(
        'scara',
        {'constraints.tool_orientation.function': 'test_settings_reach:doubled_row'},
        lambda b: b.step(),
        None,
        base=CALLABLE,
    ),
    'constraints.<name>.params': Probe(
        'scara', {'constraints.tool_orientation.params': {'value': 0.3}}, lambda b: b.step(), None, base=CALLABLE
    ),
    'constraints.<name>.rows': Probe(
        'scara',
        {'constraints.tool_orientation.rows': 2, 'constraints.tool_orientation.params': {'value': 0.0, 'copies': 2}},
        lambda b: b.ctrl.servo.m,
        5,
        base={**CALLABLE, 'constraints.tool_orientation.rows': None},
    ),
    'constraints.<name>.order': Probe(
        'scara',
        {'constraints.tool_orientation.order': 1},
        lambda b: list(b.ctrl.servo.rows.order),
        [2, 2, 2, 1],
        base=CALLABLE,
    ),
    # trajectory keys (the table of trajectory types)
    'constraints.<name>.trajectory.type': Probe('scara', SCARA_LINE, lambda b: b.step(), None),
    'constraints.<name>.trajectory.start_time': Probe(
        'scara', {'constraints.tool_path.trajectory.start_time': 0.5}, lambda b: b.step(), None
    ),
    'constraints.<name>.trajectory.components': Probe(
        'scara',
        {'constraints.tool_path.axes': ['x', 'y'], 'constraints.tool_path.trajectory.components': [1, 0]},
        lambda b: b.step(),
        None,
        base={'constraints.tool_path.axes': ['x', 'y'], 'constraints.tool_path.trajectory.components': [0, 1]},
    ),
    'constraints.<name>.trajectory.phase': Probe(
        'scara', {'constraints.tool_path.trajectory.phase': 0.4}, lambda b: b.step(), None
    ),
    'constraints.<name>.trajectory.radius': Probe(
        'scara', {'constraints.tool_path.trajectory.radius': 0.04}, lambda b: b.step(), None
    ),
    'constraints.<name>.trajectory.omega': Probe(
        'scara', {'constraints.tool_path.trajectory.omega': 2.0}, lambda b: b.step(), None
    ),
    'constraints.<name>.trajectory.centre': Probe(
        'scara', {'constraints.tool_path.trajectory.centre': [0.0, 0.34, 0.0]}, lambda b: b.step(), None
    ),
    'constraints.<name>.trajectory.rate': Probe(
        'scara', {'constraints.tool_path.trajectory.rate': 0.03}, lambda b: b.step(), None
    ),
    'constraints.<name>.trajectory.pitch': Probe(
        'scara',
        {'constraints.tool_path.trajectory.pitch': 0.05, 'constraints.tool_path.trajectory.rate': None},
        lambda b: b.step(),
        None,
    ),
    'constraints.<name>.trajectory.direction': Probe(
        'scara',
        {'constraints.tool_path.trajectory.direction': [0.0, 1.0, 0.0]},
        lambda b: b.step(),
        None,
        base=SCARA_LINE,
    ),
    'constraints.<name>.trajectory.amplitude': Probe(
        'scara', {'constraints.tool_path.trajectory.amplitude': 0.03}, lambda b: b.step(), None, base=SCARA_LINE
    ),
    'constraints.<name>.trajectory.length': Probe(
        'dual_arm',
        {f'{DUAL}.length': 0.8},
        lambda b: b.step(),
        None,
        base={f'{DUAL}.offset': None, f'{DUAL}.amplitude': None},
    ),
    'constraints.<name>.trajectory.offset': Probe(
        'dual_arm', {f'{DUAL}.offset': [1.6, 0.0, 0.0]}, lambda b: b.step(), None
    ),
    'constraints.<name>.trajectory.u': Probe(
        'scara',
        {'constraints.tool_path.trajectory.u': [0.0, 1.0, 0.0], 'constraints.tool_path.trajectory.v': [1.0, 0.0, 0.0]},
        lambda b: b.step(),
        None,
        base=SCARA_CIRCLE,
    ),
    'constraints.<name>.trajectory.v': Probe(
        'scara',
        {'constraints.tool_path.trajectory.v': [0.0, -1.0, 0.0]},
        lambda b: b.step(),
        None,
        base=SCARA_CIRCLE,
    ),
    'constraints.<name>.trajectory.times': Probe(
        'scara',
        {'constraints.tool_path.trajectory.times': [0.0, 0.5, 2.0]},
        lambda b: b.step(),
        None,
        base=SCARA_SPLINE,
    ),
    'constraints.<name>.trajectory.waypoints': Probe(
        'scara',
        {'constraints.tool_path.trajectory.waypoints': [0.0, 0.35, 0.0, 0.03, 0.36, 0.01, 0.03, 0.35, 0.02]},
        lambda b: b.step(),
        None,
        base=SCARA_POLYNOMIAL,
    ),
    'constraints.<name>.trajectory.dim': Probe(
        'scara',
        {
            'constraints.tool_path.axes': ['x', 'y'],
            'constraints.tool_path.trajectory.waypoints': [0.0, 0.35, 0.02, 0.36, 0.03, 0.35],
            'constraints.tool_path.trajectory.dim': 2,
        },
        lambda b: b.ctrl.servo.m,
        3,
        base=SCARA_POLYNOMIAL,
    ),
    'constraints.<name>.trajectory.bc_type': Probe(
        'scara',
        {'constraints.tool_path.trajectory.bc_type': 'natural'},
        lambda b: b.step(),
        None,
        base=SCARA_SPLINE,
    ),
    'constraints.<name>.trajectory.value': Probe(
        'planar_3r', {f'{PLANAR_ORIENTATION}.trajectory.value': [0.2]}, lambda b: b.step(), None
    ),
    # ------------------------------------------------------------------ stabilization
    'stabilization.convention': Probe(
        'scara', {'stabilization.convention': 'none'}, lambda b: float(b.ctrl.stabilization.kp), 0.0
    ),
    'stabilization.omega': Probe('scara', {'stabilization.omega': 7.0}, lambda b: float(b.ctrl.stabilization.kp), 49.0),
    'stabilization.alpha': Probe(
        'scara',
        {'stabilization.convention': 'seed000', 'stabilization.alpha': 0.7, 'stabilization.beta': 200.0},
        lambda b: float(b.ctrl.stabilization.kd),
        0.7,
    ),
    'stabilization.beta': Probe(
        'scara',
        {'stabilization.convention': 'seed000', 'stabilization.alpha': 0.5, 'stabilization.beta': 150.0},
        lambda b: float(b.ctrl.stabilization.kp),
        150.0,
    ),
    'stabilization.max_speed': Probe(
        'scara', {'stabilization.max_speed': 0.25}, lambda b: b.ctrl.solver_options['task_speed'], 0.25
    ),
    # ------------------------------------------------------------------ control
    'control.rate': Probe('scara', {'control.rate': 500.0}, lambda b: b.ctrl.rate, 500.0),
    'control.pinv': Probe('scara', {'control.pinv': 'damped'}, lambda b: b.ctrl.pinv_method, 'damped'),
    'control.rcond': Probe('scara', {'control.rcond': 1e-6}, lambda b: b.ctrl.rcond, 1e-6),
    'control.damping': Probe(
        'scara', {'control.damping': 0.5}, lambda b: b.step(), None, base={'control.pinv': 'damped'}
    ),
    'control.safe_effort': Probe('scara', {'control.safe_effort': 'hold'}, lambda b: b.ctrl.safe_effort, 'hold'),
    'control.friction_compensation': Probe(
        str(DATA / 'mimic_gripper.yaml'),
        {'control.friction_compensation': False},
        lambda b: b.ctrl.model.joint_dynamics.friction,
        [0.0, 0.0, 0.0],
    ),
    'control.state_timeout': Probe('scara', {'control.state_timeout': 0.3}, _settings('control.state_timeout'), 0.3),
    'control.clock_skew': Probe('scara', {'control.clock_skew': 0.2}, _settings('control.clock_skew'), 0.2),
    'control.soft_start': Probe('scara', {'control.soft_start': 2.0}, _settings('control.soft_start'), 2.0),
    # ------------------------------------------------------------------ posture
    'posture.enabled': Probe(
        'planar_3r', {'posture.enabled': False}, lambda b: b.ctrl.redundancy.secondary, 0, base=FREE
    ),
    'posture.reference': Probe(
        'planar_3r', {'posture.reference': [0.1, 0.2, 0.3]}, lambda b: b.ctrl.redundancy.q_ref, [0.1, 0.2, 0.3]
    ),
    'posture.omega': Probe('planar_3r', {'posture.omega': 3.0}, lambda b: b.ctrl.redundancy.gains, None, base=FREE),
    'posture.damping_ratio': Probe(
        'planar_3r', {'posture.damping_ratio': 0.5}, lambda b: b.ctrl.redundancy.gains, None, base=FREE
    ),
    'posture.limit_margin': Probe(
        'planar_3r', {'posture.limit_margin': 0.0}, lambda b: b.ctrl.redundancy.secondary, None, base=FREE
    ),
    'posture.limit_omega': Probe(
        'planar_3r', {'posture.limit_omega': 10.0}, lambda b: b.ctrl.redundancy.gains, None, base=FREE
    ),
    'posture.max_speed': Probe(
        'scara', {'posture.max_speed': 0.2}, lambda b: b.ctrl.solver_options['posture_speed'], 0.2
    ),
    'posture.metric': Probe(
        'scara', {'posture.metric': 'mass'}, lambda b: b.ctrl.solver_options['joint_metric'], False
    ),
    # ------------------------------------------------------------------ limits
    'limits.enabled': Probe('scara', {'limits.enabled': False}, lambda b: b.ctrl.joint_limits, None),
    'limits.velocity_scale': Probe(
        'scara', {'limits.velocity_scale': 0.5}, lambda b: b.ctrl.joint_limits.table[2], None
    ),
    'limits.margin': Probe('scara', {'limits.margin': 0.1}, lambda b: b.ctrl.joint_limits.table[0], None),
    'limits.deceleration': Probe('scara', {'limits.deceleration': 3.0}, lambda b: b.ctrl.joint_limits.brake, 3.0),
    'limits.time_constant': Probe(
        'scara', {'limits.time_constant': 0.5}, lambda b: b.ctrl.joint_limits.time_constant, 0.5
    ),
    'limits.weight': Probe('scara', {'limits.weight': 10.0}, lambda b: b.ctrl.joint_limits.weight, 10.0),
    'limits.singular_threshold': Probe(
        'scara', {'limits.singular_threshold': 1e-3}, lambda b: b.ctrl.joint_limits.singular_threshold, 1e-3
    ),
    'limits.singular_damping': Probe(
        'scara', {'limits.singular_damping': 1e-3}, lambda b: b.ctrl.joint_limits.singular_damping, 1e-3
    ),
    # ------------------------------------------------------------------ approach (planar 3R from a far start)
    'approach.mode': Probe(
        'planar_3r', {'approach.mode': 'off'}, lambda b: b.ctrl.approach is None, True, base=APPROACH
    ),
    'approach.restarts': Probe(
        'planar_3r', {'approach.restarts': 0}, lambda b: len(b.ctrl.approach.plan.ik.errors), 1, base=APPROACH
    ),
    'approach.tolerance': Probe(
        'planar_3r', {'approach.tolerance': 1e-4}, lambda b: b.ctrl.approach.plan.ik.tolerance, 1e-4, base=APPROACH
    ),
    'approach.speed_scale': Probe(
        'planar_3r', {'approach.speed_scale': 0.25}, lambda b: b.ctrl.approach.plan.duration, None, base=APPROACH
    ),
    'approach.blend_time': Probe(
        'planar_3r', {'approach.blend_time': 0.5}, lambda b: b.ctrl.approach.plan.blend, 0.5, base=APPROACH
    ),
    'internal_force.effort': Probe(
        'five_bar_redundant',
        {'internal_force.effort': [1.0, -1.0, 0.5]},
        lambda b: b.ctrl.redundancy.internal_effort is not None,
        True,
    ),
    # ------------------------------------------------------------------ simulation
    'simulation.duration': Probe('scara', {'simulation.duration': 0.004}, lambda b: _simulated(b).t.size, 4),
    'simulation.integrator': Probe(
        'scara', {'simulation.integrator': 'solve_ivp'}, lambda b: b.plant.backend.name, None
    ),
    'simulation.plant': Probe('scara', {'simulation.plant': 'mujoco'}, lambda b: type(b.plant).__name__, 'MujocoPlant'),
    'simulation.substeps': Probe('scara', {'simulation.substeps': 3}, lambda b: b.plant.substeps, 3),
    'simulation.mass_scale': Probe('planar_3r', {'simulation.mass_scale': 2.0}, _mass, None),
    'simulation.sensor_noise': Probe(
        'scara',
        {'simulation.sensor_noise': 1e-3},
        lambda b: _simulated(b).effort,
        None,
        base={'simulation.duration': 0.004},
    ),
    'simulation.measurement_delay': Probe(
        'scara',
        {'simulation.measurement_delay': 2},
        lambda b: _simulated(b).ok.tolist(),
        [False, False, True, True],
        base={'simulation.duration': 0.004},
    ),
    'simulation.log_every': Probe('scara', {'simulation.log_every': 5}, _settings('simulation.log_every'), 5),
    'simulation.transient': Probe('scara', {'simulation.transient': 1.0}, _settings('simulation.transient'), 1.0),
    'simulation.closure_omega': Probe(
        'five_bar', {'simulation.closure_omega': 20.0}, lambda b: float(b.plant.closure_stabilization.k1), 20.0
    ),
    'simulation.closure_rcond': Probe(
        'five_bar', {'simulation.closure_rcond': 1e-6}, lambda b: b.plant._closure_rcond, 1e-6
    ),
    'simulation.mujoco_timestep': Probe(
        'scara',
        {'simulation.mujoco_timestep': 5e-4},
        lambda b: b.plant.timestep,
        5e-4,
        base={'simulation.plant': 'mujoco'},
    ),
    'simulation.rate': Probe('scara', {'simulation.rate': 250.0}, _settings('simulation.rate'), 250.0),
    'simulation.publish_clock': Probe(
        'scara', {'simulation.publish_clock': True}, _settings('simulation.publish_clock'), True
    ),
    'simulation.lockstep': Probe('scara', {'simulation.lockstep': True}, _settings('simulation.lockstep'), True),
    'simulation.real_time_factor': Probe(
        'scara', {'simulation.real_time_factor': 2.0}, _settings('simulation.real_time_factor'), 2.0
    ),
    'simulation.lockstep_resend': Probe(
        'scara',
        {'simulation.lockstep_resend': 0.5},
        _settings('simulation.lockstep_resend'),
        0.5,
        base={'simulation.lockstep': True},  # the resend period is the plant's timer in lockstep only
    ),
    'simulation.clock_start': Probe('scara', {'simulation.clock_start': 3.0}, _settings('simulation.clock_start'), 3.0),
    'simulation.wait_for_subscribers': Probe(
        'scara', {'simulation.wait_for_subscribers': 2}, _settings('simulation.wait_for_subscribers'), 2
    ),
    'simulation.max_command_lag': Probe(
        'scara',
        {'simulation.max_command_lag': 5, 'simulation.publish_clock': True},
        _settings('simulation.max_command_lag'),
        5,
    ),
    # ------------------------------------------------------------------ hardware
    'hardware.protocol': Probe('scara', DYNAMIXEL, lambda b: type(b.bus).__name__, None),
    'hardware.port': Probe('scara', {'hardware.port': '/dev/ttyACM7'}, lambda b: b.bus.port, '/dev/ttyACM7'),
    'hardware.baud': Probe('scara', {'hardware.baud': 57600}, lambda b: b.bus.baud, 57600),
    'hardware.watchdog': Probe('scara', {'hardware.watchdog': 0.02}, lambda b: b.bus.timeout, 0.01),
    'hardware.rate': Probe('scara', {'hardware.rate': 500.0}, lambda b: b.hw.rate, 500.0),
    'hardware.motors': Probe(
        'scara', {'hardware.motors': ['motor4', 'motor3', 'motor2', 'motor1']}, lambda b: b.bus.ids, None
    ),
    'hardware.<name>.id': Probe('scara', {'hardware.motor1.id': 9}, lambda b: b.bus.ids[0], 9, base=MOTORS),
    'hardware.<name>.gear_ratio': Probe(
        'scara', {'hardware.motor1.gear_ratio': 3.0}, lambda b: b.hw.gear[0], 3.0, base=MOTORS
    ),
    'hardware.<name>.torque_constant': Probe(
        'scara', {'hardware.motor1.torque_constant': 0.5}, lambda b: b.bus.kt[0], 0.5, base=MOTORS
    ),
    'hardware.<name>.direction': Probe(
        'scara', {'hardware.motor1.direction': -1.0}, lambda b: b.hw.direction[0], -1.0, base=MOTORS
    ),
    'hardware.<name>.zero_offset': Probe(
        'scara', {'hardware.motor1.zero_offset': 0.2}, lambda b: b.hw.offset[0], 0.2, base=MOTORS
    ),
    'hardware.<name>.position_limit': Probe(
        'scara',
        {'hardware.motor1.position_limit': [-0.5, 0.5]},
        lambda b: b.ctrl.joint_limits.table[:2, 0],
        None,
        base=MOTORS,
    ),
    'hardware.<name>.velocity_limit': Probe(
        'scara', {'hardware.motor1.velocity_limit': 0.5}, lambda b: b.hw.qd_max[0], 0.5, base=MOTORS
    ),
    'hardware.<name>.torque_limit': Probe(
        'scara', {'hardware.motor1.torque_limit': 0.5}, lambda b: b.hw.tau_m_max[0], 0.5, base=MOTORS
    ),
    'hardware.dynamixel.position_unit': Probe(
        'scara',
        {'hardware.dynamixel.position_unit': 0.002},
        lambda b: b.bus.options['position_unit'],
        0.002,
        base=DYNAMIXEL,
    ),
    'hardware.dynamixel.velocity_unit': Probe(
        'scara',
        {'hardware.dynamixel.velocity_unit': 0.03},
        lambda b: b.bus.options['velocity_unit'],
        0.03,
        base=DYNAMIXEL,
    ),
    'hardware.dynamixel.current_unit': Probe(
        'scara',
        {'hardware.dynamixel.current_unit': 0.001},
        lambda b: b.bus.options['current_unit'],
        0.001,
        base=DYNAMIXEL,
    ),
    'hardware.dynamixel.current_limit': Probe(
        'scara',
        {'hardware.dynamixel.current_limit': 500},
        lambda b: b.bus.options['current_limit'],
        500,
        base=DYNAMIXEL,
    ),
    'hardware.dynamixel.model_number': Probe(
        'scara',
        {'hardware.dynamixel.model_number': 1060},
        lambda b: b.bus.options['model_number'],
        1060,
        base=DYNAMIXEL,
    ),
    'hardware.odrive.device_watchdog_factor': Probe(
        'scara',
        {'hardware.odrive.device_watchdog_factor': 3.0},
        lambda b: b.bus.options['device_watchdog_factor'],
        3.0,
        base=ODRIVE,
    ),
    'hardware.can.interface': Probe(
        'scara',
        {'hardware.can.interface': 'socketcan'},
        lambda b: b.bus.options['interface'],
        'socketcan',
        base=CAN_MIT,
    ),
    'hardware.can.bitrate': Probe(
        'scara', {'hardware.can.bitrate': 500000}, lambda b: b.bus.options['bitrate'], 500000, base=CAN_MIT
    ),
    'hardware.can.master_id': Probe(
        'scara', {'hardware.can.master_id': 7}, lambda b: b.bus.options['master_id'], 7, base=CAN_MIT
    ),
    'hardware.can.open_delay': Probe(
        'scara', {'hardware.can.open_delay': 0.5}, lambda b: b.bus.options['open_delay'], 0.5, base=CAN_MIT
    ),
    'hardware.can.device_watchdog_factor': Probe(
        'scara',
        {'hardware.can.device_watchdog_factor': 4.0},
        lambda b: b.bus.options['device_watchdog_factor'],
        4.0,
        base=CAN_MIT,
    ),
    **{
        f'hardware.<name>.mit.{key}': Probe(
            'scara',
            {f'hardware.{motor}.mit.{key}': value for motor in MOTORS['hardware.motors']},
            lambda b, key=key: b.bus.options['motors'][0][key],
            value,
            base={**CAN_MIT, **MOTORS},
        )
        for key, value in (
            ('model', 'dm-j4310'),
            ('reply', 'damiao'),
            ('p_max', 6.0),
            ('v_max', 20.0),
            ('t_max', 9.0),
            ('kp_max', 400.0),
            ('kd_max', 4.0),
        )
    },
    # ------------------------------------------------------------------ ros (the node's settings)
    'ros.joint_states_topic': Probe(
        'scara', {'ros.joint_states_topic': '/other_states'}, _settings('ros.joint_states_topic'), '/other_states'
    ),
    'ros.effort_topic': Probe(
        'scara', {'ros.effort_topic': '/other_efforts'}, _settings('ros.effort_topic'), '/other_efforts'
    ),
    'ros.output_type': Probe(
        'scara', {'ros.output_type': 'joint_trajectory'}, _settings('ros.output_type'), 'joint_trajectory'
    ),
    'ros.autostart': Probe('scara', {'ros.autostart': False}, _settings('ros.autostart'), False),
    'ros.trigger': Probe('scara', {'ros.trigger': 'state'}, _settings('ros.trigger'), 'state'),
    'ros.transport': Probe('scara', {'ros.transport': 'messages'}, _settings('ros.transport'), 'messages'),
    'ros.trajectory_start': Probe('scara', {'ros.trajectory_start': 2.0}, _settings('ros.trajectory_start'), 2.0),
    'ros.diagnostics_period': Probe('scara', {'ros.diagnostics_period': 2.0}, _settings('ros.diagnostics_period'), 2.0),
    'ros.executor': Probe('scara', {'ros.executor': 'multi_threaded'}, _settings('ros.executor'), 'multi_threaded'),
    'ros.effort_joints': Probe(
        'scara',
        {'ros.effort_joints': ['joint4', 'joint3', 'joint2', 'joint1']},
        lambda b: _effort_order(b),
        [3, 2, 1, 0],
    ),
    'ros.loop.mode': Probe('scara', {'ros.loop.mode': 'timer'}, lambda b: b.loop[0].mode, 'timer'),
    'ros.loop.priority': Probe('scara', {'ros.loop.priority': 10}, lambda b: b.loop[0].priority, 10),
    'ros.loop.cpus': Probe('scara', {'ros.loop.cpus': [1]}, lambda b: loop_cpus(b.loop[0]), [1]),
    'ros.loop.mlockall': Probe('scara', {'ros.loop.mlockall': True}, lambda b: b.loop[0].mlockall, True),
    'ros.loop.spin_us': Probe('scara', {'ros.loop.spin_us': 20.0}, lambda b: b.loop[0].spin_us, 20.0),
    'ros.loop.window': Probe('scara', {'ros.loop.window': 2.0}, lambda b: b.loop[0].window, 2.0),
    'ros.loop.fallback_periods': Probe(
        'scara', {'ros.loop.fallback_periods': 5.0}, lambda b: b.loop[0].fallback_periods, 5.0
    ),
    'ros.overrun.warn_after': Probe('scara', {'ros.overrun.warn_after': 3}, lambda b: b.loop[1].warn_after, 3),
    'ros.overrun.safe_after': Probe('scara', {'ros.overrun.safe_after': 30}, lambda b: b.loop[1].safe_after, 30),
    'ros.overrun.recover_after': Probe('scara', {'ros.overrun.recover_after': 4}, lambda b: b.loop[1].recover_after, 4),
}


def _simulated(built):
    from uk_controller.sim.closed_loop import simulate

    return simulate(built.setup)


def _effort_order(built):
    from uk_controller.settings.ros_section import effort_order

    perm, _names = effort_order(built.settings, built.setup.actuators.names, built.settings.ros.effort_joints)
    return list(perm)


def schema_keys():
    return [s.key for s in S.all_settings() if s.type != 'section']


def test_every_key_has_a_probe():
    """A key added to the schema needs a probe here (and a probe of a removed key goes with it)."""
    keys = schema_keys()
    assert sorted(set(keys) - set(PROBES)) == []
    assert sorted(set(PROBES) - set(keys)) == []


def _overrides(given, tmp_path):
    return given(tmp_path) if callable(given) else dict(given or {})


@pytest.mark.parametrize('key', sorted(PROBES))
@pytest.mark.slow
def test_key_reaches_the_running_objects(key, tmp_path):
    probe = PROBES[key]
    robot = probe.robot
    base = _overrides(probe.base, tmp_path)
    change = _overrides(probe.change, tmp_path)
    changed = probe.read(Built(robot, {**base, **change}))
    if probe.expect is not None:
        assert _equal(changed, probe.expect), (key, changed, probe.expect)
    unchanged = probe.read(Built(robot, base))
    assert not _equal(changed, unchanged), (key, 'reads the same without the change', changed)


# ----------------------------------------------------------------------------- through the CLI


def _setup_file(tmp_path, hardware=None, **simulation):
    """config/planar_3r.yaml with `simulation` (and `hardware`) keys and control.rate 500 Hz set in the file."""
    import yaml

    from uk_controller.files import rcl_yaml

    tree = yaml.safe_load((ROOT / 'config' / 'planar_3r.yaml').read_text())
    params = tree['/**']['ros__parameters']
    params['simulation'].update(simulation)
    params['control']['rate'] = 500.0
    if hardware:
        params['hardware'] = dict(hardware)
    path = tmp_path / 'planar_3r_reach.yaml'
    path.write_text(rcl_yaml.dump(tree))
    return path


@pytest.mark.slow
def test_cli_simulate_runs_the_values_of_the_file_and_its_flags(tmp_path):
    """``uk-controller simulate FILE``: the run has the file's rate, duration, delay, transient and log
    stride (none of them the default); a flag overrides the file's value for its key only."""
    import csv
    import json

    from uk_controller import cli

    path = _setup_file(tmp_path, duration=0.04, measurement_delay=3, transient=0.01, log_every=4)
    out = tmp_path / 'file'
    assert cli.main(['simulate', str(path), '--no-plots', '--out', str(out)]) == 0
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['steps'] == 20  # 0.04 s at the file's 500 Hz
    assert summary['transient_s'] == 0.01
    assert summary['steps_by_status'].get('safe_effort') == 3  # the file's measurement delay
    with open(out / 'log.csv') as fh:
        assert len(list(csv.reader(fh))) - 1 == 5  # every 4th of 20 steps
    flagged = tmp_path / 'flag'
    assert cli.main(['simulate', str(path), '--rate', '250', '--no-plots', '--out', str(flagged)]) == 0
    summary = json.loads((flagged / 'summary.json').read_text())
    assert summary['steps'] == 10 and summary['transient_s'] == 0.01  # --rate 250; the rest from the file


@pytest.mark.slow
def test_run_builds_the_controller_at_the_bus_rate_of_the_file(tmp_path):
    """``uk-controller run`` steps the controller once per bus cycle: with the file's hardware.rate 250 Hz
    below its control.rate 500 Hz, the controller it builds runs at 250 Hz, resolved as control.rate (so
    the settings' rules checked that rate)."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.hardware.run_command import run_setup

    path = _setup_file(tmp_path, hardware={'rate': 250.0})
    setup, hw = run_setup(str(path), {}, {})
    assert hw.rate == 250.0 and setup.settings.control.rate == 250.0
    assert ControllerCore(setup).rate == 250.0
    setup, hw = run_setup(str(_setup_file(tmp_path)), {}, {})  # no hardware.rate: the bus follows control.rate
    assert hw.rate == setup.settings.control.rate == 500.0
