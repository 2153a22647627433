"""Each protocol's host bus against its device emulator over a real pseudo-terminal.

Reference: the stand-in plant I q'' + c q' = u has the closed form (from rest, constant u)
q(t) = (u/c) (t - tau (1 - exp(-t/tau))), tau = I/c, which the feedback must reproduce
through the full calibration chain (gear, direction, torque constant, zero offset) and the
protocol's wire units.
"""

import errno
import time

import numpy as np
import pytest

from uk_controller.hardware import registry
from uk_controller.hardware.bus import PortError, describe_port_error
from uk_controller.hardware.calibration import HardwareConfig, MotorCalibration
from uk_controller.hardware.emulator import IndependentJointsPlant
from uk_controller.hardware.registry import make_bus, make_emulator

PROTOCOLS = registry.names()
# quantisation of each protocol's wire units (relative tolerance on positions)
RTOL = {
    'uk_binary': 1e-5,
    'dynamixel': 2e-3,
    'odrive': 1e-6,
    # can_mit (Damiao DM-J4310 ranges, t_max 10 N m in 12 bits): the commanded motor torque of m1,
    # 0.16 N m, is sent within half a step 10/4095 N m: 0.8 % of it, carried into the displacement
    'can_mit': 0.5 * 2 * 10.0 / 4095 / 0.16,
}


def torque_atol(protocol, hw):
    """Joint-side bound of the torque feedback against the command: can_mit rounds the command to half a
    12-bit step and the firmware truncates its reply by up to one (codec docstring); the others measure
    the torque to 2e-3 relative."""
    if protocol != 'can_mit':
        return 0.0
    return 1.5 * 2 * 10.0 / 4095 * float(np.max(hw.gear))


pytestmark = [pytest.mark.serial, pytest.mark.usefixtures('fast_gil_switch')]


def calibrated(protocol, watchdog=0.5):
    # can_mit: Damiao motors, whose motor-side timeout (TIMEOUT register) the host sets over CAN
    mit = {'mit': {'model': 'dm-j4310'}} if protocol == 'can_mit' else {}
    motors = [
        MotorCalibration(
            'm1',
            1,
            gear_ratio=5.0,
            torque_constant=0.2,
            direction=-1.0,
            zero_offset=0.1,
            torque_limit=1.0,
            joint='joint1',
            sections=mit,
        ),
        MotorCalibration(
            'm2',
            2,
            gear_ratio=2.0,
            torque_constant=0.5,
            direction=1.0,
            zero_offset=-0.2,
            torque_limit=1.0,
            joint='joint2',
            sections=mit,
        ),
    ]
    return HardwareConfig(motors=motors, protocol=protocol, watchdog=watchdog)


def wait_until(predicate, timeout=2.0):
    """Poll (for answerless writes such as Dynamixel's broadcast torque-off)."""
    end = time.monotonic() + timeout
    while not predicate() and time.monotonic() < end:
        time.sleep(0.002)
    return predicate()


def closed_form(u, inertia, c, t):
    tau = inertia / c
    return (u / c) * (t - tau * (1 - np.exp(-t / tau))), (u / c) * (1 - np.exp(-t / tau))


@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_bus_against_emulated_plant(protocol):
    hw = calibrated(protocol)
    inertia, c, dt, steps = np.array([0.02, 0.05]), np.array([0.1, 0.2]), 0.002, 150
    plant = IndependentJointsPlant(inertia, c)
    plant.reset([0.3, -0.4], [0.0, 0.0])
    with make_emulator(protocol, plant, hw, dt=dt) as emu:
        # (a generous reply timeout: the emulator thread may be starved on a loaded machine; timing is
        # not what this test checks, and a late reply is still counted in bus.stats below)
        bus = make_bus(hw.at_port(emu.port), timeout=1.0)
        with bus:
            fb = bus.read()
            q, qd = hw.motor_to_joint(fb.position, fb.velocity)
            np.testing.assert_allclose(q, [0.3, -0.4], rtol=0, atol=2e-3 / 2)
            # disabled: commands do not move the joints
            bus.enable(False)
            u = np.array([0.8, -1.5])  # joint-side efforts
            bus.write(hw.effort_to_motor_torque(u))
            fb = bus.read()
            assert wait_until(lambda: not np.any(emu.joint_effort()))
            bus.enable(True)
            for _ in range(steps):
                fb = bus.transact(hw.effort_to_motor_torque(u))
            q, qd = hw.motor_to_joint(fb.position, fb.velocity)
            # (zero-torque periods stepped while disabled leave the plant at rest)
            dq_ref, v_ref = closed_form(u, inertia, c, steps * dt)
            np.testing.assert_allclose(q - [0.3, -0.4], dq_ref, rtol=RTOL[protocol], atol=2e-3 / 2)
            np.testing.assert_allclose(qd, v_ref, rtol=RTOL[protocol] * 10, atol=0.03 / 2)
            # torque feedback (joint side) equals the command where the protocol measures it
            np.testing.assert_allclose(
                hw.motor_torque_to_effort(fb.torque), u, rtol=2e-3, atol=torque_atol(protocol, hw)
            )
            bus.enable(False)
            assert wait_until(lambda: not np.any(emu.joint_effort()))
            assert bus.stats.timeouts == 0 and bus.stats.crc_errors == 0


@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_device_watchdog_zeroes_torque_when_commands_stop(protocol):
    hw = calibrated(protocol, watchdog=0.04)
    plant = IndependentJointsPlant([0.02, 0.05], 0.1)
    with make_emulator(protocol, plant, hw, dt=0.002) as emu:
        with make_bus(hw.at_port(emu.port), timeout=0.1) as bus:
            bus.configure(0.04, hw.tau_m_max)
            bus.enable(True)
            bus.transact([0.5, 0.5])
            assert np.all(emu.joint_effort() != 0)
            deadline = time.monotonic() + 2.0  # host goes quiet
            while emu.counters['watchdog_trips'] == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert emu.counters['watchdog_trips'] >= 1
            assert wait_until(lambda: not np.any(emu.joint_effort()))
            if protocol == 'uk_binary':
                assert bus.read().device_watchdog
            if protocol == 'odrive':
                assert np.all(bus.read_faults() == 0x800)  # AXIS_ERROR_WATCHDOG_TIMER_EXPIRED


@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_device_clamps_to_configured_limit(protocol):
    hw = calibrated(protocol)
    plant = IndependentJointsPlant([0.02, 0.05], 0.1)
    with make_emulator(protocol, plant, hw, dt=0.002) as emu:
        with make_bus(hw.at_port(emu.port), timeout=0.1) as bus:
            bus.configure(0.5, [0.25, 0.25])  # motor-side N m
            bus.enable(True)
            bus.transact([5.0, -5.0])  # (the Dynamixel host also clips to the servo limit)
            tau = hw.effort_to_motor_torque(emu.joint_effort())
            assert np.all(np.abs(tau) <= 0.25 + 3e-3)


def test_port_errors_are_explained(tmp_path):
    hw = calibrated('uk_binary')
    missing = str(tmp_path / 'ttyUSB9')
    with pytest.raises(PortError, match='does not exist'):
        make_bus(hw.at_port(missing)).open()
    plant = IndependentJointsPlant([0.1, 0.1], 0.1)
    with make_emulator('uk_binary', plant, hw) as emu:
        with make_bus(hw.at_port(emu.port)):
            with pytest.raises(PortError, match='busy'):
                make_bus(hw.at_port(emu.port)).open()
    for code in (errno.EACCES, errno.EPERM):
        msg = describe_port_error('/dev/ttyUSB0', OSError(code, 'Permission denied'))
        assert 'permission' in msg and 'dialout' in msg


@pytest.mark.parametrize('protocol', ['uk_binary', 'odrive'])
def test_line_rate_emulation_delays_by_baud(protocol):
    """At 9600 baud a frame of L bytes must take at least 10 L / 9600 s on the wire."""
    hw = calibrated(protocol)
    plant = IndependentJointsPlant([0.1, 0.1], 0.1)
    with make_emulator(protocol, plant, hw, baud=9600) as emu:
        with make_bus(hw.at_port(emu.port, baud=9600), timeout=0.5) as bus:
            rx0 = emu.counters['rx_bytes']
            t0 = time.monotonic()
            bus.read()
            elapsed = time.monotonic() - t0
            assert elapsed >= 10 * (emu.counters['rx_bytes'] - rx0) / 9600


def test_vanished_port_while_polling_is_a_port_error():
    """A pty that disappears makes pyserial's in_waiting ioctl raise EIO: that is a lost port
    (PortError, counted), which SafeBus turns into torque off + reconnect, not a crash."""
    import errno

    from uk_controller.hardware.bus import BusStats, PortError
    from uk_controller.hardware.protocols.odrive.bus import ODriveBus

    class VanishedSerial:
        @property
        def in_waiting(self):
            raise OSError(errno.EIO, 'Input/output error')

    bus = ODriveBus.__new__(ODriveBus)  # no port to open: only the polling path is exercised
    bus.ser, bus.port, bus.stats, bus.buf = VanishedSerial(), '/dev/ttyGONE', BusStats(), bytearray()
    with pytest.raises(PortError, match='ttyGONE'):
        bus._query('f 0')
    assert bus.stats.io_errors == 1


def test_odrive_desynchronised_answer_is_a_counted_bus_error():
    """After a dropped line the next answer can belong to an earlier request (a 'pos vel'
    feedback line where a state integer is expected): a counted BusError, not a crash."""
    from uk_controller.hardware.bus import BusError, BusStats
    from uk_controller.hardware.protocols.odrive.bus import ODriveBus

    bus = ODriveBus.__new__(ODriveBus)
    bus.stats = BusStats()
    with pytest.raises(BusError, match='state'):
        bus._integer_of('0.0245141925 0.251421497', 'state')
    assert bus.stats.seq_errors == 1
    assert bus._integer_of('8', 'state') == 8


@pytest.mark.parametrize('protocol', PROTOCOLS)
def test_set_up_waits_for_late_first_answers_and_cycles_keep_their_timeout(protocol):
    """Answers 80 ms late (a device still booting, an adapter's latency timer, a loaded host): the first
    connect of SafeBus (limits, torque off, watchdog, faults) waits for them with the set-up timeout
    (MotorBus.patient), the control cycle keeps its 20 ms and counts the late answer as a timeout.
    CI saw a run fail before its first cycle when a set-up answer came later than the cycle's 25 ms."""
    from uk_controller.hardware.bus import SETUP_TIMEOUT, BusError
    from uk_controller.hardware.emulator import Faults
    from uk_controller.hardware.safety import SafeBus

    hw = calibrated(protocol)
    plant = IndependentJointsPlant(np.array([0.02, 0.05]), np.array([0.1, 0.2]))
    late = 0.08  # 4x the cycle timeout; can_mit answers motor by motor
    assert SETUP_TIMEOUT >= 10 * late  # can_mit: the slcan adapter's acks come late too
    with make_emulator(protocol, plant, hw, dt=0.002, faults=Faults(latency=late)) as emu:
        made = []

        def factory():
            made.append(make_bus(hw.at_port(emu.port), timeout=0.02))
            return made[-1]

        safe = SafeBus(hw, factory, watchdog=0.5)
        assert safe.connect(raise_errors=True)
        assert made[-1].timeout == 0.02  # back to the cycle's timeout after the set-up
        with pytest.raises(BusError):  # and a cycle does not wait for a late answer
            made[-1].read()
        made[-1].close()
        bare = make_bus(hw.at_port(emu.port), timeout=0.02)  # the same set-up without the patience fails
        with pytest.raises(BusError):
            with bare:
                bare.read()
