"""The can_mit protocol (MIT-mode CAN motors through python-can) against independent computations.

- packing: the 8-byte command and the replies against a 64-bit integer built from the documented bit
  layout (p 16 | v 12 | kp 12 | kd 12 | tau 12, most significant first) and the documented linear
  maps, with the quantisation bound (half a step for the host's rounding, one step for the firmware's
  truncation, read back as the interval's middle);
- python-can's own slcan driver talking to the emulated adapter over a pty (the LAWICEL commands it
  sends: C, S8, O, t..., and the frames it parses);
- Damiao error codes as named faults that take the torque off;
- `uk-controller run` (a subprocess) against the emulator: the emulator saw the exit motor mode frame
  of every motor when the run ended;
- the SCARA helix over can_mit against the in-process simulation, within the bound that the reply's
  quantisation implies for Baumgarte rows (derived in the test's docstring).
"""

import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from uk_controller.hardware.calibration import HardwareConfig, MotorCalibration
from uk_controller.hardware.emulator import IndependentJointsPlant
from uk_controller.hardware.faults import stepped_bus
from uk_controller.hardware.protocols.can_mit import codec as mit
from uk_controller.hardware.registry import make_emulator
from uk_controller.hardware.safety import ARMED

CMD = [sys.executable, '-c', 'import sys; from uk_controller.cli import main; sys.exit(main())', 'run']


def linear(x, lo, hi, bits):
    """The documented map, independently: the integer nearest to (x - lo) / (hi - lo) of 2^b - 1."""
    return int(np.clip(np.floor((x - lo) / (hi - lo) * (2**bits - 1) + 0.5), 0, 2**bits - 1))


def step(lo, hi, bits):
    return (hi - lo) / (2**bits - 1)


@pytest.mark.parametrize('model', sorted(mit.PRESETS))
def test_command_packing_is_the_documented_bit_layout_and_linear_maps(model):
    r = mit.PRESETS[model]
    rng = random.Random(model)
    for _ in range(300):
        p, v = rng.uniform(-r.p_max, r.p_max), rng.uniform(-r.v_max, r.v_max)
        kp, kd, tau = rng.uniform(0, r.kp_max), rng.uniform(0, r.kd_max), rng.uniform(-r.t_max, r.t_max)
        word = (
            linear(p, -r.p_max, r.p_max, 16) << 48
            | linear(v, -r.v_max, r.v_max, 12) << 36
            | linear(kp, 0, r.kp_max, 12) << 24
            | linear(kd, 0, r.kd_max, 12) << 12
            | linear(tau, -r.t_max, r.t_max, 12)
        )
        data = mit.pack_command(p, v, kp, kd, tau, r)
        assert data == word.to_bytes(8, 'big')
        back = mit.unpack_command(data, r)
        bounds = [
            step(-r.p_max, r.p_max, 16),
            step(-r.v_max, r.v_max, 12),
            step(0, r.kp_max, 12),
            step(0, r.kd_max, 12),
            step(-r.t_max, r.t_max, 12),
        ]
        for x, y, b in zip((p, v, kp, kd, tau), back, bounds):
            assert abs(x - y) <= b / 2 * (1 + 1e-9)
    # values beyond the range are clamped to it
    assert mit.unpack_command(mit.pack_command(1e9, -1e9, 1e9, -1, 1e9, r), r) == pytest.approx(
        (r.p_max, -r.v_max, r.kp_max, 0.0, r.t_max)
    )


@pytest.mark.parametrize('model', ['mini-cheetah', 'ak80-9', 'dm-j4310', 'dm-j8009'])
def test_reply_round_trip_and_layout(model):
    r = mit.PRESETS[model]
    rng = random.Random(1)
    for _ in range(300):
        ident = rng.randrange(1, 16)
        p, v, t = (rng.uniform(-0.99, 0.99) * m for m in (r.p_max, r.v_max, r.t_max))
        data = mit.pack_reply(ident, p, v, t, r, error=mit.DAMIAO_ENABLED, t_mos=41, t_rotor=52)
        # the firmware's truncation, independently: floor of the same ratio
        pu = int(np.floor((p + r.p_max) / (2 * r.p_max) * 65535))
        vu = int(np.floor((v + r.v_max) / (2 * r.v_max) * 4095))
        tu = int(np.floor((t + r.t_max) / (2 * r.t_max) * 4095))
        body = (pu << 24 | vu << 12 | tu).to_bytes(5, 'big')
        if r.reply == 'damiao':
            assert data == bytes([ident | 0x10]) + body + bytes([41, 52])
        else:
            assert data == bytes([ident]) + body
        back = mit.unpack_reply(data, r)
        assert back.motor == ident and back.fault == 0
        # read as the interval's middle: within half a step
        assert abs(back.position - p) <= step(-r.p_max, r.p_max, 16) / 2 * (1 + 1e-9)
        assert abs(back.velocity - v) <= step(-r.v_max, r.v_max, 12) / 2 * (1 + 1e-9)
        assert abs(back.torque - t) <= step(-r.t_max, r.t_max, 12) / 2 * (1 + 1e-9)
        if r.reply == 'damiao':
            assert back.enabled and (back.t_mos, back.t_rotor) == (41.0, 52.0)
    # at the ends of the code range: the reply is the clamp, reported as a fault
    far = mit.unpack_reply(mit.pack_reply(1, 10 * r.p_max, -10 * r.v_max, 0.0, r), r)
    assert far.fault & mit.FAULT_POSITION_RANGE and far.fault & mit.FAULT_VELOCITY_RANGE


def test_a_clipped_torque_never_decodes_above_its_limit():
    r = mit.PRESETS['ak80-9']
    rng = random.Random(2)
    for _ in range(2000):
        lim = rng.uniform(1e-3, r.t_max)
        for tau in (rng.uniform(-3 * lim, 3 * lim), lim, -lim):
            code = mit.torque_code(tau, -lim, lim, r)
            back = mit.uint_to_float(code, -r.t_max, r.t_max, 12)
            assert abs(back) <= lim + 1e-12
            assert abs(back - np.clip(tau, -lim, lim)) <= step(-r.t_max, r.t_max, 12) * (1 + 1e-9)


def test_damiao_error_codes_have_names():
    assert mit.fault_names(0xA) == ['over-current']
    assert mit.fault_names(0xB) == ['MOS over-temperature'] and mit.fault_names(0xC) == ['rotor over-temperature']
    assert 'lost communication' in mit.fault_names(0xD)[0]
    assert mit.fault_names(0xD | mit.FAULT_VELOCITY_RANGE)[1].startswith('velocity outside')


def _hw(n=2, model='dm-j4310', watchdog=0.1):
    motors = [
        MotorCalibration(
            f'm{k + 1}', k + 1, torque_limit=1.0, joint=f'joint{k + 1}', sections={'mit': {'model': model}}
        )
        for k in range(n)
    ]
    return HardwareConfig(motors=motors, protocol='can_mit', watchdog=watchdog)


@pytest.mark.serial
def test_python_can_slcan_driver_talks_to_the_emulated_adapter():
    """python-can's own slcan interface opens the emulated adapter (C, S8, O), sends MIT frames as
    t-lines and parses the motors' replies; shutting down closes the channel (C)."""
    import can

    hw = _hw(model='ak80-9')
    plant = IndependentJointsPlant([0.05, 0.05], 0.1)
    plant.reset([0.25, -0.5], [0.0, 0.0])
    r = mit.PRESETS['ak80-9']
    with make_emulator('can_mit', plant, hw, dt=0.002) as emu:
        bus = can.Bus(interface='slcan', channel=emu.port, bitrate=1000000, sleep_after_open=0)
        try:
            end = time.monotonic() + 5  # (the emulator thread reads O\r soon)
            while not emu.channel_open and time.monotonic() < end:
                time.sleep(0.002)
            assert emu.bitrate == 1000000 and emu.channel_open
            bus.send(can.Message(arbitration_id=2, data=mit.ENTER_MOTOR_MODE, is_extended_id=False))
            msg = None
            end = time.monotonic() + 5
            while msg is None and time.monotonic() < end:
                msg = bus.recv(timeout=0.1)
            assert msg is not None and msg.arbitration_id == 0 and not msg.is_extended_id
            reply = mit.unpack_reply(bytes(msg.data), r)
            assert reply.motor == 2 and abs(reply.position + 0.5) <= step(-r.p_max, r.p_max, 16)
            assert emu.motor_mode.tolist() == [False, True]
        finally:
            bus.shutdown()
        end = time.monotonic() + 5
        while emu.channel_open and time.monotonic() < end:
            time.sleep(0.002)
        assert not emu.channel_open


@pytest.mark.serial
@pytest.mark.parametrize(
    'code, name', [(0xA, 'over-current'), (0xB, 'MOS over-temperature'), (0xD, 'lost communication')]
)
def test_damiao_error_code_is_a_named_fault_and_torque_off(code, name):
    hw = _hw()
    plant = IndependentJointsPlant([0.05, 0.05], 0.5)
    clock, emu, safe = stepped_bus(hw, plant, 0.004, protocol='can_mit', watchdog=0.1)
    try:
        safe.connect(raise_errors=True)
        for _ in range(20):
            safe.cycle(np.array([0.3, -0.3]), clock())
            clock.advance(0.004)
        assert safe.state == ARMED and np.any(emu.tau_m)
        emu.inject_error(1, code)
        safe.cycle(np.array([0.3, -0.3]), clock())
        assert safe.state != ARMED
        assert name in safe.reason and 'motor id 2' in safe.reason, safe.reason
        assert not emu.motor_mode.any() and not np.any(emu.tau_m)  # the host sent exit to the other one
        emu.inject_error(1, 0)  # the cause is gone: re-arms
        for _ in range(20):
            clock.advance(0.004)
            safe.cycle(np.array([0.3, -0.3]), clock())
        assert safe.state == ARMED and emu.motor_mode.all()
    finally:
        safe.shutdown()
        emu.close()
    assert emu.saw_exit() == [1, 2]


@pytest.mark.serial
def test_damiao_motor_timeout_is_set_by_the_host_and_trips():
    """configure() writes TIMEOUT = device_watchdog_factor x watchdog (in 50 us counts); a host that goes
    quiet leaves the motor disabled with error 0xD, which the next reply names."""
    hw = _hw(watchdog=0.05)
    plant = IndependentJointsPlant([0.05, 0.05], 0.5)
    clock, emu, safe = stepped_bus(hw, plant, 0.004, protocol='can_mit', watchdog=0.05)
    try:
        safe.connect(raise_errors=True)
        assert emu.timeout.tolist() == pytest.approx([2 * 0.05] * 2)
        for _ in range(10):
            safe.cycle(np.array([0.3, -0.3]), clock())
            clock.advance(0.004)
        assert safe.state == ARMED
        clock.advance(0.2)  # the host is silent for 0.2 s
        end = time.monotonic() + 5
        while emu.motor_mode.any() and time.monotonic() < end:
            time.sleep(0.005)
        assert not emu.motor_mode.any() and emu.error.tolist() == [0xD, 0xD]
        fb = safe.bus.read()
        assert 'lost communication' in safe.bus.describe_faults(fb.fault)
    finally:
        safe.shutdown()
        emu.close()


@pytest.mark.serial
@pytest.mark.slow
def test_run_command_ends_with_the_exit_frame_on_every_motor(tmp_path, robots):
    """`uk-controller run scara --protocol can_mit` through python-can's slcan driver; SIGTERM ends it
    and the emulator saw the exit motor mode frame of every motor last."""
    from uk_controller.robots import load_robot
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot(robots('scara'))
    hw = HardwareConfig.from_setup(setup)
    with make_emulator('can_mit', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
        proc = subprocess.Popen(
            CMD + ['scara', '--port', emu.port, '--protocol', 'can_mit', '--rate', '100', '--quiet'],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            end = time.monotonic() + 120
            while not (emu.enabled and emu.counters['steps'] > 30) and time.monotonic() < end:
                time.sleep(0.02)
            assert emu.enabled, f'never armed: {dict(emu.counters)}'
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert 'torque off' in err and 'Traceback' not in err
        assert emu.saw_exit() == sorted(hw.ids)
        assert not emu.enabled and not np.any(emu.tau_m)


@pytest.mark.serial
@pytest.mark.parametrize('robot', ['scara'], indirect=True)
@pytest.mark.slow
def test_scara_helix_over_can_mit_tracks_within_the_quantisation_bound(robot):
    """The HIL loop of test_hardware_hil (lockstep emulator, UK plant) over can_mit, against the
    in-process simulation.

    Bound: the controller enforces phi'' + 2 w phi' + w^2 phi = 0 (critical Baumgarte, w =
    stabilization.omega) on the *measured* state q_m = q + dq, q_m' = q' + dv. With the feedback steady
    off by (dq, dv), the measured rows settle at zero, so the true ones settle at
    phi = -A dq - (2 / w) A dv. The reply is within half a step of the truth (codec: the middle of the
    truncated interval), so per row |phi_i| <= sum_j |A_ij| (s_p / 2 + (2 / w) s_v / 2) with s_p, s_v the
    position and velocity steps of the motors' ranges (identity calibration: joint = motor). A is the
    task Jacobian, here by finite differences of the controller's own task error.
    """
    from test_hardware_hil import RATE, hil

    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    duration = 1.5
    sim = simulate(load_robot(robot, {'simulation.duration': duration, 'control.rate': RATE}))
    k, q, e, diag = hil(robot, 'can_mit', duration)
    np.testing.assert_array_equal(k, np.arange(int(round(duration * RATE))))
    assert diag['timeouts'] == 0 and diag['crc_errors'] == 0 and diag['watchdog_trips'] == 0
    setup = load_robot(robot, {'control.rate': RATE})
    r = mit.PRESETS[mit.DEFAULT_MODEL]
    s_p, s_v = step(-r.p_max, r.p_max, 16), step(-r.v_max, r.v_max, 12)
    w = float(setup.settings.stabilization.omega[0])
    core = ControllerCore(setup)
    qf, t_end = q[-1], (k[-1]) / RATE
    zero = np.zeros_like(qf)
    e0 = core.step(qf, zero, t_end).task_error.copy()
    h = 1e-6
    A = np.array([(core.step(qf + h * np.eye(len(qf))[j], zero, t_end).task_error - e0) / h for j in range(len(qf))]).T
    bound = np.abs(A) @ np.full(len(qf), s_p / 2 + (2 / w) * s_v / 2)
    settled = k / RATE >= 5.0 / w + 0.5  # after the start transient (5 time constants)
    assert np.all(np.abs(e[settled] - sim.task_error[k[settled]]) <= bound), (
        np.max(np.abs(e[settled] - sim.task_error[k[settled]]), axis=0),
        bound,
    )


@pytest.mark.slow
def test_ids_a_damiao_reply_cannot_tell_apart_are_an_error_before_the_port_opens(tmp_path):
    """Damiao replies carry the low 4 bits of the id: ids 1 and 17 on one bus are refused with exit 2."""
    import yaml
    from hostile import planar_params, run_cli

    params = planar_params()
    params['hardware'] = {
        'protocol': 'can_mit',
        'port': str(tmp_path / 'ttyACM9'),
        **{name: {'id': i, 'mit': {'model': 'dm-j4310'}} for name, i in zip(params['actuators']['names'], (1, 17, 2))},
    }
    path = tmp_path / 'planar_dm.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    code, _, err = run_cli('run', path)
    assert code == 2 and 'cannot be told apart' in err and 'ttyACM9' not in err, err
