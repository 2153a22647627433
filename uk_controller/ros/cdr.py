"""Our own CDR for the two messages of the control period (plain Python/NumPy/struct, no rclpy).

With ``ros.transport: raw`` the loop thread takes ``sensor_msgs/JointState`` as the bytes DDS delivered
and publishes the efforts as bytes, so rclpy never builds a Python message object per period.
The layout is OMG CDR version 1 (XCDR1) little endian, as rmw_fastrtps writes ROS 2
messages (DDS-XTypes 1.3, 7.4.3.5 "XCDR stream format"):

- a 4-byte encapsulation header ``00 01 00 00`` (CDR_LE); alignment counts from the byte after it;
- a primitive of size s starts at the next multiple of s (8 for float64, 4 for (u)int32);
- ``string``: uint32 length including the terminating NUL, then the bytes and the NUL;
- ``sequence<T>``: uint32 element count, then the elements (the alignment of T is applied only
  before a first element: an empty float64 sequence adds no padding).

``sensor_msgs/JointState`` = Header(Time(int32 sec, uint32 nanosec), string frame_id),
string[] name, float64[] position, float64[] velocity, float64[] effort.
``std_msgs/Float64MultiArray`` = MultiArrayLayout(MultiArrayDimension[] dim, uint32 data_offset),
float64[] data.

rclpy's own ``serialize_message``/``deserialize_message`` are the independent reference in
test/test_ros_cdr.py (random messages both ways).
"""

from __future__ import annotations

import struct

import numpy as np

#: the encapsulation header of a little-endian CDR stream (XCDR1: CDR_LE, options 0)
CDR_LE = b'\x00\x01\x00\x00'
HEADER = 4
_U32 = struct.Struct('<I')
_STAMP = struct.Struct('<iI')
#: a name list longer than this is not a joint state of ours (protects the decoder against a
#: corrupt count that would make it loop over garbage)
MAX_NAMES = 4096


class CdrError(ValueError):
    """The bytes are not a well-formed message of the expected type (truncated, inconsistent counts)."""


def _align(offset, size):
    """`offset` (absolute, header included) moved up to a multiple of `size` counted after the header."""
    rel = offset - HEADER
    return offset + (-rel % size)


class JointStateView:
    """One decoded ``sensor_msgs/JointState``: the arrays are views into the received bytes (no copy).

    ``names`` is the decoded name list, a tuple: the SAME object as long as the publisher sends the
    same names (the bytes of the name block are compared, the strings decoded only when they change),
    so a consumer matches names to joints once per name list (JointStateMerger.match) and recognises
    the list by identity afterwards.
    """

    __slots__ = ('stamp_ns', 'names', 'position', 'velocity')

    def __init__(self):
        self.stamp_ns = 0
        self.names = ()
        self.position = np.zeros(0)
        self.velocity = np.zeros(0)


class JointStateDecoder:
    """``decode(data)``: CDR bytes of a JointState -> :class:`JointStateView` (raises :class:`CdrError`).

    Checks everything it reads against the length of `data`: a truncated message, a count larger
    than the bytes that follow or a string without its NUL is a :class:`CdrError`, never an
    out-of-bounds read. Values are not judged here (NaN passes; the merger rejects it).
    """

    def __init__(self):
        self.view = JointStateView()
        self._names_block = b''
        self.name_changes = 0  # how often the name list was decoded (once per distinct list)

    def decode(self, data):
        size = len(data)
        if size < HEADER + 12 or data[0] != 0 or data[1] != 1:
            raise CdrError(f'not a little-endian CDR JointState ({size} bytes, header {bytes(data[:4]).hex()})')
        sec, nanosec = _STAMP.unpack_from(data, HEADER)
        offset = HEADER + 8
        (length,) = _U32.unpack_from(data, offset)  # header.frame_id (skipped)
        offset += 4 + length
        if length == 0 or offset > size:
            raise CdrError(f'frame_id of {length} bytes does not fit in {size} bytes')
        offset = _align(offset, 4)
        if offset + 4 > size:
            raise CdrError(f'truncated before the name list ({size} bytes)')
        (count,) = _U32.unpack_from(data, offset)
        if count > MAX_NAMES:
            raise CdrError(f'{count} joint names (more than {MAX_NAMES})')
        start = offset
        offset += 4
        for _ in range(count):
            offset = _align(offset, 4)
            if offset + 4 > size:
                raise CdrError(f'truncated in the name list ({size} bytes)')
            (length,) = _U32.unpack_from(data, offset)
            offset += 4 + length
            if length == 0 or offset > size or data[offset - 1] != 0:
                raise CdrError(f'joint name of {length} bytes does not fit in {size} bytes')
        view = self.view
        block = data[start:offset]
        if block != self._names_block:
            view.names = self._decode_names(data, start + 4, count)
            self._names_block = block
            self.name_changes += 1
        offset, view.position = self._doubles(data, offset, size, 'position')
        offset, view.velocity = self._doubles(data, offset, size, 'velocity')
        view.stamp_ns = sec * 1_000_000_000 + nanosec
        return view

    @staticmethod
    def _decode_names(data, offset, count):
        names = []
        for _ in range(count):
            offset = _align(offset, 4)
            (length,) = _U32.unpack_from(data, offset)
            try:
                names.append(bytes(data[offset + 4 : offset + 3 + length]).decode('utf-8'))
            except UnicodeDecodeError as exc:
                raise CdrError(f'joint name is not UTF-8: {exc}') from None
            offset += 4 + length
        return tuple(names)

    @staticmethod
    def _doubles(data, offset, size, field):
        offset = _align(offset, 4)
        if offset + 4 > size:
            raise CdrError(f'truncated before {field} ({size} bytes)')
        (count,) = _U32.unpack_from(data, offset)
        offset += 4
        if count == 0:
            return offset, np.zeros(0)
        offset = _align(offset, 8)
        end = offset + 8 * count
        if end > size:
            raise CdrError(f'{field}: {count} values do not fit in {size} bytes')
        return end, np.frombuffer(data, dtype='<f8', count=count, offset=offset)


class Float64ArrayEncoder:
    """A ``std_msgs/Float64MultiArray`` of `size` doubles (empty layout) as one reused CDR buffer.

    ``values`` is a NumPy view of the doubles inside ``buffer``: write the efforts into it and
    publish ``buffer`` as it is (no per-period allocation or serialization). The padding bytes are
    zero, so equal values give equal bytes.
    """

    def __init__(self, size):
        # header | dim count 0 | data_offset 0 | data count | pad to 8 | doubles
        data_at = _align(HEADER + 12, 8) if size else HEADER + 12
        self.buffer = bytearray(data_at + 8 * size)
        self.buffer[:HEADER] = CDR_LE
        _U32.pack_into(self.buffer, HEADER + 8, size)
        self.values = np.frombuffer(self.buffer, dtype='<f8', count=size, offset=data_at)


def encode_joint_state(stamp_ns, names, position, velocity=(), effort=(), frame_id=''):
    """A JointState as CDR bytes (tests and the raw publishers of benchmarks; not used per period)."""
    out = bytearray(CDR_LE)

    def pad(size):
        out.extend(b'\x00' * (-(len(out) - HEADER) % size))

    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    out += _STAMP.pack(sec, nanosec)

    def string(text):
        raw = text.encode('utf-8') + b'\x00'
        pad(4)
        out.extend(_U32.pack(len(raw)) + raw)

    string(frame_id)
    pad(4)
    out += _U32.pack(len(names))
    for name in names:
        string(name)
    for values in (position, velocity, effort):
        pad(4)
        out += _U32.pack(len(values))
        if len(values):
            pad(8)
            out += np.asarray(values, dtype='<f8').tobytes()
    return bytes(out)
