"""Joint position and speed limits as bounds on the joint accelerations (core/joint_limits.py).

Independent checks: a joint driven as hard as the bounds allow (a double integrator at the upper or
lower bound every period) never leaves its range by more than the braking lag and never exceeds its speed
limit; the bounds are continuous in the state; the compiled twin equals the NumPy reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from uk_controller.core.joint_limits import acceleration_bounds, limit_table
from uk_controller.kernels import jit

needs_numba = pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')


def _table():
    lower = np.array([-1.0, -2.9, -np.inf, 0.0])
    upper = np.array([1.5, 2.9, np.inf, 0.4])
    velocity = np.array([2.0, 3.0, 4.0, 0.0])  # 0: no speed limit
    return limit_table(lower, upper, velocity, margin=0.02, velocity_scale=0.9)


def test_table_shrinks_ranges_and_scales_speeds():
    t = _table()
    assert np.allclose(t[0], [-1.0 + 0.05, -2.9 + 0.116, -np.inf, 0.008])
    assert np.allclose(t[1], [1.5 - 0.05, 2.9 - 0.116, np.inf, 0.4 - 0.008])
    assert np.allclose(t[2], [1.8, 2.7, 3.6, np.inf])


def test_inverted_range_is_refused():
    with pytest.raises(ValueError, match='inverted'):
        limit_table([1.0], [0.5], [1.0], margin=0.0, velocity_scale=1.0)


@pytest.mark.parametrize('side', ['upper', 'lower'])
@pytest.mark.parametrize('seed', range(5))
def test_driving_at_the_bound_never_leaves_the_range_nor_exceeds_the_speed(side, seed):
    """q'' = hi (or lo) every period of 1 ms from random starts inside the range: the joint runs at its
    speed limit, brakes and stops at its limit (overshoot below the braking lag a_b T^2 / 2 scale)."""
    rng = np.random.default_rng(seed)
    t = _table()
    brake, tc, dt = 10.0, 0.02, 1e-3
    lo_lim, hi_lim, vmax = t
    finite = np.isfinite(lo_lim)
    q = np.where(finite, rng.uniform(np.where(finite, lo_lim, 0.0), np.where(finite, hi_lim, 1.0)), 0.0)
    qd = rng.uniform(-1.0, 1.0, 4) * np.where(np.isfinite(vmax), vmax, 1.0)
    worst_speed = np.zeros(4)
    worst_over = np.zeros(4)
    for _ in range(4000):
        lo, hi = acceleration_bounds(q, qd, t, brake, tc)
        a = hi if side == 'upper' else lo
        qd = qd + dt * a
        q = q + dt * qd
        worst_speed = np.maximum(worst_speed, np.abs(qd) - vmax)
        over = np.where(np.isfinite(hi_lim), np.maximum(q - hi_lim, lo_lim - q), 0.0)
        worst_over = np.maximum(worst_over, over)
    # the speed follows its envelope from inside: at most the initial excess, decaying
    assert np.all(worst_speed <= np.maximum(0.0, np.abs(qd) - vmax) + 1e-9)
    # position: past the shrunk limit by less than the margin the table took off (2 % of the range)
    ranges = np.array([2.5, 5.8, np.inf, 0.4])
    assert np.all(worst_over[np.isfinite(ranges)] < 0.02 * ranges[np.isfinite(ranges)])
    # and at rest at the end against the limit it was pushed to
    assert np.all(np.abs(qd[np.isfinite(ranges)]) < 1e-3)


def test_bounds_are_continuous_in_the_state():
    t = _table()
    rng = np.random.default_rng(1)
    for _ in range(200):
        q = rng.uniform(-3.0, 3.0, 4)
        qd = rng.uniform(-4.0, 4.0, 4)
        dq, dv = rng.normal(size=4) * 1e-9, rng.normal(size=4) * 1e-9
        lo0, hi0 = acceleration_bounds(q, qd, t, 10.0, 0.02)
        lo1, hi1 = acceleration_bounds(q + dq, qd + dv, t, 10.0, 0.02)
        # sqrt(2 a d) has slope sqrt(a / (2 d)): the change stays small for a 1e-9 step unless d ~ 1e-9
        assert np.all(np.abs(hi1 - hi0) < 1e-2) and np.all(np.abs(lo1 - lo0) < 1e-2)
        assert np.all(lo0 <= hi0)


def test_a_start_past_a_limit_is_pulled_back():
    t = _table()
    q = np.array([1.6, 0.0, 0.0, 0.2])  # joint 0 past its upper limit 1.45
    lo, hi = acceleration_bounds(q, np.zeros(4), t, 10.0, 0.02)
    assert hi[0] < 0.0  # must accelerate back inside
    assert lo[0] <= hi[0]


@needs_numba
@pytest.mark.slow
def test_compiled_bounds_equal_the_numpy_reference():
    from uk_controller.kernels.limits import acceleration_bounds as compiled

    t = _table()
    rng = np.random.default_rng(4)
    lo_c, hi_c = np.empty(4), np.empty(4)
    for _ in range(300):
        q = rng.uniform(-3.5, 3.5, 4)
        qd = rng.uniform(-5.0, 5.0, 4)
        lo, hi = acceleration_bounds(q, qd, t, 7.0, 0.015)
        compiled(q, qd, t, 7.0, 0.015, lo_c, hi_c)
        assert np.allclose(lo_c, lo, rtol=1e-14, atol=1e-12) and np.allclose(hi_c, hi, rtol=1e-14, atol=1e-12)


# ----------------------------------------------------------------------------- the bounded least squares


def _problem(rng, p=7, m=3, n=7, rank_c=None):
    C = rng.normal(size=(m, p))
    if rank_c is not None and rank_c < m:
        C = rng.normal(size=(m, rank_c)) @ rng.normal(size=(rank_c, p))
    d = rng.normal(size=m) * 5.0
    D = rng.normal(size=(n, p))
    centre = rng.normal(size=n)
    width = rng.uniform(0.1, 2.0, n)
    dlo, dhi = centre - width, centre + width
    dlo[rng.random(n) < 0.2] = -np.inf
    dhi[rng.random(n) < 0.2] = np.inf
    lim = rng.uniform(0.3, 2.0, p)
    u0 = rng.normal(size=p) * 2.0
    return C, d, D, dlo, dhi, -lim, lim, u0


def _kkt_residual(C, d, D, dlo, dhi, w, lo, hi, eps, u0, u):
    """Largest violation of the KKT conditions of the bounded problem at u (gradient on free variables,
    sign of the multipliers at the bounds, feasibility)."""
    r = D @ u
    v = np.minimum(r - dlo, 0.0) + np.maximum(r - dhi, 0.0)
    g = C.T @ (C @ u - d) + w * (D.T @ v) + eps * (u - u0)
    tol = 1e-12 * max(1.0, np.abs(u).max())
    at_lo, at_hi = u <= lo + tol, u >= hi - tol
    worst = 0.0
    worst = max(worst, np.abs(g[~at_lo & ~at_hi]).max(initial=0.0))
    worst = max(worst, np.maximum(-g[at_lo], 0.0).max(initial=0.0))  # at lo: g >= 0
    worst = max(worst, np.maximum(g[at_hi], 0.0).max(initial=0.0))  # at hi: g <= 0
    assert np.all(u >= lo - 1e-15) and np.all(u <= hi + 1e-15)
    return worst


@pytest.mark.parametrize('seed', range(12))
def test_bounded_lsq_meets_its_kkt_conditions(seed):
    from uk_controller.core.joint_limits import bounded_lsq

    rng = np.random.default_rng(seed)
    C, d, D, dlo, dhi, lo, hi, u0 = _problem(rng, rank_c=1 if seed % 3 == 0 else None)
    w, eps = 1e3, 1e-6
    u = np.empty(7)
    iterations, _ = bounded_lsq(C, d, D, dlo, dhi, w, lo, hi, eps, u0, u)
    scale = np.abs(C.T @ d).max() + w * np.abs(D).sum(axis=0).max() * 10
    assert _kkt_residual(C, d, D, dlo, dhi, w, lo, hi, eps, u0, u) <= 1e-9 * scale
    assert iterations < 100


def test_box_only_problem_equals_scipy_bvls():
    from scipy.optimize import lsq_linear

    from uk_controller.core.joint_limits import bounded_lsq

    rng = np.random.default_rng(7)
    for _ in range(20):
        C, d, D, _, _, lo, hi, u0 = _problem(rng)
        eps = 1e-4
        u = np.empty(7)
        bounded_lsq(C, d, D[:0], np.zeros(0), np.zeros(0), 0.0, lo, hi, eps, u0, u)
        A = np.vstack((C, np.sqrt(eps) * np.eye(7)))
        b = np.concatenate((d, np.sqrt(eps) * u0))
        ref = lsq_linear(A, b, bounds=(lo, hi), method='bvls', tol=1e-14).x
        assert np.allclose(u, ref, atol=1e-8)


def test_feasible_exact_u0_is_returned_unchanged():
    """u0 inside every bound and exact is the minimizer: returned, to the accuracy of the final solve on
    its piece (the same solve from any start; this task has rank 3 of 7, so the tie-break eps = 1e-9 sets
    that system's condition number, about 1e9)."""
    from uk_controller.core.joint_limits import bounded_lsq

    rng = np.random.default_rng(9)
    C, _, D, _, _, lo, hi, _ = _problem(rng)
    u0 = rng.uniform(lo * 0.5, hi * 0.5)
    d = C @ u0
    r = D @ u0
    u = np.empty(7)
    iterations, violation = bounded_lsq(C, d, D, r - 1.0, r + 1.0, 1e4, lo, hi, 1e-9, u0, u)
    condition = np.linalg.norm(C.T @ C, 2) / 1e-9
    assert np.abs(u - u0).max() <= 100.0 * condition * np.finfo(float).eps * np.abs(u0).max()
    assert violation == 0.0 and iterations == 1


def test_bounded_lsq_is_lipschitz_in_its_data():
    """No bang-bang: a small change of the task or of u0 moves the solution by a comparable amount."""
    from uk_controller.core.joint_limits import bounded_lsq

    rng = np.random.default_rng(13)
    C, d, D, dlo, dhi, lo, hi, u0 = _problem(rng)
    w, eps = 1e3, 1e-3
    u, u2 = np.empty(7), np.empty(7)
    direction = rng.normal(size=3)
    ratios = []
    for k in range(200):
        dk = d + 0.05 * k * direction
        bounded_lsq(C, dk, D, dlo, dhi, w, lo, hi, eps, u0, u)
        bounded_lsq(C, dk + 1e-6 * direction, D, dlo, dhi, w, lo, hi, eps, u0, u2)
        ratios.append(np.linalg.norm(u2 - u) / (1e-6 * np.linalg.norm(direction)))
    assert max(ratios) < 1e3 / eps**0.5


@needs_numba
@pytest.mark.parametrize('seed', range(8))
@pytest.mark.slow
def test_compiled_bounded_lsq_equals_the_numpy_reference(seed):
    from uk_controller.core.joint_limits import bounded_lsq
    from uk_controller.kernels.limits import bounded_lsq as compiled

    rng = np.random.default_rng(100 + seed)
    C, d, D, dlo, dhi, lo, hi, u0 = _problem(rng, rank_c=2 if seed % 2 else None)
    w, eps = 1e3, 1e-6
    ref, out = np.empty(7), np.empty(7)
    it_ref, viol_ref = bounded_lsq(C, d, D, dlo, dhi, w, lo, hi, eps, u0, ref)
    sc = np.full((3 * 7 + 14, 7), np.nan)
    it, viol = compiled(C, d, D, dlo, dhi, w, lo, hi, eps, u0, u0, out, sc, 0)
    assert np.allclose(out, ref, rtol=1e-9, atol=1e-10 * max(1.0, np.abs(ref).max()))
    assert abs(viol - viol_ref) <= 1e-8 * max(1.0, viol_ref)


@pytest.mark.parametrize('seed', range(8))
@pytest.mark.slow
def test_warm_start_reaches_the_same_minimizer_in_fewer_iterations(seed):
    """The minimizer is unique: from the solution of a nearby problem (the previous control step's) the
    method ends at the same point, bit for bit (the last solve on the final piece and active set), in at
    most as many iterations as from the unbounded u; both meet the KKT conditions; the compiled twin
    likewise."""
    from uk_controller.core.joint_limits import bounded_lsq

    rng = np.random.default_rng(300 + seed)
    C, d, D, dlo, dhi, lo, hi, u0 = _problem(rng)
    w, eps = 1e3, 1e-6
    prev, cold, warm = np.empty(7), np.empty(7), np.empty(7)
    bounded_lsq(C, d, D, dlo, dhi, w, lo, hi, eps, u0, prev)
    d2, dlo2, dhi2 = d + 1e-3 * rng.normal(size=3), dlo + 1e-3, dhi + 1e-3
    it_cold, _ = bounded_lsq(C, d2, D, dlo2, dhi2, w, lo, hi, eps, u0, cold)
    it_warm, _ = bounded_lsq(C, d2, D, dlo2, dhi2, w, lo, hi, eps, u0, warm, start=prev)
    assert np.array_equal(warm, cold)
    assert it_warm <= it_cold
    if jit.AVAILABLE:
        from uk_controller.kernels.limits import bounded_lsq as compiled

        sc = np.full((3 * 7 + 14, 7), np.nan)
        out_cold, out_warm = np.empty(7), np.empty(7)
        compiled(C, d2, D, dlo2, dhi2, w, lo, hi, eps, u0, u0, out_cold, sc, 0)
        compiled(C, d2, D, dlo2, dhi2, w, lo, hi, eps, u0, prev, out_warm, sc, 0)
        assert np.array_equal(out_warm, out_cold)
        assert np.allclose(out_warm, warm, rtol=1e-9, atol=1e-10)
    scale = np.abs(C.T @ d2).max() + w * np.abs(D).sum(axis=0).max() * 10
    assert _kkt_residual(C, d2, D, dlo2, dhi2, w, lo, hi, eps, u0, warm) <= 1e-9 * scale


def test_bounded_lsq_equals_a_generic_convex_solver():
    """The whole objective (task rows, penalized intervals, tie-break) against scipy's trust-region
    constrained minimizer with the box as bounds: an independent method on the same convex problem."""
    from scipy.optimize import Bounds, minimize

    from uk_controller.core.joint_limits import bounded_lsq

    rng = np.random.default_rng(21)
    for _ in range(5):
        C, d, D, dlo, dhi, lo, hi, u0 = _problem(rng)
        w, eps = 50.0, 1e-3
        u = np.empty(7)
        bounded_lsq(C, d, D, dlo, dhi, w, lo, hi, eps, u0, u)

        def f(x):
            r = D @ x
            v = np.minimum(r - dlo, 0.0) + np.maximum(r - dhi, 0.0)
            e = C @ x - d
            return 0.5 * e @ e + 0.5 * w * v @ v + 0.5 * eps * (x - u0) @ (x - u0), C.T @ e + w * D.T @ v + eps * (
                x - u0
            )

        ref = minimize(
            f,
            np.clip(u0, lo, hi),
            jac=True,
            method='L-BFGS-B',
            bounds=Bounds(lo, hi),
            options={'ftol': 1e-15, 'gtol': 1e-12, 'maxiter': 20000},
        ).x
        assert f(u)[0] <= f(ref)[0] + 1e-9 * max(1.0, abs(f(ref)[0]))
        assert np.allclose(u, ref, atol=1e-4 * max(1.0, np.abs(ref).max()))


@needs_numba
@pytest.mark.parametrize('seed', range(6))
@pytest.mark.slow
def test_compiled_stage_equals_the_numpy_reference(seed):
    """The compiled bounded_stage (Gram form, warm start) equals the NumPy stage on the same data."""
    from uk_controller.core.joint_limits import bounded_stage
    from uk_controller.kernels.limits import bounded_stage as compiled
    from uk_controller.kernels.limits import bounded_stage_rows

    rng = np.random.default_rng(400 + seed)
    p, n, m = 7, 7, 3 + seed % 4
    CB, NB = rng.normal(size=(m, p)), rng.normal(size=(n, p))
    a0, bbar = rng.normal(size=n), rng.normal(size=m) * 5.0
    limits = rng.uniform(0.3, 2.0, p)
    lo, hi = -np.full(n, 2.0) + rng.normal(size=n), np.full(n, 2.0) + rng.normal(size=n)
    u_unb = np.linalg.lstsq(CB, bbar, rcond=None)[0] + rng.normal(size=p)
    start = rng.normal(size=p) * limits if seed % 2 else u_unb
    ref, out = u_unb.copy(), u_unb.copy()
    _, viol_ref = bounded_stage(CB, bbar, NB, a0, lo, hi, limits, 1e4, 1e-9, ref, start)
    sc = np.full((bounded_stage_rows(p), max(n, p)), np.nan)
    _, viol = compiled(CB, bbar, NB, a0, lo, hi, limits, 1e4, 1e-9, out, start, sc, 0)
    assert np.allclose(out, ref, rtol=1e-8, atol=1e-8 * max(1.0, np.abs(ref).max()))
    assert abs(viol - viol_ref) <= 1e-6 * max(1.0, viol_ref)
