"""serial_bridge_node with real rclpy (loopback only) against an emulated uk_binary driver.

The robot YAML is scara.yaml with ros.effort_joints reversed, so efforts must be matched to
motors by joint name, not by position.
"""

import contextlib
import os

from parallel import domain_id

os.environ['ROS_DOMAIN_ID'] = str(domain_id(63))  # this module's id from the range 60-69 (test/parallel.py)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.pop('ROS_STATIC_PEERS', None)

import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from uk_controller.files import rcl_yaml  # noqa: E402

rclpy = pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from uk_controller.hardware.calibration import HardwareConfig  # noqa: E402
from uk_controller.hardware.emulator import IndependentJointsPlant  # noqa: E402
from uk_controller.hardware.registry import make_emulator  # noqa: E402
from uk_controller.paths import resolve_config, resolve_data_file  # noqa: E402
from uk_controller.robots import load_robot  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.serial]


def wait_until(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


@pytest.fixture
def config(tmp_path):
    src = resolve_config('scara')
    data = yaml.safe_load(src.read_text())
    params = data['/**']['ros__parameters']
    params['robot']['urdf'] = str(resolve_data_file(params['robot']['urdf'], src))
    params['ros']['effort_joints'] = list(reversed(params['ros']['effort_joints']))
    path = tmp_path / 'scara_reversed.yaml'
    path.write_text(rcl_yaml.dump(data))  # quotes 'y' as ROS needs
    return path


def _emulated_arm(config):
    """The setup in `config` and a uk_binary device emulator on a pty for it (four independent joints)."""
    setup = load_robot(str(config))
    hw = HardwareConfig.from_setup(setup)
    plant = IndependentJointsPlant(np.full(4, 0.5), 1.0)
    plant.joint_names = list(setup.joint_names)
    plant.reset([0.1, 0.2, 0.05, -0.3], np.zeros(4))
    return setup, make_emulator('uk_binary', plant, hw, dt=0.01).start()


def _bridge(config, emu):
    """The bridge node on `emu`'s port at 100 Hz with a 0.2 s watchdog."""
    from uk_controller.ros.serial_bridge_node import SerialBridgeNode

    return SerialBridgeNode(
        parameter_overrides=[
            Parameter('config', value=str(config)),
            Parameter('hardware.port', value=emu.port),
            Parameter('hardware.protocol', value='uk_binary'),
            Parameter('hardware.rate', value=100.0),
            Parameter('hardware.watchdog', value=0.2),
        ]
    )


@contextlib.contextmanager
def _bridge_and_probe(config, probe_name):
    """The emulated arm, the bridge node on it and a probe node, yielded as
    ``(setup, emu, bridge, probe, spin)``: subscribe on `probe`, then call ``spin()`` to run both
    nodes on one executor thread. On exit everything is shut down and the emulator closed."""
    setup, emu = _emulated_arm(config)
    rclpy.init()
    ex = SingleThreadedExecutor()
    bridge = probe = None

    def spin():
        ex.add_node(bridge)
        ex.add_node(probe)
        threading.Thread(target=ex.spin, daemon=True).start()

    try:
        bridge = _bridge(config, emu)
        probe = rclpy.create_node(probe_name)
        yield setup, emu, bridge, probe, spin
    finally:
        ex.shutdown()
        if bridge is not None:
            bridge.shutdown()
            bridge.destroy_node()
        if probe is not None:
            probe.destroy_node()
        rclpy.try_shutdown()
        emu.close()


def test_bridge_topics_watchdog_and_diagnostics(config):
    with _bridge_and_probe(config, 'bridge_probe') as (setup, emu, bridge, probe, spin):
        states, diags = [], []
        probe.create_subscription(JointState, '/joint_states', states.append, 50)
        probe.create_subscription(DiagnosticArray, '/diagnostics', diags.append, 50)
        pub = probe.create_publisher(Float64MultiArray, '/effort_controller/commands', 10)
        spin()

        # feedback before any command: names and positions from the device, torque off
        assert wait_until(lambda: len(states) > 5, 20)
        msg = states[-1]
        assert list(msg.name) == list(setup.joint_names)
        np.testing.assert_allclose(msg.position, [0.1, 0.2, 0.05, -0.3], atol=1e-6)
        assert not emu.enabled

        # efforts in ros.effort_joints order (reversed): matched to motors by joint name
        by_joint = {'joint1': 1.5, 'joint2': -2.0, 'joint3': 0.5, 'joint4': 0.25}
        order = list(setup.settings.ros.effort_joints)
        cmd = Float64MultiArray(data=[by_joint[j] for j in order])
        stop = threading.Event()

        def publish():
            while not stop.is_set():
                pub.publish(cmd)
                time.sleep(0.02)

        feeder = threading.Thread(target=publish, daemon=True)
        feeder.start()
        assert wait_until(lambda: emu.enabled, 10)
        assert wait_until(lambda: np.allclose(emu.joint_effort(), [1.5, -2.0, 0.5, 0.25], atol=1e-6), 5)
        pub.publish(Float64MultiArray(data=[1.0, 2.0]))  # wrong length: rejected, counted
        moved = wait_until(lambda: states[-1].position[0] > 0.1 + 1e-3, 5)
        assert moved

        # publisher goes silent: host watchdog => torque off at the device
        stop.set()
        feeder.join()
        assert wait_until(lambda: not emu.enabled and not np.any(emu.joint_effort()), 5)
        assert wait_until(lambda: bridge.safe.counters['watchdog_trips'] >= 1, 2)

        def diag_values():
            if not diags:
                return {}
            return {kv.key: kv.value for kv in diags[-1].status[0].values}

        assert wait_until(
            lambda: (
                int(diag_values().get('watchdog_trips', 0)) >= 1 and int(diag_values().get('effort_rejected', 0)) >= 1
            ),
            5,
        )
        d = diag_values()
        assert float(d['bus_rate']) > 0 and d['crc_errors'] == '0' and float(d['rtt_p50_ms']) > 0
        assert diags[-1].status[0].name == 'serial_bridge_node: motor bus'
        assert diags[-1].status[0].hardware_id == f'uk_binary:{emu.port}'
    assert not emu.enabled


def test_bridge_loop_timing_matches_probe(config):
    """~/loop_timing's achieved rate against the JointState messages a probe received meanwhile.

    Every bus period with fresh feedback publishes one JointState, so over the windows between two
    ~/loop_timing messages the probe counts about sum(rate * window) states. Loose: reception times
    are the probe's (same executor), and a busy machine shifts a few messages between windows.
    """
    from uk_controller.control.loop_timing import TIMING_FIELDS

    data = yaml.safe_load(config.read_text())
    data['/**']['ros__parameters']['ros']['loop'] = {'window': 0.5}
    config.write_text(rcl_yaml.dump(data))
    with _bridge_and_probe(config, 'bridge_timing_probe') as (setup, emu, bridge, probe, spin):
        events, timings, diags = [], [], []  # (kind, index) in reception order
        probe.create_subscription(JointState, '/joint_states', lambda m: events.append('state'), 200)
        probe.create_subscription(
            Float64MultiArray,
            '/serial_bridge_node/loop_timing',
            lambda m: (timings.append(list(m.data)), events.append('timing')),
            20,
        )
        probe.create_subscription(DiagnosticArray, '/diagnostics', diags.append, 20)
        spin()
        assert wait_until(lambda: len(timings) >= 6, 30)
        assert wait_until(lambda: bool(diags), 5)
    assert all(len(v) == len(TIMING_FIELDS) for v in timings)
    marks = [i for i, e in enumerate(events) if e == 'timing']
    first, last = marks[1], marks[5]  # windows 3..6: the probe was listening throughout
    counted = events[first:last].count('state')
    rate = TIMING_FIELDS.index('achieved_rate_hz')
    expected = sum(v[rate] * 0.5 for v in timings[2:6])
    print(
        f'\nbridge ~/loop_timing: {[round(v[rate], 1) for v in timings]} Hz; probe counted {counted} '
        f'JointState in windows 3-6, loop_timing says {expected:.1f}'
    )
    assert counted == pytest.approx(expected, rel=0.25, abs=5)
    assert all(v[rate] > 0 for v in timings[2:6])
    d = {kv.key: kv.value for kv in diags[-1].status[0].values}
    assert {'loop_' + f for f in TIMING_FIELDS} <= set(d) and 'overrun_state' in d


@pytest.mark.slow
def test_bridge_refuses_a_rate_the_bus_cannot_carry_and_servos_that_cannot_hold(tmp_path, robots):
    """The bridge as its own process (``python -m uk_controller.ros.serial_bridge_node``) on the SCARA over
    the Dynamixel emulator behind a fake FTDI adapter with the 16 ms default latency timer, at 200 Hz: the
    rules of ``uk-controller run`` (hardware.setup_check.check_setup) refuse both the rate (the highest rate
    is the one bus_timing.budget computes, checked against its hand formula in test_bus_timing) and the
    prismatic servo (gravity at q0 from Pinocchio against Current Limit x 2.69 mA x k_t): exit 2, each error
    in the log with its numbers, torque never on at the device. The same bridge at a 1 ms latency timer and
    100 Hz still refuses the servo alone: the static load does not depend on the bus."""
    import subprocess
    import sys

    import pinocchio as pin
    from ros_nodes import ros_env

    from uk_controller.hardware import bus_timing, registry
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot(robots('scara'))
    hw = HardwareConfig.from_setup(setup)
    model = setup.model.model
    need = abs(pin.computeGeneralizedGravity(model, model.createData(), np.asarray(setup.q0, float))[3])
    limit = 1193 * 2.69e-3  # XM430-W350 Current Limit x 2.69 mA, k_t = 1 N m/A
    with registry.make_emulator('dynamixel', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
        runs = {}
        for ms, rate in ((16, 200.0), (1, 100.0)):
            root = str(tmp_path / f'sys{ms}')
            bus_timing.fake_usb_serial(root, emu.port, ms)
            args = [
                '--ros-args',
                '-p',
                'config:=scara',
                '-p',
                f'hardware.port:={emu.port}',
                '-p',
                'hardware.protocol:=dynamixel',
                '-p',
                f'hardware.rate:={rate}',
            ]
            r = subprocess.run(
                [sys.executable, '-m', 'uk_controller.ros.serial_bridge_node', *args],
                capture_output=True,
                text=True,
                timeout=240,
                env={**ros_env(domain_id(63)), bus_timing.SYSFS_ENV: root},
            )
            print(r.stdout, r.stderr)
            runs[ms] = r.stdout + r.stderr
            assert r.returncode == 2 and 'Traceback' not in runs[ms]
            assert (
                f'motor motor4 (joint4) cannot hold the start pose: gravity needs {need:.4g} N, the motor '
                f'gives {limit:.4g} N'
            ) in runs[ms]
            assert 'serial_bridge_node: set-up refused: torque never on' in runs[ms]
            assert not emu.enabled and not np.any(emu.max_abs_effort) and emu.counters['steps'] == 0
        assert 'the requested rate 200 Hz is above the 62 Hz' in runs[16]
        assert f'echo 1 | sudo tee {tmp_path}/sys16/bus/usb-serial/devices/ttyUSB0/latency_timer' in runs[16]
        assert 'USB latency timer: 1 ms' in runs[1] and 'the requested rate 100 Hz is above' not in runs[1]


@pytest.mark.slow
def test_bridge_checks_at_the_first_connect_when_the_port_came_late(tmp_path, robots):
    """The port is not there when the bridge starts (an adapter plugged in later): the bridge retries,
    sends no effort before the check, and at the first connect refuses the servo that cannot hold the
    start pose (the same check_setup as at start): ``refused`` set, which node_runner.run turns into
    exit 2; torque never on although efforts were published all along."""
    from uk_controller.hardware import registry
    from uk_controller.ros.serial_bridge_node import SerialBridgeNode
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot(robots('scara'))
    hw = HardwareConfig.from_setup(setup)
    late = tmp_path / 'ttyLATE'
    with registry.make_emulator('dynamixel', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
        rclpy.init()
        ex = SingleThreadedExecutor()
        bridge = probe = None
        try:
            bridge = SerialBridgeNode(
                parameter_overrides=[
                    Parameter('config', value='scara'),
                    Parameter('hardware.port', value=str(late)),
                    Parameter('hardware.protocol', value='dynamixel'),
                    Parameter('hardware.rate', value=100.0),
                    Parameter('hardware.watchdog', value=0.2),
                ]
            )
            assert not bridge.checked and bridge.refused is None
            probe = rclpy.create_node('late_probe')
            pub = probe.create_publisher(Float64MultiArray, '/effort_controller/commands', 10)
            ex.add_node(bridge)
            ex.add_node(probe)
            threading.Thread(target=ex.spin, daemon=True).start()
            stop = threading.Event()

            def publish():
                while not stop.is_set():
                    pub.publish(Float64MultiArray(data=[0.1, 0.1, 0.1, 0.1]))
                    time.sleep(0.02)

            threading.Thread(target=publish, daemon=True).start()
            time.sleep(0.5)
            assert bridge.received > 0 and bridge.refused is None  # efforts came, nothing to send them to
            os.symlink(os.path.realpath(emu.port), late)  # the adapter appears
            assert wait_until(lambda: bridge.refused is not None, 30)
            stop.set()
            assert 'motor motor4 (joint4) cannot hold the start pose' in bridge.refused
            assert not emu.enabled and not np.any(emu.max_abs_effort) and emu.counters['steps'] == 0
            assert bridge.safe.counters['arms'] == 0
        finally:
            ex.shutdown()
            for node in (bridge, probe):
                if node is not None:
                    node.destroy_node()
            rclpy.try_shutdown()
