"""The UK core (uk.py, baumgarte.py, rows.py) against independent computations.

- fast Gram form vs the square-root reference form (seed 000 eq 7), incl. rank-deficient A;
- the Lagrange-multiplier (KKT) system of seed 000 eq 10 solved directly;
- non-ideal constraint force (seed 004 eq 12): fast vs literal, and its work property;
- Baumgarte (seed 000 eq 52; seeds 002/004): conventions, and the closed-form decay of phi;
- Chen's servo control (seed 004 section II): UK special cases, under/redundant actuation,
  the controllability and consistency checks, and a closed chain (seed 004 section V's two
  coordinated arms) where the cascade violates the servo constraint and servo_control does not.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from uk_controller.core import uk
from uk_controller.core.baumgarte import Baumgarte
from uk_controller.core.pinv import get_pinv
from uk_controller.core.rows import ConstraintRows


def random_spd(rng, n, cond=100.0):
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    w = np.exp(rng.uniform(0.0, np.log(cond), n))
    w[0], w[-1] = 1.0, cond
    return (Qm * w) @ Qm.T


def random_system(rng, n, m, rank, consistent=True, cond=100.0):
    M = random_spd(rng, n, cond)
    Q = rng.standard_normal(n) * 5
    A = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n)) if rank else np.zeros((m, n))
    b = A @ rng.standard_normal(n) if consistent else rng.standard_normal(m)
    return M, Q, A, b


CASES = [
    (n, m, r) for n in (2, 4, 7, 12) for m in (1, 3, n) for r in {m, max(m - 1, 1), max(m // 2, 1)} if r <= min(m, n)
]


# ----------------------------------------------------------------------- fast vs reference


EPS = np.finfo(float).eps


def max_fast_vs_reference(seed, consistent, pinv_name='svd', cond=100.0):
    """Largest relative |fast - reference| over CASES, and the largest ratio of it to the
    round-off bound ``eps * max(kappa(B), 100)^2`` of the Gram form (B = A M^{-1/2}, kappa over the
    non-zero singular values): the Gram matrix squares the condition number."""
    rng = np.random.default_rng(seed)
    worst = worst_ratio = 0.0
    for n, m, r in CASES:
        for _ in range(3):
            M, Q, A, b = random_system(rng, n, m, r, consistent, cond)
            ref = uk.constraint_force_reference(M, Q, A, b, pinv=get_pinv(pinv_name), rcond=1e-10)
            fast = uk.constraint_force(M, Q, A, b, rcond=1e-10)
            diff = np.max(np.abs(fast - ref)) / max(1.0, np.max(np.abs(ref)))
            sv = np.linalg.svd(A @ uk.symmetric_sqrt(M, inverse=True), compute_uv=False)
            sv = sv[sv > 1e-10 * sv[0]]
            kappa = sv[0] / sv[-1]
            worst = max(worst, diff)
            worst_ratio = max(worst_ratio, diff / (EPS * max(kappa, 100.0) ** 2))
            # constrained acceleration is consistent with the force
            qdd = uk.constrained_acceleration(M, Q, A, b)
            assert np.allclose(M @ qdd, Q + fast, atol=1e-9 * max(1.0, np.abs(fast).max()))
    return worst, worst_ratio


def test_fast_equals_reference_consistent():
    worst, ratio = max_fast_vs_reference(0, consistent=True)
    print(
        f'\nfast vs reference, consistent b (incl. rank-deficient A): max rel. difference {worst:.2e}, '
        f'max difference / (eps kappa^2) {ratio:.2f}'
    )
    assert ratio < 50.0


def test_fast_equals_reference_well_conditioned():
    """Well-conditioned systems (kappa(M) = 2): agreement to round-off outright."""
    worst, _ = max_fast_vs_reference(5, consistent=True, cond=2.0)
    print(f'\nfast vs reference, kappa(M) = 2: max rel. difference {worst:.2e}')
    assert worst < 1e-8


def test_fast_equals_reference_inconsistent_least_squares():
    """Rank-deficient A with b outside range(A): both forms give the same least-squares force."""
    worst, ratio = max_fast_vs_reference(1, consistent=False)
    print(f'\nfast vs reference, inconsistent b: max rel. difference {worst:.2e}, / (eps kappa^2) {ratio:.2f}')
    assert ratio < 50.0


@pytest.mark.parametrize('pinv_name', ['varga', 'greville', 'householder', 'mgs'])
def test_reference_with_each_pinv(pinv_name):
    assert max_fast_vs_reference(2, consistent=True, pinv_name=pinv_name)[1] < 50.0


def test_constraints_realised_and_gauss_minimum():
    """q'' satisfies A q'' = b; among all accelerations that do, it minimises the
    Gauss function (q'' - a)^T M (q'' - a) (seed 001 section 5)."""
    rng = np.random.default_rng(3)
    for n, m, r in CASES:
        M, Q, A, b = random_system(rng, n, m, r)
        qdd = uk.constrained_acceleration(M, Q, A, b)
        assert np.allclose(A @ qdd, b, atol=1e-9 * (1 + np.abs(b).max()))
        a = np.linalg.solve(M, Q)
        gauss = (qdd - a) @ M @ (qdd - a)
        _, s, Vt = np.linalg.svd(A)
        null = Vt[int(np.sum(s > 1e-10 * s[0])) :].T
        for _ in range(5):
            other = qdd + null @ rng.standard_normal(null.shape[1])
            assert (other - a) @ M @ (other - a) >= gauss - 1e-9 * (1 + gauss)


# ------------------------------------------------------------------------- KKT cross-check


def test_uk_matches_lagrange_multipliers():
    """Seed 000 eq 10: [[M, -A^T], [A, 0]] [q''; lambda] = [Q; b], constraint force A^T lambda."""
    rng = np.random.default_rng(4)
    worst_qdd = worst_force = 0.0
    for n in (2, 3, 6, 10, 15):
        for m in range(1, n):
            M = random_spd(rng, n)
            A = rng.standard_normal((m, n))  # full row rank
            Q, b = rng.standard_normal(n) * 5, rng.standard_normal(m)
            K = np.block([[M, -A.T], [A, np.zeros((m, m))]])
            sol = np.linalg.solve(K, np.concatenate((Q, b)))
            qdd_kkt, lam = sol[:n], sol[n:]
            force_kkt = A.T @ lam
            qdd = uk.constrained_acceleration(M, Q, A, b)
            for force in (uk.constraint_force(M, Q, A, b), uk.constraint_force_reference(M, Q, A, b)):
                worst_force = max(worst_force, np.max(np.abs(force - force_kkt)) / max(1, np.abs(force_kkt).max()))
            worst_qdd = max(worst_qdd, np.max(np.abs(qdd - qdd_kkt)) / max(1, np.abs(qdd_kkt).max()))
    print(f'\nUK vs KKT: max rel. difference q\'\' {worst_qdd:.2e}, constraint force {worst_force:.2e}')
    assert worst_qdd < 1e-10 and worst_force < 1e-10


def test_mass_factor_reuse_and_errors():
    rng = np.random.default_rng(5)
    M, Q, A, b = random_system(rng, 5, 2, 2)
    factor = uk.MassFactor(M)
    assert np.allclose(factor.solve(Q), np.linalg.solve(M, Q))
    assert np.allclose(uk.constraint_force(M, Q, A, b, factor=factor), uk.constraint_force(M, Q, A, b))
    with pytest.raises(uk.NotPositiveDefiniteError):
        uk.MassFactor(np.diag([1.0, -1.0]))
    with pytest.raises(uk.NotPositiveDefiniteError):
        uk.symmetric_sqrt(np.diag([1.0, 0.0]))
    with pytest.raises(ValueError, match='inconsistent shapes'):
        uk.constraint_force(M, Q, A, b[:1])
    S = uk.symmetric_sqrt(M)
    assert np.allclose(S @ S, M) and np.allclose(S @ uk.symmetric_sqrt(M, inverse=True), np.eye(5))


# -------------------------------------------------------------------------- non-ideal force


def test_nonideal_force_fast_vs_reference_and_work():
    """Seed 004 eq 12: Q_nid = M^{1/2} (I - B^+ B) M^{-1/2} c does work v^T c on every
    virtual displacement (A v = 0, seed 004 eq 8) and leaves A q'' unchanged."""
    rng = np.random.default_rng(6)
    worst = 0.0
    for n, m, r in CASES:
        M, Q, A, b = random_system(rng, n, m, r)
        c = rng.standard_normal(n)
        fast = uk.nonideal_constraint_force(M, A, c)
        ref = uk.nonideal_constraint_force_reference(M, A, c)
        worst = max(worst, np.max(np.abs(fast - ref)) / max(1, np.abs(ref).max()))
        _, s, Vt = np.linalg.svd(A)
        null = Vt[int(np.sum(s > 1e-10 * s[0])) :].T
        assert np.allclose(null.T @ fast, null.T @ c, atol=1e-9)  # work property
        assert np.allclose(A @ np.linalg.solve(M, fast), 0.0, atol=1e-9)  # no constraint acceleration
    print(f'\nnon-ideal force: max rel. |fast - reference| {worst:.2e}')
    assert worst < 1e-9


# ------------------------------------------------------------------------------- Baumgarte


def test_baumgarte_conventions_agree():
    a, b = 3.0, 7.0
    sq = Baumgarte.squared(a, b)  # phi'' + 2a phi' + b^2 phi
    s0 = Baumgarte.seed000(2 * a, b * b)  # phi'' + alpha phi' + beta phi
    assert np.isclose(sq.kd, s0.kd) and np.isclose(sq.kp, s0.kp)
    assert (sq.kd, sq.kp) == (6.0, 49.0)
    cr = Baumgarte.critical(4.0)
    assert (cr.kd, cr.kp) == (8.0, 16.0) and cr.kd**2 == 4 * cr.kp  # critical damping
    assert Baumgarte.from_config({'convention': 'squared', 'alpha': a, 'beta': b}) == sq
    assert Baumgarte.from_config({'convention': 'seed000', 'alpha': 2 * a, 'beta': b * b}) == s0
    assert Baumgarte.from_config({'convention': 'critical', 'omega': 4.0}) == cr
    assert Baumgarte.from_config({'convention': 'none'}) == Baumgarte.none()
    with pytest.raises(KeyError, match='stabilization.omega'):
        Baumgarte.from_config({'convention': 'critical'})
    with pytest.raises(ValueError, match='convention'):
        Baumgarte.from_config({'convention': 'fast'})
    # per-row gains (seed 000 writes diagonal gain matrices)
    rows = ConstraintRows(
        np.array([1.0, 2.0]), np.array([0.5, 0.0]), np.eye(2), np.zeros(2), np.array([2, 1], dtype=np.int8)
    )
    out = Baumgarte(kd=np.array([2.0, 9.0]), kp=np.array([3.0, 9.0]), k1=np.array([9.0, 5.0])).stabilized_rhs(rows)
    assert np.allclose(out, [-(2.0 * 0.5 + 3.0 * 1.0), -5.0 * 2.0])


def linear_ode_solution(kd, kp, phi0, dphi0, t):
    """Closed form of phi'' + kd phi' + kp phi = 0 (roots of s^2 + kd s + kp)."""
    disc = kd * kd - 4 * kp
    if abs(disc) < 1e-12:
        r = -kd / 2
        return (phi0 + (dphi0 - r * phi0) * t) * np.exp(r * t)
    sq = np.sqrt(complex(disc))
    r1, r2 = (-kd + sq) / 2, (-kd - sq) / 2
    c2 = (dphi0 - r1 * phi0) / (r2 - r1)
    c1 = phi0 - c2
    return np.real(c1 * np.exp(r1 * t) + c2 * np.exp(r2 * t))


MASS = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 1.5]])
AVEC = np.array([1.0, -0.5, 0.8])


def holonomic_rows(q, qd):
    """phi = a.q + 0.3 sin(q1) - 0.2 (a nonlinear holonomic constraint) in ConstraintRows form."""
    A = (AVEC + np.array([0.3 * np.cos(q[0]), 0.0, 0.0]))[None, :]
    phi = np.array([AVEC @ q + 0.3 * np.sin(q[0]) - 0.2])
    b = np.array([0.3 * np.sin(q[0]) * qd[0] ** 2])  # phi'' = A q'' - b
    return ConstraintRows(phi, A @ qd, A, b, np.array([2], dtype=np.int8))


@pytest.mark.parametrize(
    'gains',
    [
        Baumgarte.seed000(4.0, 25.0),  # under-damped (zeta 0.4)
        Baumgarte.critical(5.0),  # critical
        Baumgarte.squared(5.0, 3.0),
    ],  # over-damped (roots -1, -9)
    ids=['under', 'critical', 'over'],
)
def test_baumgarte_decay_matches_closed_form(gains):
    """Integrating the UK dynamics with the stabilized b makes phi obey the linear ODE exactly."""

    def rhs(t, s):
        q, qd = s[:3], s[3:]
        rows = holonomic_rows(q, qd)
        Q = np.array([np.sin(t), -1.0, 0.5 * q[1]])
        qdd = uk.constrained_acceleration(MASS, Q, rows.A, gains.stabilized_rhs(rows))
        return np.concatenate((qd, qdd))

    s0 = np.array([0.4, 0.1, -0.2, 0.3, -0.1, 0.2])
    rows0 = holonomic_rows(s0[:3], s0[3:])
    t = np.linspace(0.0, 4.0, 81)
    sol = solve_ivp(rhs, (0, 4.0), s0, t_eval=t, method='DOP853', rtol=1e-10, atol=1e-12)
    assert sol.success
    phi = np.array([holonomic_rows(sol.y[:3, k], sol.y[3:, k]).phi[0] for k in range(t.size)])
    expected = linear_ode_solution(float(gains.kd), float(gains.kp), rows0.phi[0], rows0.phidot[0], t)
    assert abs(rows0.phi[0]) > 0.1  # starts well off the constraint
    assert np.max(np.abs(phi - expected)) < 1e-7
    assert abs(phi[-1]) < 0.05 * abs(rows0.phi[0])


def test_first_order_rows_decay_exponentially():
    """Nonholonomic row phi = qd1 + q1 qd2 (order 1): A q'' = b - k1 phi gives phi' = -k1 phi."""
    gains = Baumgarte.critical(3.0)
    M = np.diag([1.0, 2.0, 0.5])

    def rows_at(q, qd):
        A = np.array([[1.0, q[0], 0.0]])
        phi = np.array([qd[0] + q[0] * qd[1]])
        b = np.array([-qd[0] * qd[1]])  # phi' = A q'' - b
        return ConstraintRows(phi, np.zeros(1), A, b, np.array([1], dtype=np.int8))

    def rhs(t, s):
        rows = rows_at(s[:3], s[3:])
        qdd = uk.constrained_acceleration(M, np.array([0.0, -1.0, 1.0]), rows.A, gains.stabilized_rhs(rows))
        return np.concatenate((s[3:], qdd))

    s0 = np.array([0.5, 0.0, 0.0, 1.0, 0.4, 0.0])
    t = np.linspace(0, 3, 31)
    sol = solve_ivp(rhs, (0, 3), s0, t_eval=t, method='DOP853', rtol=1e-10, atol=1e-12)
    phi = np.array([rows_at(sol.y[:3, k], sol.y[3:, k]).phi[0] for k in range(t.size)])
    assert np.max(np.abs(phi - phi[0] * np.exp(-3.0 * t))) < 1e-8


# ---------------------------------------------------------------------------- servo control


def test_servo_passive_structure_is_uk_force():
    """Seed 004 section II: with B = A^T (a passive constraint seen as a servo) B u is the UK force."""
    rng = np.random.default_rng(7)
    for n, m, r in CASES:
        M, Q, A, b = random_system(rng, n, m, r)
        res = uk.servo_control(M, Q, A.T, A, b)
        ref = uk.constraint_force_reference(M, Q, A, b)
        assert np.allclose(A.T @ res.u, ref, atol=1e-9 * max(1, np.abs(ref).max()))
        # A backward-stable solve leaves a residual of order eps * cond(A N B) * |b|; the random
        # rank-deficient cases reach cond ~ 5e7, where 1e-9 * |b| alone is below round-off.
        bound = max(1e-9, 10 * EPS * res.condition) * max(1, np.abs(b).max())
        assert res.consistent and res.servo_residual < bound


def test_servo_fully_actuated_fully_specified_equals_uk_force():
    """B = I and n independent servo constraints: u is the UK force (q'' is unique)."""
    rng = np.random.default_rng(8)
    for n in (2, 4, 6):
        M, Q, A, b = random_system(rng, n, n, n)
        res = uk.servo_control(M, Q, np.eye(n), A, b)
        assert np.allclose(res.u, uk.constraint_force(M, Q, A, b), atol=1e-9)
        assert res.rank == n


def test_servo_fully_actuated_minimum_norm():
    """B = I, m < n: u = (A M^{-1})^+ (b - A M^{-1} Q) (seed 004 eq 35, s = 0): it realises the
    constraint, and no other realising u is shorter (the UK force is one of them)."""
    rng = np.random.default_rng(9)
    M, Q, A, b = random_system(rng, 6, 2, 2)
    res = uk.servo_control(M, Q, np.eye(6), A, b)
    Minv = np.linalg.inv(M)
    assert np.allclose(res.u, np.linalg.pinv(A @ Minv) @ (b - A @ Minv @ Q), atol=1e-10)
    assert np.allclose(A @ res.qdd, b, atol=1e-10)
    assert np.linalg.norm(res.u) <= np.linalg.norm(uk.constraint_force(M, Q, A, b)) + 1e-12


def test_servo_underactuated_and_redundant():
    rng = np.random.default_rng(10)
    n = 5
    M = random_spd(rng, n)
    Q = rng.standard_normal(n)
    # under-actuated: 2 actuators, 2 servo constraints (rank C B_bar = 2)
    B = rng.standard_normal((n, 2))
    A, b = rng.standard_normal((2, n)), rng.standard_normal(2)
    res = uk.servo_control(M, Q, B, A, b)
    assert res.rank == 2 and res.consistent
    assert np.allclose(A @ res.qdd, b, atol=1e-10)
    assert np.allclose(M @ res.qdd, Q + B @ res.u, atol=1e-10)
    # redundantly actuated: 7 actuators, 2 servo constraints; s moves u in null(C B_bar) only
    B = rng.standard_normal((n, 7))
    s = rng.standard_normal(7)
    r0 = uk.servo_control(M, Q, B, A, b)
    rs = uk.servo_control(M, Q, B, A, b, s=s)
    CB = A @ np.linalg.solve(M, B)
    for res in (r0, rs):
        assert np.allclose(A @ res.qdd, b, atol=1e-10)
    assert np.allclose(CB @ (rs.u - r0.u), 0.0, atol=1e-10)
    assert np.linalg.norm(r0.u) < np.linalg.norm(rs.u)  # s = 0 is the minimum-norm control
    assert np.allclose(r0.u, np.linalg.pinv(CB) @ (b - A @ np.linalg.solve(M, Q)), atol=1e-10)


def test_servo_infeasible_reports():
    M = np.diag([1.0, 2.0, 3.0])
    Q = np.array([0.0, 1.0, 0.0])
    # rank 0: the actuator drives q1, the servo constraint is on q2 (M diagonal: decoupled)
    B, A, b = np.array([[1.0], [0.0], [0.0]]), np.array([[0.0, 1.0, 0.0]]), np.array([1.0])
    with pytest.raises(uk.ServoInfeasibleError, match='rank'):
        uk.servo_control(M, Q, B, A, b)
    res = uk.servo_control(M, Q, B, A, b, on_infeasible='report')
    assert res.rank == 0 and not res.consistent
    assert res.servo_residual == pytest.approx(abs(b[0] - Q[1] / M[1, 1]))
    # inconsistent: one actuator, two independent servo constraints
    B = np.array([[1.0], [1.0], [0.0]])
    A, b = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), np.array([1.0, -1.0])
    with pytest.raises(uk.ServoInfeasibleError, match='inconsistent'):
        uk.servo_control(M, Q, B, A, b)
    res = uk.servo_control(M, Q, B, A, b, on_infeasible='report')
    assert res.rank == 1 and not res.consistent and res.servo_residual > 0.1
    # least squares: the u returned minimises ||C B_bar u - b_bar|| (seed 004 eq 35 with s = 0)
    CB, bbar = A @ np.linalg.solve(M, B), b - A @ np.linalg.solve(M, Q)
    u_ls = np.linalg.lstsq(CB, bbar, rcond=None)[0]
    assert np.allclose(res.u, u_ls)
    with pytest.raises(ValueError):
        uk.servo_control(M, Q, B, A, b, on_infeasible='ignore')


# --------------------------------------------------------- closed chain: two coordinated arms


class DualArm:
    """Seed 004 section V: two 3-link planar arms holding one object, as a 5-link chain in
    absolute link angles theta_i (omega_i = theta_i', seed 004 eq 59), hinged to the ground
    at the origin and closed at (L, 0) (eq 60). Uniform links, centroid at the middle.

    For absolute angles the planar-chain inertia is M_ij = a_ij cos(th_i - th_j) + I_i delta_ij
    and the velocity terms are h_i = sum_j a_ij sin(th_i - th_j) th_j'^2 (derived from
    T = 1/2 th'^T M th'), with a_ii = m_i (l_i/2)^2 + l_i^2 sum_{k>i} m_k and, for i < j,
    a_ij = l_i l_j (m_j / 2 + sum_{k>j} m_k). Gravity G_i = g l_i (m_i/2 + sum_{k>i} m_k) cos th_i.
    """

    def __init__(self, m=1.0, inertia=1.0, length=1.0, g=9.8, base=3.0):
        k = 5
        self.l = np.full(k, length)
        self.m = np.full(k, m)
        self.I = np.full(k, inertia)
        self.g, self.base = g, base
        tail = np.array([self.m[i + 1 :].sum() for i in range(k)])
        a = np.empty((k, k))
        for i in range(k):
            for j in range(k):
                lo, hi = min(i, j), max(i, j)
                a[i, j] = (
                    self.m[i] * (self.l[i] / 2) ** 2 + self.l[i] ** 2 * tail[i]
                    if i == j
                    else self.l[lo] * self.l[hi] * (self.m[hi] / 2 + tail[hi])
                )
        self.a = a
        self.gcoef = g * self.l * (self.m / 2 + tail)
        # eq 70: u1 base of arm 1, u2, u3 its joints, u4, u5 joints of arm 2, u6 its base
        self.B = np.array(
            [[1, -1, 0, 0, 0, 0], [0, 1, -1, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, -1, 1, 0], [0, 0, 0, 0, -1, 1]],
            dtype=float,
        )

    def dynamics(self, th, thd):
        d = th[:, None] - th[None, :]
        M = self.a * np.cos(d) + np.diag(self.I)
        h = (self.a * np.sin(d)) @ (thd**2)
        return M, -h - self.gcoef * np.cos(th)  # Q = tau - C th' - G, tau = 0

    def closure(self, th, thd):
        """Eqs 60–63: A_p th'' = b_p, and the position residual."""
        l = self.l
        A = np.vstack((-l * np.sin(th), l * np.cos(th)))
        b = np.array([l @ (np.cos(th) * thd**2), l @ (np.sin(th) * thd**2)])
        phi = np.array([l @ np.cos(th) - self.base, l @ np.sin(th)])
        return A, b, phi

    def servo(self, th, thd, t, length=1.0):
        """Eqs 64–68: object centroid x3 = 1.5 l, y3 = l/2 (1 - cos t), theta3 = 0."""
        l = self.l
        c = np.array([l[0], l[1], l[2] / 2, 0, 0])
        A = np.vstack((-c * np.sin(th), c * np.cos(th), [0, 0, 1, 0, 0]))
        b = np.array([c @ (np.cos(th) * thd**2), c @ (np.sin(th) * thd**2) + length / 2 * np.cos(t), 0.0])
        return A, b

    def random_state(self, rng):
        """A configuration on the closure (arm 2 by two-link inverse kinematics) and a velocity tangent to it."""
        while True:
            th = np.empty(5)
            th[:3] = rng.uniform([0.8, -1.8, -0.4], [2.2, -0.3, 0.4])
            p = np.array([self.l[:3] @ np.cos(th[:3]), self.l[:3] @ np.sin(th[:3])])
            d = np.array([self.base, 0.0]) - p
            r = np.linalg.norm(d)
            l4, l5 = self.l[3], self.l[4]
            if not abs(l4 - l5) < r < l4 + l5:
                continue
            base_angle = np.arctan2(d[1], d[0])
            off = np.arccos((l4**2 + r**2 - l5**2) / (2 * l4 * r))
            th[3] = base_angle + off
            e = d - l4 * np.array([np.cos(th[3]), np.sin(th[3])])
            th[4] = np.arctan2(e[1], e[0])
            A, _, phi = self.closure(th, np.zeros(5))
            assert np.allclose(phi, 0.0, atol=1e-12)
            _, s, Vt = np.linalg.svd(A)
            thd = Vt[2:].T @ rng.standard_normal(3)
            return th, thd


def test_closed_chain_cascade_violates_servo_projected_does_not():
    arm = DualArm()
    rng = np.random.default_rng(12)
    cascade_worst, ours_worst, passive_worst = 0.0, 0.0, 0.0
    for _ in range(20):
        th, thd = arm.random_state(rng)
        t = rng.uniform(0, 6)
        M, Q = arm.dynamics(th, thd)
        Ap, bp, _ = arm.closure(th, thd)
        As, bs = arm.servo(th, thd, t)
        scale = max(1.0, np.abs(bs).max())
        u_c, qdd_c = uk.servo_control_cascade(M, Q, arm.B, As, bs, A_passive=Ap, b_passive=bp)
        res = uk.servo_control(M, Q, arm.B, As, bs, A_passive=Ap, b_passive=bp)
        cascade_worst = max(cascade_worst, np.linalg.norm(As @ qdd_c - bs) / scale)
        ours_worst = max(ours_worst, np.linalg.norm(As @ res.qdd - bs) / scale)
        passive_worst = max(passive_worst, np.linalg.norm(Ap @ res.qdd - bp) / max(1, np.abs(bp).max()))
        # 2 closure + 3 servo rows fix all 5 accelerations: compare with the direct solve
        qdd_direct = np.linalg.solve(np.vstack((Ap, As)), np.concatenate((bp, bs)))
        assert np.allclose(res.qdd, qdd_direct, atol=1e-8 * max(1, np.abs(qdd_direct).max()))
        # the closed chain really does this under u: UK with the closure as the passive constraint
        qdd_plant = uk.constrained_acceleration(M, Q + arm.B @ res.u, Ap, bp)
        assert np.allclose(qdd_plant, res.qdd, atol=1e-8 * max(1, np.abs(res.qdd).max()))
        # the passive force is an ideal closure force: in range(A_p^T)
        _, s, Vt = np.linalg.svd(Ap)
        assert np.allclose(Vt[2:] @ res.passive_force, 0.0, atol=1e-8 * max(1, np.abs(res.passive_force).max()))
        assert res.rank == 3 and res.consistent and res.passive_rank == 2
    print(
        f'\nclosed chain: servo residual cascade {cascade_worst:.2e}, servo_control {ours_worst:.2e}, '
        f'closure residual {passive_worst:.2e}'
    )
    assert cascade_worst > 1e-1
    assert ours_worst < 1e-10 and passive_worst < 1e-10
