"""The MuJoCo plant: an independent physics engine for the same robots.

1. Open loop, the two engines integrate the same torques from the same state:
   our UK plant (Pinocchio + UK closure forces) and MuJoCo (its own model from
   the URDF, soft equality constraints for the closures) must agree.
2. Closed loop, the controller tracks on MuJoCo too.
"""

import numpy as np
import pytest

from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import simulate
from uk_controller.sim.mujoco_plant import MujocoPlant
from uk_controller.sim.uk_plant import UKPlant

pytest.importorskip('mujoco')


@pytest.mark.parametrize(
    'robot, tol', [('scara', 1e-6), ('five_bar', 1e-5), ('five_bar_redundant', 1e-5), ('dual_arm', 1e-5)]
)
@pytest.mark.slow
def test_open_loop_engines_agree(robot, tol):
    setup = load_robot(robot, {'simulation.substeps': 2})
    ours = UKPlant.from_setup(setup)
    theirs = MujocoPlant.from_setup(setup, joint_limits=False)
    rng = np.random.default_rng(3)
    u = 0.3 * rng.normal(size=setup.actuators.p)
    for _ in range(150):
        ours.step(u, 1e-3)
        theirs.step(u, 1e-3)
    dq = np.abs(ours.q - theirs.q).max()
    motion = np.abs(ours.q - setup.q0).max()
    print(f'{robot}: |q_uk - q_mujoco| {dq:.2e} rad after 0.15 s (motion {motion:.2e})')
    assert motion > 20 * dq
    assert dq < tol


@pytest.mark.parametrize('robot, tol', [('scara', 1e-4), ('five_bar', 1e-4), ('dual_arm', 1e-3)])
@pytest.mark.slow
def test_tracking_on_mujoco(robot, tol):
    setup = load_robot(robot, {'simulation.duration': 1.0, 'simulation.plant': 'mujoco'})
    result = simulate(setup)
    s = result.summary(transient=0.5)
    print(
        f"{robot} on MuJoCo: task error max {s['task_error_max']:.2e}, RMS {s['task_error_rms']:.2e}, "
        f"closure {s['closure_residual_max']:.2e}"
    )
    assert s['safe_effort_steps'] == 0
    assert s['task_error_max'] < tol
