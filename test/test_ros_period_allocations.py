"""The raw path's period keeps nothing it allocates (no growth per period).

uk_controller_node in this process (rclpy, loopback only) with ``ros.transport: raw``, ``ros.trigger:
state`` and the loop in thread mode; its loop thread is stopped at once and the test runs the thread's
period by hand, the same calls in the same order (control_loop.ControlLoop._loop): CDR bytes decoded
(cdr.JointStateDecoder), names matched once, the state merged (accept_state), the control step and the
raw effort publish (control), the statistics (_account, whose windows are handed off) and, as the
executor would every 50 ms, the telemetry (window quantiles, ~/loop_timing, the plot check).

Counted: Python's allocated blocks (sys.getallocatedblocks) kept by each of 3000 periods after a
warm-up, summed; the telemetry runs between periods, outside the count (it is the executor's). A
period that kept one object (a list that grows, a log entry, a cache per message) would add >= 3000;
the bound, 300, leaves room for the allocator's and rclpy's own bookkeeping and has nothing to do with
time. Temporaries freed within the period are not counted here: small NumPy arrays cost less than
writing into preallocated ones (docs/ros.md, "Raw transport").
"""

import gc
import os
import sys

from parallel import domain_id

os.environ['ROS_DOMAIN_ID'] = str(domain_id(64))  # this module's id from the range 60-69 (test/parallel.py)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.pop('ROS_STATIC_PEERS', None)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

rclpy = pytest.importorskip('rclpy')
from rclpy.parameter import Parameter  # noqa: E402

from uk_controller.ros.cdr import JointStateDecoder, encode_joint_state  # noqa: E402

pytestmark = pytest.mark.ros


@pytest.mark.parametrize('robot', ['scara', 'five_bar'])
@pytest.mark.slow
def test_a_raw_period_keeps_no_allocation(robot, robots):
    robots(robot)
    from uk_controller.ros.controller_node import ControllerNode

    rclpy.init()
    node = None
    try:
        node = ControllerNode(
            parameter_overrides=[
                Parameter('config', value=robot),
                Parameter('ros.transport', value='raw'),
                Parameter('ros.trigger', value='state'),
                Parameter('ros.loop.mode', value='thread'),
                Parameter('ros.loop.window', value=0.2),
            ]
        )
        loop = node.loop
        loop.stop()  # the test runs the thread's period itself
        assert loop.threaded and node.raw_effort is not None
        names, q0 = list(node.core.joint_names), np.asarray(node.setup.q0, dtype=float)
        period_ns = loop.timing.period_ns
        t0 = node.now_ns()
        count = 4000
        states = [
            encode_joint_state(t0 + k * period_ns, names, q0 + 1e-3 * np.sin(0.01 * k), np.zeros(len(names)))
            for k in range(count)
        ]
        decoder, merger = JointStateDecoder(), node.merger
        seen = [None, None]

        def period(k):
            now = t0 + k * period_ns
            state = decoder.decode(states[k])
            if state.names is not seen[0]:
                seen[0], seen[1] = state.names, merger.match(state.names)
            fresh = node.accept_state(seen[1], state.position, state.velocity, state.stamp_ns, now)
            node.control(now, merger.newest_ns if fresh else now)
            loop._account(now, now + 20_000, 0, 5_000, 30_000)

        for k in range(1000):
            period(k)
            if k % 50 == 0:
                loop.telemetry()
        gc.collect()
        grown = 0
        for k in range(1000, count):
            before = sys.getallocatedblocks()
            period(k)
            grown += sys.getallocatedblocks() - before
            if k % 50 == 0:
                loop.telemetry()  # the executor's part, outside the count (module docstring)
        print(f'\n{robot}: {grown} blocks more after {count - 1000} raw periods')
        assert node.running and not node.fault and node.stats.steps >= count - 1
        assert loop.timing.last[0] > 0  # windows were summarized (telemetry)
        assert grown < 300
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
