"""Coulomb friction over the control period (core/implicit_friction.py): the second solve on M + dt diag(c).

Independent checks: the secant slope against the friction law itself; on one joint, the speed the plant
reaches after a period (integrated by scipy's solve_ivp, the effort held) against the speed the controller
asked for, with the explicit compensation and with the secant; the backends agree on a robot with friction;
a robot without friction has no second solve.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from uk_controller.core.implicit_friction import friction_mass, secant_slopes
from uk_controller.kernels import jit

ROOT = Path(__file__).resolve().parent.parent
MIMIC = ROOT / 'test' / 'data' / 'mimic_gripper.yaml'


def test_secant_slope_is_the_friction_difference_over_the_speed_change():
    rng = np.random.default_rng(3)
    f, vs, dt = rng.uniform(0.1, 2.0, 6), rng.uniform(0.005, 0.05, 6), 1e-3
    qd, qdd = rng.normal(size=6) * 0.05, rng.normal(size=6) * 30.0
    c = secant_slopes(qd, qdd, f, vs, dt)
    law = lambda v: f * np.tanh(v / vs)      # noqa: E731
    np.testing.assert_allclose(c * dt * qdd, law(qd + dt * qdd) - law(qd), rtol=1e-12, atol=1e-15)
    assert np.all(c >= 0.0)
    # at q'' = 0 the tangent, and the secant tends to it
    c0 = secant_slopes(qd, np.zeros(6), f, vs, dt)
    np.testing.assert_allclose(c0, f / vs / np.cosh(qd / vs) ** 2, rtol=1e-12)
    np.testing.assert_allclose(secant_slopes(qd, np.full(6, 1e-6), f, vs, dt), c0, rtol=1e-6)
    assert not secant_slopes(qd, qdd, np.zeros(6), vs, dt).any()


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
def test_compiled_secant_equals_the_numpy_reference():
    from uk_controller.kernels.rows import friction_secant
    rng = np.random.default_rng(4)
    for _ in range(200):
        f, vs, v, a = rng.uniform(0.0, 2.0), rng.uniform(0.005, 0.05), rng.normal() * 0.1, rng.normal() * 50.0
        a = 0.0 if rng.random() < 0.1 else a
        ref = secant_slopes(np.array([v]), np.array([a]), np.array([f]), np.array([vs]), 1e-3)[0]
        # tanh of numba and of NumPy may differ in the last bit; the difference of two of them is then relative
        # to f / dv, not to the slope
        assert friction_secant(f, vs, v, 1e-3 * a) == pytest.approx(ref, rel=1e-12, abs=1e-15 * f / max(abs(1e-3 * a), 1e-300))


@pytest.mark.parametrize('v0, ratio', [(0.0, 0.45), (0.004, 0.45), (-0.02, 0.8), (0.3, 1.0)])
def test_one_joint_reaches_the_speed_asked_for(v0, ratio):
    """I q'' = u - f tanh(q'/v_s), u held over dt = 1 ms (solve_ivp, tight tolerances): the controller asks
    for q'' = a. With the friction compensated at the sampled speed the joint ends the period far from
    q' + dt a near rest (the friction's time constant I v_s / f = 0.1 ms); with the second solve on I + dt c
    the effort is I a + f tanh((q' + dt a) / v_s) and the joint ends closer to it: at most `ratio` times the
    explicit error (the same where the friction is saturated over the whole period)."""
    from scipy.integrate import solve_ivp
    I, f, vs, dt = 0.01, 1.0, 0.01, 1e-3
    step = (dt, np.array([f]), np.array([vs]))
    for a in (-40.0, 5.0, 25.0):
        u_explicit = I * a + f * np.tanh(v0 / vs)
        # the two-pass law on one joint: (I + dt c) a = u - f tanh(v0 / vs), c the secant at the explicit a
        Mc = friction_mass(np.array([[I]]), np.array([v0]), np.array([a]), step)
        u_implicit = Mc[0, 0] * a + f * np.tanh(v0 / vs)
        assert u_implicit == pytest.approx(I * a + f * np.tanh((v0 + dt * a) / vs), rel=1e-12)
        ends = []
        for u in (u_explicit, u_implicit):
            sol = solve_ivp(lambda t, v: [(u - f * np.tanh(v[0] / vs)) / I], (0.0, dt), [v0], method='Radau',
                            rtol=1e-10, atol=1e-12)
            ends.append(sol.y[0, -1])
        want = v0 + dt * a
        assert abs(ends[1] - want) <= ratio * abs(ends[0] - want) + 1e-9


def test_no_friction_no_second_solve():
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot
    assert ControllerCore(load_robot('scara')).friction_step is None
    ctrl = ControllerCore(load_robot(MIMIC))
    dt, f, vs = ctrl.friction_step
    assert dt == ctrl.dt and np.any(f > 0.0) and np.all(vs > 0.0)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
def test_backends_agree_on_a_robot_with_friction():
    """The compiled program (second solve inside the fused kernel), the reference backend and the general
    backend (second solve in Python) give the same efforts at random states of the mimic gripper."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot
    setup = load_robot(MIMIC)
    ctrls = {b: ControllerCore(setup, backend=b) for b in ('compiled', 'reference', 'general')}
    assert ctrls['compiled'].backend.name == 'compiled'
    rng = np.random.default_rng(6)
    n = ctrls['compiled'].n
    for k in range(20):
        q = setup.q0 + rng.normal(size=n) * 0.05
        qd = rng.normal(size=n) * 0.02
        efforts = {b: c.step(q, qd, 0.01 * k).effort.copy() for b, c in ctrls.items()}
        scale = max(1.0, np.abs(efforts['reference']).max())
        for b in ('compiled', 'general'):
            np.testing.assert_allclose(efforts[b], efforts['reference'], rtol=0, atol=1e-7 * scale, err_msg=b)
