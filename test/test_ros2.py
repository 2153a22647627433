"""The embedded plant's ROS2 (uk_controller/sim/ros2.py, kernels/plant.py ros2_period).

Independent checks: one joint ``I q'' = u - d q' - k q - f tanh(q'/v_s)`` against its closed form (damping
alone) or scipy's solve_ivp at tight tolerances: order 2 on non-stiff cases (the error falls by ~4 when the
step halves); on the stiff light link of the xArm7's last joint (I = 1/7200, d = 2, f = 1, v_s = 0.01) RK4
at the same step runs away while ROS2 settles, and through the friction's zero crossing ROS2 follows a
Radau reference where a step without the secant redo chatters. Then the compiled period against the NumPy
one, and the closed loop of the xArm7 and the Unitree Z1 (example-robot-data) with the default integrator
(auto -> ROS2 at 4 steps per period) against RK4 at the hundreds of steps the stiffness check asks for.
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from uk_controller.sim import ros2 as ros2_module
from uk_controller.sim.rk4 import rk4_period
from uk_controller.sim.ros2 import ros2_period

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arm_starts  # noqa: E402


def _joint(inertia, damping, stiffness, friction, vs, effort):
    """(accel, mass, passive arrays) of one joint under the effort ``effort(t)``."""

    def accel(q, qd, t):
        return (effort(t) - damping * qd - stiffness * q - friction * np.tanh(qd / vs)) / inertia

    def mass(q, qd):
        return np.array([[inertia]])

    passive = (np.array([damping]), np.array([stiffness]), np.array([friction]), vs)
    return accel, mass, passive


def _ros2(joint, x0, T, steps):
    accel, mass, passive = joint
    x = np.array(x0, dtype=float)
    ros2_period(x, 0.0, T, steps, accel, mass, *passive)
    return x


def _jacobian(joint):
    """The exact Jacobian of (q', q'') for solve_ivp's implicit methods (its finite differences overflow on
    the light joint)."""
    damping, stiffness, friction, vs = (float(np.ravel(a)[0]) for a in joint[2])
    inertia = float(joint[1](0.0, 0.0)[0, 0])

    def jac(t, x):
        th = math.tanh(x[1] / vs)
        return [[0.0, 1.0], [-stiffness / inertia, -(damping + friction / vs * (1.0 - th * th)) / inertia]]

    return jac


def _solve(joint, x0, T, method='DOP853', **kw):
    accel = joint[0]
    if method == 'Radau':
        kw['jac'] = _jacobian(joint)
    sol = solve_ivp(
        lambda t, x: [x[1], float(accel(x[0], x[1], t))], (0.0, T), x0, method=method, rtol=1e-12, atol=1e-13, **kw
    )
    assert sol.success
    return sol


def _reference(joint, x0, T, method='DOP853', **kw):
    return _solve(joint, x0, T, method, **kw).y[:, -1]


def _order(errors):
    return [a / b for a, b in zip(errors, errors[1:])]


def test_order_two_on_damping_against_the_closed_form():
    """``I v' = u - d v``: v(t) = u/d + (v0 - u/d) e^{-d t / I}, q by its integral."""
    inertia, d, u, v0, T = 1.0, 2.0, 1.0, 1.5, 1.0
    joint = _joint(inertia, d, 0.0, 0.0, 1.0, lambda t: u)
    e = math.exp(-d * T / inertia)
    exact = np.array([u / d * T + (v0 - u / d) * inertia / d * (1.0 - e), u / d + (v0 - u / d) * e])
    errors = [np.abs(_ros2(joint, [0.0, v0], T, n) - exact).max() for n in (40, 80, 160, 320)]
    assert all(3.5 < r < 4.5 for r in _order(errors)), (errors, _order(errors))


@pytest.mark.parametrize(
    'stiffness, friction, vs',
    [(4.0, 0.0, 1.0), (0.0, 1.5, 2.0), (2.5, 0.5, 0.5)],
    ids=['spring-damper', 'smooth-friction', 'all'],
)
def test_order_two_against_a_tight_reference(stiffness, friction, vs):
    """Non-stiff joints with a spring, a smooth friction and a time-varying effort: the error against
    solve_ivp (DOP853, rtol 1e-12) falls by ~4 per halving of the step."""
    joint = _joint(0.5, 0.3, stiffness, friction, vs, lambda t: 2.0 * math.sin(3.0 * t))
    x0, T = [0.2, 0.7], 1.0
    ref = _reference(joint, x0, T)
    errors = [np.abs(_ros2(joint, x0, T, n) - ref).max() for n in (80, 160, 320, 640)]
    assert all(3.3 < r < 4.7 for r in _order(errors)), (errors, _order(errors))


# the xArm7's last joint: mobility 7200 /(kg m^2), damping 2, friction 1 at v_s = 0.01: rate 7.3e5 1/s
LIGHT = dict(inertia=1.0 / 7200.0, damping=2.0, stiffness=0.0, friction=1.0, vs=0.01)


def test_stiff_joint_settles_where_rk4_at_the_same_step_runs_away():
    """Effort 0.5 N m against friction 1 N m from 0.3 rad/s: the joint comes to rest (the friction holds
    it where f tanh(v/v_s) + d v = 0.5). ROS2 at 4 steps per millisecond settles there; RK4 at the same
    step (h m (d + f/v_s) = 184 >> 2.78) grows without bound."""
    joint = _joint(**LIGHT, effort=lambda t: 0.5)
    accel = joint[0]
    x0, dt, steps = np.array([0.0, 0.3]), 1e-3, 4
    rest = _reference(joint, list(x0), 0.05, method='Radau')[1]  # the speed where the forces balance
    x, speeds = x0.copy(), []
    for k in range(50):
        ros2_period(x, k * dt, dt, steps, *joint[:2], *joint[2])
        speeds.append(x[1])
    assert np.isfinite(speeds).all() and np.abs(speeds).max() <= 0.3
    assert abs(speeds[-1] - rest) < 1e-9 and abs(speeds[-1]) < LIGHT['vs']
    y, kk, yt = x0.copy(), np.zeros((4, 2)), np.zeros(2)
    with np.errstate(all='ignore'):
        for k in range(5):
            rk4_period(y, kk, yt, k * dt, dt, steps, lambda q, qd, t: np.array([accel(q[0], qd[0], t)]))
    assert not (np.abs(y[1]) < 1e3)  # diverged (or overflowed to inf / nan)


def _chatter(monkeypatch, passes):
    monkeypatch.setattr(ros2_module, 'PASSES', passes)
    joint = _joint(**LIGHT, effort=lambda t: 1.5 * math.sin(20.0 * t))
    x0, dt, T = [0.0, 0.5], 1e-3, 0.4
    ts = np.arange(0.0, T + 1e-12, dt)
    ref = _solve(joint, x0, T, 'Radau', t_eval=ts, max_step=1e-4)
    x, speeds = np.array(x0), [x0[1]]
    for k in range(ts.size - 1):
        ros2_period(x, ts[k], dt, 4, *joint[:2], *joint[2])
        speeds.append(x[1])
    return np.abs(np.array(speeds) - ref.y[1]).max()


@pytest.mark.slow  # seconds of Radau
def test_friction_zero_crossing_follows_the_reference(monkeypatch):
    """An effort that swings the light joint through rest every 80 ms (the friction's slope at the step's
    start ~0, 100 N m s/rad where the speed crosses zero inside the step): with the secant redo the speed
    follows Radau's to a few mrad/s (measured 1.6e-3 at 4 steps per ms); with one pass (the W-method's
    start slope alone) it chatters by a tenth of a rad/s (measured 0.21)."""
    with_redo = _chatter(monkeypatch, ros2_module.PASSES)
    without = _chatter(monkeypatch, 1)
    assert with_redo < 1e-2, with_redo
    assert without > 10 * with_redo, (without, with_redo)


# ----------------------------------------------------------------------------- real arms (compiled)


def test_plants_with_closures_refuse_rosenbrock():
    """ROS2 is for open trees: a plant with closure rows (the mimic gripper's passive row) refuses it."""
    from uk_controller.robots import load_robot
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot(
        Path(__file__).resolve().parent / 'data' / 'mimic_gripper.yaml', {'simulation.integrator': 'rosenbrock'}
    )
    assert setup.passive.m > 0
    with pytest.raises(ValueError, match='rosenbrock is for open trees'):
        UKPlant(setup)


needs_arms = pytest.mark.skipif(not arm_starts.available(), reason='example-robot-data not installed')


def _setup_file(arm, seed, task, duration):
    case = arm_starts.draw_case(arm, seed, task)
    path = Path(tempfile.mkdtemp()) / f'{arm}.yaml'
    path.write_text(arm_starts.setup_yaml(case, duration=duration))
    return path


@pytest.mark.slow
@needs_arms
def test_compiled_ros2_equals_numpy_ros2():
    """UKPlant's compiled ROS2 period (kernels.plant.ros2_period through plant_rk4) against the NumPy
    reference (sim/ros2.py on Pinocchio's ABA and M) on the xArm7 under random held efforts: round-off."""
    from uk_controller.robots import load_robot
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot(_setup_file('xarm7', 0, 'pose', 0.01), {'simulation.integrator': 'rosenbrock'})
    compiled, numpy_ref = UKPlant(setup), UKPlant(setup, backend='numpy')
    assert compiled.backend.name == 'compiled' and numpy_ref.backend.name == 'numpy_rosenbrock'
    rng = np.random.default_rng(1)
    for k in range(300):
        if k % 50 == 0:
            u = rng.normal(0.0, 2.0, compiled.actuator_matrix.shape[1])
        compiled.step(u, 1e-3)
        numpy_ref.step(u, 1e-3)
    assert np.abs(compiled.qd).max() > 0.1  # it moved
    assert np.abs(compiled.q - numpy_ref.q).max() < 1e-10
    assert np.abs(compiled.qd - numpy_ref.qd).max() < 1e-9


@pytest.mark.slow
@needs_arms
@pytest.mark.parametrize('arm, seed, task', [('xarm7', 0, 'pose'), ('z1', 0, 'pose'), ('z1', 1, 'position')])
def test_closed_loop_default_follows_rk4_with_its_substeps(arm, seed, task):
    """The closed loop over 1.5 s from a seeded start: the default integrator (auto -> ROS2 at
    simulation.substeps = 4) against RK4 at the substeps the stiffness check raises it to (552 on the
    xArm7, ~250 on the Z1). Measured max |q_ros2 - q_rk4| over the run: 2.6e-5 (xarm7-0-pose), 7.0e-5
    (z1-0-pose), 9.5e-6 rad (z1-1-position); the bound 5e-4 is half the task tolerance of the arm runs."""
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    path = _setup_file(arm, seed, task, 1.5)
    auto = simulate(load_robot(path, {}))
    rk4 = simulate(load_robot(path, {'simulation.integrator': 'rk4'}))
    assert 'auto chose rosenbrock (4 steps' in auto.settings['plant_note']
    assert 'raised from 4 to' in rk4.settings['plant_note']
    assert auto.q.shape == rk4.q.shape == (1500, auto.q.shape[1])
    assert np.isfinite(auto.q).all()
    assert np.abs(auto.q - rk4.q).max() < 5e-4
    assert np.abs(auto.q[-1] - rk4.q[-1]).max() < 1e-4
    moved = np.abs(rk4.q[-1] - rk4.q[0]).max()
    assert moved > 0.05, moved  # the arm did move towards its target
