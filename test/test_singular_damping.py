"""The task rows' damped least squares near a singularity (core/joint_limits.singular_damping).

Independent checks: the damping law against its formula (zero at and above the threshold, continuous
there, the full damping at a singular matrix); the damped servo effort against scipy's least squares on
the augmented system ``[A; lambda I] u = [b; 0]``; the damped joint-limit stage against scipy's bounded
least squares on the same augmented system; the compiled twins against the NumPy reference; and a
scripted crossing of the stretched-elbow singularity of a planar two-link arm, where the exact effort
changes sign through infinity: undamped, the stage's effort jumps from one limit to the other in one
step; damped, it moves continuously.
"""

from __future__ import annotations

import numpy as np
import pytest

from uk_controller.core.joint_limits import bounded_stage, singular_damping
from uk_controller.core.uk import servo_solve
from uk_controller.kernels import jit

needs_numba = pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')

THRESHOLD, DAMPING = 1e-2, 1e-2


def test_damping_law():
    smax = 3.0
    assert singular_damping(smax, smax, THRESHOLD, DAMPING) == 0.0
    assert singular_damping(THRESHOLD * smax, smax, THRESHOLD, DAMPING) == 0.0  # exactly 0 at the threshold
    assert singular_damping(0.0, smax, THRESHOLD, DAMPING) == pytest.approx((DAMPING * smax) ** 2, rel=1e-15)
    for x in (0.1, 0.5, 0.9):
        want = (1.0 - x * x) * (DAMPING * smax) ** 2
        assert singular_damping(x * THRESHOLD * smax, smax, THRESHOLD, DAMPING) == pytest.approx(want, rel=1e-14)
    # continuous at the threshold: just below it the damping is (2 delta) of its largest value
    delta = 1e-9
    lam2 = singular_damping((1 - delta) * THRESHOLD * smax, smax, THRESHOLD, DAMPING)
    assert 0.0 < lam2 <= 3 * delta * (DAMPING * smax) ** 2
    assert singular_damping(0.0, smax, 0.0, DAMPING) == 0.0  # threshold 0: never
    assert singular_damping(0.0, smax, THRESHOLD, 0.0) == 0.0


@needs_numba
@pytest.mark.slow
def test_compiled_damping_law_equals_the_numpy_reference():
    from uk_controller.kernels.limits import singular_damping as compiled

    rng = np.random.default_rng(3)
    for _ in range(50):
        smax = rng.uniform(0.1, 10.0)
        smin = smax * rng.choice([0.0, 1e-6, 1e-3, 5e-3, 1e-2, 0.5]) * rng.uniform(0.5, 1.5)
        t, d = rng.choice([0.0, 1e-3, 1e-2]), rng.choice([0.0, 1e-3, 1e-2])
        assert compiled(smin, smax, t, d) == singular_damping(smin, smax, t, d)


def _planar_2r(q, l1=0.5, l2=0.4):
    """Position Jacobian of a planar two-link arm (det = l1 l2 sin q2: singular at q2 = 0)."""
    s1, c1 = np.sin(q[0]), np.cos(q[0])
    s12, c12 = np.sin(q[0] + q[1]), np.cos(q[0] + q[1])
    return np.array([[-l1 * s1 - l2 * s12, -l2 * s12], [l1 * c1 + l2 * c12, l2 * c12]])


def _solve(A, b, limits, M=None, singular=(THRESHOLD, DAMPING), u_prev=None, weight=1e4, Q=None):
    """servo_solve with M = I (or M), B = I, Q = 0 (or Q), loose acceleration bounds and effort limits."""
    n = A.shape[1]
    M = np.eye(n) if M is None else M
    u = np.zeros(n) if u_prev is None else u_prev.copy()
    qdd, pf = np.zeros(n), np.zeros(n)
    alo, ahi = np.full(n, -np.inf), np.full(n, np.inf)
    out = servo_solve(
        M,
        np.zeros(n) if Q is None else Q,
        np.eye(n),
        A,
        b,
        np.zeros((0, n)),
        np.zeros(0),
        u,
        qdd,
        pf,
        bounded=(limits, alo, ahi, weight, 1e-9, *singular),
    )
    return u, out


def test_damped_effort_equals_least_squares_on_the_augmented_system():
    """Near the singularity (sigma_min / sigma_1 below the threshold), effort limits not reached: the
    effort is argmin |A u - b|^2 + lambda^2 |u|^2 (scipy lstsq on [A; lambda I]); away from it the exact
    inverse, bit for bit the same as without damping."""
    from scipy.linalg import lstsq

    b = np.array([0.3, -0.7])
    for q2 in (1e-5, -3e-4, 2e-3, 0.0):
        A = _planar_2r([0.4, q2])
        sv = np.linalg.svd(A, compute_uv=False)
        assert sv[1] < THRESHOLD * sv[0]
        lam2 = (1 - (sv[1] / (THRESHOLD * sv[0])) ** 2) * (DAMPING * sv[0]) ** 2
        u, _ = _solve(A, b, np.full(2, 1e12))
        ref = lstsq(np.vstack((A, np.sqrt(lam2) * np.eye(2))), np.concatenate((b, np.zeros(2))))[0]
        assert np.allclose(u, ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())
    A = _planar_2r([0.4, 0.7])  # far from the singularity
    u, _ = _solve(A, b, np.full(2, 1e12))
    u_exact, _ = _solve(A, b, np.full(2, 1e12), singular=())
    assert np.array_equal(u, u_exact)
    assert np.allclose(A @ u, b, rtol=1e-12)


def test_drift_is_compensated_exactly_and_the_command_damped():
    """With a drift (Q = tau - h, a0 = M^{-1} Q) the effort is the exact -Q (the effort cancelling a0,
    bounded at the singularity) plus the damped least squares of the commanded b: u + Q equals scipy lstsq
    on [A M^{-1}; lambda I] x = [b; 0] (down to the rank cut: a singular value under rcond s_1 drops
    its direction's drift part, which is 0 / 0 there)."""
    from scipy.linalg import lstsq

    M = np.array([[2.0, 0.3], [0.3, 0.5]])
    Q = np.array([-4.0, 1.5])
    b = np.array([0.3, -0.7])
    for q2 in (1e-4, -2e-3, 3e-7):
        CB = _planar_2r([0.4, q2]) @ np.linalg.inv(M)
        sv = np.linalg.svd(CB, compute_uv=False)
        lam2 = singular_damping(sv[-1], sv[0], THRESHOLD, DAMPING)
        assert lam2 > 0.0
        u, _ = _solve(_planar_2r([0.4, q2]), b, np.full(2, 1e12), M=M, Q=Q)
        ref = lstsq(np.vstack((CB, np.sqrt(lam2) * np.eye(2))), np.concatenate((b, np.zeros(2))))[0]
        assert np.allclose(u + Q, ref, rtol=1e-8, atol=1e-8 * np.abs(Q).max())


def test_damped_stage_equals_bounded_least_squares_on_the_augmented_system():
    """Efforts limited, no acceleration bound active: the stage's effort is the bounded least squares of
    [A; lambda I; sqrt(eps') I] u = [b; lambda c; sqrt(eps') u0] over the effort box (scipy BVLS), c the
    null-space part of the unbounded effort (here 0) and eps' the stage's tie-break weight."""
    from scipy.optimize import lsq_linear

    rng = np.random.default_rng(5)
    for _ in range(10):
        A = _planar_2r([rng.uniform(-2, 2), rng.uniform(-3e-3, 3e-3)])
        b = rng.normal(size=2)
        sv = np.linalg.svd(A, compute_uv=False)
        lam2 = singular_damping(sv[1], sv[0], THRESHOLD, DAMPING)
        assert lam2 > 0.0
        u_unb, _ = _solve(A, b, np.full(2, 1e12))
        limits = np.abs(u_unb) * rng.uniform(0.2, 0.9, 2)
        u, out = _solve(A, b, limits)
        assert out[7] is not None  # the stage ran
        eps = 1e-9 * (np.sum(A * A) + 1e4 * 2) / 2  # relative to the mean diagonal of A^T A + w NB^T NB
        C = np.vstack((A, np.sqrt(lam2) * np.eye(2), np.sqrt(eps) * np.eye(2)))
        d = np.concatenate((b, np.zeros(2), np.sqrt(eps) * u_unb))
        ref = lsq_linear(C, d, bounds=(-limits, limits), method='bvls', tol=1e-15).x
        assert np.allclose(u, ref, rtol=1e-7, atol=1e-9 * limits.max())


def test_stage_damping_is_centred_on_the_null_space_effort():
    """A redundant task (1 row, 3 efforts): with a centre c in the null space of A, the damped stage's
    unconstrained minimizer is the damped task effort plus c, so an effort box that holds it changes
    nothing (the stage reproduces the unbounded effort)."""
    rng = np.random.default_rng(8)
    A = np.array([[1.0, 2e-3, -1e-3]])
    b = np.array([0.2])
    lam2 = 0.3
    u_task = A.T @ np.linalg.solve(A @ A.T + lam2 * np.eye(1), b)
    z = rng.normal(size=3)
    c = z - A.T @ np.linalg.solve(A @ A.T, A @ z)
    u = u_task + c
    NB = np.eye(3)
    bounded_stage(
        A, b, NB, np.zeros(3), np.full(3, -np.inf), np.full(3, np.inf), np.full(3, 1e6), 1e4, 1e-9, u, None, lam2, c
    )
    assert np.allclose(u, u_task + c, rtol=1e-9, atol=1e-12)


@needs_numba
@pytest.mark.parametrize('seed', range(5))
@pytest.mark.slow
def test_compiled_damped_stage_equals_the_numpy_reference(seed):
    """The compiled stage with damping (G + lambda^2 I, C^T d + lambda^2 c) equals the NumPy stage on the
    augmented rows [CB; lambda I]. (Seed 5 of this generator is left out: there the NumPy reference ends
    at its 100-iteration cap without damping too.)"""
    from uk_controller.kernels.limits import bounded_stage as compiled
    from uk_controller.kernels.limits import bounded_stage_rows

    rng = np.random.default_rng(500 + seed)
    p, n, m = 7, 7, 3 + seed % 3
    CB = rng.normal(size=(m, p))
    CB[-1] = CB[0] + 1e-5 * rng.normal(size=p)  # nearly singular
    NB = rng.normal(size=(n, p))
    a0, bbar = rng.normal(size=n), rng.normal(size=m) * 5.0
    limits = rng.uniform(0.3, 2.0, p)
    lo, hi = -np.full(n, 2.0) + rng.normal(size=n), np.full(n, 2.0) + rng.normal(size=n)
    lam2 = 1e-2 * np.sum(CB * CB) * rng.uniform(1e-4, 1.0)
    centre = rng.normal(size=p)
    u_unb = np.linalg.lstsq(CB, bbar, rcond=None)[0] + centre
    start = rng.normal(size=p) * limits if seed % 2 else u_unb
    ref, out = u_unb.copy(), u_unb.copy()
    _, viol_ref = bounded_stage(CB, bbar, NB, a0, lo, hi, limits, 1e4, 1e-9, ref, start, lam2, centre)
    sc = np.full((bounded_stage_rows(p), max(n, p)), np.nan)
    _, viol = compiled(CB, bbar, NB, a0, lo, hi, limits, 1e4, 1e-9, out, start, sc, 0, lam2, centre)
    assert np.allclose(out, ref, rtol=1e-8, atol=1e-8 * max(1.0, np.abs(ref).max()))
    assert abs(viol - viol_ref) <= 1e-6 * max(1.0, viol_ref)


#: q2 through the singularity, denser near it (from 1e-3 rad apart at +-0.05 to 1e-8 rad at 0)
GRID = np.concatenate((-np.geomspace(0.05, 5e-9, 600), np.geomspace(5e-9, 0.05, 600)))


def _stage(threshold=THRESHOLD, damping=DAMPING):
    from uk_controller.core.joint_limits import JointLimitStage, limit_table

    table = limit_table(np.full(2, -10.0), np.full(2, 10.0), np.zeros(2), margin=0.0, velocity_scale=1.0)
    return JointLimitStage(table, 10.0, 0.02, 1e4, singular_threshold=threshold, singular_damping=damping)


def _crossing(backend, stage, M):
    """The efforts of the servo solve (ServoSolver, `backend`) along q2 from -0.05 to 0.05 rad through the
    singularity q2 = 0 of the planar arm, the task acceleration b fixed, the efforts limited to 1."""
    from uk_controller.core.uk import ServoSolver

    solver = ServoSolver(2, 2, 0, 2, backend=backend, joint_limits=stage)
    limits = np.ones(2)
    b = np.array([0.05, 0.2])
    efforts = []
    for q2 in GRID:
        A = _planar_2r([0.3, q2])
        solver.solve_rows(
            M,
            np.zeros(2),
            np.zeros(2),
            np.eye(2),
            A,
            b,
            np.zeros(2),
            np.zeros(2),
            np.zeros((0, 2)),
            np.zeros(0),
            np.zeros(0),
            np.zeros(0),
            np.zeros((2, 2)),
            limits,
            (np.full(2, -np.inf), np.full(2, np.inf)),
        )
        efforts.append(solver.effort.copy())
    return np.array(efforts)


def _flips(u, limit=1.0):
    at = np.abs(u) >= 0.999 * limit
    return int((at[1:] & at[:-1] & (np.sign(u[1:]) * np.sign(u[:-1]) < 0)).sum())


@pytest.mark.parametrize('backend', ['numpy', pytest.param('numba', marks=needs_numba)])
@pytest.mark.slow
def test_effort_is_continuous_across_a_singularity_crossing(backend):
    """Through the stretched elbow the exact effort goes to +-infinity and changes sign; with the effort
    box the undamped stage jumps from one limit to the other between q2 = -5e-9 and 5e-9, the damped one
    moves by at most a few percent of the limit per step and never flips at the limit."""
    M = np.array([[2.0, 0.3], [0.3, 0.5]])
    damped = _crossing(backend, _stage(), M)
    undamped = _crossing(backend, _stage(0.0, 0.0), M)
    assert _flips(undamped) >= 1  # the failure the damping removes
    assert np.abs(np.diff(undamped, axis=0)).max() > 1.5
    assert _flips(damped) == 0
    assert np.abs(np.diff(damped, axis=0)).max() < 0.05
    far = np.abs(GRID) > 0.03  # outside the damped band both laws agree
    assert np.allclose(damped[far], undamped[far], rtol=0, atol=1e-12)


@needs_numba
@pytest.mark.slow
def test_compiled_servo_damping_equals_the_numpy_reference():
    """ServoSolver numba vs numpy near a singularity, with and without the stage running."""
    M = np.array([[2.0, 0.3], [0.3, 0.5]])
    for stage in (_stage(), _stage(0.0, 0.0)):
        a = _crossing('numpy', stage, M)
        c = _crossing('numba', stage, M)
        assert np.allclose(a, c, rtol=1e-8, atol=1e-9)
