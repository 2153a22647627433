"""The effort a motor gives is the effort the controller works with.

- the static load at the start pose against Pinocchio's own ``computeGeneralizedGravity``;
- the device limits read at connect (Current Limit x unit x k_t x gear) become the limits of the
  hardware layer and of the controller; a motor that cannot hold q0 is named with its numbers;
- the emulators' plants stop at the description's joint limits (against the free fall in closed form);
- over the Dynamixel emulator, clipping by the motor is logged ``saturated`` (never ``armed`` with an
  effort the motor does not give), counted in the diagnostics, and the prismatic joint rests on its stop.
"""

import csv
import io

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.hardware import registry, static_load
from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.emulator import JointLimitedPlant
from uk_controller.robots import load_robot
from uk_controller.sim.uk_plant import UKPlant

DXL_LIMIT = 1193 * 2.69e-3  # XM430-W350 Current Limit x 2.69 mA, k_t = 1 N m/A: 3.209 N m


def pinocchio_gravity(setup, q):
    model = setup.model.model
    return np.array(pin.computeGeneralizedGravity(model, model.createData(), np.asarray(q, float)))


def test_static_effort_of_the_scara_is_pinocchio_gravity():
    setup = load_robot('scara')
    u = static_load.static_effort(setup)
    G = pinocchio_gravity(setup, setup.q0)  # joint order = Pinocchio's, one motor per joint
    np.testing.assert_allclose(u, G, rtol=1e-12, atol=1e-12)
    m4 = setup.model.model.inertias[setup.model.model.getJointId('joint4')].mass
    assert u[3] == pytest.approx(m4 * 9.81, rel=1e-12)  # the prismatic axis carries link 4: 0.5 kg
    assert [static_load.effort_unit(setup, j) for j in ('joint1', 'joint4')] == ['N m', 'N']


def test_static_effort_of_a_closed_chain_balances_pinocchio_gravity():
    """five_bar: u and some closure force lambda together balance G(q0) (B u + A_p^T lambda = G)."""
    setup = load_robot('five_bar')
    u = static_load.static_effort(setup)
    n = setup.model.n
    passive, _servo, B = setup.evaluate(setup.q0, np.zeros(n), 0.0)
    G = pinocchio_gravity(setup, setup.model.to_pinocchio_q(setup.q0))
    rest = G - np.asarray(B).reshape(n, -1) @ u
    lam = np.linalg.lstsq(passive.A.T, rest, rcond=None)[0]
    assert np.linalg.norm(passive.A.T @ lam - rest) < 1e-9 * max(1.0, np.linalg.norm(G))


def test_device_limits_become_the_limits_and_the_motor_that_cannot_hold_is_named():
    setup = load_robot('scara')
    hw = HardwareConfig.from_setup(setup)
    assert np.all(hw.u_max == setup.actuators.effort_limits)  # 200, 100, 20 N m; 50 N
    assert hw.apply_device_limits(np.full(4, DXL_LIMIT))
    np.testing.assert_allclose(hw.u_max, DXL_LIMIT)
    u = static_load.static_effort(setup)
    problems = static_load.problems(setup, hw, u)
    assert len(problems) == 1 and problems[0].startswith('motor motor4 (joint4) cannot hold the start pose')
    need = abs(pinocchio_gravity(setup, setup.q0)[3])
    assert f'gravity needs {need:.4g} N' in problems[0] and f'gives {DXL_LIMIT:.4g} N' in problems[0]
    # a 10:1 reduction: the same servo holds it
    ten = {'hardware.protocol': 'dynamixel', **{f'hardware.motor{k}.gear_ratio': 10.0 for k in range(1, 5)}}
    hw10 = HardwareConfig.from_setup(load_robot('scara', ten))
    hw10.apply_device_limits(np.full(4, DXL_LIMIT))
    np.testing.assert_allclose(hw10.u_max, np.minimum(setup.actuators.effort_limits, 10 * DXL_LIMIT))
    assert static_load.problems(setup, hw10, u) == []


def test_the_shipped_dynamixel_example_holds_the_scara():
    setup = load_robot('config/examples/scara_dynamixel.yaml')
    hw = HardwareConfig.from_setup(setup)
    limit = registry.get('dynamixel').options(hw.options.get('dynamixel'))['current_limit'] * 2.69e-3
    hw.apply_device_limits(limit * hw.kt)
    assert static_load.problems(setup, hw, static_load.static_effort(setup)) == []


@pytest.mark.slow
def test_joint_limited_plant_stops_the_falling_axis():
    """Zero effort for 1 s: the free SCARA's prismatic joint falls as q4(t) = q4(0) + v0 t - g t^2 / 2
    (its axis is parallel to the revolute ones: nothing couples it); with the stops it rests on the
    URDF's lower limit."""
    setup = load_robot('scara')
    free = UKPlant.from_setup(load_robot('scara'))
    limited = JointLimitedPlant.from_setup(UKPlant.from_setup(load_robot('scara')), setup)
    q0, v0 = setup.q0[3], setup.qd0[3]
    for _ in range(1000):
        free.step(np.zeros(4), 1e-3)
        limited.step(np.zeros(4), 1e-3)
    assert free.q[3] == pytest.approx(q0 + v0 - 9.81 / 2, rel=1e-9)
    lo = setup.model.position_limits[0][3]
    assert lo == -0.1
    assert limited.q[3] == lo and limited.qd[3] == 0.0 and limited.stops > 0
    assert np.all(limited.q[:3] >= -3.1) and np.all(limited.q[:3] <= 3.1)


@pytest.mark.serial
@pytest.mark.usefixtures('fast_gil_switch')
@pytest.mark.slow
def test_clipping_by_the_motor_is_logged_saturated_and_the_axis_rests_on_its_stop(robots):
    """The SCARA on Dynamixel servos that cannot hold its payload, run anyway (run_loop, as `run` would
    after its checks): every logged row whose effort is at a motor's limit says `saturated`, the logged
    effort never exceeds what the motor gives (3.209 N), the diagnostics count it, and the emulated
    prismatic joint stops at -0.1 m instead of falling."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.hardware.joint_state_assembler import JointStateAssembler
    from uk_controller.hardware.safety import SafeBus
    from uk_controller.hardware.serial_loop import run_loop

    robots('scara')
    setup = load_robot('scara', {'hardware.protocol': 'dynamixel', 'control.rate': 200.0})
    hw = HardwareConfig.from_setup(setup)
    core = ControllerCore(setup)
    plant = JointLimitedPlant.from_setup(UKPlant.from_setup(load_robot('scara')), setup)
    emu = registry.make_emulator('dynamixel', plant, hw, dt=core.dt, return_delay_time=0).start()
    safe = SafeBus(hw, lambda: registry.make_bus(hw.at_port(emu.port), timeout=0.5), watchdog=2.0)
    log = io.StringIO()
    writer = csv.writer(log)
    writer.writerow(
        [
            't',
            'state',
            *[f'q_{j}' for j in core.joint_names],
            *[f'qd_{j}' for j in core.joint_names],
            *[f'u_{a}' for a in core.actuator_names],
            *[f'e{i}' for i in range(setup.servo.m)],
            'rtt',
        ]
    )
    try:
        safe.connect(raise_errors=True)
        np.testing.assert_allclose(hw.u_max, DXL_LIMIT)  # read from the servos at connect
        core.set_effort_limits(hw.u_max)
        res = run_loop(
            core, safe, JointStateAssembler(setup, hw), duration=1.0, realtime=False, record=True, csv_writer=writer
        )
        diag = safe.diagnostics()
    finally:
        safe.shutdown()
        emu.close()
    rows = list(csv.reader(io.StringIO(log.getvalue())))
    head, rows = rows[0], rows[1:]
    state = [r[head.index('state')] for r in rows]
    u4 = np.array([float(r[head.index('u_motor4')]) for r in rows])
    print(
        '\nstates:',
        {s: state.count(s) for s in set(state)},
        'max |u4|',
        np.abs(u4).max(),
        'saturated_cycles',
        diag['saturated_cycles'],
        'q4 end',
        plant.q[3],
    )
    assert np.abs(u4).max() <= DXL_LIMIT * (1 + 1e-9)
    at_limit = np.abs(u4) >= DXL_LIMIT * (1 - 1e-9)
    assert at_limit.sum() > 10
    assert all(s == 'saturated' for s, hit in zip(state, at_limit) if hit)
    assert diag['saturated_cycles'] >= at_limit.sum() - 1 and any(res.saturated)
    assert emu.max_abs_effort[3] <= DXL_LIMIT * (1 + 1e-6)
    assert plant.q[3] == pytest.approx(-0.1, abs=1e-12) and plant.stops > 0


@pytest.mark.serial
@pytest.mark.slow
def test_run_refuses_the_scara_its_servos_cannot_hold(tmp_path, robots):
    """The issue's reproduction, `uk-controller run scara --protocol dynamixel --duration 3 --log run.csv`
    over the Dynamixel emulator (at a rate the bus carries): exit 2 naming motor4 and the numbers, no log
    left behind, torque never on; the same over uk_binary (no device limits: the URDF's 50 N) passes."""
    import subprocess
    import sys

    setup = load_robot(robots('scara'))
    hw = HardwareConfig.from_setup(setup)
    cmd = [sys.executable, '-c', 'import sys; from uk_controller.cli import main; sys.exit(main())', 'run', 'scara']
    with registry.make_emulator('dynamixel', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
        log = tmp_path / 'run.csv'
        r = subprocess.run(
            cmd
            + ['--port', emu.port, '--protocol', 'dynamixel', '--rate', '100', '--duration', '3', '--log', str(log)],
            capture_output=True,
            text=True,
            timeout=240,
        )
        print(r.stderr)
        assert r.returncode == 2 and 'Traceback' not in r.stderr
        need = abs(pinocchio_gravity(setup, setup.q0)[3])
        assert (
            f'motor motor4 (joint4) cannot hold the start pose: gravity needs {need:.4g} N, the motor gives '
            f'{DXL_LIMIT:.4g} N'
        ) in r.stderr
        assert 'Current Limit 1193 x 2.69 mA x torque constant 1 N m/A' in r.stderr
        assert 'running scara' not in r.stderr
        assert not log.exists() and not log.with_name('run.csv.part').exists()
        assert not np.any(emu.max_abs_effort) and emu.counters['steps'] == 0
    with registry.make_emulator('uk_binary', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
        r = subprocess.run(
            cmd + ['--port', emu.port, '--protocol', 'uk_binary', '--rate', '100', '--check'],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert 'check passed' in r.stdout and 'motor4: gravity load +4.905 N, limit 50 N' in r.stdout
