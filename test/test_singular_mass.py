"""Singular (positive semi-definite) mass matrices: seed 002 eqs 37–41 and eqs 42–43.

Checked against: a pendulum written in redundant coordinates (closed-form
acceleration and energy conservation), the non-singular bordered (KKT)
system solved directly (seed 002 eq 23), the UK equation when M is positive
definite, and the defining work property of non-ideal constraints.
"""

import zlib

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from uk_controller.core import uk
from uk_controller.core.pinv import get_pinv
from uk_controller.core.singular_mass import (
    acceleration_is_determined,
    acceleration_pseudoinverse_bordered,
    acceleration_udwadia_phohomsiri,
    constraint_force_singular,
)

FORMS = {'eq41': acceleration_pseudoinverse_bordered, 'eq43': acceleration_udwadia_phohomsiri}
G, L, MASS = 9.81, 0.7, 1.3


def pendulum(state):
    """Point mass on a circle, q = (x, y, theta): theta is redundant and carries no inertia.

    Constraints x = L sin(theta), y = -L cos(theta), twice differentiated:
    x'' - L cos(th) th'' = -L sin(th) th'^2,  y'' - L sin(th) th'' = L cos(th) th'^2.
    """
    x, y, th, xd, yd, thd = state
    M = np.diag([MASS, MASS, 0.0])
    F = np.array([0.0, -MASS * G, 0.0])
    A = np.array([[1.0, 0.0, -L * np.cos(th)], [0.0, 1.0, -L * np.sin(th)]])
    gamma = np.array([-L * np.sin(th) * thd**2, L * np.cos(th) * thd**2])
    return M, F, A, gamma


def pendulum_state(th, thd):
    return np.array([L * np.sin(th), -L * np.cos(th), th, L * np.cos(th) * thd, L * np.sin(th) * thd, thd])


@pytest.mark.parametrize('form', FORMS)
def test_redundant_pendulum_closed_form(form):
    rng = np.random.default_rng(1)
    for _ in range(20):
        th, thd = rng.uniform(-3, 3), rng.uniform(-4, 4)
        M, F, A, gamma = pendulum(pendulum_state(th, thd))
        assert np.linalg.matrix_rank(M) == 2 and acceleration_is_determined(M, A)
        qdd = FORMS[form](M, F, A, gamma, rcond=1e-12)
        thdd = -(G / L) * np.sin(th)  # simple pendulum
        expected = [
            L * np.cos(th) * thdd - L * np.sin(th) * thd**2,
            L * np.sin(th) * thdd + L * np.cos(th) * thd**2,
            thdd,
        ]
        assert np.allclose(qdd, expected, atol=1e-10, rtol=1e-10)
        # the constraint force is the rod tension: along the rod, no work on v in null(A)
        Fc = constraint_force_singular(M, F, qdd)
        v = np.array([L * np.cos(th), L * np.sin(th), 1.0])  # A v = 0
        assert abs(v @ Fc) < 1e-9


@pytest.mark.parametrize('form', FORMS)
def test_redundant_pendulum_energy(form):
    """Simulated 3 s in redundant coordinates: energy and the constraints are kept."""

    def rhs(t, s):
        M, F, A, gamma = pendulum(s)
        return np.concatenate((s[3:], FORMS[form](M, F, A, gamma, rcond=1e-12)))

    s0 = pendulum_state(1.2, 0.5)
    sol = solve_ivp(rhs, (0.0, 3.0), s0, method='DOP853', rtol=1e-10, atol=1e-12)
    assert sol.success
    x, y, th, xd, yd, thd = sol.y
    energy = 0.5 * MASS * (xd**2 + yd**2) + MASS * G * y
    assert np.max(np.abs(energy - energy[0])) < 1e-7 * abs(energy[0]) + 1e-8
    assert np.max(np.hypot(x - L * np.sin(th), y + L * np.cos(th))) < 1e-7


def random_psd(rng, n, rank):
    X = rng.standard_normal((n, rank))
    return X @ X.T


@pytest.mark.parametrize('form', FORMS)
@pytest.mark.parametrize('pinv_name', ['svd', 'varga', 'greville', 'householder', 'mgs'])
def test_singular_mass_matches_bordered_system(form, pinv_name):
    """Singular M, [M; A] of full rank: the KKT matrix of seed 002 eq 23 is invertible."""
    rng = np.random.default_rng(zlib.crc32(repr((form, pinv_name)).encode()))  # stable across runs
    worst = 0.0
    for n, rank, m in [(6, 4, 3), (5, 2, 3), (8, 5, 4), (4, 1, 3)]:
        M = random_psd(rng, n, rank)
        A = rng.standard_normal((m, n))
        F, gamma = rng.standard_normal(n), rng.standard_normal(m)
        assert acceleration_is_determined(M, A)
        K = np.block([[M, A.T], [A, np.zeros((m, m))]])
        qdd_ref = np.linalg.solve(K, np.concatenate((F, gamma)))[:n]
        qdd = FORMS[form](M, F, A, gamma, rcond=1e-11, pinv=get_pinv(pinv_name))
        worst = max(worst, np.max(np.abs(qdd - qdd_ref)) / (1 + np.max(np.abs(qdd_ref))))
    assert worst < 1e-8


@pytest.mark.parametrize('form', FORMS)
def test_positive_definite_mass_equals_uk(form):
    """With M > 0 both forms give the UK acceleration (seed 000 eq 9), also for rank-deficient A."""
    rng = np.random.default_rng(5)
    for n, m, r in [(5, 3, 3), (6, 4, 2), (4, 4, 4)]:
        X = rng.standard_normal((n, n))
        M = X @ X.T + n * np.eye(n)
        A = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
        F = rng.standard_normal(n)
        gamma = A @ rng.standard_normal(n)  # consistent
        qdd = FORMS[form](M, F, A, gamma, rcond=1e-10)
        ref = uk.constrained_acceleration(M, F, A, gamma)
        assert np.allclose(qdd, ref, atol=1e-10 * (1 + np.abs(ref).max()))


def test_udwadia_phohomsiri_nonideal_work():
    """Eq 43 with C: A q'' = gamma and v^T (M q'' - F) = v^T C for every v with A v = 0."""
    rng = np.random.default_rng(9)
    n, m = 6, 2
    M = random_psd(rng, n, 5)
    A = rng.standard_normal((m, n))
    F, C, gamma = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(m)
    qdd = acceleration_udwadia_phohomsiri(M, F, A, gamma, C=C)
    assert np.allclose(A @ qdd, gamma, atol=1e-12)
    _, _, Vt = np.linalg.svd(A)
    null = Vt[m:].T  # basis of null(A)
    assert np.allclose(null.T @ (M @ qdd - F - C), 0.0, atol=1e-10)
    # positive definite M: same as UK with seed 004 eq 12's non-ideal force
    M = M + np.eye(n)
    qdd = acceleration_udwadia_phohomsiri(M, F, A, gamma, C=C)
    total = F + uk.constraint_force(M, F, A, gamma) + uk.nonideal_constraint_force(M, A, C)
    assert np.allclose(qdd, np.linalg.solve(M, total), atol=1e-10)


def test_indeterminate_acceleration_and_eta():
    """If M vanishes on part of null(A), q'' is not unique: the check says so, eta moves it."""
    M = np.diag([1.0, 0.0, 0.0])
    A = np.array([[0.0, 1.0, 0.0]])  # leaves q3 unconstrained and massless
    F, gamma = np.array([2.0, 0.0, 0.0]), np.array([0.5])
    assert not acceleration_is_determined(M, A)
    base = acceleration_udwadia_phohomsiri(M, F, A, gamma)
    moved = acceleration_udwadia_phohomsiri(M, F, A, gamma, eta=np.array([0.0, 0.0, 3.0]))
    assert np.allclose(base, [2.0, 0.5, 0.0]) and np.allclose(moved, [2.0, 0.5, 3.0])
    assert np.allclose(acceleration_pseudoinverse_bordered(M, F, A, gamma), base)
    # determinate case: eta has no effect
    M = np.diag([1.0, 0.0, 2.0])
    assert acceleration_is_determined(M, A)
    a = acceleration_udwadia_phohomsiri(M, F, A, gamma)
    b = acceleration_udwadia_phohomsiri(M, F, A, gamma, eta=np.array([5.0, -1.0, 3.0]))
    assert np.allclose(a, b) and np.allclose(a, [2.0, 0.5, 0.0])
