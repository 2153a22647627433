"""uk_binary framing, CRC-16 vectors, COBS, Dynamixel packet CRC/stuffing, ODrive checksums.

Independent references: published CRC check values (CRC catalogue: CCITT-FALSE 0x29B1,
UMTS/BUYPASS 0xFEE8 for b"123456789"), the bitwise CRC definition, the official
dynamixel_sdk's own CRC table and stuffing, and hand-computed COBS examples (Cheshire & Baker).
"""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uk_controller.hardware.crc import crc16_bitwise, crc16_ccitt_false, crc16_umts
from uk_controller.hardware.protocols.dynamixel.codec import packet, stuff, unstuff
from uk_controller.hardware.protocols.odrive import codec as oa
from uk_controller.hardware.protocols.uk_binary import codec as ukb


def test_crc_check_values():
    assert crc16_ccitt_false(b'123456789') == 0x29B1
    assert crc16_umts(b'123456789') == 0xFEE8
    assert crc16_ccitt_false(b'') == 0xFFFF


@given(st.binary(max_size=300))
def test_crc_tables_match_bitwise_definition(data):
    assert crc16_ccitt_false(data) == crc16_bitwise(data, 0x1021, 0xFFFF)
    assert crc16_umts(data) == crc16_bitwise(data, 0x8005, 0x0000)


@given(st.binary(max_size=300))
def test_umts_crc_equals_official_dynamixel_sdk(data):
    from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

    assert crc16_umts(data) == Protocol2PacketHandler().updateCRC(0, list(data), len(data))


@pytest.mark.parametrize(
    'raw, enc',
    [
        (b'\x00', b'\x01\x01'),
        (b'\x00\x00', b'\x01\x01\x01'),
        (b'\x11\x22\x00\x33', b'\x03\x11\x22\x02\x33'),
        (b'\x11\x22\x33\x44', b'\x05\x11\x22\x33\x44'),
        (b'\x11\x00\x00\x00', b'\x02\x11\x01\x01\x01'),
        (bytes(range(1, 255)), b'\xff' + bytes(range(1, 255)) + b'\x01'),
    ],
)
def test_cobs_published_examples(raw, enc):
    assert ukb.cobs_encode(raw) == enc
    assert ukb.cobs_decode(enc) == raw


@given(st.binary(max_size=700))
def test_cobs_round_trip_and_no_zero(data):
    enc = ukb.cobs_encode(data)
    assert 0 not in enc
    assert len(enc) <= len(data) + 1 + len(data) // 254 + 1
    assert ukb.cobs_decode(enc) == data


def test_frame_layout_by_hand():
    """COMMAND seq 7, 2 motors, currents (1.5, -0.25): bytes computed field by field."""
    body = bytes([0x01, 7, 2]) + struct.pack('<ff', 1.5, -0.25)
    body += struct.pack('<H', crc16_bitwise(body, 0x1021, 0xFFFF))
    frame = ukb.encode_frame(ukb.COMMAND, 7, 2, ukb.command_payload([1.5, -0.25]))
    assert frame[-1] == 0 and 0 not in frame[:-1]
    assert ukb.cobs_decode(frame[:-1]) == body
    t, seq, n, payload = ukb.decode_frame(frame[:-1])
    assert (t, seq, n) == (ukb.COMMAND, 7, 2)
    np.testing.assert_array_equal(ukb.parse_command(payload, 2), [1.5, -0.25])


@settings(max_examples=60)
@given(st.integers(1, 16), st.integers(0, 255), st.data())
def test_feedback_round_trip(n, seq, data):
    f32 = st.floats(-1e6, 1e6, width=32)
    pos = np.array(data.draw(st.lists(f32, min_size=n, max_size=n)))
    vel = np.array(data.draw(st.lists(f32, min_size=n, max_size=n)))
    cur = np.array(data.draw(st.lists(f32, min_size=n, max_size=n)))
    fault = np.array(data.draw(st.lists(st.integers(0, 255), min_size=n, max_size=n)))
    payload = ukb.feedback_payload(5, 6, 700, 123456, pos, vel, cur, fault)
    dec = ukb.StreamDecoder()
    (frame,) = dec.feed(ukb.encode_frame(ukb.FEEDBACK, seq, n, payload))
    fb = ukb.parse_feedback(frame[1], frame[2], frame[3])
    assert (fb.seq, fb.state, fb.error, fb.rx_errors, fb.time_us) == (seq, 5, 6, 700, 123456)
    np.testing.assert_array_equal(fb.position, pos)
    np.testing.assert_array_equal(fb.velocity, vel)
    np.testing.assert_array_equal(fb.current, cur)
    np.testing.assert_array_equal(fb.fault, fault)


def test_every_single_bit_error_is_detected():
    frame = ukb.encode_frame(ukb.COMMAND, 3, 3, ukb.command_payload([0.1, -2.0, 3.5]))
    for i in range(len(frame) - 1):
        for bit in range(8):
            bad = bytearray(frame)
            bad[i] ^= 1 << bit
            dec = ukb.StreamDecoder()
            assert dec.feed(bytes(bad)) == [] or dec.feed(b'\x00') == []
            assert dec.bad_frames >= 1


def test_stream_decoder_resynchronises_and_reassembles():
    f1 = ukb.encode_frame(ukb.STATUS, 1, 2)
    f2 = ukb.encode_frame(ukb.STATUS, 2, 2)
    garbage = b'\x13\x37\xaa\x00'
    stream = garbage + f1 + f1[:3] + b'\x00' + f2
    dec = ukb.StreamDecoder()
    got = []
    for k in range(0, len(stream), 3):  # arrives in small pieces
        got += dec.feed(stream[k : k + 3])
    assert [g[1] for g in got] == [1, 2]
    assert dec.bad_frames == 2  # the garbage and the truncated copy


def test_dynamixel_stuffing_matches_sdk():
    from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

    params = bytes([0xFF, 0xFF, 0xFD, 0x01, 0xFF, 0xFF, 0xFD])
    pkt = packet(1, 0x03, params)
    h = Protocol2PacketHandler()
    tx = [0xFF, 0xFF, 0xFD, 0x00, 1, (len(params) + 3) & 0xFF, 0, 0x03] + list(params) + [0, 0]
    tx = h.addStuffing(tx)
    total = tx[5] + (tx[6] << 8) + 7
    crc = h.updateCRC(0, tx, total - 2)
    tx[total - 2 : total] = [crc & 0xFF, crc >> 8]
    assert bytes(tx[:total]) == pkt
    assert unstuff(stuff(params)) == params
    assert stuff(params).count(b'\xff\xff\xfd\xfd') == 2


def test_odrive_checksum_and_parse():
    line = oa.make_line('c 0 1.25')
    text = b'c 0 1.25 '
    cs = 0
    for b in text:
        cs ^= b
    assert line == text + b'*' + str(cs).encode() + b'\n'
    assert oa.parse_line(line) == ('c 0 1.25', True)
    assert oa.parse_line(b'f 1 ; comment\n') == ('f 1', False)
    with pytest.raises(oa.ChecksumError):
        oa.parse_line(line.replace(b'1.25', b'1.35'))


def test_worked_examples_in_the_specification():
    """The hex bytes printed in docs/serial_protocol.md section 2.6 are what the encoder emits."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / 'docs' / 'serial_protocol.md').read_text()

    def wire_after(marker):
        part = doc[doc.index(marker) :]
        start = part.index('wire') + 4
        lines = []
        for line in part[start:].splitlines():
            if not line.strip():
                break
            lines.append(line.strip())
        return bytes.fromhex(' '.join(lines))

    assert wire_after('COMMAND, seq 1, n 2') == ukb.encode_frame(ukb.COMMAND, 1, 2, ukb.command_payload([0.5, -1.0]))
    assert wire_after('STATUS, seq 0x2A') == ukb.encode_frame(ukb.STATUS, 0x2A, 2)
    fb = ukb.feedback_payload(ukb.ST_ENABLED, 0, 0, 1000, [1.0, -2.0], [0.0, 0.5], [0.5, -1.0], [0, 0])
    assert wire_after('FEEDBACK, seq 1, n 2') == ukb.encode_frame(ukb.FEEDBACK, 1, 2, fb)
