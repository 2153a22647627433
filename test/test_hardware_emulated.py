"""`hardware.launch.py` with no hardware: its nodes against `uk-controller emulate` over DDS.

`uk-controller emulate scara --protocol uk_binary --mode lockstep` puts the
uk_binary motor drivers of the SCARA on a pty, driven by the embedded plant
(one plant period per torque command, so a busy machine slows the robot with
its controller). The nodes are exactly those hardware.launch.py starts for
`robot:=scara port:=<printed path> protocol:=uk_binary rate:=100` (taken from
the launch file, parameters passed as launch_ros passes them): serial_bridge_node
on the port, uk_controller_node closing the loop. The task error the controller
publishes must settle to the level of the in-process loop with a few periods
of measurement delay (bus + two DDS hops): the run goes on until the last
SETTLED seconds of errors stay below SETTLE_BOUND. A stall of the busy machine
(a watchdog trip, a late period) costs time, not the result; a mis-wired joint
or effort order, unit or sign diverges by orders of magnitude and never settles.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('serial')
from launch_stub import launch_nodes, start_node  # noqa: E402
from parallel import domain_id  # noqa: E402
from ros_nodes import Probe, ros_env  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from uk_controller.robots import load_robot  # noqa: E402
from uk_controller.sim.closed_loop import simulate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOMAIN_ID = domain_id(76)
RATE = 100.0
SETTLE_BOUND = 0.02  # m: 10x the in-process error with 3 periods of delay (2.0e-3 m); broken: metres or NaN
SETTLED = 0.5  # s


def emulate(*args):
    proc = subprocess.Popen(
        [sys.executable, '-m', 'uk_controller.cli', 'emulate', *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ros_env(DOMAIN_ID),
    )
    first = proc.stdout.readline()
    return proc, first


@pytest.mark.slow
def test_cli_emulate_rejects_bad_arguments_with_exit_2():
    done = subprocess.run(
        [sys.executable, '-m', 'uk_controller.cli', 'emulate', 'scara', '--rate', '0'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and '--rate: must be > 0 Hz' in done.stderr and 'Traceback' not in done.stderr


@pytest.mark.ros
@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.parametrize('robot', ['scara'], indirect=True)
def test_hardware_launch_nodes_track_against_the_emulator(tmp_path, robot):
    emulator, first = emulate(
        robot, '--protocol', 'uk_binary', '--rate', f'{RATE:g}', '--port', str(tmp_path / 'ttyUK0')
    )
    probe = Probe(DOMAIN_ID)
    procs = []
    try:
        assert first.startswith('emulating scara: 4 uk_binary motor drivers on '), first
        port = first.split(' on ', 1)[1].split(' (', 1)[0]
        assert port == str(tmp_path / 'ttyUK0') and os.path.exists(port)
        errors = probe.record(Float64MultiArray, '/uk_controller_node/task_error', convert=lambda m: list(m.data))
        nodes = launch_nodes(
            ROOT / 'launch' / 'hardware.launch.py', robot='scara', port=port, protocol='uk_binary', rate=f'{RATE:g}'
        )
        assert [n['executable'] for n in nodes] == ['serial_bridge_node', 'uk_controller_node']
        procs = [start_node(n, DOMAIN_ID, str(tmp_path)) for n in nodes]
        duration, window = 2.0, int(SETTLED * RATE)

        def settled():
            e = [np.linalg.norm(x) for _, x in probe.snapshot('/uk_controller_node/task_error')]
            return len(e) >= duration * RATE and max(e[-window:]) < SETTLE_BOUND

        done = probe.wait_for(settled, 120.0)
    finally:
        codes = [p.stop() for p in procs]
        probe.close()
        emulator.send_signal(2)
        tail = emulator.communicate(timeout=30)[0]
    logs = '\n'.join(p.output()[-2000:] for p in procs)
    assert done, f'no loop:\n{logs}\n{tail}'
    assert codes == [0, 0], (codes, logs)
    assert emulator.returncode == 0 and 'emulator stopped' in tail, tail
    e = np.linalg.norm(np.array([x for _, x in errors]), axis=1)
    bound = np.linalg.norm(
        simulate(
            load_robot(
                'scara',
                {'simulation.duration': duration, 'control.rate': RATE, 'simulation.measurement_delay': 3},
            )
        ).task_error[int(SETTLED * RATE) :],
        axis=1,
    ).max()
    print(
        f'hardware.launch.py nodes vs uk-controller emulate (scara, uk_binary, {RATE:g} Hz): '
        f'{len(e)} task errors, |e| first {e[0]:.3e} m, max {e.max():.3e} m, max over the last {SETTLED:g} s '
        f'{e[-window:].max():.3e} m, final {e[-1]:.3e} m (in-process with 3 periods delay, after {SETTLED:g} s: '
        f'{bound:.3e} m)'
    )
    assert np.isfinite(e).all() and e[-window:].max() < SETTLE_BOUND
