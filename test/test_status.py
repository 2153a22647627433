"""Named statuses (uk_controller.control.status): every backend of ControllerCore ends a step in the same Status with
the reason from the one table, checked on real failures (non-finite and mis-shaped states, an under-actuated
task whose least-squares residual is recomputed here independently) and on the plant's kernel codes."""

import copy

import numpy as np
import pytest

from uk_controller.control import status as S
from uk_controller.control.controller import ControllerCore
from uk_controller.control.status import Status, StepClass
from uk_controller.files import rcl_yaml
from uk_controller.files.parameter_file import load_config
from uk_controller.kernels import codes
from uk_controller.paths import share_dir
from uk_controller.robots import load_robot
from uk_controller.sim.uk_plant import UKPlant

BACKENDS = ('compiled', 'reference', 'general')


def test_table_has_one_row_per_status_and_kernel_codes_are_the_kernels():
    assert set(S.TABLE) == set(Status)
    assert (Status.OK, Status.NOT_POSITIVE_DEFINITE, Status.NON_FINITE_EFFORT, Status.NON_FINITE_STATE) == (
        codes.OK,
        codes.NOT_PD,
        codes.NOT_FINITE,
        codes.NOT_FINITE_STATE,
    )
    assert S.SAFE == {s for s in Status if S.TABLE[s][0]}
    assert {S.level(s) for s in Status} == {'ok', 'warn', 'error'}
    assert all(S.level(s) == 'error' for s in S.SAFE)
    assert S.STEP_CLASSES == ('ok', 'saturated', 'servo_inconsistent', 'rank_lost', 'safe_effort', 'limited')


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.slow
def test_bad_states_give_the_same_status_and_reason_on_every_backend(backend):
    ctrl = ControllerCore.from_config('five_bar', backend=backend)
    assert ctrl.backend.name == backend
    q, qd = ctrl.setup.q0, ctrl.setup.qd0
    cases = [
        ((q + np.nan, qd, 0.1), Status.NON_FINITE_STATE, {}),
        ((q, qd + np.inf, 0.1), Status.NON_FINITE_STATE, {}),
        ((q, qd, float('nan')), Status.NON_FINITE_STATE, {}),
        ((q[:2], qd, 0.1), Status.BAD_STATE_SHAPE, {'q': (2,), 'qd': (4,), 'n': 4}),
    ]
    for args, expected, details in cases:
        res = ctrl.step(*args)
        assert res.status is expected and not res.ok
        assert res.reason == S.reason(expected, **details)
        assert np.all(res.effort == 0.0) and np.isnan(res.phi).all()
        assert S.step_class(res, ctrl.servo.m, ctrl.p) is StepClass.SAFE_EFFORT
    good = ctrl.step(q, qd, 0.2)
    assert good.ok and good.status is Status.OK and good.reason == ''
    held = ctrl.safe('stale state')
    assert held.status is Status.SAFE_REQUESTED and held.reason == 'stale state' and not held.ok


def _two_motor_scara(tmp_path):
    params, _ = load_config(share_dir() / 'config' / 'scara.yaml')
    params = copy.deepcopy(params)
    params['robot']['urdf'] = str(share_dir() / 'urdf' / 'scara.urdf')
    params['actuators'] = {'names': ['motor1', 'motor2'], 'motor1': {'joint': 'joint1'}, 'motor2': {'joint': 'joint2'}}
    path = tmp_path / 'two_motors.yaml'
    path.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}))
    return load_robot(path)


@pytest.mark.slow
def test_under_actuated_task_is_servo_inconsistent_with_its_residual(tmp_path):
    """Four task rows, two motors: the least-squares effort of Chen's servo equation. Its residual
    |A_s q'' - b_s| is recomputed here from the model (q'' = M^-1 (B u - h), the stabilized b_s)."""
    setup = _two_motor_scara(tmp_path)
    q, qd, t = setup.q0 + 0.05, setup.qd0 + 0.1, 0.3
    results = {}
    for backend in BACKENDS:
        ctrl = ControllerCore(setup, backend=backend)
        results[backend] = res = ctrl.step(q, qd, t)
        assert res.ok and res.status is Status.SERVO_INCONSISTENT
        assert res.reason == S.reason(Status.SERVO_INCONSISTENT, residual=res.residual)
        assert S.step_class(res, ctrl.servo.m, ctrl.p) in (
            StepClass.SERVO_INCONSISTENT,
            StepClass.SATURATED,
            StepClass.RANK_LOST,
        )
    speed = ctrl.solver_options['task_speed']  # the saturated Baumgarte term's cap, as the controller
    model = setup.model
    model.compute(q, qd)
    servo = setup.servo.evaluate(model, q, qd, t)
    b = setup.stabilization.stabilized_rhs(servo, speed=speed)
    u = results['reference'].effort
    assert not results['reference'].saturated.any()
    qdd = np.linalg.solve(model.M, setup.actuators.matrix(model) @ u - model.h)
    assert results['reference'].residual == pytest.approx(np.linalg.norm(servo.A @ qdd - b), rel=1e-6)
    for backend in ('compiled', 'general'):
        assert results[backend].residual == pytest.approx(results['reference'].residual, rel=1e-6)


@pytest.mark.parametrize('robot, backend', [('five_bar', 'compiled'), ('scara', 'compiled'), ('scara', 'numpy')])
@pytest.mark.slow
def test_plant_propagates_a_non_finite_state(robot, backend):
    """The compiled period's NON_FINITE_STATE (and Pinocchio's ABA on the open tree) give NaN, not an error.
    (The reference closure solve on a NaN state reports a mass matrix that is not positive definite.)"""
    plant = UKPlant.from_setup(load_robot(robot), backend=backend)
    assert plant.backend.name == backend
    plant.reset(plant.q * np.nan, plant.qd)
    q, qd = plant.step(np.zeros(plant.setup.actuators.p), 1e-3)
    assert np.isnan(q).all() and np.isnan(qd).all()
