"""A robot with URDF 'continuous' joints through the ROS nodes over real DDS (loopback): joint_states
carry one unwrapped angle per joint (radians) both ways, and the lockstep loop reproduces the in-process
simulation, with the crank past two full turns."""

import os

import numpy as np
import pytest
from parallel import domain_id

DOMAIN_ID = domain_id(74)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

rclpy = pytest.importorskip('rclpy')
from ros_nodes import NodeProcess, Probe  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from test_continuous_joints import write_arm  # noqa: E402

from uk_controller.robots import load_robot  # noqa: E402
from uk_controller.sim.closed_loop import simulate  # noqa: E402

pytestmark = pytest.mark.ros

RATE = 200.0
CLOCK_START = 1.0  # uk_sim_node's default simulation.clock_start


def _stamp(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


@pytest.mark.slow
def test_continuous_arm_lockstep_over_dds(tmp_path, robots):
    config = robots(str(write_arm(tmp_path / 'arm', 'continuous')))
    duration = 1.1
    steps = int(round(duration * RATE))
    probe = Probe(DOMAIN_ID)
    try:
        states = probe.record(
            JointState, '/joint_states', convert=lambda m: (_stamp(m), list(m.name), list(m.position))
        )
        probe.record(Float64MultiArray, '/uk_controller_node/task_error', convert=lambda m: list(m.data))
        ctl = {'config': config, 'use_sim_time': True, 'control': {'rate': RATE}, 'ros': {'trigger': 'state'}}
        sim = {
            'config': config,
            'control': {'rate': RATE},
            'simulation': {'lockstep': True, 'substeps': 2, 'wait_for_subscribers': 2},
        }
        controller = NodeProcess('uk_controller.ros.controller_node', ctl, DOMAIN_ID, str(tmp_path))
        probe.wait_for(lambda: probe.publishers('/uk_controller_node/task_error') > 0, 20.0)
        plant = NodeProcess('uk_controller.ros.sim_node', sim, DOMAIN_ID, str(tmp_path))
        try:
            done = probe.wait_for(
                lambda: any(
                    round((t - CLOCK_START) * RATE) >= steps for _, (t, _n, _q) in probe.snapshot('/joint_states')
                ),
                60.0,
            )
        finally:
            codes = plant.stop(), controller.stop()
        assert done and codes == (0, 0), f'{controller.output()[-3000:]}\n{plant.output()[-2000:]}'
        states = probe.snapshot('/joint_states')
    finally:
        probe.close()
    ref = simulate(
        load_robot(config, {'simulation.duration': duration, 'control.rate': RATE, 'simulation.substeps': 2})
    )
    by_step = {int(round((t - CLOCK_START) * RATE)): (names, q) for _, (t, names, q) in states}
    names, _ = by_step[steps - 1]
    assert names == ['crank', 'slider', 'wrist']  # one position per joint, no (cos, sin) pair
    common = [k for k in range(steps) if k in by_step]
    assert len(common) > 0.9 * steps
    dq = max(np.abs(np.asarray(by_step[k][1]) - ref.q[k]).max() for k in common)
    assert dq < 1e-9
    assert by_step[steps - 1][1][0] > 2 * 2 * np.pi  # unwrapped: the crank is past two full turns
