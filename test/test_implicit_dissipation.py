"""The joints' damping and friction over the control period (core/implicit_dissipation.py).

Independent checks: one joint of a real setup (a rotor about the vertical, so nothing but its inertia and
its passive dissipation acts) is stepped by the controller, and the effort it returns is held over the
period in the joint's own equation, integrated in closed form (friction alone: the separable
``I v' = u - f tanh(v / v_s)``; damping alone: the linear ODE) or by scipy's Radau (both): the joint ends
the period at the speed the controller asked for, ``v + dt q''``, within the dissipation's time constant,
where the effort of the sampled speed misses it. The compiled twins against the NumPy functions, the three
backends against each other on robots with damping and friction (closures, and a wheel arm with its
joint-limit stage), a robot without either keeps its one solve, the effort is continuous through rest.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from uk_controller.core.implicit_dissipation import friction_change, period_dissipation, period_mass
from uk_controller.kernels import jit

ROOT = Path(__file__).resolve().parent.parent
MIMIC = ROOT / 'test' / 'data' / 'mimic_gripper.yaml'
DT = 1e-3
VS = 0.01  # robot.friction_velocity (default)

ROTOR_URDF = """<?xml version="1.0"?>
<robot name="rotor">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="0 0 0"/><mass value="1.0"/>
      <inertia ixx="{I}" ixy="0" ixz="0" iyy="{I}" iyz="0" izz="{I}"/></inertial>
  </link>
  <joint name="j" type="revolute">
    <parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="100" velocity="50"/>
    <dynamics damping="{d}" friction="{f}"/>
  </joint>
</robot>
"""

ROTOR_YAML = """/**:
  ros__parameters:
    robot:
      name: rotor
      urdf: rotor.urdf
      initial_position: [0.0]
    actuators:
      names: [m]
      m: {joint: j}
    constraints:
      names: [angle]
      angle:
        role: servo
        type: joint_linear
        joints: [j]
        coefficients: [1.0]
        trajectory: {type: hold, value: [0.0]}
    stabilization: {convention: critical, omega: 20.0}
    control: {rate: 1000.0}
"""


def _rotor(tmp_path, I, d, f, backend='auto'):
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    (tmp_path / 'rotor.urdf').write_text(ROTOR_URDF.format(I=I, d=d, f=f))
    (tmp_path / 'rotor.yaml').write_text(ROTOR_YAML)
    return ControllerCore(load_robot(tmp_path / 'rotor.yaml'), backend=backend)


def _asked(ctrl):
    """The joint acceleration the (last) solve of a compiled or reference controller asks for."""
    b = ctrl.backend
    return (b.program.qdd if b.name == 'compiled' else b.solver.qdd).copy()


def _end_speed(I, d, f, u, v0):
    """The speed after DT of ``I v' = u - d v - f tanh(v / v_s)`` from v0, u held: closed forms for d = 0 and
    for f = 0, scipy's Radau (tight tolerances) for both."""
    if f == 0.0:  # linear: v -> u / d with the time constant I / d
        vinf = u / d
        return vinf + (v0 - vinf) * math.exp(-d * DT / I)
    if d == 0.0:
        # t(v) = I v_s [u x + f ln|u cosh x - f sinh x|] / (u^2 - f^2) between x0 = v0 / v_s and x = v / v_s
        from scipy.optimize import brentq

        def log_term(x):  # ln|u cosh x - f sinh x| = ln|(u - f) e^x + (u + f) e^-x| - ln 2, without overflow
            big = max(x, -x)
            return big + math.log(abs((u - f) * math.exp(x - big) + (u + f) * math.exp(-x - big))) - math.log(2.0)

        def t_of(v):
            x0, x = v0 / VS, v / VS
            return I * VS * (u * (x - x0) + f * (log_term(x) - log_term(x0))) / (u * u - f * f)

        assert abs(abs(u) - f) > 1e-6 * f, 'the closed form needs |u| != f'
        direction = 1.0 if u > f * math.tanh(v0 / VS) else -1.0
        if abs(u) < f:  # the speed tends to the balance u = f tanh(v / v_s)
            balance = VS * math.atanh(u / f)
            far = balance - direction * 1e-12 * max(1.0, abs(balance))
            if t_of(far) <= DT:  # there within 1e-12 before the period ends
                return balance
        else:  # the speed grows without bound: at most (|u| + f) / I
            far = v0 + direction * (abs(u) + f) / I * DT * 1.01
        return brentq(lambda v: t_of(v) - DT, v0, far, xtol=1e-15, rtol=1e-14)
    return _radau_end_speed(I, d, f, u, v0, rtol=1e-11, atol=1e-14)


def _radau_end_speed(I, d, f, u, v0, rtol, atol):
    """The same speed after DT by scipy's Radau on ``I v' = u - d v - f tanh(v / v_s)``."""
    from scipy.integrate import solve_ivp

    sol = solve_ivp(
        lambda t, v: [(u - d * v[0] - f * math.tanh(v[0] / VS)) / I],
        (0.0, DT),
        [v0],
        method='Radau',
        rtol=rtol,
        atol=atol,
    )
    return float(sol.y[0, -1])


def test_closed_forms_agree_with_a_numerical_integration():
    """The two closed forms of _end_speed against Radau on the same ODE (the helpers the test below trusts)."""
    for I, d, f, u, v0 in (
        (1e-3, 0.0, 1.0, 0.3, 0.0),
        (1e-3, 0.0, 1.0, 1.7, -0.02),
        (1e-2, 0.0, 0.5, -0.2, 0.01),
        (1e-4, 2.0, 0.0, 0.01, 0.0),
        (0.1, 0.5, 0.0, -1.0, 0.3),
    ):
        radau = _radau_end_speed(I, d, f, u, v0, rtol=1e-12, atol=1e-15)
        assert _end_speed(I, d, f, u, v0) == pytest.approx(radau, rel=1e-7, abs=1e-12)


# (I, d, f): the xArm7's last joint (inertia 1e-4, damping 2, friction 1), friction alone, damping alone,
# a heavy joint on which neither is stiff
JOINTS = [(1e-4, 2.0, 1.0), (1e-3, 0.0, 1.0), (1e-4, 2.0, 0.0), (0.1, 0.5, 0.2)]
# (q, q'): task errors and speeds from near rest to sliding
STATES = [(1e-3, 0.0), (-2e-3, 0.004), (0.05, -0.02), (-0.02, 0.3), (4e-4, -1e-3)]


def _balance(d, f, u, start, direction):
    """The speed at which ``d v + f tanh(v / v_s)`` balances u, searched from `start` in `direction`
    (+-inf when the dissipation never reaches u)."""
    from scipy.optimize import brentq

    if d == 0.0:
        return VS * math.atanh(u / f) if abs(u) < f else direction * math.inf
    far = (u + direction * f) / d + direction  # beyond it: d v + f tanh(v / v_s) - u has the sign of direction
    return brentq(lambda v: d * v + f * math.tanh(v / VS) - u, start, far, xtol=1e-16, rtol=1e-14)


@pytest.mark.parametrize('I, d, f', JOINTS)
@pytest.mark.slow
def test_one_joint_ends_the_period_at_the_speed_it_asks_for(tmp_path, I, d, f):
    """The effort is ``u = (I + dt d) a + d v + f tanh((v + dt a) / v_s)`` for the q'' = a the solve asks for
    (the implicit Euler step of core/implicit_dissipation.py on one joint). Held over dt, it brings the speed
    from v towards the speed v_b at which the dissipation balances u, and ``v + dt a`` lies between the two
    (``I a = P(v_b) - P(v + dt a)``, P the dissipation): the speed ends the period within ``|v_b - (v + dt
    a)| = I |a| / (P's secant slope)`` of the one asked for, a times the dissipation's time constant, and
    never further than with the effort of the sampled speed, ``I a + d v + f tanh(v / v_s)``. Where the
    dissipation is stiff (dt / tau > 10, tau = I / P'(v + dt a)) the sampled speed's effort misses by more
    than half of ``dt a`` and this one by less than a tenth."""
    ctrl = _rotor(tmp_path, I, d, f, backend='reference')
    for q, v in STATES:
        u = float(ctrl.step(np.array([q]), np.array([v]), 0.0).effort[0])
        a = float(_asked(ctrl)[0])
        v1 = v + DT * a
        assert u == pytest.approx((I + DT * d) * a + d * v + f * math.tanh(v1 / VS), rel=1e-10, abs=1e-13)
        u_sampled = I * a + d * v + f * math.tanh(v / VS)
        end = _end_speed(I, d, f, u, v)
        miss = abs(end - v1)
        miss_sampled = abs(_end_speed(I, d, f, u_sampled, v) - v1)
        v_b = _balance(d, f, u, v1, math.copysign(1.0, a))
        assert miss <= abs(v_b - v1) * (1.0 + 1e-9) + 1e-15, (q, v, a, miss, v_b)
        assert miss <= miss_sampled * (1.0 + 1e-9) + 1e-15, (q, v, a, miss, miss_sampled)
        tau = I / (d + f / VS / math.cosh(v1 / VS) ** 2)
        if DT / tau > 10.0 and DT * abs(a) > 1e-6:
            assert miss < 0.1 * DT * abs(a) and miss_sampled > 0.5 * DT * abs(a), (q, v, a, miss, miss_sampled)


@pytest.mark.parametrize('backend', ['compiled', 'general'])
@pytest.mark.slow
def test_one_joint_law_on_every_backend(tmp_path, backend):
    """The compiled program and the general backend give the one-joint law too, equal to the reference's,
    with friction and without."""
    if backend == 'compiled' and not jit.AVAILABLE:
        pytest.skip('numba not installed')
    for I, d, f in (JOINTS[0], JOINTS[2]):  # damping and friction (two solves), damping alone (one)
        ref = _rotor(tmp_path, I, d, f, backend='reference')
        other = _rotor(tmp_path, I, d, f, backend=backend)
        for q, v in STATES:
            u = other.step(np.array([q]), np.array([v]), 0.0).effort[0]
            assert u == pytest.approx(ref.step(np.array([q]), np.array([v]), 0.0).effort[0], rel=1e-9, abs=1e-12)


@pytest.mark.slow
def test_effort_is_continuous_through_rest(tmp_path):
    """Through q' = 0, where the friction's slope is steepest (f / v_s), the effort changes by at most that
    slope (plus the damping and the inertia's share) times the speed step: no jump, no bang-bang."""
    I, d, f = JOINTS[0]
    ctrl = _rotor(tmp_path, I, d, f)
    speeds = np.linspace(-0.03, 0.03, 6001)
    u = np.array([ctrl.step(np.array([1e-3]), np.array([v]), 0.0).effort[0] for v in speeds])
    lipschitz = (f / VS) * 1.0 + d + (I + DT * d) * 40.0 + 1.0
    assert np.abs(np.diff(u)).max() <= lipschitz * (speeds[1] - speeds[0])


def test_period_mass_and_friction_change():
    rng = np.random.default_rng(5)
    n = 6
    d, f = rng.uniform(0.0, 3.0, n), rng.uniform(0.0, 2.0, n)
    f[2] = 0.0
    diss = period_dissipation(DT, d, f, VS)
    X = rng.normal(size=(n, n))
    M = X @ X.T + np.eye(n)
    np.testing.assert_array_equal(period_mass(M, diss), M + DT * np.diag(d))
    qd, qdd = rng.normal(size=n) * 0.02, rng.normal(size=n) * 30.0
    want = f * (np.tanh((qd + DT * qdd) / VS) - np.tanh(qd / VS))
    np.testing.assert_allclose(friction_change(qd, qdd, diss), want, rtol=1e-14, atol=1e-15)
    assert np.all(np.abs(friction_change(qd, 1e9 * qdd, diss)) <= 2.0 * f)  # a load, never a slope times q''
    assert period_dissipation(DT, np.zeros(n), np.zeros(n), VS) is None
    assert not period_dissipation(DT, d, np.zeros(n), VS).has_friction


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
def test_compiled_twins_equal_the_numpy_functions():
    from uk_controller.kernels.rows import friction_load, period_mass_lower

    rng = np.random.default_rng(6)
    for n in (1, 3, 7):
        d, f = rng.uniform(0.0, 3.0, n), rng.uniform(0.0, 2.0, n)
        diss = period_dissipation(DT, d, f, VS)
        X = rng.normal(size=(n, n))
        M = X @ X.T + np.eye(n)
        Md = np.zeros((n, n))
        period_mass_lower(M, diss.dt_damping, Md)
        np.testing.assert_array_equal(np.tril(Md), np.tril(period_mass(M, diss)))
        qd, qdd, h = rng.normal(size=n) * 0.02, rng.normal(size=n) * 30.0, rng.normal(size=n)
        hf = np.zeros(n)
        friction_load(qd, qdd, h, DT, VS, diss.friction, hf)
        # numba's tanh and NumPy's may differ in the last bit
        np.testing.assert_allclose(hf, h + friction_change(qd, qdd, diss), rtol=1e-13, atol=1e-14)


@pytest.mark.slow
def test_no_dissipation_no_change():
    """A robot without damping or friction has no dissipation step (its control step is the plain one); with
    control.friction_compensation false only the damping is taken over the period."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.files.parameter_file import load_config
    from uk_controller.robots import load_robot, setup_from_settings
    from uk_controller.settings.resolve import resolve

    assert ControllerCore(load_robot('scara')).dissipation is None
    on = ControllerCore(load_robot(MIMIC))
    assert on.dissipation.has_friction and on.dissipation.has_damping and on.dissipation.dt == on.dt
    params = load_config(MIMIC)[0]
    params.setdefault('control', {}).update(friction_compensation=False)
    off = ControllerCore(setup_from_settings(resolve(MIMIC, params=params)))
    assert off.dissipation.has_damping and not off.dissipation.has_friction


def _agree(setup, states, atol):
    from uk_controller.control.controller import ControllerCore

    ctrls = {b: ControllerCore(setup, backend=b) for b in ('compiled', 'reference', 'general')}
    assert ctrls['compiled'].dissipation is not None
    for k, (q, qd) in enumerate(states):
        efforts = {b: c.step(q, qd, 0.01 * k).effort.copy() for b, c in ctrls.items()}
        scale = max(1.0, np.abs(efforts['reference']).max())
        for b in ('compiled', 'general'):
            np.testing.assert_allclose(efforts[b], efforts['reference'], rtol=0, atol=atol * scale, err_msg=b)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
@pytest.mark.slow
def test_backends_agree_on_a_gripper_with_damping_and_friction():
    """The mimic gripper: a passive row, friction on the passive finger too (its load reaches the motors
    through the closure)."""
    from uk_controller.robots import load_robot

    setup = load_robot(MIMIC)
    rng = np.random.default_rng(7)
    n = setup.model.n
    states = [(setup.q0 + rng.normal(size=n) * 0.05, rng.normal(size=n) * 0.02) for _ in range(20)]
    _agree(setup, states, 1e-7)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
@pytest.mark.slow
def test_backends_agree_on_a_wheel_arm_with_its_limit_stage(tmp_path):
    """The xArm7 of example-robot-data (damping 2-10, friction 1 per joint) far from its target: efforts
    beyond their limits, so the joint-limit stage runs in both solves."""
    sys.path.insert(0, str(ROOT / 'test'))
    import arm_starts

    if not arm_starts.available():
        pytest.skip('example-robot-data not installed')
    from uk_controller.kernels.codes import INFO_LIMIT_ITERATIONS
    from uk_controller.robots import load_robot

    case = arm_starts.draw_case('xarm7', 1, 'pose')
    path = tmp_path / 'xarm7.yaml'
    path.write_text(arm_starts.setup_yaml(case))
    setup = load_robot(path)
    rng = np.random.default_rng(8)
    states = [(case.q0 + rng.normal(size=7) * 0.3, rng.normal(size=7) * (0.02 if k % 2 else 1.0)) for k in range(30)]
    _agree(setup, states, 1e-7)
    from uk_controller.control.controller import ControllerCore

    ctrl = ControllerCore(setup, backend='compiled')
    ran = 0
    for k, (q, qd) in enumerate(states):
        ctrl.step(q, qd, 0.01 * k)
        ran += ctrl.backend.info[INFO_LIMIT_ITERATIONS] > 0
    assert ran > 0  # the stage ran in some of the states compared
