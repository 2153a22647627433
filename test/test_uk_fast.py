"""The hot path equals the reference path to round-off.

- ServoSolver (numba kernel and LAPACK backend) vs uk.servo_control, incl. rank-deficient servo
  and passive rows, under-/over-actuation, the constrained acceleration (p = m_s = 0) vs
  uk.constrained_acceleration and vs the square-root reference (seed 000 eq 7);
- the kernel's one-sided Jacobi SVD vs LAPACK's singular values;
- Baumgarte folded into the solver (uk.row_gains) vs Baumgarte.stabilized_rhs;
- ControllerCore's fast step vs the general step (pinv 'svd' through uk.servo_control) on every
  shipped robot along a perturbed trajectory;
- UKPlant's fast right-hand side (pin.aba / the kernel) vs the UK equation solved by
  uk.constrained_acceleration, and vs Pinocchio's constraintDynamics-free KKT system;
- a control step creates no new Pinocchio Data.
"""

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.control.controller import ControllerCore
from uk_controller.core import uk
from uk_controller.core.baumgarte import Baumgarte
from uk_controller.core.rows import ConstraintRows
from uk_controller.kernels import jit, linalg
from uk_controller.robots import load_robot

BACKENDS = ['numpy'] + (['numba'] if jit.AVAILABLE else [])
ROBOTS = ['scara', 'five_bar', 'five_bar_redundant', 'dual_arm', 'planar_3r']


def spd(rng, n, cond=1e3):
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (Qm * np.geomspace(1.0, cond, n)) @ Qm.T


def random_case(rng, deficient):
    n = int(rng.integers(2, 9))
    p = int(rng.integers(1, n + 1))
    ms = int(rng.integers(1, n + 1))
    mp = int(rng.integers(0, n))
    M = spd(rng, n)
    Q = rng.standard_normal(n)
    B = rng.standard_normal((n, p))
    As = rng.standard_normal((ms, n))
    bs = rng.standard_normal(ms)
    Ap = rng.standard_normal((mp, n)) if mp else None
    bp = rng.standard_normal(mp) if mp else None
    if deficient:
        if ms > 1:
            As[-1] = 2.0 * As[0]  # dependent servo rows, inconsistent right-hand side
        if mp > 1:
            Ap[-1] = -Ap[0]  # redundant closure (as seed 002's parallelogram)
            bp[-1] = -bp[0]
    return n, p, mp, ms, M, Q, B, As, bs, Ap, bp


def rel(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('deficient', [False, True])
@pytest.mark.slow
def test_servo_solver_equals_servo_control(backend, deficient):
    rng = np.random.default_rng(7 + deficient)
    for _ in range(60):
        n, p, mp, ms, M, Q, B, As, bs, Ap, bp = random_case(rng, deficient)
        ref = uk.servo_control(M, Q, B, As, bs, A_passive=Ap, b_passive=bp, on_infeasible='report')
        sol = uk.ServoSolver(n, p, mp, ms, backend=backend).solve(M, Q, B, As, bs, Ap, bp)
        assert sol.rank == ref.rank and sol.passive_rank == ref.passive_rank
        assert sol.consistent == ref.consistent
        assert sol.condition == pytest.approx(ref.condition, rel=1e-8)
        assert rel(sol.u, ref.u) < 1e-9
        assert rel(sol.qdd, ref.qdd) < 1e-9
        scale = max(1.0, np.abs(B @ ref.u).max(), np.abs(Q).max())  # Qc_p is a difference of these
        assert np.abs(sol.passive_force - ref.passive_force).max() < 1e-9 * scale
        assert sol.servo_residual == pytest.approx(ref.servo_residual, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.slow
def test_solver_without_servo_is_the_uk_acceleration(backend):
    """p = m_s = 0: q'' is the UK constrained acceleration (fast and square-root forms)."""
    rng = np.random.default_rng(3)
    for trial in range(40):
        n = int(rng.integers(2, 10))
        m = int(rng.integers(1, n + 1))
        M = spd(rng, n)
        Q = rng.standard_normal(n)
        A = rng.standard_normal((m, n))
        if trial % 2 and m > 1:
            A[-1] = A[0] + A[1 % m] if m > 2 else 3.0 * A[0]  # rank deficient
        b = A @ rng.standard_normal(n)  # consistent
        sol = uk.ServoSolver(n, 0, m, 0, backend=backend)
        sol.solve(M, Q, np.zeros((n, 0)), np.zeros((0, n)), np.zeros(0), A, b)
        fast = uk.constrained_acceleration(M, Q, A, b)
        ref = np.linalg.solve(M, Q + uk.constraint_force_reference(M, Q, A, b))
        assert rel(sol.qdd, fast) < 1e-9
        assert rel(sol.qdd, ref) < 1e-8
        assert np.abs(A @ sol.qdd - b).max() < 1e-8 * max(1.0, np.abs(b).max())


@pytest.mark.slow
def test_solver_rejects_indefinite_mass():
    M = np.diag([1.0, -1.0])
    for backend in BACKENDS:
        sol = uk.ServoSolver(2, 1, 0, 1, backend=backend)
        with pytest.raises(uk.NotPositiveDefiniteError):
            sol.solve(M, np.zeros(2), np.ones((2, 1)), np.ones((1, 2)), np.ones(1))


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
def test_jacobi_svd_matches_lapack():
    rng = np.random.default_rng(11)
    for _ in range(50):
        r, c = rng.integers(1, 8, size=2)
        A = rng.standard_normal((r, c)) * np.geomspace(1, 1e-6, c)
        W = A.copy()
        V = np.empty((c, c))
        linalg.jacobi_columns(W, V, 60)
        s = np.sort(np.linalg.norm(W, axis=0))[::-1][: min(r, c)]
        ref = np.linalg.svd(A, compute_uv=False)
        np.testing.assert_allclose(s, ref, rtol=1e-12, atol=1e-14 * ref[0])
        np.testing.assert_allclose(W @ V.T, A, atol=1e-13 * np.abs(A).max())
        np.testing.assert_allclose(V.T @ V, np.eye(c), atol=1e-13)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
def test_jacobi_rhs_is_an_svd_solve():
    """linalg.jacobi_columns_rhs (the servo solve's SVD when C B is wide: rotations applied to b, no V) against
    numpy.linalg.svd / pinv on random, rank-deficient, ill-conditioned and badly scaled matrices: singular
    values, orthogonal columns, ``W_in = W V^T`` with V orthogonal (V^T from y = e_i, one run per i: the
    rotations do not depend on y), and the rank-truncated least-squares solution ``sum_k W_k y_k / s_k^2``."""
    rng = np.random.default_rng(23)
    for trial in range(80):
        c = int(rng.integers(1, 8))
        r = int(rng.integers(c, 10))  # c <= r columns, as the servo solve rotates them
        A = rng.standard_normal((c, r))  # the servo solve's C B (ms x p); W_in = A^T
        if trial % 4 == 1:
            A = A * np.geomspace(1, 1e-9, c)[:, None]
        if trial % 4 == 2 and c > 1:  # rank deficient: repeated and combined rows
            A[-1] = A[0]
            if c > 2:
                A[-2] = 2.0 * A[1] - A[0]
        if trial % 4 == 3 and c > 1:  # a row 1e-140 smaller (the rotation's large-|zeta| branch)
            A[-1] = 1e-140 * (A[0] + 1e-3 * A[-1])
        b = rng.standard_normal(c)
        W, y = np.ascontiguousarray(A.T), b.copy()
        sweeps = linalg.jacobi_columns_rhs(W, y, 60)
        assert sweeps < 60
        s = np.linalg.norm(W, axis=0)
        ref = np.linalg.svd(A, compute_uv=False)
        np.testing.assert_allclose(np.sort(s)[::-1], ref, rtol=1e-12, atol=1e-14 * ref[0])
        G = W.T @ W
        off = np.abs(G - np.diag(np.diag(G)))
        assert np.all(off <= 1e-14 * np.outer(s, s) + 1e-300)
        VT = np.empty((c, c))
        for i in range(c):
            Wi, e = np.ascontiguousarray(A.T), np.eye(c)[i].copy()
            assert linalg.jacobi_columns_rhs(Wi, e, 60) == sweeps
            np.testing.assert_array_equal(Wi, W)
            VT[:, i] = e
        np.testing.assert_allclose(VT @ VT.T, np.eye(c), atol=1e-13)
        np.testing.assert_allclose(W @ VT, A.T, atol=1e-13 * np.abs(A).max())
        np.testing.assert_allclose(VT @ b, y, atol=1e-13 * np.abs(b).max())
        rcond = 1e-10
        keep = s > rcond * s.max()
        assert keep.sum() == np.linalg.matrix_rank(A, tol=rcond * ref[0])
        u = W[:, keep] @ (y[keep] / s[keep] ** 2)
        uref = np.linalg.pinv(A, rcond=rcond) @ b
        np.testing.assert_allclose(u, uref, atol=1e-9 * np.abs(uref).max())


def test_jacobi_rows_and_blocked_solves_match_their_column_forms():
    """linalg.jacobi_rows (transposed storage) gives the bits of jacobi_columns, and LAPACK's singular values;
    chol_solve_cols (all columns at once) gives the bits of chol_solve_col column by column, and numpy's solve."""
    rng = np.random.default_rng(17)
    for trial in range(60):
        r, c = rng.integers(1, 10, size=2)
        A = rng.standard_normal((r, c)) * np.geomspace(1, 1e-6, c)
        if trial % 4 == 0 and c > 1:  # rank deficient: a repeated column
            A[:, -1] = A[:, 0]
        W, V = A.copy(), np.empty((c, c))
        sweeps = linalg.jacobi_columns(W, V, 60)
        WT, VT = np.ascontiguousarray(A.T), np.empty((c, c))
        assert linalg.jacobi_rows(WT, VT, 60) == sweeps
        np.testing.assert_array_equal(WT, W.T)
        np.testing.assert_array_equal(VT, V.T)
        s, sr = np.empty(c), np.empty(c)
        assert linalg.row_norms(WT, sr) == linalg.column_norms(W, s)
        np.testing.assert_array_equal(sr, s)
        ref = np.linalg.svd(A, compute_uv=False)
        np.testing.assert_allclose(np.sort(sr)[::-1][: min(r, c)], ref, rtol=1e-12, atol=1e-14 * ref[0])
    for n, p in ((1, 1), (4, 2), (6, 6), (9, 9), (7, 3)):
        M = spd(rng, n)
        L = np.linalg.cholesky(M)
        X = rng.standard_normal((n, p))
        out = np.empty((n, p))
        linalg.chol_solve_cols(L, X, out)
        for j in range(p):
            col = X[:, j].copy()
            linalg.chol_solve_col(L, col)
            np.testing.assert_array_equal(out[:, j], col)
        np.testing.assert_allclose(out, np.linalg.solve(M, X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.slow
def test_folded_baumgarte_equals_stabilized_rhs(backend):
    rng = np.random.default_rng(5)
    n, p, mp, ms = 5, 3, 2, 2
    M = spd(rng, n)
    h = rng.standard_normal(n)
    B = rng.standard_normal((n, p))
    rows_p = ConstraintRows(
        rng.standard_normal(mp),
        rng.standard_normal(mp),
        rng.standard_normal((mp, n)),
        rng.standard_normal(mp),
        np.array([2, 1], dtype=np.int8),
    )
    rows_s = ConstraintRows(
        rng.standard_normal(ms),
        rng.standard_normal(ms),
        rng.standard_normal((ms, n)),
        rng.standard_normal(ms),
        np.array([1, 2], dtype=np.int8),
    )
    for stab in (
        Baumgarte.critical(7.0),
        Baumgarte.seed000(np.array([1.0, 2.0]), np.array([3.0, 4.0])),
        Baumgarte.squared(2.0, 3.0),
        Baumgarte.none(),
    ):
        gains = uk.row_gains(stab, rows_p, rows_s)
        sol = uk.ServoSolver(n, p, mp, ms, backend=backend)
        sol.solve_rows(
            M,
            np.zeros(n),
            h,
            B,
            rows_s.A,
            rows_s.b,
            rows_s.phi,
            rows_s.phidot,
            rows_p.A,
            rows_p.b,
            rows_p.phi,
            rows_p.phidot,
            gains,
        )
        ref = uk.servo_control(
            M,
            -h,
            B,
            rows_s.A,
            stab.stabilized_rhs(rows_s),
            A_passive=rows_p.A,
            b_passive=stab.stabilized_rhs(rows_p),
            on_infeasible='report',
        )
        assert rel(sol.u, ref.u) < 1e-10 and rel(sol.qdd, ref.qdd) < 1e-10


def _states(setup, rng, count):
    q0, qd0 = setup.q0, setup.qd0
    for k in range(count):
        yield (q0 + 0.02 * rng.standard_normal(q0.size), qd0 + 0.2 * rng.standard_normal(q0.size), 0.37 * k)


@pytest.mark.parametrize('robot', ROBOTS)
@pytest.mark.slow
def test_controller_fast_step_equals_general_step(robot):
    fast = ControllerCore.from_config(robot)
    general = ControllerCore.from_config(robot, backend='general')  # the uk.servo_control path
    assert fast.backend.name in ('compiled', 'reference') and general.backend.name == 'general'
    rng = np.random.default_rng(2)
    for q, qd, t in _states(fast.setup, rng, 8):
        a = fast.step(q, qd, t)
        b = general.step(q, qd, t)
        assert a.ok == b.ok and a.reason == b.reason and a.rank == b.rank
        assert a.passive_rank == b.passive_rank
        assert rel(a.effort, b.effort) < 1e-9
        np.testing.assert_array_equal(a.saturated, b.saturated)
        np.testing.assert_allclose(a.phi, b.phi, rtol=0, atol=1e-15)
        np.testing.assert_allclose(a.task_error, b.task_error, rtol=0, atol=1e-15)
        assert a.condition == pytest.approx(b.condition, rel=1e-8)


@pytest.mark.slow
def test_controller_stabilization_assignment_rebuilds_gains():
    ctrl = ControllerCore.from_config('five_bar')
    general = ControllerCore.from_config('five_bar', backend='general')
    for c in (ctrl, general):
        c.stabilization = Baumgarte.critical(3.0)
    q, qd = ctrl.setup.q0 + 0.01, ctrl.setup.qd0 + 0.1
    assert rel(ctrl.step(q, qd, 0.2).effort, general.step(q, qd, 0.2).effort) < 1e-9


@pytest.mark.slow
def test_step_creates_no_pinocchio_data(monkeypatch):
    ctrl = ControllerCore.from_config('dual_arm')
    created = []
    original = pin.Model.createData

    def counting(self):
        created.append(1)
        return original(self)

    monkeypatch.setattr(pin.Model, 'createData', counting)
    data_before = ctrl.model.data
    for k in range(20):
        ctrl.step(ctrl.setup.q0, ctrl.setup.qd0, 0.001 * k)
    assert not created and ctrl.model.data is data_before


@pytest.mark.parametrize('robot', ROBOTS)
@pytest.mark.slow
def test_plant_rhs_equals_uk_equation(robot):
    """UKPlant's right-hand side (pin.aba without closures, the kernel with them) is the UK equation
    M q'' = B u - h + Qc with the closure rows Baumgarte-stabilized by the plant's own gains."""
    from uk_controller.sim.uk_plant import UKPlant

    setup = load_robot(robot)
    plant = UKPlant.from_setup(setup)
    model = setup.model
    rng = np.random.default_rng(4)
    for q, qd, t in _states(setup, rng, 5):
        u = rng.standard_normal(setup.actuators.p)
        qdd = plant.acceleration(q, qd, u, t).copy()
        model.compute(q, qd)
        Q = setup.actuators.matrix(model) @ u - model.h
        if setup.passive.m:
            rows = setup.passive.evaluate(model, q, qd, t)
            ref = uk.constrained_acceleration(model.M, Q, rows.A, plant.closure_stabilization.stabilized_rhs(rows))
        else:
            ref = np.linalg.solve(model.M, Q)
        assert rel(qdd, ref) < 1e-10


def test_forward_dynamics_with_permuted_joint_order():
    setup = load_robot('scara')
    from uk_controller.model.robot_model import RobotModel

    names = list(reversed(setup.model.joint_names))
    model = RobotModel.from_urdf(setup.urdf_path, joint_names=names)
    rng = np.random.default_rng(9)
    q, qd, tau = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4)
    model.compute(q, qd)
    np.testing.assert_allclose(
        model.forward_dynamics(q, qd, tau), np.linalg.solve(model.M, tau - model.h), rtol=1e-10, atol=1e-12
    )


@pytest.mark.slow
def test_rk4_substeps_agree_on_scara():
    """One RK4 step per 1 ms control period already agrees with eight (the plant is smooth)."""
    from uk_controller.sim.uk_plant import UKPlant

    ctrl = ControllerCore.from_config('scara')
    plants = [UKPlant.from_setup(load_robot('scara', {'simulation.substeps': s})) for s in (1, 8)]
    for k in range(200):
        for plant in plants:
            plant.step(ctrl.step(plant.q, plant.qd, plant.t).effort, ctrl.dt)
    assert np.abs(plants[0].q - plants[1].q).max() < 1e-10
    assert np.abs(plants[0].qd - plants[1].qd).max() < 1e-8


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
@pytest.mark.parametrize('robot', ROBOTS)
def test_compiled_rows_equal_reference_rows(robot):
    """Constraint rows through the numba row kernels equal the NumPy/Python reference code."""
    setup = load_robot(robot)
    model = setup.model
    rng = np.random.default_rng(12)
    for q, qd, t in _states(setup, rng, 4):
        model.compute(q, qd)
        for stack in (setup.passive, setup.servo):
            if not stack.m:
                continue
            assert stack.backend_name == 'compiled'
            fast = stack.evaluate(model, q, qd, t, out=stack.empty_rows())
            ref = stack.with_backend('numpy').evaluate(model, q, qd, t, out=stack.empty_rows())
            for key in ('phi', 'phidot', 'A', 'b'):
                np.testing.assert_allclose(getattr(fast, key), getattr(ref, key), rtol=1e-13, atol=1e-13)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
@pytest.mark.parametrize('robot', ['scara', 'five_bar'])
@pytest.mark.slow
def test_plant_rk4_kernel_equals_numpy_rk4(robot):
    from uk_controller.sim import uk_plant

    plants = [
        uk_plant.UKPlant.from_setup(load_robot(robot, {'simulation.substeps': 2}), backend=b)
        for b in ('compiled', 'numpy')
    ]
    assert [p.backend.name for p in plants] == ['compiled', 'numpy']
    rng = np.random.default_rng(1)
    for _ in range(30):
        u = rng.standard_normal(plants[0].setup.actuators.p)
        plants[0].step(u, 1e-3)
        plants[1].step(u, 1e-3)
    np.testing.assert_allclose(plants[0].q, plants[1].q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(plants[0].qd, plants[1].qd, rtol=0, atol=1e-11)
    assert plants[0].t == pytest.approx(plants[1].t)
