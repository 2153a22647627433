"""Our CDR (uk_controller/ros/cdr.py) against rclpy's own serializer, on many random messages.

rclpy.serialization.serialize_message / deserialize_message (rosidl's C type support over
rmw_fastrtps) are the independent reference: every JointState they write our decoder reads back
bit for bit, every message our encoders write they read back bit for bit. No rclpy Context is
started (serialization needs none), so these run in the quick suite.
"""

import math
import struct

import numpy as np
import pytest

serialization = pytest.importorskip('rclpy.serialization')
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from uk_controller.ros.cdr import CdrError, Float64ArrayEncoder, JointStateDecoder, encode_joint_state  # noqa: E402
from uk_controller.ros.joint_state_merger import JointStateMerger  # noqa: E402

ALPHABET = 'abcdefghijklmnopqrstuvwxyz_0123456789/éλ'


def random_doubles(rng, n):
    """Doubles of every kind: ordinary, tiny, huge, negative zero, NaN and infinities."""
    values = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, size=n)
    special = rng.random(n) < 0.15
    values[special] = rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324], size=int(special.sum()))
    return values


def random_name(rng):
    return ''.join(rng.choice(list(ALPHABET), size=int(rng.integers(1, 20))))


def random_joint_state(rng):
    n = int(rng.integers(0, 9))
    msg = JointState()
    msg.header.stamp.sec = int(rng.integers(-(2**31), 2**31))
    msg.header.stamp.nanosec = int(rng.integers(0, 10**9))
    msg.header.frame_id = random_name(rng) if rng.random() < 0.5 else ''
    msg.name = [random_name(rng) for _ in range(n)]
    msg.position = random_doubles(rng, n).tolist()
    msg.velocity = random_doubles(rng, n).tolist() if rng.random() < 0.7 else []
    msg.effort = random_doubles(rng, int(rng.integers(0, 9))).tolist()
    return msg


def bits(values):
    return np.asarray(values, dtype='<f8').tobytes()


def test_decoder_reads_what_rclpy_serializes_bit_for_bit():
    rng = np.random.default_rng(24)
    decoder = JointStateDecoder()
    for _ in range(2000):
        msg = random_joint_state(rng)
        view = decoder.decode(serialization.serialize_message(msg))
        assert view.names == tuple(msg.name)
        assert bits(view.position) == bits(msg.position)
        assert bits(view.velocity) == bits(msg.velocity)
        assert view.stamp_ns == msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_rclpy_reads_what_our_joint_state_encoder_writes():
    rng = np.random.default_rng(241)
    for _ in range(1000):
        msg = random_joint_state(rng)
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        data = encode_joint_state(stamp, msg.name, msg.position, msg.velocity, msg.effort, msg.header.frame_id)
        back = serialization.deserialize_message(data, JointState)
        assert (back.header.stamp.sec, back.header.stamp.nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
        assert back.header.frame_id == msg.header.frame_id
        assert list(back.name) == list(msg.name)
        for field in ('position', 'velocity', 'effort'):
            assert bits(getattr(back, field)) == bits(getattr(msg, field)), field


def test_rclpy_reads_our_effort_buffer_and_writes_the_same_layout():
    rng = np.random.default_rng(242)
    for _ in range(1000):
        n = int(rng.integers(0, 13))
        values = random_doubles(rng, n)
        encoder = Float64ArrayEncoder(n)
        encoder.values[:] = values
        back = serialization.deserialize_message(bytes(encoder.buffer), Float64MultiArray)
        assert bits(back.data) == bits(values)
        assert list(back.layout.dim) == [] and back.layout.data_offset == 0
        # and rclpy's own bytes carry the doubles exactly where our buffer keeps them
        reference = serialization.serialize_message(Float64MultiArray(data=values.tolist()))
        assert len(reference) >= len(encoder.buffer)
        at = len(encoder.buffer) - 8 * n
        assert reference[at : at + 8 * n] == bytes(encoder.buffer[at:])
        assert reference[:16] == bytes(encoder.buffer[:16])


def test_the_same_names_are_decoded_once_and_a_new_list_again():
    decoder = JointStateDecoder()
    first = decoder.decode(encode_joint_state(1, ['a', 'b'], [1.0, 2.0])).names
    again = decoder.decode(encode_joint_state(2, ['a', 'b'], [3.0, 4.0], [0.5, 0.5])).names
    assert again is first and decoder.name_changes == 1
    swapped = decoder.decode(encode_joint_state(3, ['b', 'a'], [1.0, 2.0])).names
    assert swapped == ('b', 'a') and decoder.name_changes == 2


def test_every_truncation_is_a_cdr_error_never_a_read_past_the_end():
    rng = np.random.default_rng(243)
    decoder = JointStateDecoder()
    for _ in range(200):
        msg = random_joint_state(rng)
        msg.effort = []
        data = serialization.serialize_message(msg)
        # the decoder reads up to the end of the velocities (effort is not read)
        end = len(encode_joint_state(0, msg.name, msg.position, msg.velocity, [], msg.header.frame_id)) - 4
        for cut in range(end):
            with pytest.raises(CdrError):
                decoder.decode(data[:cut])


def test_corrupted_bytes_give_a_cdr_error_or_arrays_inside_the_message():
    rng = np.random.default_rng(244)
    decoder = JointStateDecoder()
    for _ in range(3000):
        data = bytearray(serialization.serialize_message(random_joint_state(rng)))
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(4, len(data)))] = int(rng.integers(0, 256))
        if rng.random() < 0.3:  # a huge count somewhere
            at = int(rng.integers(4, len(data) - 4))
            struct.pack_into('<I', data, at, int(rng.integers(2**20, 2**32)))
        try:
            view = decoder.decode(bytes(data))
        except CdrError:
            continue
        assert view.position.size * 8 <= len(data) and view.velocity.size * 8 <= len(data)


@pytest.mark.parametrize('case', ['fewer_positions', 'more_velocities', 'nan', 'inf_velocity'])
def test_a_decoded_bad_state_is_counted_by_the_merger_and_changes_nothing(case):
    names = ['j1', 'j2']
    merger = JointStateMerger(names, state_timeout=1.0)
    decoder = JointStateDecoder()
    good = decoder.decode(encode_joint_state(1000, names, [0.1, 0.2], [0.0, 0.0]))
    assert merger.update_matched(merger.match(good.names), good.position, good.velocity, 1000, 2000)
    q, qd = merger.q.copy(), merger.qd.copy()
    position, velocity, kind = [0.3, 0.4], [1.0, 1.0], 'nonfinite'
    if case == 'fewer_positions':
        position, kind = [0.3], 'malformed'
    elif case == 'more_velocities':
        velocity, kind = [1.0, 1.0, 1.0], 'malformed'
    elif case == 'nan':
        position = [0.3, math.nan]
    else:
        velocity = [math.inf, 0.0]
    bad = decoder.decode(encode_joint_state(3000, names, position, velocity))
    assert not merger.update_matched(merger.match(bad.names), bad.position, bad.velocity, 3000, 4000)
    assert merger.counts[kind] == 1
    np.testing.assert_array_equal(merger.q, q)
    np.testing.assert_array_equal(merger.qd, qd)
