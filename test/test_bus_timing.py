"""The cycle budget: sizes against the frames the protocols really send, the
budget against the formula computed here by hand from baud, sizes, return delays and the latency
timer, the latency timer read from a fake sysfs, CAN frame bits against the closed form of Davis et
al. 2007, and the prediction against the loop period measured on the emulator (never shorter than the
predicted minimum; within a generous factor of it: no wall-clock margin a busy machine could break).
"""

import math
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from uk_controller.hardware import bus_timing, registry
from uk_controller.hardware.bus_timing import CycleBudget, budget, can_frame_bits, fake_usb_serial, usb_latency_timer
from uk_controller.hardware.protocols.dynamixel import control_table as T
from uk_controller.hardware.protocols.dynamixel.codec import packet
from uk_controller.hardware.protocols.uk_binary import codec as ukb

CMD = [sys.executable, '-c', 'import sys; from uk_controller.cli import main; sys.exit(main())']


@pytest.mark.parametrize('p', [1, 4, 6, 16])
def test_uk_binary_sizes_are_the_encoded_frames(p):
    rng = np.random.default_rng(p)
    cost = registry.get('uk_binary').cycle_cost(p)
    (ex,) = cost.exchanges
    cmd = ukb.encode_frame(ukb.COMMAND, 7, p, ukb.command_payload(rng.normal(size=p)))
    fb = ukb.encode_frame(
        ukb.FEEDBACK, 7, p, ukb.feedback_payload(1, 0, 0, 123, *rng.normal(size=(3, p)), np.zeros(p, int))
    )
    assert (ex.request_bytes, ex.reply_bytes) == (len(cmd), len(fb))


@pytest.mark.parametrize('p', [1, 4, 6])
def test_dynamixel_sizes_are_the_protocol_2_packets(p):
    """Sync Write of Goal Current, Sync Read of the 10 feedback bytes and the status packets, built
    with the codec's packet() from the Protocol 2.0 parameter layout (values that need no stuffing)."""
    cost = registry.get('dynamixel').cycle_cost(p, facts={'return_delay': [0.0] * p})
    write, read = cost.exchanges
    ids = list(range(1, p + 1))
    sync_write = packet(
        T.BROADCAST,
        T.INST_SYNC_WRITE,
        struct.pack('<HH', T.ADDR_GOAL_CURRENT, 2) + b''.join(bytes([i, 5, 0]) for i in ids),
    )
    sync_read = packet(T.BROADCAST, T.INST_SYNC_READ, struct.pack('<HH', T.FEEDBACK_START, T.FEEDBACK_LEN) + bytes(ids))
    status = packet(1, T.INST_STATUS, bytes([0]) + bytes(range(1, 1 + T.FEEDBACK_LEN)))
    assert write.request_bytes == len(sync_write) and not write.awaited
    assert (read.request_bytes, read.reply_bytes, read.replies) == (len(sync_read), p * len(status), p)
    # by hand: header 4 + id 1 + length 2 + instruction 1 + CRC 2 = 10 bytes of framing
    assert (write.request_bytes, read.request_bytes, read.reply_bytes) == (14 + 3 * p, 14 + p, 21 * p)


def _hand_dynamixel(p, baud, rdt_units, latency_ms):
    """The cycle of DynamixelBus computed here: write bytes, then read bytes + p return delays, the read
    reply at the next tick of the latency timer."""
    byte = 10.0 / baud
    write = (14 + 3 * p) * byte
    read = (14 + p + 21 * p) * byte + p * rdt_units * 2e-6
    return max(write + read, latency_ms * 1e-3)


@pytest.mark.parametrize('latency_ms', [16, 1, 0])
@pytest.mark.parametrize(
    'p, baud, rdt', [(4, 1_000_000, 250), (6, 1_000_000, 0), (4, 4_000_000, 250), (2, 57_600, 250)]
)
def test_dynamixel_budget_is_the_hand_formula(p, baud, rdt, latency_ms):
    entry = registry.get('dynamixel')
    cost = entry.cycle_cost(p, facts={'return_delay': [rdt * 2e-6] * p})
    b = CycleBudget('dynamixel', p, baud, cost, latency_ms * 1e-3 if latency_ms else None, 'test')
    T_hand = _hand_dynamixel(p, baud, rdt, latency_ms)
    assert b.min_period == pytest.approx(T_hand, rel=1e-12)
    assert b.max_rate == pytest.approx(1.0 / T_hand, rel=1e-12)
    assert b.check_rate(0.999 / T_hand) is None
    msg = b.check_rate(1.01 / T_hand)
    assert msg is not None and f'{1 / T_hand:.0f} Hz' in msg and f'--rate {math.floor(1 / T_hand)}' in msg
    wire = _hand_dynamixel(p, baud, rdt, 0)
    assert ('latency_timer' in msg) == (latency_ms * 1e-3 > wire)  # named only when it is the bound
    assert ('--set-return-delay-zero' in msg) == (rdt > 0)


@pytest.mark.parametrize('baud', [115200, 1_000_000])
def test_odrive_budget_waits_one_tick_per_axis(baud):
    """ODrive asks every axis for its feedback separately: p awaited replies, each at a latency tick.
    Shortest lines (one digit per number, one checksum digit): 'c 0 0 *0\\n', 'f 0 *0\\n', '0 0 *0\\n'."""
    p, L = 4, 0.004
    c, f, r = len('c 0 0 *0\n'), len('f 0 *0\n'), len('0 0 *0\n')
    t_first, t_other = (p * c + f + r) * 10 / baud, (f + r) * 10 / baud
    cost = registry.get('odrive').cycle_cost(p)
    b = CycleBudget('odrive', p, baud, cost, L, 'test')
    assert b.min_period == pytest.approx(max(t_first, L) + (p - 1) * max(t_other, L), rel=1e-12)
    b0 = CycleBudget('odrive', p, baud, cost, None, 'test')
    assert b0.min_period == pytest.approx(t_first + (p - 1) * t_other, rel=1e-12)


def test_latency_timer_from_a_fake_sysfs(tmp_path):
    root = tmp_path / 'sys'
    dev = root / 'bus' / 'usb-serial' / 'devices' / 'ttyUSB3'
    dev.mkdir(parents=True)
    (dev / 'latency_timer').write_text('16\n')
    node = tmp_path / 'dev' / 'ttyUSB3'
    node.parent.mkdir()
    node.write_text('')
    by_id = tmp_path / 'usb-FTDI_FT232R_USB_UART_A1-if00-port0'
    by_id.symlink_to(node)
    # the port's real path (a by-id link resolved) names the adapter
    assert usb_latency_timer(str(by_id), str(root)) == (0.016, str(dev / 'latency_timer'))
    (dev / 'latency_timer').write_text('1\n')
    assert usb_latency_timer(str(node), str(root))[0] == 0.001
    # a device node under another name: its character device number, as sysfs's dev/char links
    path = fake_usb_serial(str(root), '/dev/null', 4, name='ttyUSB9')
    assert usb_latency_timer('/dev/null', str(root)) == (0.004, path)
    # no adapter with a timer: none, and why
    latency, why = usb_latency_timer('/dev/zero', str(root))
    assert latency is None and 'latency_timer' in why
    # the environment variable moves the root
    os.environ[bus_timing.SYSFS_ENV] = str(root)
    try:
        assert usb_latency_timer('/dev/null')[0] == 0.004
    finally:
        del os.environ[bus_timing.SYSFS_ENV]


@pytest.mark.parametrize('n', range(9))
def test_can_frame_bits_against_davis_2007(n):
    """Field by field (SOF, id, RTR, IDE, r0, DLC, data, CRC, delimiters, ACK, EOF, IFS) without stuffing;
    with worst-case stuffing the closed form C = 55 + 10 n (standard) and 80 + 10 n (extended) bits."""
    fields_std = 1 + 11 + 1 + 1 + 1 + 4 + 8 * n + 15 + 1 + 2 + 7 + 3
    fields_ext = 1 + 11 + 1 + 1 + 18 + 1 + 1 + 1 + 4 + 8 * n + 15 + 1 + 2 + 7 + 3
    assert can_frame_bits(n, worst_case_stuffing=False) == fields_std
    assert can_frame_bits(n, extended=True, worst_case_stuffing=False) == fields_ext
    assert can_frame_bits(n) == 55 + 10 * n
    assert can_frame_bits(n, extended=True) == 80 + 10 * n
    assert bus_timing.can_frame_time(n, 1e6) == pytest.approx((55 + 10 * n) * 1e-6)


def test_can_frame_bits_refuses_more_than_eight_bytes():
    with pytest.raises(ValueError, match='0..8'):
        can_frame_bits(9)


# ---- against the emulator ----------------------------------------------------------------------------


@pytest.mark.serial
@pytest.mark.parametrize('latency_ms', [0, 4])
@pytest.mark.slow
def test_prediction_bounds_the_loop_period_measured_on_the_emulator(tmp_path, robots, latency_ms):
    """The SCARA's controller over the Dynamixel emulator with the line rate imposed (1 Mbaud), the
    servos' factory Return Delay Time and an FTDI latency timer model, read by the budget from a fake
    sysfs: the loop, asked for more than the bus carries, runs at most at the predicted rate, and not
    twenty times slower."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.control.loop_timing import TIMING_FIELDS
    from uk_controller.hardware.calibration import HardwareConfig
    from uk_controller.hardware.emulator import JointLimitedPlant
    from uk_controller.hardware.joint_state_assembler import JointStateAssembler
    from uk_controller.hardware.safety import SafeBus
    from uk_controller.hardware.serial_loop import run_loop
    from uk_controller.robots import load_robot
    from uk_controller.sim.uk_plant import UKPlant

    robots('scara')
    setup = load_robot('scara', {'ros.loop.window': 0.5, 'control.rate': 1000.0, 'hardware.protocol': 'dynamixel'})
    hw = HardwareConfig.from_setup(setup)
    baud = 1_000_000
    core = ControllerCore(setup)
    plant = JointLimitedPlant.from_setup(UKPlant.from_setup(load_robot('scara')), setup)
    emu = registry.make_emulator('dynamixel', plant, hw, dt=core.dt, baud=baud, usb_latency=latency_ms * 1e-3)
    root = str(tmp_path / 'sys')
    if latency_ms:
        fake_usb_serial(root, emu.port, latency_ms)
    emu.start(process=True)  # its own process: its waits do not share our GIL
    safe = SafeBus(hw, lambda: registry.make_bus(hw.at_port(emu.port, baud=baud), timeout=0.2), watchdog=1.0)
    try:
        safe.connect(raise_errors=True)
        b = budget(registry.get('dynamixel'), hw.p, baud, facts=safe.bus.timing_facts(), port=emu.port, sysfs=root)
        res = run_loop(core, safe, JointStateAssembler(setup, hw), duration=2.0, realtime=True)
        diag = safe.diagnostics()
    finally:
        safe.shutdown()
        emu.close()
    print('\n' + b.report())
    assert b.cost.notes[0].startswith('return delays read from the servos') and '250' in b.cost.notes[0]
    assert (b.usb_latency or 0.0) == latency_ms * 1e-3
    rate = TIMING_FIELDS.index('achieved_rate_hz')
    achieved = [w[rate] for w in res.windows]
    print('achieved rate per window:', achieved, 'predicted at most', b.max_rate, 'timeouts', diag['timeouts'])
    assert len(achieved) >= 2
    assert max(achieved) <= b.max_rate * 1.02  # the bus cannot be beaten (2 %: window edges)
    assert float(np.median(achieved)) >= b.max_rate / 20.0  # a generous factor: a busy machine is slow


def _cli(args, env=None, timeout=240):
    return subprocess.run(
        CMD + args, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


@pytest.mark.serial
@pytest.mark.slow
def test_check_reports_the_budget_with_a_16_and_a_1_ms_latency_timer(tmp_path, robots):
    """``uk-controller run --check`` for the SCARA on Dynamixel servos (the emulator) behind a fake FTDI
    adapter: the highest rate it prints is the hand formula's, 16 ms is refused naming the latency
    timer, 1 ms is bound by the servos' return delays; --set-return-delay-zero writes the register."""
    from uk_controller.hardware.calibration import HardwareConfig
    from uk_controller.robots import load_robot
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot(robots('scara'))
    hw = HardwareConfig.from_setup(setup)
    with registry.make_emulator('dynamixel', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
        out = {}
        for ms in (16, 1):
            root = str(tmp_path / f'sys{ms}')
            fake_usb_serial(root, emu.port, ms)
            r = _cli(
                ['run', 'scara', '--port', emu.port, '--protocol', 'dynamixel', '--rate', '200', '--check'],
                env={bus_timing.SYSFS_ENV: root},
            )
            out[ms] = r
            print(r.stdout, r.stderr)
            assert r.returncode == 2 and 'Traceback' not in r.stderr
            T_hand = _hand_dynamixel(4, 1_000_000, 250, ms)
            assert f'the bus carries at most {1 / T_hand:.0f} Hz' in r.stdout
            assert 'motor4' in r.stdout and 'EXCEEDED' in r.stdout  # and the static load (test_static_load)
        assert f'echo 1 | sudo tee {tmp_path}/sys16/bus/usb-serial/devices/ttyUSB0/latency_timer' in out[16].stdout
        assert 'USB latency timer: 1 ms' in out[1].stdout and 'echo 1 |' not in out[1].stdout
        assert 'the requested rate 200 Hz is above the 62 Hz' in out[16].stdout
        assert 'the requested rate 200 Hz' not in out[1].stdout  # 1 ms: 305 Hz carried
        assert not emu.enabled and not np.any(emu.max_abs_effort)  # torque never on
        r = _cli(
            [
                'run',
                'scara',
                '--port',
                emu.port,
                '--protocol',
                'dynamixel',
                '--rate',
                '200',
                '--check',
                '--set-return-delay-zero',
            ],
            env={bus_timing.SYSFS_ENV: str(tmp_path / 'sys1')},
        )
        print(r.stdout)
        assert 'Return Delay Time set to 0' in r.stdout
        assert all(t[T.ADDR_RETURN_DELAY_TIME] == 0 for t in emu.tables.values())
        assert f'the bus carries at most {1 / _hand_dynamixel(4, 1_000_000, 0, 1):.0f} Hz' in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    'args, message',
    [
        (['--usb-latency', '300'], '--usb-latency: must be in [0, 255] ms'),
        (['--return-delay', '255', '--protocol', 'dynamixel'], '--return-delay: must be in [0, 254] units of 2 us'),
        (['--return-delay', '0', '--protocol', 'uk_binary'], '--return-delay: a Dynamixel register'),
    ],
)
def test_emulate_rejects_bad_timing_arguments_with_exit_2(args, message):
    done = subprocess.run(CMD + ['emulate', 'scara', *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr and 'Traceback' not in done.stderr


def test_run_set_return_delay_zero_is_refused_for_a_protocol_without_it():
    """Checked before anything is sent: only the dynamixel protocol has the register (the run module's
    preflight says so; here through its helper with a bus stand-in)."""
    from types import SimpleNamespace

    from uk_controller.hardware.calibration import HardwareConfig
    from uk_controller.hardware.run_command import _preflight
    from uk_controller.robots import load_robot

    setup = load_robot('scara')
    hw = HardwareConfig.from_setup(setup)

    class Bus:
        ids = [1, 2, 3, 4]
        timing_facts = staticmethod(dict)
        torque_limit_sources = staticmethod(lambda: [''] * 4)

    args = SimpleNamespace(set_return_delay_zero=True, baud=None)
    ok, text = _preflight(setup, hw, SimpleNamespace(bus=Bus()), 'uk_binary', '', args, 100.0)
    assert not ok and '--set-return-delay-zero: the uk_binary protocol has no Return Delay Time register' in text


def test_a_protocol_without_cycle_cost_bounds_nothing_and_says_so():
    from uk_controller.hardware.bus_timing import CycleCost

    b = CycleBudget('mine', 2, 1_000_000, CycleCost(exchanges=()), None, 'test')
    assert b.min_period == 0 and b.max_rate == math.inf and b.check_rate(1e6) is None
    assert 'no bound on the rate' in b.report()


@pytest.mark.parametrize(
    'models, reply_bits',
    [(['mini-cheetah'] * 4, 47 + 8 * 6), (['dm-j4310'] * 6, 47 + 8 * 8), (['ak60-6', 'dm-j4310'], None)],
)
@pytest.mark.parametrize('bitrate', [1_000_000, 500_000])
def test_can_mit_cycle_is_its_frames_on_the_can_bus(models, reply_bits, bitrate):
    """p command frames (8 bytes: 111 bits) and p replies (cubemars 6 bytes: 95 bits, damiao 8: 111), counted
    without stuffing (a lower bound on the period), at hardware.can.bitrate; one awaited exchange."""
    from types import SimpleNamespace

    from uk_controller.hardware.protocols.can_mit.codec import PRESETS

    p = len(models)
    motors = [SimpleNamespace(sections={'mit': {'model': m}}) for m in models]
    cost = registry.get('can_mit').cycle_cost(p, {'bitrate': bitrate}, motors=motors)
    if reply_bits is None:
        reply_bits = sum(47 + 8 * (8 if PRESETS[m].reply == 'damiao' else 6) for m in models) / p
    b = CycleBudget('can_mit', p, 1_000_000, cost, None, 'test')
    assert b.min_period == pytest.approx(p * (111 + reply_bits) / bitrate, rel=1e-12)
    b16 = CycleBudget('can_mit', p, 1_000_000, cost, 0.016, 'test')
    assert b16.min_period == pytest.approx(max(0.016, b.min_period))
