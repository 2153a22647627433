"""uk_sim_node on MuJoCo (``simulation.plant: mujoco``) driven by uk_controller_node over real DDS.

MuJoCo builds its own model from the URDF and closes the loops with its own
equality constraints (uk_controller/sim/mujoco_plant.py), so this is the closed
chains and the dual arms on a simulator that shares nothing of our dynamics,
over ROS. In lockstep (the plant advances only when the effort for its last
state arrives) the DDS loop must reproduce the in-process
``simulate`` with ``simulation.plant: mujoco`` run to rounding: same states, same task errors.
"""

import os

import numpy as np
import pytest
from parallel import domain_id

DOMAIN_ID = domain_id(75)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('mujoco')

from dds_loops import run_controller_first  # noqa: E402
from ros_nodes import Probe  # noqa: E402

from uk_controller.robots import load_robot  # noqa: E402
from uk_controller.sim.closed_loop import simulate  # noqa: E402

RATE = 200.0
CLOCK_START = 1.0


@pytest.fixture(scope='module')
def probe():
    p = Probe(DOMAIN_ID)
    yield p
    p.close()


@pytest.mark.ros
@pytest.mark.parametrize('robot,duration', [('five_bar', 0.5), ('dual_arm', 0.5)], indirect=['robot'])
@pytest.mark.slow
def test_mujoco_plant_over_dds_reproduces_the_in_process_mujoco_loop(probe, tmp_path, robot, duration):
    steps = int(round(duration * RATE))
    ctl = {'config': robot, 'use_sim_time': True, 'control': {'rate': RATE}, 'ros': {'trigger': 'state'}}
    sim = {
        'config': robot,
        'control': {'rate': RATE},
        'simulation': {'plant': 'mujoco', 'lockstep': True, 'wait_for_subscribers': 2},
    }
    states, errors, plant_output = run_controller_first(
        probe,
        tmp_path,
        DOMAIN_ID,
        ctl,
        sim,
        lambda s, e: len(e) >= steps and max((round((t - CLOCK_START) * RATE) for _, (t, _q) in s), default=0) >= steps,
        timeout=90.0,
    )
    assert 'mujoco plant' in plant_output
    ref = simulate(
        load_robot(robot, {'simulation.duration': duration, 'control.rate': RATE, 'simulation.plant': 'mujoco'})
    )
    by_step = {int(round((t - CLOCK_START) * RATE)): q for _, (t, q) in states}
    common = [k for k in range(steps) if k in by_step]
    assert len(common) > 0.9 * steps and steps - 1 in by_step
    dq = max(np.abs(np.asarray(by_step[k]) - ref.q[k]).max() for k in common)
    assert dq < 1e-9, f'MuJoCo over DDS differs from in-process MuJoCo by {dq:.3e}'
    dds_error = np.array([e for _, e in errors])
    first = int(np.argmin(np.abs(ref.task_error - dds_error[0]).max(axis=1)))
    count = min(len(dds_error), steps - first)
    assert count > 0.5 * steps
    assert np.abs(dds_error[:count] - ref.task_error[first : first + count]).max() < 1e-9
    print(
        f'{robot} on MuJoCo over DDS: {len(common)} states, |dq| vs in-process {dq:.1e}, '
        f'final task error {np.linalg.norm(dds_error[count - 1]):.2e} m'
    )


def test_unknown_plant_is_named():
    from uk_controller.files.parameter_file import ConfigError
    from uk_controller.settings.resolve import resolve

    with pytest.raises(ConfigError, match="simulation.plant: 'gazebo' is not one of uk, mujoco"):
        resolve(None, {'simulation.plant': 'gazebo'})
