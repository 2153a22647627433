"""Calibration from the config `hardware` section, limits, SafeBus logic (fake bus and clock),
and the closure-based joint state of the five-bar."""

import numpy as np
import pytest

from uk_controller.files.parameter_file import ConfigError
from uk_controller.hardware.bus import BusTimeout, MotorFeedback, PortError
from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.safety import ARMED, DISCONNECTED, SAFE, EffortLimiter, SafeBus
from uk_controller.settings.resolve import resolve


def params(**hw):
    base = {
        'actuators': {
            'names': ['motor1', 'motor2'],
            'motor1': {'joint': 'j1', 'effort_limit': 50.0},
            'motor2': {'joint': 'j2'},
        }
    }
    if hw is not None:
        base['hardware'] = hw
    return base


HW = {
    'protocol': 'dynamixel',
    'port': '/dev/ttyX',
    'baud': 57600,
    'watchdog': 0.02,
    'motors': ['motor2', 'motor1'],
    'motor1': {
        'id': 7,
        'gear_ratio': 10.0,
        'torque_constant': 0.5,
        'direction': -1.0,
        'zero_offset': 0.3,
        'position_limit': [-1.0, 2.0],
        'velocity_limit': 4.0,
        'torque_limit': 2.0,
    },
    'motor2': {'id': 3, 'gear_ratio': 2.0, 'torque_constant': 0.1, 'torque_limit': 1.0},
}


def test_section_is_read_in_actuator_order():
    hw = HardwareConfig.from_settings(resolve('robot.yaml', params=params(**HW)))
    assert hw.names == ['motor1', 'motor2'] and hw.ids == [7, 3]
    assert (hw.protocol, hw.port, hw.baud, hw.watchdog) == ('dynamixel', '/dev/ttyX', 57600, 0.02)
    # joint limit = min(effort_limit, torque_limit * gear): min(50, 20) and min(inf, 2)
    np.testing.assert_allclose(hw.u_max, [20.0, 2.0])
    assert hw.joints == ['j1', 'j2']


@pytest.mark.parametrize(
    'key, bad, dotted',
    [
        ('protocol', 'can', 'hardware.protocol'),
        ('motors', ['motor1'], 'hardware.motors'),
        ('motors', ['motor1', 'motor2', 'motor9'], 'hardware.motors'),
        ('watchdog', -1.0, 'hardware.watchdog'),
        ('motor1', {'direction': 2.0}, 'hardware.motor1.direction'),
        ('motor1', {'gear_ratio': 0.0}, 'hardware.motor1.gear_ratio'),
        ('motor1', {'position_limit': [1.0, -1.0]}, 'hardware.motor1.position_limit'),
        ('motor2', {'id': 7}, 'hardware.motors'),
    ],
)
def test_bad_values_name_file_and_key(key, bad, dotted):
    cfg = dict(HW)
    cfg[key] = bad
    with pytest.raises(ConfigError) as err:
        HardwareConfig.from_settings(resolve('robot.yaml', params=params(**cfg)))
    assert 'robot.yaml' in str(err.value) and dotted in str(err.value)


def test_joint_motor_maps_follow_the_transmission_equations():
    hw = HardwareConfig.from_settings(resolve(params=params(**HW)))
    rng = np.random.default_rng(0)
    theta, omega, tau = rng.normal(size=(3, 2))
    q, qd = hw.motor_to_joint(theta, omega)
    # q = d theta / N + offset (motor1: d=-1, N=10, offset 0.3; motor2: d=1, N=2)
    np.testing.assert_allclose(q, [-theta[0] / 10 + 0.3, theta[1] / 2])
    np.testing.assert_allclose(qd, [-omega[0] / 10, omega[1] / 2])
    np.testing.assert_allclose(hw.joint_to_motor(q, qd), (theta, omega))
    u = hw.motor_torque_to_effort(tau)
    np.testing.assert_allclose(u, [-10 * tau[0], 2 * tau[1]])
    np.testing.assert_allclose(hw.effort_to_motor_torque(u), tau)
    # power is the same on both sides of an ideal transmission: u qd = tau omega
    np.testing.assert_allclose(u * qd, tau * omega)
    np.testing.assert_allclose(hw.torque_to_current(tau), tau / np.array([0.5, 0.1]))


def test_limiter():
    hw = HardwareConfig.from_settings(resolve(params=params(**HW)))
    lim = EffortLimiter(hw)
    np.testing.assert_allclose(lim.apply([100.0, -100.0]), [20.0, -2.0])
    np.testing.assert_allclose(lim.apply([np.nan, 1.0]), [0.0, 1.0])
    # beyond the upper position limit: pushing further out is zeroed, pulling back allowed
    np.testing.assert_allclose(lim.apply([5.0, 1.0], q=np.array([2.5, 0.0])), [0.0, 1.0])
    np.testing.assert_allclose(lim.apply([-5.0, 1.0], q=np.array([2.5, 0.0])), [-5.0, 1.0])
    # too fast: accelerating is zeroed, braking allowed
    np.testing.assert_allclose(lim.apply([5.0, 0.0], qd=np.array([5.0, 0.0])), [0.0, 0.0])
    np.testing.assert_allclose(lim.apply([-5.0, 0.0], qd=np.array([5.0, 0.0])), [-5.0, 0.0])


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeBus:
    """In-memory bus: records every command; can fail on demand."""

    def __init__(self, p):
        self.p, self.is_open, self.enabled, self.sent = p, False, False, []
        self.fail = None
        self.port = 'fake'
        from uk_controller.hardware.bus import BusStats

        self.stats = BusStats()

    def open(self):
        if self.fail == 'port':
            raise PortError('gone')
        self.is_open = True

    def close(self):
        self.is_open = False

    def enable(self, on):
        self.enabled = on

    def configure(self, *a):
        pass

    def clear_faults(self):
        pass

    def _fb(self):
        if self.fail == 'timeout':
            raise BusTimeout('x')
        if self.fail == 'port':
            raise PortError('gone')
        z = np.zeros(self.p)
        return MotorFeedback(z, z, z, np.zeros(self.p, int), enabled=self.enabled)

    def read(self):
        return self._fb()

    def write(self, tau):
        self.sent.append(np.array(tau))

    def transact(self, tau):
        self.sent.append((self.enabled, np.array(tau)))
        return self._fb()


def test_safebus_arms_trips_and_reconnects_by_the_clock():
    hw = HardwareConfig.from_settings(resolve(params=params(**HW)))
    clock, bus = FakeClock(), FakeBus(2)
    safe = SafeBus(hw, lambda: bus, watchdog=0.05, arm_after=3, reconnect_interval=0.1, clock=clock)
    assert safe.connect()
    u = np.array([100.0, 0.5])
    for k in range(3):  # three valid feedbacks before arming
        safe.cycle(u, clock.t)
        assert safe.state == SAFE and not bus.enabled
        clock.t += 0.01
    safe.cycle(u, clock.t)
    assert safe.state == ARMED and bus.enabled
    enabled, tau = bus.sent[-1]
    np.testing.assert_allclose(hw.motor_torque_to_effort(tau), [20.0, 0.5])  # limited before sending
    # stale effort: the command is 0.05 s + 1 ms old => torque off, nothing sent
    stamp = clock.t
    clock.t += 0.051
    n = len(bus.sent)
    safe.cycle(u, stamp)
    assert safe.state == SAFE and not bus.enabled and len(bus.sent) == n
    assert safe.counters['watchdog_trips'] == 1
    # feedback timeouts: armed again, then no valid feedback for > watchdog => trip
    for _ in range(4):
        clock.t += 0.01
        safe.cycle(u, clock.t)
    assert safe.state == ARMED
    bus.fail = 'timeout'
    t_last = safe.last_feedback
    while safe.state == ARMED:
        clock.t += 0.01
        safe.cycle(u, clock.t)
    assert clock.t - t_last <= 0.05 + 0.01 + 1e-9  # within the watchdog (+ one period)
    assert not bus.enabled
    # torque is never sent with feedback or effort older than the watchdog
    assert all(r[1] <= 0.05 + 1e-12 and r[2] <= 0.05 + 1e-12 for r in safe.sent_log)
    # port vanishes: disconnected, retried every 0.1 s, re-armed only after 3 valid feedbacks
    bus.fail = 'port'
    clock.t += 0.01
    assert safe.cycle(u, clock.t) is None and safe.state == DISCONNECTED
    clock.t += 0.05
    assert safe.cycle(u, clock.t) is None  # too early to retry
    bus.fail = None
    clock.t += 0.06
    safe.cycle(u, clock.t)
    assert safe.state == SAFE and safe.counters['reconnects'] == 1
    for _ in range(3):
        clock.t += 0.01
        safe.cycle(u, clock.t)
    assert safe.state == ARMED
    safe.shutdown()
    assert not bus.enabled and not bus.is_open
    np.testing.assert_array_equal(bus.sent[-1], [0.0, 0.0])


class SlowEnableBus(FakeBus):
    """Enabling takes `delay` seconds of the clock (ODrive-style per-axis handshakes)."""

    def __init__(self, p, clock, delay):
        super().__init__(p)
        self.clock, self.delay = clock, delay

    def enable(self, on):
        if on:
            self.clock.t += self.delay
        super().enable(on)


def test_safebus_sends_nothing_on_inputs_that_aged_while_enabling():
    # regression: a torque went out on feedback 165 ms old (watchdog 100 ms) because a slow
    # enable sat between the cycle's freshness check and the send
    hw = HardwareConfig.from_settings(resolve(params=params(**HW)))
    clock = FakeClock()
    bus = SlowEnableBus(2, clock, delay=0.08)
    safe = SafeBus(hw, lambda: bus, watchdog=0.05, arm_after=3, clock=clock)
    assert safe.connect()
    u = np.array([1.0, 0.5])
    for _ in range(3):
        safe.cycle(u, clock.t)
        clock.t += 0.01
    safe.cycle(u, clock.t)  # arms; enabling ages feedback and command by 80 ms
    assert safe.state == ARMED and bus.sent == [] and safe.counters['stale_skips'] == 1
    clock.t += 0.01
    safe.cycle(u, clock.t)  # fresh feedback from the skipped cycle, fresh command
    assert safe.state == ARMED and len(bus.sent) == 1 and safe.counters['watchdog_trips'] == 0
    assert all(age <= 0.05 for _, fb_age, cmd_age, _r in safe.sent_log for age in (fb_age, cmd_age))


@pytest.mark.slow
def test_five_bar_passive_joints_from_closure():
    from uk_controller.hardware.joint_state_assembler import JointStateAssembler
    from uk_controller.robots import load_robot
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot('five_bar')
    hw = HardwareConfig.from_setup(setup)
    asm = JointStateAssembler(setup, hw)
    assert [setup.joint_names[i] for i in asm.measured] == ['joint_a1', 'joint_a2']
    # 4 RK4 substeps per 5 ms period: the plant's own velocity-level closure drift
    # (~2e-8 with 1 substep) stays well below the 1e-8 asked of the reconstruction
    plant = UKPlant.from_setup(load_robot('five_bar', {'simulation.substeps': 4}))
    err = 0.0
    for k in range(40):  # the plant integrates the true closed chain
        plant.step(np.array([0.03, -0.02]), 0.005)
        q, qd = asm(plant.q[asm.measured], plant.qd[asm.measured])
        err = max(err, np.abs(q - plant.q).max(), np.abs(qd - plant.qd).max())
    assert err < 1e-8


def test_motor_calibration_defaults_are_the_schemas():
    from uk_controller.hardware.calibration import MotorCalibration
    from uk_controller.settings import schema as S

    motor = MotorCalibration('m1', 1)
    for key in ('gear_ratio', 'torque_constant', 'direction', 'zero_offset'):
        assert getattr(motor, key) == S.default(f'hardware.<name>.{key}'), key
    # what a resolved setup gives a motor without its own map is the same calibration
    hw = HardwareConfig.from_settings(resolve(None, {'actuators.names': ['m1'], 'actuators.m1.effort_limit': 2.0}))
    resolved = hw.motors[0]
    for key in ('gear_ratio', 'torque_constant', 'direction', 'zero_offset', 'position_limit', 'velocity_limit'):
        assert getattr(resolved, key) == getattr(motor, key), key
