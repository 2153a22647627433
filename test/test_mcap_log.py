"""`uk-controller simulate --mcap`: the run as ROS 2 messages, read back with the mcap reader
(mcap_ros2.reader, CDR decoded from the definitions in the file) and checked against the CSV log."""

import csv

import numpy as np
import pytest

from uk_controller.cli import main

pytest.importorskip('mcap_ros2')
from mcap_ros2.reader import read_ros2_messages  # noqa: E402

NODE = '/uk_controller_node'


def _csv(path):
    with open(path, newline='') as fh:
        rows = list(csv.reader(fh))
    keep = [i for i, h in enumerate(rows[0]) if h != 'status']  # the per-step status is a word
    return [rows[0][i] for i in keep], np.array([[r[i] for i in keep] for r in rows[1:]], dtype=float)


@pytest.mark.parametrize('robot, rate, duration', [('five_bar', 200, 2.2), ('scara', 250, 0.2)])
@pytest.mark.slow
def test_mcap_messages_match_the_csv_log(robot, rate, duration, tmp_path):
    out = tmp_path / robot
    mcap = tmp_path / f'{robot}.mcap'
    assert (
        main(
            [
                'simulate',
                robot,
                '--duration',
                str(duration),
                '--rate',
                str(rate),
                '--no-plots',
                '--out',
                str(out),
                '--mcap',
                str(mcap),
            ]
        )
        == 0
    )
    header, data = _csv(out / 'log.csv')
    col = {name: i for i, name in enumerate(header)}
    t = data[:, col['t']]
    joints = [h[2:] for h in header if h.startswith('q_')]
    actuators = [h[2:] for h in header if h.startswith('u_')]
    rows = [h[4:] for h in header if h.startswith('phi_')]
    tasks = [h for h in header if h.startswith('task_')]
    ok = data[:, col['ok']] == 1.0
    by_topic = {}
    for m in read_ros2_messages(str(mcap)):
        by_topic.setdefault(m.channel.topic, []).append(m)
    # the nodes' topics and types (docs/ros.md); scara and five_bar publish efforts as Float64MultiArray
    types = {topic: msgs[0].schema.name for topic, msgs in by_topic.items()}
    assert types == {
        '/joint_states': 'sensor_msgs/msg/JointState',
        '/effort_controller/commands': 'std_msgs/msg/Float64MultiArray',
        f'{NODE}/task_error': 'std_msgs/msg/Float64MultiArray',
        f'{NODE}/constraint_residual': 'std_msgs/msg/Float64MultiArray',
        f'{NODE}/efforts': 'std_msgs/msg/Float64MultiArray',
        f'{NODE}/loop_timing': 'std_msgs/msg/Float64MultiArray',
    }
    # one state, command and efforts message per control instant, stamped 1 s + t
    states = by_topic['/joint_states']
    assert len(states) == len(by_topic['/effort_controller/commands']) == len(by_topic[f'{NODE}/efforts']) == t.size
    stamps = np.array([s.ros_msg.header.stamp.sec + 1e-9 * s.ros_msg.header.stamp.nanosec for s in states])
    np.testing.assert_allclose(stamps, 1.0 + t, atol=1e-9)
    np.testing.assert_array_equal([s.log_time_ns for s in states], np.round((1.0 + t) * 1e9).astype(np.int64))
    assert all(list(s.ros_msg.name) == joints for s in states)
    q = np.array([s.ros_msg.position for s in states])
    qd = np.array([s.ros_msg.velocity for s in states])
    np.testing.assert_allclose(q, data[:, [col[f'q_{j}'] for j in joints]], rtol=1e-8, atol=1e-12)  # CSV: %.9g
    np.testing.assert_allclose(qd, data[:, [col[f'qd_{j}'] for j in joints]], rtol=1e-8, atol=1e-12)
    u = data[:, [col[f'u_{a}'] for a in actuators]]
    efforts = np.array([m.ros_msg.data for m in by_topic[f'{NODE}/efforts']])
    np.testing.assert_allclose(efforts, u, rtol=1e-8, atol=1e-12)
    assert by_topic[f'{NODE}/efforts'][0].ros_msg.layout.dim[0].label == 'efforts: ' + ','.join(actuators)
    # the command: efforts in ros.effort_joints order = the joints the actuators drive, here actuator order
    commands = np.array([m.ros_msg.data for m in by_topic['/effort_controller/commands']])
    np.testing.assert_allclose(commands, u, rtol=1e-8, atol=1e-12)
    # task error and residuals: computed steps only
    task = by_topic[f'{NODE}/task_error']
    assert len(task) == ok.sum()
    np.testing.assert_allclose(
        [m.ros_msg.data for m in task], data[ok][:, [col[h] for h in tasks]], rtol=1e-8, atol=1e-12
    )
    residual = np.array([m.ros_msg.data for m in by_topic[f'{NODE}/constraint_residual']])
    m = len(rows)
    assert residual.shape == (ok.sum(), 2 * m)
    np.testing.assert_allclose(residual[:, :m], data[ok][:, [col[f'phi_{r}'] for r in rows]], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(residual[:, m:], data[ok][:, [col[f'phidot_{r}'] for r in rows]], rtol=1e-8, atol=1e-12)
    # loop timing: one message per simulated second (ros.loop.window) and one at the end, the node's layout
    from uk_controller.ros.loop_timing import TIMING_FIELDS

    timing = by_topic[f'{NODE}/loop_timing']
    assert all(m.ros_msg.layout.dim[0].label == ','.join(TIMING_FIELDS) for m in timing)
    assert len(timing) == int(np.floor(duration)) + (1 if duration % 1 else 0)
    for msg in timing:
        d = msg.ros_msg.data
        assert len(d) == 8 and d[0] == rate and d[1] == d[2] == d[3] == 0.0 and d[6] == 0.0
        assert 0.0 < d[4] <= d[5] and d[7] >= 0 and d[7] == int(d[7])
    assert timing[-1].log_time_ns == states[-1].log_time_ns


@pytest.mark.slow
def test_command_follows_ros_effort_joints_order(tmp_path):
    """With ros.effort_joints reversed the command topic carries the efforts reversed (as the node sends)."""
    import yaml

    from uk_controller.files import rcl_yaml
    from uk_controller.paths import resolve_config

    source = resolve_config('five_bar')
    doc = yaml.safe_load(open(source))
    params = doc['/**']['ros__parameters']
    params['ros']['effort_joints'] = ['joint_a2', 'joint_a1']
    if not params['robot']['urdf'].startswith('package://'):  # a path relative to the shipped config
        params['robot']['urdf'] = str((source.parent.parent / params['robot']['urdf']).resolve())
    config = tmp_path / 'five_bar_swapped.yaml'
    config.write_text(rcl_yaml.dump(doc))
    mcap = tmp_path / 'swapped.mcap'
    assert (
        main(
            [
                'simulate',
                str(config),
                '--duration',
                '0.1',
                '--rate',
                '200',
                '--no-plots',
                '--out',
                str(tmp_path / 'out'),
                '--mcap',
                str(mcap),
            ]
        )
        == 0
    )
    header, data = _csv(tmp_path / 'out' / 'log.csv')
    u = data[:, [header.index('u_motor1'), header.index('u_motor2')]]
    commands = np.array([m.ros_msg.data for m in read_ros2_messages(str(mcap), topics=['/effort_controller/commands'])])
    np.testing.assert_allclose(commands, u[:, ::-1], rtol=1e-8, atol=1e-12)
