"""simulate() (compiled closed loop where available, else the Python loop) equals an un-fused reference loop.

The reference is written here, independently of simulate: a zero-order-hold loop of
ControllerCore.step with its fused program switched off (rows by ConstraintStack.evaluate on
Pinocchio's computeAllTerms, then the ServoSolver) and a UKPlant integrating stage by stage on
Pinocchio (forward dynamics / ServoSolver with the closure rows; no compiled period, no fused rows).
simulate's compiled loop (sim/compiled_loop.py) computes M, h and the frames with uk_controller.kernels' own tree
pass instead, so the trajectories agree to round-off, not bit for bit; the Python loop
(``compiled=False``) must agree as well. A run that starts from a non-finite state exercises the
fall-back from the compiled loop to ControllerCore.step's safe effort and the plant's own NaN step.
"""

import numpy as np
import pytest

from uk_controller.control.controller import ControllerCore
from uk_controller.kernels import codes, jit
from uk_controller.kernels.plant import plant_rk4
from uk_controller.robots import load_robot
from uk_controller.sim import compiled_loop
from uk_controller.sim.closed_loop import simulate
from uk_controller.sim.uk_plant import UKPlant

DURATION = 1.0
TOL = {'q': 1e-12, 'qd': 1e-11, 'effort': 1e-11, 'phi': 1e-12}  # measured: <= 3e-13 (effort, dual_arm)


def reference_run(robot, duration):
    setup = load_robot(robot)
    ctrl = ControllerCore(setup, backend='reference')  # rows by ConstraintStack, ServoSolver (reference step)
    plant = UKPlant.from_setup(setup, backend='numpy')  # NumPy RK4 on Pinocchio + ServoSolver
    ctrl.reset(plant.t)
    steps = int(round(duration * ctrl.rate))
    log = {key: [] for key in ('t', 'q', 'qd', 'effort', 'phi', 'ok')}
    for _ in range(steps):
        q, qd, t = plant.q.copy(), plant.qd.copy(), plant.t
        res = ctrl.step(q, qd, t)
        for key, value in (('t', t), ('q', q), ('qd', qd), ('effort', res.effort), ('phi', res.phi), ('ok', res.ok)):
            log[key].append(value)
        plant.step(res.effort, ctrl.dt)
    return {key: np.array(value) for key, value in log.items()}


@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'five_bar_redundant', 'dual_arm', 'planar_3r'])
@pytest.mark.slow
def test_simulate_equals_unfused_reference(robot):
    ref = reference_run(robot, DURATION)
    fast = simulate(load_robot(robot, {'simulation.duration': DURATION}))
    plain = simulate(load_robot(robot, {'simulation.duration': DURATION}), compiled=False)
    assert plain.settings['loop'] == 'python'
    if jit.AVAILABLE:
        assert fast.settings['loop'] == 'compiled'
        assert np.isfinite(fast.compute_time).all() and (fast.compute_time > 0).all()
    for res in (fast, plain):
        assert res.ok.all() and ref['ok'].all()
        np.testing.assert_array_equal(res.t, ref['t'])
        for key, tol in TOL.items():
            scale = max(1.0, np.abs(ref[key]).max())
            np.testing.assert_allclose(getattr(res, key), ref[key], rtol=0, atol=tol * scale, err_msg=key)
        mp = load_robot(robot).passive.m
        np.testing.assert_array_equal(res.task_error, res.phi[:, mp:])
        np.testing.assert_array_equal(res.closure_residual, res.phi[:, :mp])


@pytest.mark.skipif(not compiled_loop.AVAILABLE, reason='numba not installed')
@pytest.mark.parametrize('robot', ['scara', 'five_bar'])
@pytest.mark.slow
def test_non_finite_start_falls_back_like_the_python_loop(robot):
    """Every period: the compiled controller stops, ControllerCore.step gives the safe effort (zero) with
    ok False, the plant propagates NaN; identical logs with and without the compiled loop."""
    runs = []
    for compiled in (None, False):
        setup = load_robot(robot, {'simulation.duration': 0.005})
        setup.q0 = setup.q0 * np.nan
        runs.append(simulate(setup, compiled=compiled))
    fast, plain = runs
    assert fast.settings['loop'] == 'compiled'
    assert not fast.ok.any() and not plain.ok.any()
    np.testing.assert_array_equal(fast.effort, np.zeros_like(fast.effort))
    np.testing.assert_array_equal(fast.effort, plain.effort)
    assert np.isnan(fast.q).all() and np.isnan(plain.q).all()


@pytest.mark.skipif(not compiled_loop.AVAILABLE, reason='numba not installed')
@pytest.mark.slow
def test_compiled_required_but_unavailable_is_an_error():
    with pytest.raises(ValueError, match='compiled closed loop not available'):
        simulate(load_robot('scara', {'simulation.duration': 0.01, 'simulation.sensor_noise': 1e-6}), compiled=True)


@pytest.mark.skipif(not compiled_loop.AVAILABLE, reason='numba not installed')
@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'five_bar_redundant', 'planar_3r'])
@pytest.mark.slow
def test_plant_period_equals_plant_rk4_bit_for_bit(robot):
    """CompiledLoop.plant_period (kernels.plant.plant_period on the loop's own unpacked model, work and scratch
    arrays) equals UKPlant's kernels.plant.plant_rk4 (packed model, one work array): the same bits over 200 periods
    of random efforts, 2 substeps."""
    setup = load_robot(robot, {'simulation.substeps': 2})
    plant = UKPlant.from_setup(setup)
    loop = compiled_loop.CompiledLoop.build(ControllerCore(setup), plant)
    rng = np.random.default_rng(21)
    x_ref = np.concatenate((plant.q, plant.qd))
    x = x_ref.copy()
    t = 0.0
    for _ in range(200):
        u = 0.3 * rng.standard_normal(setup.actuators.p)
        assert plant_rk4(x_ref, plant.actuator_matrix @ u, t, 1e-3, 2, *plant.backend.args) == 0.0
        assert loop.plant_period(x, u, t, 1e-3) == 0.0
        t += 1e-3
    np.testing.assert_array_equal(x, x_ref)
    assert np.abs(x - np.concatenate((plant.q, plant.qd))).max() > 1e-3  # the state did move
    x[0] = np.nan
    assert loop.plant_period(x, u, t, 1e-3) == codes.NOT_FINITE_STATE


@pytest.mark.skipif(not compiled_loop.AVAILABLE, reason='numba not installed')
@pytest.mark.slow
def test_plant_period_with_q_dependent_actuators_equals_the_reference_plant():
    """dual_arm's 'between' actuator (torque between link5 and the world): B(q) u at every RK4 stage by the
    plant's closure program equals UKPlant's stage-by-stage RK4 with ActuatorMap.matrix on Pinocchio."""
    setup = load_robot('dual_arm')
    ref = UKPlant.from_setup(setup, backend='numpy')
    assert ref.actuator_matrix is None and UKPlant.from_setup(setup).backend.name != 'compiled'
    loop = compiled_loop.CompiledLoop.build(ControllerCore(setup), UKPlant.from_setup(setup))
    assert loop.qdep
    rng = np.random.default_rng(22)
    x = np.concatenate((ref.q, ref.qd))
    for _ in range(100):
        u = 0.5 * rng.standard_normal(setup.actuators.p)
        assert loop.plant_period(x, u, ref.t, 1e-3) == 0.0
        ref.step(u, 1e-3)
    np.testing.assert_allclose(x[: ref.n], ref.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(x[ref.n :], ref.qd, rtol=0, atol=1e-12)
    assert np.abs(ref.q - setup.q0).max() > 1e-3


@pytest.mark.skipif(not compiled_loop.AVAILABLE, reason='numba not installed')
@pytest.mark.parametrize('robot', ['scara', 'five_bar'])
@pytest.mark.slow
def test_model_mismatch_and_own_gains_equal_the_python_loop(robot):
    """Plant inertias x 1.3 (the controller's and the plant's trees differ: no shared tree pass), seed 000's
    Baumgarte gains and 500 Hz: the compiled loop follows the Python loop to round-off."""
    options = {
        'simulation.duration': 0.6,
        'control.rate': 500.0,
        'simulation.mass_scale': 1.3,
        'stabilization.convention': 'seed000',
        'stabilization.alpha': 0.5,
        'stabilization.beta': 200.0,
    }
    fast = simulate(load_robot(robot, options))
    plain = simulate(load_robot(robot, options), compiled=False)
    assert fast.settings['loop'] == 'compiled' and plain.settings['loop'] == 'python'
    assert fast.ok.all() and plain.ok.all()
    np.testing.assert_array_equal(fast.t, plain.t)
    for key, tol in TOL.items():
        ref = getattr(plain, key)
        np.testing.assert_allclose(getattr(fast, key), ref, rtol=0, atol=tol * max(1.0, np.abs(ref).max()), err_msg=key)
    assert np.abs(fast.q - simulate(load_robot(robot, {**options, 'simulation.mass_scale': 1.0})).q).max() > 1e-6


@pytest.mark.skipif(not compiled_loop.AVAILABLE, reason='numba not installed')
@pytest.mark.slow
def test_progress_chunks_do_not_change_the_run():
    """With a progress callback the compiled loop runs in chunks of ~1 % of the periods: same bits as one
    chunk, fractions rising from 0 to 1."""
    seen = []
    chunked = simulate(load_robot('five_bar', {'simulation.duration': 0.3}), progress=seen.append)
    whole = simulate(load_robot('five_bar', {'simulation.duration': 0.3}))
    assert chunked.settings['loop'] == whole.settings['loop'] == 'compiled'
    for key in ('q', 'qd', 'effort', 'phi', 'phidot', 'saturated', 'ok', 't'):
        np.testing.assert_array_equal(getattr(chunked, key), getattr(whole, key), err_msg=key)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and len(seen) >= 50 and np.all(np.diff(seen) >= 0)


@pytest.mark.skipif(not compiled_loop.AVAILABLE, reason='numba not installed')
@pytest.mark.slow
def test_hold_safe_effort_after_compiled_periods():
    """safe_effort 'hold': after compiled periods the ControllerCore holds the last compiled effort, as if its
    own step had produced it."""
    setup = load_robot('five_bar', {'control.safe_effort': 'hold'})
    ctrl = ControllerCore(setup)
    plant = UKPlant.from_setup(setup)
    loop = compiled_loop.CompiledLoop.build(ctrl, plant)
    steps, n, p, m = 40, plant.n, ctrl.p, setup.passive.m + setup.servo.m
    logs = {
        't': np.zeros(steps),
        'q': np.zeros((steps, n)),
        'qd': np.zeros((steps, n)),
        'effort': np.zeros((steps, p)),
        'phi': np.zeros((steps, m)),
        'phidot': np.zeros((steps, m)),
        'saturated': np.zeros((steps, p), dtype=bool),
        'ok': np.zeros(steps, dtype=bool),
        'compute_time': np.zeros(steps),
    }
    assert loop.run(0, steps, logs) == (steps, compiled_loop.DONE)
    assert logs['ok'].all() and np.abs(logs['effort'][-1]).max() > 0
    assert plant.t == pytest.approx(steps * ctrl.dt) and plant.rhs_evaluations == 4 * plant.substeps * steps
    held = ctrl.step(plant.q * np.nan, plant.qd, plant.t)
    assert not held.ok and held.reason == 'non-finite state'
    np.testing.assert_array_equal(held.effort, logs['effort'][-1])
