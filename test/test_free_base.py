"""A free base held by its feet: the biped of test/data/biped_free.sdf (no joint to the world, robot.base: free)
standing on both feet welded where they start, its pelvis height on a sine and its attitude held.

Checked against what does not come from the controller: the foot frames' poses recomputed from the logged
joint positions by Pinocchio, the pelvis pose likewise, and the base's total mass from the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.robots.setup import load_robot
from uk_controller.sim.closed_loop import simulate

DATA = Path(__file__).parent / 'data'


def frame_poses(model, qs, frame):
    fid = model.getFrameId(frame)
    data = model.createData()
    out = []
    for q in qs:
        pin.framesForwardKinematics(model, data, q)
        out.append(data.oMf[fid].copy())
    return out


def test_hold_without_value_holds_where_the_row_starts():
    setup = load_robot(str(DATA / 'biped_standing.yaml'))
    model = setup.model.model
    data = model.createData()
    pin.framesForwardKinematics(model, data, setup.q0)
    held = {term.name: term.traj.value for term in setup.passive.terms}
    np.testing.assert_allclose(held['left_foot_point'], data.oMf[model.getFrameId('left_foot')].translation, atol=1e-15)
    np.testing.assert_allclose(
        held['right_foot_attitude'], pin.log3(data.oMf[model.getFrameId('right_foot')].rotation), atol=1e-15
    )
    servo = {term.name: term.traj.value for term in setup.servo.terms if term.name != 'pelvis_height'}
    np.testing.assert_allclose(servo['pelvis_xy'], [0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(servo['pelvis_attitude'], [0.0, 0.0, 0.0], atol=1e-15)


@pytest.mark.slow
def test_free_base_biped_stands_with_feet_still_and_pelvis_tracked():
    setup = load_robot(str(DATA / 'biped_standing.yaml'), {'simulation.duration': 3.0})
    assert setup.joint_names[:6] == ['base_x', 'base_y', 'base_z', 'base_yaw', 'base_pitch', 'base_roll']
    assert not any(a.joint in range(6) for a in setup.actuators.actuators)  # the base is not actuated
    res = simulate(setup)
    s = res.summary()
    assert not s['failure'], s['verdict']
    assert np.abs(res.closure_residual).max() <= 1e-10
    model = setup.model.model
    for foot in ('left_foot', 'right_foot'):
        poses = frame_poses(model, res.q[::50], foot)
        for pose in poses:
            assert np.linalg.norm(pose.translation - poses[0].translation) <= 1e-10
            assert np.linalg.norm(pin.log3(poses[0].rotation.T @ pose.rotation)) <= 1e-10
    pelvis = frame_poses(model, res.q, 'pelvis')
    t = res.t
    z_wanted = 0.87 + 0.03 * np.cos(2.0 * t)
    z = np.array([p.translation[2] for p in pelvis])
    after = t >= 0.5
    assert np.abs(z - z_wanted)[after].max() < 1e-4
    assert z.max() - z.min() > 0.059  # the pelvis really moved 6 cm
    assert max(np.linalg.norm(pin.log3(p.rotation)) for p in pelvis) < 1e-4
    assert np.abs(res.effort).max() <= 300.0
    assert np.abs(res.qd).max() <= 10.0  # the file's velocity limits
