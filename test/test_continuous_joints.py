"""URDF 'continuous' joints: one unwrapped angle per joint in our q, (cos, sin) only inside
Pinocchio. The same arm written with 'revolute' joints (limits far out of reach) is the independent
reference: model terms, frames and whole closed-loop runs over several turns must agree to round-off."""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from variants import variant

from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import simulate

ARM = """<?xml version="1.0"?>
<robot name="crank_arm">
  <link name="world"/>
  <joint name="crank" type="{kind}">
    <parent link="world"/><child link="link1"/>
    <origin xyz="0 0 0.5" rpy="1.5707963267948966 0 0"/>
    <axis xyz="0 0 1"/>
    {limit}
  </joint>
  <link name="link1">
    <inertial><origin xyz="0.15 0.01 0"/><mass value="1.5"/>
      <inertia ixx="0.002" ixy="0.0001" ixz="0" iyy="0.012" iyz="0" izz="0.013"/></inertial>
  </link>
  <joint name="slider" type="prismatic">
    <parent link="link1"/><child link="link2"/>
    <origin xyz="0.3 0 0"/><axis xyz="1 0 0"/>
    <limit effort="200" velocity="10" lower="-100" upper="100"/>
  </joint>
  <link name="link2">
    <inertial><origin xyz="0.05 0 0"/><mass value="0.4"/>
      <inertia ixx="0.0004" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial>
  </link>
  <joint name="wrist" type="{kind}">
    <parent link="link2"/><child link="link3"/>
    <origin xyz="0.1 0 0" rpy="0 0.3 0"/>
    <axis xyz="0 0.6 0.8"/>
    {limit}
  </joint>
  <link name="link3">
    <inertial><origin xyz="0.08 0 0.01"/><mass value="0.6"/>
      <inertia ixx="0.0005" ixy="0" ixz="0.00002" iyy="0.002" iyz="0" izz="0.002"/></inertial>
  </link>
  <joint name="tool_joint" type="fixed">
    <parent link="link3"/><child link="tool"/><origin xyz="0.16 0 0"/>
  </joint>
  <link name="tool"/>
</robot>
"""
REVOLUTE_LIMIT = '<limit effort="200" velocity="50" lower="-1000" upper="1000"/>'
CONTINUOUS_LIMIT = '<limit effort="200" velocity="50"/>'

# crank spins at 2 rev/s (helix z component: angle = 0.2 + 4 pi t), the wrist turns back and forth over
# 1.5 turns, the slider oscillates: after 1.5 s the crank has made three full turns.
SETUP = """
robot:
  name: crank_arm
  urdf: {urdf}
  joints: [crank, slider, wrist]
  initial_position: [0.25, 0.0, 0.0]
  initial_velocity: [0.0, 0.0, 0.0]
constraints:
  names: [spin, reach, roll]
  spin:
    role: servo
    type: joint_linear
    joints: [crank]
    coefficients: [1.0]
    trajectory: {{type: helix, radius: 0.0, omega: 1.0, centre: [0.0, 0.0, 0.2], rate: 12.566370614359172,
                 components: [2]}}
  reach:
    role: servo
    type: joint_linear
    joints: [slider]
    coefficients: [1.0]
    trajectory: {{type: line, centre: [0.0], amplitude: 0.05, omega: 3.0}}
  roll:
    role: servo
    type: joint_linear
    joints: [wrist]
    coefficients: [1.0]
    trajectory: {{type: line, centre: [0.0], amplitude: 4.71238898038469, omega: 2.0}}
stabilization: {{convention: critical, omega: 20.0, max_speed: 0.0}}
# the linear law above: the 4.7 rad start error closes in 1.5 s
control: {{rate: 1000.0}}
simulation: {{duration: 1.5}}
"""


def write_arm(folder, kind, actuators=False):
    """arm.urdf + arm.yaml in `folder`; without `actuators` the setup has no actuators section (one motor
    per joint by default), with it the three motors are listed (the hardware layer needs the names)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    limit = CONTINUOUS_LIMIT if kind == 'continuous' else REVOLUTE_LIMIT
    (folder / 'arm.urdf').write_text(ARM.format(kind=kind, limit=limit))
    body = SETUP.format(urdf='arm.urdf').strip('\n')
    if actuators:
        body += (
            '\nactuators:\n  names: [m_crank, m_slider, m_wrist]\n  m_crank: {joint: crank}\n'
            '  m_slider: {joint: slider}\n  m_wrist: {joint: wrist}'
        )
    (folder / 'arm.yaml').write_text(
        '/**:\n  ros__parameters:\n' + '\n'.join('    ' + line for line in body.splitlines())
    )
    return folder / 'arm.yaml'


@pytest.fixture(scope='module')
def arms(tmp_path_factory):
    root = tmp_path_factory.mktemp('arms')
    return {kind: load_robot(write_arm(root / kind, kind)) for kind in ('continuous', 'revolute')}


def test_continuous_model_matches_revolute(arms):
    cont, rev = arms['continuous'].model, arms['revolute'].model
    assert cont.n == rev.n == 3 and cont.model.nq == 5 and rev.model.nq == 3
    assert cont.continuous_names == ['crank', 'wrist']
    lower, upper = cont.position_limits
    assert np.isinf(lower[[0, 2]]).all() and np.isinf(upper[[0, 2]]).all() and upper[1] == 100.0
    rng = np.random.default_rng(3)
    for q_turns in (0.0, 1.0, -2.0, 5.0):  # angles far outside (-pi, pi]: several turns
        q = rng.normal(size=3) + np.array([2 * np.pi * q_turns, 0.0, -2 * np.pi * q_turns])
        qd, qdd = rng.normal(size=3), rng.normal(size=3)
        cont.compute(q, qd)
        rev.compute(q, qd)
        np.testing.assert_allclose(cont.M, rev.M, rtol=0, atol=1e-12)
        np.testing.assert_allclose(cont.h, rev.h, rtol=0, atol=1e-12)
        np.testing.assert_allclose(cont.frame_position('tool'), rev.frame_position('tool'), atol=1e-12)
        np.testing.assert_allclose(cont.frame_jacobian('tool'), rev.frame_jacobian('tool'), atol=1e-12)
        np.testing.assert_allclose(cont.frame_drift('tool'), rev.frame_drift('tool'), atol=1e-12)
        np.testing.assert_allclose(cont.inverse_dynamics(q, qd, qdd), rev.inverse_dynamics(q, qd, qdd), atol=1e-12)
        np.testing.assert_allclose(cont.forward_dynamics(q, qd, qdd), rev.forward_dynamics(q, qd, qdd), atol=1e-10)
        # Pinocchio's own configuration of the continuous joints is (cos, sin) of our angle
        qp = cont.to_pinocchio_q(q)
        np.testing.assert_allclose(qp, [np.cos(q[0]), np.sin(q[0]), q[1], np.cos(q[2]), np.sin(q[2])])
        back = cont.from_pinocchio_q(qp)
        np.testing.assert_allclose(np.cos(back - q), 1.0, atol=1e-12)
        M_direct = pin.crba(cont.model, cont.model.createData(), qp)
        np.testing.assert_allclose(np.triu(M_direct), np.triu(rev.M), atol=1e-12)


@pytest.mark.parametrize('plant, compiled', [('uk', None), ('uk', False), ('mujoco', None)])
@pytest.mark.slow
def test_continuous_tracks_like_revolute_over_several_turns(arms, plant, compiled):
    """compiled=None: the whole loop compiled (sim/compiled_loop.py) when available; False: the Python loop
    (ControllerCore step with Pinocchio fed (cos, sin)). The revolute arm is the reference either way."""
    duration = 1.5 if plant == 'uk' else 0.5
    runs = {
        kind: simulate(variant(setup, {'simulation.plant': plant, 'simulation.duration': duration}), compiled=compiled)
        for kind, setup in arms.items()
    }
    cont, rev = runs['continuous'], runs['revolute']
    assert cont.settings['loop'] == rev.settings['loop']
    if plant == 'uk':
        assert cont.q[-1, 0] > 0.2 + 2 * np.pi * 2.9  # the crank angle is unwrapped: ~3 turns
    scale = np.abs(rev.effort).max()
    tol = 1e-9 if plant == 'uk' else 1e-6
    np.testing.assert_allclose(cont.effort, rev.effort, rtol=0, atol=tol * scale)
    np.testing.assert_allclose(cont.q, rev.q, rtol=0, atol=tol * 10)
    # tracked: the 4.7 rad initial wrist error is down to the 1 kHz zero-order-hold lag (~1e-3 rad)
    final = 5e-3 if plant == 'uk' else 0.05  # the MuJoCo run is shorter (0.5 s)
    assert np.abs(cont.task_error[-100:]).max() < final < np.abs(cont.task_error[0]).max()


@pytest.mark.serial
@pytest.mark.usefixtures('fast_gil_switch')
@pytest.mark.slow
def test_continuous_arm_over_serial_matches_in_process(tmp_path, robots):
    """Serial drivers (uk_binary over a pseudo-terminal, test_hardware_hil.py's rig) report one unwrapped
    angle per continuous joint: the hardware loop reproduces the in-process run past two crank turns
    (float32 on the wire: 1e-5 rad, as for the shipped robots)."""
    from test_hardware_hil import RATE, hil

    config = robots(str(write_arm(tmp_path / 'arm', 'continuous', actuators=True)))
    duration = 1.1
    sim = simulate(load_robot(config, {'simulation.duration': duration, 'control.rate': RATE}))
    k, q, e, diag = hil(config, 'uk_binary', duration)
    np.testing.assert_array_equal(k, np.arange(int(round(duration * RATE))))
    assert diag['timeouts'] == 0 and diag['crc_errors'] == 0
    assert q[-1, 0] > 2 * 2 * np.pi
    assert np.max(np.abs(q - sim.q[k])) < 1e-5
    assert np.max(np.abs(e - sim.task_error[k])) < 1e-5
