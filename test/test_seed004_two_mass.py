"""Seed 004 section IV: two-mass spring, force F on mass 1 only (underactuated), servo
constraint x2 - x1 = 2 l (eq 44, second-order form eq 45).

The closed form of the servo control is eq 47, F = -(1 + m1/m2) k (x2 - x1 - l). On the
constraint the spring is stretched by l, so both masses move with the constant acceleration
-k l / m2: x_i(t) = x_i(0) + v(0) t - k l t^2 / (2 m2).
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from uk_controller.core import uk
from uk_controller.core.baumgarte import Baumgarte

B = np.array([[1.0], [0.0]])  # eq 41: Q_s^c = [1, 0]^T F
A = np.array([[-1.0, 1.0]])  # eq 45


def two_mass(x, m1, m2, k, l):
    """Eqs 37–41: M = diag(m1, m2) (eq 39 prints x2 for m2), spring force as the given force."""
    stretch = x[1] - x[0] - l
    return np.diag([m1, m2]), np.array([k * stretch, -k * stretch])


def eq47(x, m1, m2, k, l):
    return -(1.0 + m1 / m2) * k * (x[1] - x[0] - l)


def test_servo_control_equals_eq47_at_random_states():
    rng = np.random.default_rng(47)
    worst = 0.0
    for _ in range(200):
        m1, m2, k, l = rng.uniform(0.1, 10.0, 4)
        x = rng.uniform(-5, 5, 2)
        M, Q = two_mass(x, m1, m2, k, l)
        res = uk.servo_control(M, Q, B, A, np.zeros(1))
        # C B_bar = -1/m1 != 0: controllable (section IV), rank 1, consistent
        assert res.rank == 1 and res.consistent
        F = eq47(x, m1, m2, k, l)
        worst = max(worst, abs(res.u[0] - F) / max(1.0, abs(F)))
        assert abs(A @ res.qdd) < 1e-12 * max(1.0, abs(F))
    print(f'\nseed 004 two-mass: max rel. |u - eq 47| over 200 random states {worst:.2e}')
    assert worst < 1e-12


def simulate(m1, m2, k, l, s0, T, gains=Baumgarte.none()):
    def rhs(t, s):
        x, xd = s[:2], s[2:]
        M, Q = two_mass(x, m1, m2, k, l)
        phi, phidot = x[1] - x[0] - 2 * l, xd[1] - xd[0]
        b = np.array([-float(gains.kd) * phidot - float(gains.kp) * phi])
        u = uk.servo_control(M, Q, B, A, b).u
        return np.concatenate((xd, np.linalg.solve(M, Q + B @ u)))

    t = np.linspace(0, T, 101)
    sol = solve_ivp(rhs, (0, T), s0, t_eval=t, method='DOP853', rtol=1e-11, atol=1e-12)
    assert sol.success
    return t, sol


def test_simulation_keeps_x2_minus_x1_equal_2l():
    m1, m2, k, l = 1.0, 2.0, 10.0, 0.5
    v0 = 0.3
    s0 = np.array([0.0, 2 * l, v0, v0])  # started on the constraint
    t, sol = simulate(m1, m2, k, l, s0, 5.0)
    gap = sol.y[1] - sol.y[0] - 2 * l
    print(f'\nseed 004 two-mass: max |x2 - x1 - 2l| over 5 s {np.abs(gap).max():.2e}')
    assert np.max(np.abs(gap)) < 1e-9
    # closed-form motion on the constraint (uniform acceleration -k l / m2)
    x1 = v0 * t - k * l * t**2 / (2 * m2)
    assert np.allclose(sol.y[0], x1, atol=1e-8) and np.allclose(sol.y[1], x1 + 2 * l, atol=1e-8)
    # and the control along it is eq 47's constant value -(1 + m1/m2) k l
    x = sol.y[:2, -1]
    M, Q = two_mass(x, m1, m2, k, l)
    assert uk.servo_control(M, Q, B, A, np.zeros(1)).u[0] == pytest.approx(-(1 + m1 / m2) * k * l)


def test_simulation_off_the_constraint_converges_with_baumgarte():
    """Started with x2 - x1 = 2l + 0.1, the stabilized servo constraint (seed 004 III.B,
    phi'' + 2 a phi' + b^2 phi = 0) brings the gap back along the closed form."""
    m1, m2, k, l = 1.0, 2.0, 10.0, 0.5
    gains = Baumgarte.squared(2.0, 2.0)  # critically damped, roots -2, -2
    s0 = np.array([0.0, 2 * l + 0.1, 0.0, 0.0])
    t, sol = simulate(m1, m2, k, l, s0, 5.0, gains)
    gap = sol.y[1] - sol.y[0] - 2 * l
    assert np.allclose(gap, 0.1 * (1 + 2 * t) * np.exp(-2 * t), atol=1e-8)
