"""The saturated Baumgarte term and the null-space metric that damps light joints.

``correction(kd, kp, phi, phi', v) = kd phi' + kd sat_v(kp phi / kd)``: the linear term inside the cap
(bit for bit), an approach at most at speed v outside it, and still convergent (a Lyapunov function
decreasing as ``-kd phi'^2``). The null-space term in the identity metric is the minimum-norm least
squares of ``|N B du - (a_p - q''_task)|`` over the efforts that leave the task rows alone, computed here
independently from a basis of null(G) and numpy's lstsq.
"""

from __future__ import annotations

import numpy as np
import pytest

from uk_controller.core import uk
from uk_controller.core.baumgarte import correction
from uk_controller.kernels import jit

needs_numba = pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')


def test_inside_the_cap_the_term_is_the_linear_one_bit_for_bit():
    rng = np.random.default_rng(3)
    kd, kp = 40.0, 400.0
    phi = rng.uniform(-0.09, 0.09, 200)  # |kp phi| <= kd * 1.0
    phid = rng.normal(size=200)
    assert np.array_equal(correction(kd, kp, phi, phid, 1.0), kd * phid + kp * phi)
    # no cap: any error
    phi = rng.normal(size=200) * 10.0
    assert np.array_equal(correction(kd, kp, phi, phid, np.inf), kd * phid + kp * phi)


def test_outside_the_cap_the_stiffness_term_is_kd_times_the_speed():
    kd, kp, v = 40.0, 400.0, 0.5
    phi = np.array([3.0, -3.0, 0.05, -0.05])
    out = correction(kd, kp, phi, np.zeros(4), v)
    assert np.allclose(out, [kd * v, -kd * v, kp * 0.05, -kp * 0.05], rtol=0, atol=1e-12)


def test_first_order_rows_and_zero_damping_are_not_capped():
    phi = np.array([5.0, -5.0])
    out = correction(np.array([0.0, 0.0]), np.array([20.0, 20.0]), phi, np.zeros(2), 0.1)
    assert np.array_equal(out, 20.0 * phi)


@needs_numba
@pytest.mark.slow
def test_kernel_twin_equals_the_numpy_term():
    from uk_controller.kernels.servo import correction as kcorrection

    rng = np.random.default_rng(5)
    for _ in range(300):
        kd, kp = rng.uniform(0.0, 50.0), rng.uniform(0.0, 900.0)
        if rng.random() < 0.2:
            kd = 0.0
        phi, phid, v = rng.normal() * 3.0, rng.normal() * 3.0, rng.choice([0.1, 1.0, np.inf])
        assert kcorrection(kd, kp, phi, phid, v) == correction(np.array(kd), np.array(kp), phi, phid, v)


@pytest.mark.parametrize('phi0', [3.0, -2.5, 0.4, np.pi])
def test_saturated_error_dynamics_converge_at_bounded_speed_with_a_decreasing_lyapunov_function(phi0):
    """``phi'' = -correction``: from rest, |phi'| never exceeds v; V = phi'^2/2 + kd int sat never rises;
    phi -> 0 (integrated with a fine RK4, independent of the controller)."""
    w, v = 15.0, 0.5
    kd, kp = 2.0 * w, w * w

    def sat_integral(x):  # kd * int_0^x sat(kp s / kd) ds
        knee = kd * v / kp
        ax = abs(x)
        inner = 0.5 * kp * min(ax, knee) ** 2
        return inner + kd * v * max(ax - knee, 0.0)

    def f(x):
        return np.array([x[1], -float(correction(kd, kp, x[0], x[1], v))])

    x, dt = np.array([phi0, 0.0]), 1e-4
    energy = [0.5 * x[1] ** 2 + sat_integral(x[0])]
    for _ in range(int(12.0 / dt)):
        k1 = f(x)
        k2 = f(x + 0.5 * dt * k1)
        k3 = f(x + 0.5 * dt * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        assert abs(x[1]) <= v * (1.0 + 1e-9)
        energy.append(0.5 * x[1] ** 2 + sat_integral(x[0]))
    energy = np.array(energy)
    assert np.all(np.diff(energy) <= 1e-9 * energy[0])
    assert abs(x[0]) < 1e-6 and abs(x[1]) < 1e-5
    # the linear law from the same start asks for kp * phi0 at t = 0; the saturated one for kd v
    assert abs(correction(kd, kp, phi0, 0.0, v)) <= kd * v + 1e-12 < kp * abs(phi0)


def _random_problem(rng, n=7, p=7, ms=3):
    A = rng.normal(size=(n, n))
    M = A @ A.T + n * np.eye(n)
    M[-1, :] *= 1e-3  # a light last joint
    M[:, -1] *= 1e-3
    M[-1, -1] += 1e-3
    NB = np.linalg.solve(M, np.eye(n)[:, :p])
    As = rng.normal(size=(ms, n))
    return M, NB, As


@pytest.mark.parametrize('seed', range(6))
def test_joint_metric_du_is_the_minimum_norm_least_squares_in_the_null_space(seed):
    rng = np.random.default_rng(seed)
    M, NB, As = _random_problem(rng)
    G = As @ NB
    qt, ap = rng.normal(size=7), rng.normal(size=7)
    du, motion, internal = uk.redundancy_effort(M, NB, G, qt, ap, metric='joint')
    # independent: Z = basis of null(G) (scipy-free: SVD of G), z = lstsq(NB Z, ap - qt), du = Z z
    _, s, Vt = np.linalg.svd(G)
    Z = Vt[np.sum(s > 1e-10 * s[0]) :].T
    z, *_ = np.linalg.lstsq(NB @ Z, ap - qt, rcond=None)
    assert np.allclose(du, Z @ z, rtol=0, atol=1e-9 * np.linalg.norm(du))
    assert np.linalg.norm(G @ du) <= 1e-10 * np.linalg.norm(G) * np.linalg.norm(du)  # the task rows never feel it
    assert motion == 4 and internal == 0


def test_joint_metric_asks_more_of_a_light_joint_than_the_mass_metric():
    """The posture acceleration of a light joint is met far better in the identity metric."""
    rng = np.random.default_rng(11)
    M, NB, As = _random_problem(rng)
    G = As @ NB
    qt = np.zeros(7)
    ap = np.zeros(7)
    ap[-1] = -5.0  # brake the light joint
    err = {}
    for metric in ('mass', 'joint'):
        du, *_ = uk.redundancy_effort(M, NB, G, qt, ap, metric=metric)
        err[metric] = abs((NB @ du)[-1] - ap[-1])
    assert err['joint'] < 0.5 * err['mass']


@needs_numba
@pytest.mark.parametrize('joint_metric', [False, True])
@pytest.mark.slow
def test_compiled_servo_solve_with_speeds_and_metric_equals_the_numpy_backend(joint_metric):
    rng = np.random.default_rng(2)
    n, p, ms, sec = 6, 6, 3, 6
    for _ in range(20):
        A = rng.normal(size=(n, n))
        M = A @ A.T + n * np.eye(n)
        B = np.eye(n)
        As = np.vstack((rng.normal(size=(ms, n)), np.eye(n)))
        bs, phis, phids = rng.normal(size=ms + sec), rng.normal(size=ms + sec) * 2.0, rng.normal(size=ms + sec)
        gains = np.vstack((np.full(ms + sec, 30.0), np.full(ms + sec, 225.0)))
        h = rng.normal(size=n)
        out = []
        for backend in ('numba', 'numpy'):
            s = uk.ServoSolver(
                n,
                p,
                0,
                ms + sec,
                backend=backend,
                secondary=sec,
                task_speed=0.3,
                posture_speed=0.2,
                joint_metric=joint_metric,
            )
            s.solve_rows(
                np.tril(M),
                np.zeros(n),
                h,
                B,
                As,
                bs,
                phis,
                phids,
                np.zeros((0, n)),
                np.zeros(0),
                np.zeros(0),
                np.zeros(0),
                gains,
            )
            out.append(s.u.copy())
        assert np.allclose(out[0], out[1], rtol=1e-9, atol=1e-9 * np.abs(out[1]).max())
