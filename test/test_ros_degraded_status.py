"""uk_controller_node over real DDS with a task it can only follow in the least-squares sense.

The SCARA's four task rows on two motors (joints 1 and 2 only): every step solves, but Chen's servo
equation is inconsistent (seed 004 eq 35 gives the least-squares effort). The node runs the step in place
(``ControllerCore.step_view``) and keeps the status and reason of the last solved step for /diagnostics:
they must say WARN with the controller's own reason, while the published efforts are that solution
(finite, not the safe effort), as ``ControllerCore.step`` computes it for the same setup.
"""

import os
import re
import time

import numpy as np
import pytest
from parallel import domain_id

DOMAIN_ID = domain_id(83)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

rclpy = pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from ros_nodes import NodeProcess, Probe  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from test_status import _two_motor_scara  # noqa: E402

from uk_controller.control.controller import ControllerCore  # noqa: E402
from uk_controller.control.status import Status, reason  # noqa: E402

pytestmark = pytest.mark.ros

RATE = 100.0


def _diag(msg):
    status = next(s for s in msg.status if s.name.startswith('uk_controller_node'))
    return ord(status.level), status.message, {kv.key: kv.value for kv in status.values}


@pytest.mark.slow
def test_a_solved_but_inconsistent_step_is_a_warning_with_its_reason(tmp_path):
    setup = _two_motor_scara(tmp_path)
    names, q0 = list(setup.joint_names), [float(v) for v in setup.q0]
    probe = Probe(DOMAIN_ID)
    efforts = probe.record(Float64MultiArray, '/effort_controller/commands', convert=lambda m: list(m.data))
    diags = probe.record(DiagnosticArray, '/diagnostics', convert=_diag)
    pub = probe.node.create_publisher(JointState, '/joint_states', 10)

    def tick():
        msg = JointState(name=names, position=q0, velocity=[0.0] * len(q0))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(probe.node.get_clock().now().nanoseconds, 1_000_000_000)
        pub.publish(msg)

    probe.node.create_timer(1.0 / RATE, tick)
    params = {
        'config': str(tmp_path / 'two_motors.yaml'),  # written by _two_motor_scara
        'control': {'rate': RATE, 'state_timeout': 0.2},
        'ros': {'diagnostics_period': 0.25, 'effort_joints': ['joint1', 'joint2']},
    }
    node = NodeProcess('uk_controller.ros.controller_node', params, DOMAIN_ID, str(tmp_path))
    try:
        # readiness, not a speed requirement: a loaded 2-core machine may take minutes to start the node
        # (or until the node exits: a refused configuration is an answer too)
        probe.wait_for(lambda: len(efforts) > 20 or node.proc.poll() is not None, 300.0)
        assert len(efforts) > 20, node.output()
        since = time.monotonic()
        assert probe.wait_for(lambda: any(t >= since for t, _ in diags), 30.0), node.output()
        level, message, values = next(d for t, d in diags if t >= since)
        # what the controller itself says of this setup, at the state the node is fed
        want = ControllerCore(setup).step(np.array(q0), np.zeros(len(q0)), 0.0)
        assert want.ok and want.status is Status.SERVO_INCONSISTENT
        assert level == 1 and values['status'] == 'servo_inconsistent', (level, message, values)
        residual = re.fullmatch(r'.*\(residual (\S+)\)', message)
        assert residual and message == reason(Status.SERVO_INCONSISTENT, residual=float(residual[1])), message
        assert float(residual[1]) > 0.0
        assert message != 'controlling' and int(values['safe_effort_steps']) == 0, values
        sent = np.array([e for _, e in efforts])
        assert sent.shape[1] == 2 and np.isfinite(sent).all() and np.abs(sent).max() > 0.0
    finally:
        code = node.stop()
        probe.close()
    assert code == 0, node.output()
