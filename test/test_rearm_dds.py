"""Re-arming without a jolt over DDS: uk_controller_node (trigger state, sim time) with the lockstep
uk_sim_node; ~/stop, a period of safe effort ('hold': the last effort, as a vertical axis needs to
not fall), during which the arm drifts, then ~/start.

Without the re-arming rule ~/start would restart the trajectory clock at t = 0 (or, on stale state, keep it running),
so the first efforts after re-arming would correct the whole jump at full gain. The trajectory clock is
held during the outage and the gains ramp in over control.soft_start. Requirement: the peak effort in
the first second after re-arming is no larger than the steady-state peak of the same run. The outage
length depends on when the service calls land, which the requirement does not: any outage must pass.
"""

import os

import numpy as np
import pytest
from parallel import domain_id

DOMAIN_ID = domain_id(77)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

rclpy = pytest.importorskip('rclpy')
from ros_nodes import NodeProcess, Probe  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

pytestmark = pytest.mark.ros

RATE = 200.0


@pytest.mark.parametrize('robot', ['scara'], indirect=True)
@pytest.mark.slow
def test_stop_start_rearms_without_a_jolt_over_dds(tmp_path, robot):
    probe = Probe(DOMAIN_ID)
    efforts = probe.record(Float64MultiArray, '/uk_controller_node/efforts', convert=lambda m: list(m.data))
    sim = NodeProcess(
        'uk_controller.ros.sim_node',
        {
            'config': robot,
            'control': {'rate': RATE},
            'simulation': {'lockstep': True, 'substeps': 2, 'wait_for_subscribers': 1},
        },
        DOMAIN_ID,
        str(tmp_path),
    )
    ctl = NodeProcess(
        'uk_controller.ros.controller_node',
        {
            'config': robot,
            'use_sim_time': True,
            'control': {'rate': RATE, 'soft_start': 1.0, 'safe_effort': 'hold'},
            'ros': {'trigger': 'state'},
        },
        DOMAIN_ID,
        str(tmp_path),
    )
    stop = probe.node.create_client(Trigger, '/uk_controller_node/stop')
    start = probe.node.create_client(Trigger, '/uk_controller_node/start')
    try:
        assert stop.wait_for_service(60.0) and start.wait_for_service(60.0)
        assert probe.wait_for(lambda: len(efforts) >= 2.0 * RATE, 60.0), ctl.output()[-3000:]
        assert stop.call(Trigger.Request(), timeout_sec=10.0).success
        n = len(efforts)
        assert probe.wait_for(lambda: len(efforts) >= n + 0.2 * RATE, 60.0)
        assert start.call(Trigger.Request(), timeout_sec=10.0).success
        n = len(efforts)
        assert probe.wait_for(lambda: len(efforts) >= n + 1.5 * RATE, 60.0)
    finally:
        codes = sim.stop(), ctl.stop()
        probe.close()
    assert codes == (0, 0), ctl.output()[-3000:]
    u = np.array([e for _, e in probe.snapshot('/uk_controller_node/efforts')])
    peak = np.abs(u).max(axis=1)
    # the outage: the held effort repeated exactly (while controlling, consecutive efforts differ)
    same = np.all(u[1:] == u[:-1], axis=1)
    runs, k = [], 0
    while k < same.size:
        if same[k]:
            j = k
            while j < same.size and same[j]:
                j += 1
            runs.append((k + 1, j))  # u[k+1..j] repeat u[k]
            k = j
        else:
            k += 1
    runs = [r for r in runs if r[1] - r[0] >= 10 and r[0] > 0.5 * RATE]
    assert len(runs) == 1, runs
    first, last = runs[0]
    steady = peak[int(0.5 * RATE) : first].max()
    rearm = peak[last + 1 : last + 1 + int(RATE)].max()
    print(
        f'\nDDS re-arm (scara, lockstep, {last - first + 1} periods stopped, safe effort hold): steady peak '
        f'{steady:.4f} N m, peak in the first second after ~/start {rearm:.4f} N m, first effort '
        f'{peak[last + 1]:.4f} N m'
    )
    assert rearm <= steady * (1 + 1e-9)
