"""Robots nobody on this project described: the example-robot-data wheel's URDFs, unedited.

The UR5 with a pose task as a user writes it (uk_controller.robots.example_robot_data.ur5_pose_yaml: tool on
a 10 cm circle, attitude held by ``frame_orientation`` ``mode: so3``) runs on the compiled backend, tracks
the task (closed loop on the embedded UK plant), stays bounded (no saturated step, every step a solution),
and its compiled steps equal the reference backend's on the states of that run. Independent checks: the
tool's pose from Pinocchio's forward kinematics on the logged q against the circle and the held attitude.
"""

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.control.controller import ControllerCore
from uk_controller.kernels import jit
from uk_controller.robots import example_robot_data as erd
from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import simulate

pytestmark = [
    pytest.mark.skipif(erd.description(erd.UR5) is None, reason='example-robot-data not installed'),
    pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed'),
]


def test_robots_dir_is_found_from_the_distribution():
    """The helper finds the wheel's files where pip installed them, as package:// does (no path assumed)."""
    from importlib import metadata

    root = erd.robots_dir()
    assert root.is_dir() and (root / erd.UR5).is_file() and (root / erd.PANDA).is_file()
    assert str(root).startswith(str(metadata.distribution(erd.DISTRIBUTION).locate_file('')))


@pytest.mark.slow
def test_ur5_pose_task_tracked_on_the_compiled_backend(tmp_path):
    path = tmp_path / 'ur5_pose.yaml'
    path.write_text(erd.ur5_pose_yaml(radius=0.1, omega=1.0, duration=4.0))
    setup = load_robot(path, {'simulation.duration': 4.0})
    fast = ControllerCore(setup)
    assert fast.backend.name == 'compiled'
    res = simulate(setup)
    assert res.ok.all() and not res.saturated.any() and np.isfinite(res.q).all()
    after = res.after(1.0)
    assert np.abs(res.task_error[after]).max() < 1e-4
    # the tool's pose from the logged q (Pinocchio's own kinematics), against the circle and the held attitude
    pm = setup.model.model
    data = pm.createData()
    fid = pm.getFrameId(erd.UR5_TOOL)
    pin.framesForwardKinematics(pm, data, setup.q0)
    p0, R0 = data.oMf[fid].translation.copy(), data.oMf[fid].rotation.copy()
    centre = p0 - np.array([0.1, 0.0, 0.0])
    for k in np.nonzero(after)[0][::200]:
        pin.framesForwardKinematics(pm, data, res.q[k])
        t = res.t[k]
        want = centre + 0.1 * np.array([np.cos(t), np.sin(t), 0.0])
        assert np.linalg.norm(data.oMf[fid].translation - want) < 1e-4
        assert np.linalg.norm(pin.log3(R0.T @ data.oMf[fid].rotation)) < 1e-4
    # efforts bounded by the URDF's limits with a margin, and joint speeds those of a 1 rad/s circle
    assert (np.abs(res.effort) < 0.5 * fast.effort_limits).all()
    assert np.abs(res.qd[after]).max() < 2.0
    # compiled step == reference step on states of the run
    ref = ControllerCore(setup, backend='reference')
    for k in range(0, res.t.size, 400):
        a, b = fast.step(res.q[k], res.qd[k], res.t[k]), ref.step(res.q[k], res.qd[k], res.t[k])
        assert (a.ok, a.status, a.rank) == (b.ok, b.status, b.rank)
        np.testing.assert_allclose(a.effort, b.effort, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(a.phi, b.phi, rtol=0, atol=1e-13)
        np.testing.assert_allclose(a.phidot, b.phidot, rtol=0, atol=1e-12)
