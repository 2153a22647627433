"""Where the ``example-robot-data`` wheel (PyPI, a cmeel package) keeps its robot descriptions.

Public robot descriptions nobody on this project wrote (UR5, Franka Panda, SO-101, ...), used by the
tests and benchmarks as a user's robot. The wheel installs them under
``<site-packages>/cmeel.prefix/share/example-robot-data/robots/``, found as a setup file finds it
(``package://example-robot-data/robots/...``: :func:`uk_controller.paths.other_package_share`, the ament
index of a ROS workspace first, then the prefixes pip installs into), never assumed::

    from uk_controller.robots.example_robot_data import description
    urdf = description('ur_description/urdf/ur5_robot.urdf')      # a Path, or None when not installed
"""

from __future__ import annotations

import functools
from pathlib import Path

DISTRIBUTION = 'example-robot-data'


@functools.lru_cache(maxsize=1)
def robots_dir() -> Path | None:
    """The ``.../share/example-robot-data/robots`` folder of the installed wheel, or None."""
    from ..paths import other_package_share

    share = other_package_share(DISTRIBUTION)
    folder = share / 'robots' if share is not None else None
    return folder if folder is not None and folder.is_dir() else None


def description(relative) -> Path | None:
    """``robots/<relative>`` of the wheel (e.g. ``'ur_description/urdf/ur5_robot.urdf'``) when it exists."""
    root = robots_dir()
    if root is None:
        return None
    path = root / relative
    return path if path.is_file() else None


#: descriptions the tests and the bench use: name -> path under robots/
UR5 = 'ur_description/urdf/ur5_robot.urdf'
PANDA = 'panda_description/urdf/panda.urdf'


#: the usual home postures and tool frames
UR5_HOME = (0.0, -1.5707963267948966, 1.5707963267948966, -1.5707963267948966, -1.5707963267948966, 0.0)
UR5_TOOL = 'tool0'
PANDA_HOME = (
    0.0,
    -0.7853981633974483,
    0.0,
    -2.356194490192345,
    0.0,
    1.5707963267948966,
    0.7853981633974483,
    0.02,
    0.02,
)
PANDA_TOOL = 'panda_hand_tcp'


def _floats(v):
    return '[' + ', '.join(repr(float(x)) for x in v) + ']'


def arm_setup_yaml(name, relative, joints, start, rows, *, control='rate: 1000.0', simulation, sections=''):
    """Text of the setup file a user would write for a wheel's arm (its URDF unedited, named as
    ``package://example-robot-data/robots/...``): the arm at `start`, one actuator per joint, the servo
    `rows` ({name: the row's indented YAML}), critical stabilization at 20 rad/s, and the `control` and
    `simulation` sections' keys as ``key: value`` text; `sections`: more sections' YAML lines (indented)."""
    actuators = ''.join(f'      m_{j}: {{joint: {j}}}\n' for j in joints)
    return f"""/**:
  ros__parameters:
    robot:
      name: {name}
      urdf: package://{DISTRIBUTION}/robots/{relative}
      joints: [{', '.join(joints)}]
      initial_position: {_floats(start)}
    actuators:
      names: [{', '.join('m_' + j for j in joints)}]
{actuators}    constraints:
      names: [{', '.join(rows)}]
{''.join(rows.values())}    stabilization: {{convention: critical, omega: 20.0}}
    control: {{{control}}}
{sections}    simulation: {{{simulation}}}
"""


def hold_rows(tool, position, rotation_vector=None):
    """Servo rows holding `tool` at `position` (``tool_point``) and, with `rotation_vector`, at that
    attitude (``tool_attitude``, ``frame_orientation`` in ``mode: so3``)."""
    rows = {
        'tool_point': f"""      tool_point:
        role: servo
        type: frame_position
        frame: {tool}
        axes: ['x', 'y', 'z']
        trajectory: {{type: hold, value: {_floats(position)}}}
"""
    }
    if rotation_vector is not None:
        rows['tool_attitude'] = f"""      tool_attitude:
        role: servo
        type: frame_orientation
        mode: so3
        frame: {tool}
        trajectory: {{type: hold, value: {_floats(rotation_vector)}}}
"""
    return rows


def circle_task_yaml(
    relative, home, tool, *, radius=0.1, omega=1.0, attitude=False, duration=6.0, control=None, name='arm'
):
    """Text of the setup file a user would write for a wheel's arm (:func:`arm_setup_yaml`): the
    `tool` frame on a horizontal circle of `radius` m through its position at `home` (phase 0), and with
    `attitude` its orientation held there too (``frame_orientation``, ``mode: so3``).
    `control`: extra keys of the ``control`` section (text ``key: value`` pairs, e.g. a posture task's).
    The numbers (tool position and rotation vector at home) come from Pinocchio's forward kinematics of that
    URDF, as a user would read them off a viewer. None when the wheel is not installed."""
    urdf = description(relative)
    if urdf is None:
        return None
    import numpy as np
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.array(home, dtype=float))
    pose = data.oMf[model.getFrameId(tool)]
    centre = pose.translation - np.array([radius, 0.0, 0.0])
    joints = [model.names[j] for j in range(1, model.njoints)]
    rows = {
        'tool_circle': f"""      tool_circle:
        role: servo
        type: frame_position
        frame: {tool}
        axes: ['x', 'y', 'z']
        trajectory: {{type: circle, centre: {_floats(centre)}, radius: {radius!r}, omega: {omega!r},
                     u: [1.0, 0.0, 0.0], v: [0.0, 1.0, 0.0]}}
"""
    }
    if attitude:
        rows.update({'tool_attitude': hold_rows(tool, pose.translation, pin.log3(pose.rotation))['tool_attitude']})
    extra = ''.join(f', {k}: {v}' for k, v in (control or {}).items())
    return arm_setup_yaml(
        name,
        relative,
        joints,
        home,
        rows,
        control=f'rate: 1000.0, pinv: svd{extra}',
        simulation=f'duration: {duration!r}, substeps: 1',
    )


def ur5_pose_yaml(radius=0.1, omega=1.0, duration=6.0):
    """The UR5's tool on a 10 cm circle with its attitude held (position + so3 rows): :func:`circle_task_yaml`."""
    return circle_task_yaml(
        UR5, UR5_HOME, UR5_TOOL, radius=radius, omega=omega, attitude=True, duration=duration, name='ur5_pose'
    )


def panda_position_yaml(radius=0.05, omega=1.0, duration=6.0, control=None):
    """The Panda's TCP on a 5 cm circle (3 position rows; 7 arm joints + 2 fingers): :func:`circle_task_yaml`;
    `control` adds keys to the control section (the posture task of the null space, where configured)."""
    return circle_task_yaml(
        PANDA,
        PANDA_HOME,
        PANDA_TOOL,
        radius=radius,
        omega=omega,
        duration=duration,
        control=control,
        name='panda_position',
    )
