"""Hardware in the loop over pseudo-terminals: ControllerCore -> SafeBus -> serial protocol ->
emulated drivers with the embedded UKPlant (lockstep, one plant period per command) ->
feedback -> ControllerCore, compared with the in-process closed-loop simulation
(uk_controller.sim.closed_loop.simulate) step for step.

Stated tolerances (max over the run, joint positions in rad/m, task error in m):
- uk_binary (float32 on the wire):           |q_hil - q_sim| < 1e-5,  |e_hil - e_sim| < 1e-5
- odrive (9 significant digits in ASCII):    |q_hil - q_sim| < 1e-6,  |e_hil - e_sim| < 1e-6
- dynamixel (4096 ticks/rev, 2.69 mA units,  |q_hil - q_sim| < 5e-3,  |e_hil - e_sim| < 1e-3
  behind a 100:1 gear: 0.27 N m effort steps dominate)
The five-bar's passive joints are not measured: they are reconstructed from the closure.
"""

import numpy as np
import pytest

from uk_controller.control.controller import ControllerCore
from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.joint_state_assembler import JointStateAssembler
from uk_controller.hardware.registry import make_bus, make_emulator
from uk_controller.hardware.safety import SafeBus
from uk_controller.hardware.serial_loop import run_loop
from uk_controller.robots import load_robot
from uk_controller.settings.resolve import resolve
from uk_controller.sim.closed_loop import simulate
from uk_controller.sim.uk_plant import UKPlant

RATE = 200.0
TOL = {'uk_binary': (1e-5, 1e-5), 'odrive': (1e-6, 1e-6), 'dynamixel': (5e-3, 1e-3)}


pytestmark = [pytest.mark.serial, pytest.mark.usefixtures('fast_gil_switch')]


def hardware(setup, protocol):
    names = setup.actuators.names
    overrides = {'hardware.protocol': protocol}
    if protocol == 'dynamixel':
        overrides['hardware.motors'] = list(names)
    for k, name in enumerate(names if protocol == 'dynamixel' else ()):
        overrides.update(
            {
                f'hardware.{name}.id': k + 1,
                f'hardware.{name}.gear_ratio': 100.0,
                f'hardware.{name}.torque_constant': 1.0,
                f'hardware.{name}.torque_limit': float(setup.actuators.effort_limits[k]) / 100.0,
            }
        )
    acts = setup.actuators.actuators
    return HardwareConfig.from_settings(
        resolve(setup.config_path, overrides),
        effort_limits=setup.actuators.effort_limits,
        joints=[setup.joint_names[a.joint] for a in acts],
    )


def hil(robot, protocol, duration):
    setup = load_robot(robot, {'control.rate': RATE})
    hw = hardware(setup, protocol)
    plant = UKPlant.from_setup(load_robot(robot))  # the device's own physics
    core = ControllerCore(setup)
    emu = make_emulator(protocol, plant, hw, dt=core.dt).start()
    safe = SafeBus(hw, lambda: make_bus(hw.at_port(emu.port), timeout=0.5), watchdog=2.0)
    try:
        safe.connect(raise_errors=True)
        res = run_loop(core, safe, JointStateAssembler(setup, hw), duration=duration, realtime=False, record=True)
        diag = safe.diagnostics()
    finally:
        safe.shutdown()
        emu.close()
    # warm-up reads before arming repeat t = 0; keep the last row per period
    rows = {int(round(t * RATE)): (q, e) for t, q, e in zip(res.t, res.q, res.task_error)}
    k = np.array(sorted(rows))
    return k, np.array([rows[i][0] for i in k]), np.array([rows[i][1] for i in k]), diag


@pytest.mark.parametrize(
    'robot, protocol, duration',
    [
        ('scara', 'uk_binary', 1.0),
        ('scara', 'odrive', 0.5),
        ('five_bar', 'uk_binary', 0.5),
        ('five_bar', 'dynamixel', 0.5),
    ],
    indirect=['robot'],
)
@pytest.mark.slow
def test_hil_matches_in_process_simulation(robot, protocol, duration):
    sim = simulate(load_robot(robot, {'simulation.duration': duration, 'control.rate': RATE}))
    k, q, e, diag = hil(robot, protocol, duration)
    steps = int(round(duration * RATE))
    np.testing.assert_array_equal(k, np.arange(steps))  # every period ran, in order
    assert diag['timeouts'] == 0 and diag['crc_errors'] == 0 and diag['watchdog_trips'] == 0
    tol_q, tol_e = TOL[protocol]
    assert np.max(np.abs(q - sim.q[k])) < tol_q
    assert np.max(np.abs(e - sim.task_error[k])) < tol_e
    # and the loop actually tracks: the task error shrinks like the simulation's
    assert np.max(np.abs(e[-1])) <= max(2 * np.max(np.abs(sim.task_error[k[-1]])), tol_e)
