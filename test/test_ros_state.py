"""Joint-state merging and parameter handling of the ROS layer (plain Python, no DDS)."""

import math

import pytest

from uk_controller.files.parameter_file import ConfigError
from uk_controller.ros import params as P
from uk_controller.ros.joint_state_merger import JointStateMerger
from uk_controller.settings.resolve import resolve

MS = 1_000_000
JOINTS = ['a', 'b', 'c']


def test_merges_partial_messages_by_name_in_any_order():
    m = JointStateMerger(JOINTS, state_timeout=0.1)
    assert m.update(['c', 'a'], [3.0, 1.0], [30.0, 10.0], 0, 1 * MS)
    assert not m.complete and m.missing() == ['b']
    assert math.isinf(m.age(2 * MS))
    assert m.update(['b'], [2.0], [20.0], 0, 5 * MS)
    assert m.complete
    assert list(m.q) == [1.0, 2.0, 3.0] and list(m.qd) == [10.0, 20.0, 30.0]
    # the oldest joint decides the age: a and c were last seen at 1 ms
    assert m.age(11 * MS) == pytest.approx(0.010)
    assert m.oldest_joint() in ('a', 'c')


@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf])
def test_nonfinite_message_is_rejected_whole_and_counted(bad):
    m = JointStateMerger(JOINTS, 0.1)
    m.update(JOINTS, [1.0, 2.0, 3.0], [0.0, 0.0, 0.0], 0, MS)
    assert not m.update(JOINTS, [9.0, bad, 9.0], [0.0, 0.0, 0.0], 0, 2 * MS)
    assert not m.update(JOINTS, [9.0, 9.0, 9.0], [0.0, 0.0, bad], 0, 2 * MS)
    assert list(m.q) == [1.0, 2.0, 3.0]
    assert m.counts['nonfinite'] == 2
    assert "'c'" in m.last_rejection


def test_unknown_names_are_ignored_counted_and_known_joints_used():
    m = JointStateMerger(JOINTS, 0.1)
    assert m.update(['a', 'gripper', 'b', 'c'], [1.0, math.nan, 2.0, 3.0], [], 0, MS)
    assert m.counts['unknown_names'] == 1 and list(m.q) == [1.0, 2.0, 3.0]
    assert not m.update(['x', 'y'], [0.0, 0.0], [], 0, 2 * MS)
    assert m.counts['no_known_joint'] == 1


def test_late_and_out_of_order_stamps_are_rejected():
    m = JointStateMerger(JOINTS, 0.1)
    now = 10_000 * MS
    assert m.update(JOINTS, [1.0, 1.0, 1.0], [0.0] * 3, now - 5 * MS, now)
    assert not m.update(JOINTS, [2.0, 2.0, 2.0], [0.0] * 3, now - 500 * MS, now)  # older than the timeout
    assert not m.update(['a'], [3.0], [0.0], now - 8 * MS, now)  # older than held sample
    assert m.counts['late'] == 2 and list(m.q) == [1.0, 1.0, 1.0]


def test_malformed_lengths_are_rejected():
    m = JointStateMerger(JOINTS, 0.1)
    assert not m.update(JOINTS, [1.0, 2.0], [], 0, MS)
    assert not m.update(JOINTS, [1.0, 2.0, 3.0], [1.0], 0, MS)
    assert m.counts['malformed'] == 2 and not m.received.any()


def test_missing_velocity_is_the_backward_difference_of_stamped_positions():
    m = JointStateMerger(['a'], 1.0)
    m.update(['a'], [0.30], [], 100 * MS, 100 * MS)
    m.update(['a'], [0.34], [], 104 * MS, 104 * MS)
    assert m.qd[0] == pytest.approx((0.34 - 0.30) / 0.004)


def test_flatten_unflatten_round_trip_as_ros_does():
    tree = {
        'robot': {'joints': ['j1', 'j2'], 'gravity': [0.0, 0.0, -9.81]},
        'constraints': {'names': ['tool'], 'tool': {'frame': 'tcp', 'trajectory': {'radius': 0.1}}},
    }
    flat = P.flatten(tree)
    assert flat['constraints.tool.trajectory.radius'] == 0.1
    assert P.unflatten(flat) == tree
    with pytest.raises(ConfigError, match='robot'):
        P.unflatten({'robot': 1.0, 'robot.urdf': 'x'})


def test_ros_settings_name_the_bad_key():
    with pytest.raises(ConfigError, match=r'^ros\.output_type'):
        resolve(None, {'ros.output_type': 'pwm'})
    with pytest.raises(ConfigError, match=r'^control\.state_timeout'):
        resolve(None, {'control.state_timeout': -1.0})
    with pytest.raises(ConfigError, match=r'^ros\.effort_joints'):
        resolve(None, {'ros.effort_joints': ['a', 'a']})
    assert resolve().ros.effort_topic == '/effort_controller/commands'


def test_effort_order_maps_controller_joints_to_actuators():
    params = resolve(
        params={
            'actuators': {
                'names': ['m1', 'm2', 'm3'],
                'm1': {'joint': 'j1'},
                'm2': {'joint': 'j3'},
                'm3': {'between': ['l5', 'world']},
            }
        }
    )
    perm, names = P.effort_order(params, ['m1', 'm2', 'm3'], ['j3', 'm3', 'j1'])
    u = [10.0, 30.0, 60.0]
    assert [u[k] for k in perm] == [30.0, 60.0, 10.0] and names == ['j3', 'm3', 'j1']
    with pytest.raises(ConfigError, match='every actuator'):
        P.effort_order(params, ['m1', 'm2', 'm3'], ['j1', 'j3'])
    with pytest.raises(ConfigError, match="'j2'"):
        P.effort_order(params, ['m1', 'm2', 'm3'], ['j1', 'j2', 'm3'])
    assert P.effort_order(params, ['m1', 'm2', 'm3'])[1] == ['j1', 'j3', 'm3']


def test_live_parameters_are_gains_and_trajectory_start_only():
    assert P.is_live('stabilization.omega') and P.is_live('ros.trajectory_start')
    assert not P.is_live('control.rate') and not P.is_live('robot.urdf') and not P.is_live('ros.effort_topic')


@pytest.mark.parametrize('ahead_s', [5.0, 60.0])
def test_a_stamp_from_the_future_is_clock_skew_and_does_not_freeze_the_state(ahead_s):
    """One message stamped +5 s / +60 s must not make every real message 'out of order'."""
    m = JointStateMerger(JOINTS, 0.1, clock_skew=0.05)
    now = 10_000 * MS
    assert m.update(JOINTS, [1.0, 1.0, 1.0], [0.0] * 3, now - MS, now)
    assert not m.update(JOINTS, [9.0, 9.0, 9.0], [0.0] * 3, now + int(ahead_s * 1e9), now)
    assert m.counts['skew'] == 1 and m.last_kind == 'skew'
    assert m.last_skew == pytest.approx(ahead_s) and 'ahead of the node clock' in m.last_rejection
    # the next real messages are used (the joint really moves)
    for k in range(1, 4):
        assert m.update(JOINTS, [1.0 + 0.1 * k] * 3, [0.0] * 3, now + k * 10 * MS - MS, now + k * 10 * MS)
    assert m.q[0] == pytest.approx(1.3) and m.counts['late'] == 0


def test_age_is_judged_by_arrival_too():
    """A sample stamped (slightly) in the future is never held longer than the timeout by arrival."""
    m = JointStateMerger(JOINTS, 0.1, clock_skew=0.05)
    now = 10_000 * MS
    assert m.update(JOINTS, [1.0] * 3, [0.0] * 3, now + 40 * MS, now)  # within the tolerance: used
    later = now + 150 * MS  # stamp age 110 ms, arrival 150 ms
    assert m.age(later) == pytest.approx(0.150)
    assert m.age(later) > m.state_timeout


def test_stamps_far_in_the_past_are_rejected_with_the_offset():
    m = JointStateMerger(JOINTS, 0.1)
    now = 100_000 * MS
    assert not m.update(JOINTS, [1.0] * 3, [0.0] * 3, now - 60_000 * MS, now)
    assert m.counts['late'] == 1 and m.last_skew == pytest.approx(-60.0)


def test_live_parameters_use_the_schema():
    from uk_controller.settings import schema as S

    assert P.is_live('control.soft_start') and P.is_live('control.clock_skew')
    for bad in (-15.0, float('nan'), float('inf'), 1e9):
        with pytest.raises(ValueError, match=r'stabilization\.omega.*\(0, 1000\] rad/s'):
            S.check_value(S.lookup('stabilization.omega'), bad, key='stabilization.omega')


def test_output_types_are_one_table(monkeypatch):
    """``ros.output_type``: the schema's choices (hence docs/config.md and resolve()), the nodes' message
    class and the MCAP log's channel schema all read ros_section.OUTPUT_TYPES; a type added there is
    accepted by each, one removed is refused. The message classes are compared with the ones docs/ros.md
    names, imported here directly."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    from uk_controller.settings import ros_section
    from uk_controller.settings import schema as S
    from uk_controller.sim.mcap_log import MSGDEFS

    documented = {
        'float64_multi_array': Float64MultiArray,
        'joint_state': JointState,
        'joint_trajectory': JointTrajectory,
    }
    assert set(ros_section.OUTPUT_TYPES) == set(documented)
    setting = S.lookup('ros.output_type')
    for kind, cls in documented.items():
        assert P.message_class(kind) is cls
        assert ros_section.OUTPUT_TYPES[kind] in MSGDEFS  # the MCAP log can write it
        assert S.check_value(setting, kind) == kind
        assert resolve(None, {'ros.output_type': kind}).ros.output_type == kind
    from geometry_msgs.msg import Wrench

    monkeypatch.setitem(ros_section.OUTPUT_TYPES, 'wrench', 'geometry_msgs/msg/Wrench')
    assert P.message_class('wrench') is Wrench
    assert resolve(None, {'ros.output_type': 'wrench'}).ros.output_type == 'wrench'
    row = next(line for line in S.markdown_table().splitlines() if line.startswith('| `ros.output_type` |'))
    assert 'wrench' in row, row
    monkeypatch.delitem(ros_section.OUTPUT_TYPES, 'joint_state')
    with pytest.raises(ConfigError, match=r'^ros\.output_type'):
        resolve(None, {'ros.output_type': 'joint_state'})
