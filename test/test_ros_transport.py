"""ros.transport over real DDS: the raw CDR path gives the message path's efforts bit for bit.

Two uk_controller_node processes run the same robot, phase-locked to their joint states (ros.trigger:
state in the loop thread, trajectory time = the state's stamp, so an effort is a function of the
states alone): one with ``ros.transport: raw`` (our CDR decoder and effort buffer), one with
``ros.transport: messages`` (rclpy's message objects, the reference). A probe sends the same states
to both, one at a time (the next only once both answered), with the name order permuted, unknown
names, missing velocities, single-joint messages and NaN between them; the raw node also gets
malformed bytes (truncated, lengths that disagree, garbage) that rclpy's own path could not even
deserialize. Required: the two effort sequences equal bit for bit, one effort per good state (so no
malformed or NaN message became an effort), and the raw node counts every malformed message in
/diagnostics. The fall-back deadline is set far out (ros.loop.fallback_periods) so that only
states trigger steps; no assertion depends on timing.
"""

import math
import struct
import time

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

rclpy = pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from parallel import domain_id  # noqa: E402
from ros_nodes import NodeProcess, Probe, reliable  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from uk_controller.robots import load_robot  # noqa: E402
from uk_controller.ros.cdr import encode_joint_state  # noqa: E402

DOMAIN_ID = domain_id(94)
ROBOT = 'scara'
RATE = 200.0
PATHS = ('raw', 'messages')


def _counts(msg):
    status = next((s for s in msg.status if s.name.startswith('uk_controller_node')), None)
    return {kv.key: kv.value for kv in status.values} if status is not None else {}


def node_params(transport):
    return {
        'config': ROBOT,
        'control': {'rate': RATE, 'state_timeout': 10.0},
        'ros': {
            'trigger': 'state',
            'transport': transport,
            'diagnostics_period': 0.2,
            'autostart': False,
            'joint_states_topic': f'/{transport}/joint_states',
            'effort_topic': f'/{transport}/efforts',
            'loop': {'mode': 'thread', 'fallback_periods': 1000.0},
            'overrun': {'warn_after': 0, 'safe_after': 0},
        },
    }


def good_states(setup, count, rng):
    """(names, positions, velocities) near the start pose, in the ways a plant may send them."""
    names, q0 = list(setup.joint_names), np.asarray(setup.q0, dtype=float)
    out = []
    for k in range(count):
        q = q0 + 0.05 * rng.standard_normal(q0.size)
        qd = 0.2 * rng.standard_normal(q0.size)
        order = list(range(len(names)))
        if k % 7 == 3:
            order = order[::-1]  # another name order: matched again
        msg_names = [names[i] for i in order]
        position, velocity = [float(q[i]) for i in order], [float(qd[i]) for i in order]
        if k % 11 == 5:
            velocity = []  # velocity from the backward difference
        if k % 13 == 8:
            msg_names.append('not_a_joint')  # unknown name: ignored, the rest used
            position.append(1.0)
            velocity = velocity + [0.0] if velocity else []
        if k % 17 == 9:  # one joint only: merged into the held state
            msg_names, position, velocity = msg_names[:1], position[:1], velocity[:1]
        out.append((msg_names, position, velocity))
    return out


def malformed(setup, stamp_ns, rng):
    """Bytes the raw decoder or the merger must reject: truncated, lengths that disagree, garbage."""
    names, q = list(setup.joint_names), [float(v) for v in setup.q0]
    whole = encode_joint_state(stamp_ns, names, q, [0.0] * len(q))
    garbage = (
        whole[:12]
        + struct.pack('<I', 0xFFFFFFF0)  # a frame_id longer than the message
        + rng.integers(0, 256, size=40, dtype=np.uint8).tobytes()
    )
    return [
        whole[: len(whole) // 2],
        whole[:20],
        encode_joint_state(stamp_ns, names, q[:-1], []),  # one position short
        encode_joint_state(stamp_ns, names, q, [0.0] * (len(q) + 1)),  # one velocity too many
        garbage,
    ]


def test_raw_and_message_paths_give_the_same_efforts_and_malformed_states_never_become_efforts(tmp_path, robots):
    setup = load_robot(robots(ROBOT))
    rng = np.random.default_rng(2024)
    probe = Probe(DOMAIN_ID, name='uk_transport_probe')
    nodes = {}
    try:
        efforts = {
            p: probe.record(
                Float64MultiArray, f'/{p}/efforts', convert=lambda m: bytes(np.asarray(m.data, dtype='<f8').tobytes())
            )
            for p in PATHS
        }
        for p in PATHS:
            probe.record(DiagnosticArray, f'/{p}/diagnostics', convert=_counts)
        pubs = {p: probe.node.create_publisher(JointState, f'/{p}/joint_states', reliable(100)) for p in PATHS}
        for p in PATHS:
            nodes[p] = NodeProcess(
                'uk_controller.ros.controller_node',
                node_params(p),
                DOMAIN_ID,
                str(tmp_path),
                extra_args=['-r', f'__ns:=/{p}', '-r', f'/diagnostics:=/{p}/diagnostics'],
            )
        for p in PATHS:
            assert nodes[p].wait_for_output('control loop', 300.0), nodes[p].output()[-3000:]
        # both nodes listen (their subscriptions matched our publishers) and we hear both
        assert probe.wait_for(
            lambda: all(
                pubs[p].get_subscription_count() >= 1 and probe.matched_publishers(f'/{p}/efforts') >= 1 for p in PATHS
            ),
            120.0,
        )
        assert 'phase-locked' in nodes['raw'].output() and 'transport raw' in nodes['raw'].output()
        assert 'transport messages' in nodes['messages'].output()

        def send(names, position, velocity):
            msg = JointState(name=names, position=position, velocity=velocity)
            msg.header.stamp = probe.node.get_clock().now().to_msg()
            for p in PATHS:
                pubs[p].publish(msg)
            return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

        # discovery is complete on both sides once both nodes answer a state (stopped: the safe effort);
        # then both start their trajectory clocks at that same state (~/start under ros.trigger: state)
        q0 = [float(v) for v in setup.q0]
        answered = False
        for _ in range(120):
            before = {p: len(efforts[p]) for p in PATHS}
            send(list(setup.joint_names), q0, [0.0] * len(q0))
            if probe.wait_for(lambda: all(len(efforts[p]) > before[p] for p in PATHS), 1.0):
                answered = True
                break
        assert answered, {p: nodes[p].output()[-2000:] for p in PATHS}
        for p in PATHS:
            client = probe.node.create_client(Trigger, f'/{p}/uk_controller_node/start')
            assert client.wait_for_service(timeout_sec=60.0)
            future = client.call_async(Trigger.Request())
            assert probe.wait_for(future.done, 60.0) and future.result().success, future.result()
        for p in PATHS:
            probe.clear(f'/{p}/efforts')
            probe.clear(f'/{p}/diagnostics')
        used0 = {}

        def used_now():
            for p in PATHS:
                snap = probe.snapshot(f'/{p}/diagnostics')
                if snap:
                    used0[p] = int(snap[-1][1].get('messages_used', -1))
            return len(used0) == 2

        assert probe.wait_for(used_now, 60.0)
        states = good_states(setup, 150, rng)
        bad_raw, nan_sent = 0, 0

        def latest(p):
            snap = probe.snapshot(f'/{p}/diagnostics')
            return snap[-1][1] if snap else {}

        def rejected_malformed():
            return int(latest('raw').get('rejected_malformed', -1))

        for k, state in enumerate(states):
            send(*state)
            assert probe.wait_for(lambda: all(len(efforts[p]) == k + 1 for p in PATHS), 60.0), (
                k,
                {p: len(efforts[p]) for p in PATHS},
                nodes['raw'].output()[-2000:],
            )
            if k % 10 == 4:  # NaN for one of our joints: rejected whole by both paths
                names, position, velocity = state
                send(names, [math.nan] + position[1:], velocity)
                nan_sent += 1
            if k % 30 == 7:  # bytes only our decoder sees (rclpy could not deserialize them)
                for data in malformed(setup, time.time_ns(), rng):
                    # one at a time, each counted before the next (best effort: a burst could overflow the
                    # reader's history and a lost message would not be counted)
                    pubs['raw'].publish(data)
                    bad_raw += 1
                    assert probe.wait_for(lambda: rejected_malformed() >= bad_raw, 60.0), (bad_raw, latest('raw'))
        # everything sent has been taken: the last good state came after it on the same topic
        last = {p: {} for p in PATHS}

        def counted():
            for p in PATHS:
                snap = probe.snapshot(f'/{p}/diagnostics')
                last[p] = snap[-1][1] if snap else {}
            return all(int(last[p].get('messages_used', -1)) == used0[p] + len(states) for p in PATHS)

        assert probe.wait_for(counted, 60.0), last
        raw_seq = [e for _, e in probe.snapshot('/raw/efforts')]
        msg_seq = [e for _, e in probe.snapshot('/messages/efforts')]
    finally:
        codes = {p: node.stop() for p, node in nodes.items()}
        probe.close()
    assert codes == {'raw': 0, 'messages': 0}, {p: n.output()[-2000:] for p, n in nodes.items()}
    assert len(raw_seq) == len(msg_seq) == len(states)
    mismatch = [k for k, (a, b) in enumerate(zip(raw_seq, msg_seq)) if a != b]
    assert not mismatch, f'efforts differ at states {mismatch[:10]}'
    values = np.array([np.frombuffer(e, dtype='<f8') for e in raw_seq])
    assert np.isfinite(values).all()
    assert np.ptp(values, axis=0).min() > 0.0, 'efforts did not change with the state: nothing compared'
    assert int(last['raw']['rejected_malformed']) == bad_raw, last['raw']  # none before the sequence
    assert int(last['messages']['rejected_malformed']) == 0, last['messages']
    for p in PATHS:
        assert int(last[p]['rejected_nonfinite']) == nan_sent, (p, last[p])


def _level_message(msg):
    status = next((s for s in msg.status if s.name.startswith('uk_controller_node')), None)
    return (ord(status.level), status.message) if status is not None else (None, '')


def test_phase_locked_loop_falls_back_to_the_wall_clock_and_the_safe_effort_when_states_stop(tmp_path, robots):
    """ros.trigger: state in the loop thread: while states come, one step per state; when they stop, the
    loop keeps stepping on the wall clock (ros.loop.fallback_periods), the held state goes stale after
    control.state_timeout and the safe effort (zero) goes out; when states return it controls again."""
    setup = load_robot(robots(ROBOT))
    probe = Probe(DOMAIN_ID, name='uk_fallback_probe')
    node = None
    try:
        efforts = probe.record(
            Float64MultiArray, '/effort_controller/commands', convert=lambda m: np.asarray(m.data, dtype=float)
        )
        diags = probe.record(DiagnosticArray, '/diagnostics', convert=_level_message)
        pub = probe.node.create_publisher(JointState, '/joint_states', reliable(100))
        node = NodeProcess(
            'uk_controller.ros.controller_node',
            {
                'config': ROBOT,
                'control': {'rate': RATE, 'state_timeout': 0.3, 'safe_effort': 'zero'},
                'ros': {'trigger': 'state', 'diagnostics_period': 0.1},
            },
            DOMAIN_ID,
            str(tmp_path),
        )
        assert node.wait_for_output('control loop', 300.0), node.output()[-3000:]
        names, q = list(setup.joint_names), [float(v) + 0.02 for v in setup.q0]

        def feed(count):
            for _ in range(count):
                msg = JointState(name=names, position=q, velocity=[0.0] * len(q))
                msg.header.stamp = probe.node.get_clock().now().to_msg()
                pub.publish(msg)
                time.sleep(1.0 / RATE)

        while len(efforts) < 50:  # until discovery is done and the node controls
            feed(20)
            assert node.proc.poll() is None, node.output()[-3000:]
        assert probe.wait_for(lambda: diags and diags[-1][1] == (0, 'controlling'), 60.0), diags[-3:]
        during = len(efforts)
        # no more states: steps go on on the wall clock, the state goes stale, the safe effort goes out
        assert probe.wait_for(lambda: diags[-1][1][0] == 2 and 'stale state' in diags[-1][1][1], 60.0), diags[-3:]
        assert probe.wait_for(lambda: len(efforts) > during + 20 and not np.any(efforts[-1][1]), 60.0)
        assert np.any(efforts[during - 1][1]), 'the controlling efforts were zero: nothing to tell apart'
        # states again: controlling again
        resumed = False
        for _ in range(200):
            feed(10)
            if diags[-1][1] == (0, 'controlling') and np.any(efforts[-1][1]):
                resumed = True
                break
        assert resumed, (diags[-3:], node.output()[-2000:])
        assert 'phase-locked' in node.output() and 'transport raw' in node.output()
    finally:
        code = node.stop() if node is not None else 0
        probe.close()
    assert code == 0, node.output()[-3000:]
