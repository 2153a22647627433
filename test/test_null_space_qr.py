"""The null-space term's QR fast path (kernels/servo.py null_space_qr, kernels/qrls.py) against the SVD.

``null_space_step`` solves ``z = Y^+ L^T (a_p - q''_task)`` with ``Y = X Z`` (Z: orthonormal basis of the
complement of the kept V_G) and counts the singular values ``s > null_rcond |X|_F``. Its fast path (pivoted
Householder QR, taken only when the factors prove that rank) must give the SVD's dimensions and its
minimum-norm solution; where the proof fails it must decline and the Jacobi path must give the SVD's answer.
References computed here: numpy.linalg.svd of X P with the same rule, uk.redundancy_effort (the NumPy twin)
and numpy.linalg.lstsq.
"""

import numpy as np
import pytest

from uk_controller.core import uk
from uk_controller.kernels import jit

pytestmark = pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')

RNG = np.random.default_rng(190)
NULL_RCOND = 1e-6


def _orthonormal(m, c):
    return np.linalg.qr(RNG.normal(size=(m, m)))[0][:, :c]


def _problem(n, p, g, sy, *, small=(), big=1.0, scaled=False, L=None):
    """Inputs of null_space_step with prescribed singular values of Y = X Z: sy, and `small` given in units of
    the cut null_rcond |X|_F (len(sy) + len(small) = k = p - g <= n). X = U diag(s) W^T Z^T + D V_G^T with
    [V_G Z] orthogonal, so |X|_F^2 = |s|^2 + |D|_F^2 exactly; M = L L^T (identity unless L given, then
    NB = L^-T X so that L^T NB = X)."""
    k = p - g
    Q = _orthonormal(p, p)
    Vg, Z = Q[:, :g], Q[:, g:]
    U, W = _orthonormal(n, k), _orthonormal(k, k)
    D = big * RNG.normal(size=(n, g))
    small = np.asarray(small, dtype=float)
    fro = np.sqrt((np.sum(np.square(sy)) + np.sum(D * D)) / (1.0 - NULL_RCOND**2 * np.sum(small * small)))
    s = np.concatenate((sy, small * NULL_RCOND * fro))
    X = U @ np.diag(s) @ W.T @ Z.T + D @ Vg.T
    L = np.eye(n) if L is None else L
    NB = np.linalg.solve(L.T, X)
    sg = np.sort(RNG.uniform(0.5, 3.0, size=g))[::-1].copy()
    right = Vg * sg if scaled else Vg.copy()
    a_p, qt = RNG.normal(size=n), RNG.normal(size=n)
    return dict(L=L, NB=NB, X=L.T @ NB, Vg=Vg, sg=sg, right=np.ascontiguousarray(right), scaled=scaled, a_p=a_p, qt=qt)


def _kernel(pb, *, fast_only=False):
    """(ok, du, dims): null_space_qr alone when fast_only (ok: it took the problem), else null_space_step."""
    from uk_controller.kernels import servo

    L, NB = pb['L'], pb['NB']
    n, p = NB.shape
    g = pb['sg'].size
    # posture rows A = I with kd = 0, kp = 1, b = 0: a_p = -phi
    As, bs, phis, phids = np.eye(n), np.zeros(n), -pb['a_p'], np.zeros(n)
    gains = np.vstack((np.zeros(n), np.ones(n)))
    sc = np.full((servo.null_scratch_rows(n, p), max(n, p, 1)), np.nan)
    du = np.full(p, np.nan)
    if fast_only:
        ap = np.zeros(n)
        servo.posture_accel(As, bs, phis, phids, gains, 0, 0, np.inf, ap)
        ok, r = servo.null_space_qr(L, NB, pb['qt'], ap, pb['right'], pb['sg'], g, pb['scaled'], NULL_RCOND, du, sc, 0)
        return ok, du, (r, p - g - r)
    dims = servo.null_space_step(
        L,
        NB,
        pb["qt"],
        As,
        bs,
        phis,
        phids,
        gains,
        0,
        0,
        np.inf,
        pb['right'],
        pb['sg'],
        g,
        pb['scaled'],
        NULL_RCOND,
        60,
        False,
        np.zeros(p),
        du,
        sc,
        0,
    )
    return True, du, dims


def _reference(pb):
    """du and dims by numpy.linalg.svd of X P (the SVD rule s > null_rcond |X|_F), as uk.redundancy_effort."""
    X, Vg = pb['X'], pb['Vg']
    p = X.shape[1]
    P = np.eye(p) - Vg @ Vg.T
    U, s, Vt = np.linalg.svd(X @ P, full_matrices=False)
    keep = s > NULL_RCOND * np.linalg.norm(X)
    d = pb['L'].T @ (pb['a_p'] - pb['qt'])
    du = Vt[keep].T @ ((U[:, keep].T @ d) / s[keep])
    return du, (int(keep.sum()), p - Vg.shape[1] - int(keep.sum()))


def _close(a, b, rtol):
    return np.abs(a - b).max() <= rtol * max(1.0, np.abs(b).max())


@pytest.mark.parametrize('scaled', [False, True])
@pytest.mark.parametrize(
    'n, p, g, deficient',
    [(9, 9, 3, 0), (9, 9, 3, 1), (6, 6, 3, 0), (7, 5, 1, 2), (4, 4, 0, 0), (5, 3, 2, 1), (8, 6, 0, 2)],
)
@pytest.mark.slow
def test_fast_path_is_the_svd_solution(n, p, g, deficient, scaled):
    """Full column rank and exactly rank-deficient Y (structural zeros, as the Panda's finger coupling gives):
    the QR path takes the problem and returns the SVD's dimensions and minimum-norm solution, also against
    numpy.linalg.lstsq of the same projected problem and the NumPy twin uk.redundancy_effort."""
    for trial in range(6):
        k = p - g
        sy = RNG.uniform(0.05, 2.0, size=k)
        sy[k - deficient :] = 0.0
        Lr = np.linalg.cholesky(np.cov(RNG.normal(size=(n, 3 * n))) + np.eye(n)) if trial % 2 else None
        pb = _problem(n, p, g, sy, scaled=scaled, L=Lr)
        ok, du, dims = _kernel(pb, fast_only=True)
        ref, rdims = _reference(pb)
        assert ok and dims == rdims == (k - deficient, deficient)
        assert _close(du, ref, 1e-11)
        # lstsq: minimum-norm least squares of X P z = L^T (a_p - q''_task), its relative cut set to the rule's
        XP = pb['X'] @ (np.eye(p) - pb['Vg'] @ pb['Vg'].T)
        s1 = np.linalg.norm(XP, 2)
        rc = NULL_RCOND * np.linalg.norm(pb['X']) / s1
        z = np.linalg.lstsq(XP, pb['L'].T @ (pb['a_p'] - pb['qt']), rcond=rc)[0] if rc < 1.0 else np.zeros(p)
        assert _close(du, z, 1e-10)
        # the whole step (null_space_step) and the NumPy twin from M, N B and a G with row space V_G
        _, du2, dims2 = _kernel(pb)
        assert dims2 == dims and np.array_equal(du2, du)
        if g:
            G = RNG.normal(size=(g, g)) @ pb['Vg'].T
            M = pb['L'] @ pb['L'].T
            du3, m3, i3 = uk.redundancy_effort(M, pb['NB'], G, pb['qt'], posture_accel=pb['a_p'])
            assert (m3, i3) == dims and _close(du, du3, 1e-9)


@pytest.mark.parametrize(
    'small, expected_rank',
    [
        ((1.2, 1.2), 6),  # both above the cut, but 1 / |R11^-1|_F <= 1.2 / sqrt 2 cut < cut: no proof
        ((0.9,), 5),  # just below the cut: dropped by the SVD, not provable either way by the QR
        ((1e-3,), 5),  # between the QR's round-off margin and the cut
    ],
)
@pytest.mark.slow
def test_fast_path_declines_what_it_cannot_prove(small, expected_rank):
    """Singular values near the cut (in units of cut = null_rcond |X|_F): null_space_qr declines, and
    null_space_step (then the Jacobi SVD) gives the SVD rule's dimensions and solution."""
    for _ in range(4):
        pb = _problem(9, 9, 3, RNG.uniform(0.5, 2.0, size=6 - len(small)), small=small)
        cut = NULL_RCOND * np.linalg.norm(pb['X'])
        s = np.linalg.svd(pb['X'] @ (np.eye(9) - pb['Vg'] @ pb['Vg'].T), compute_uv=False)[:6]
        assert np.allclose(np.sort(s)[: len(small)] / cut, sorted(small), rtol=1e-6)
        ok, _, _ = _kernel(pb, fast_only=True)
        assert not ok
        _, du, dims = _kernel(pb)
        ref, rdims = _reference(pb)
        assert dims == rdims == (expected_rank, 6 - expected_rank)
        assert _close(du, ref, 1e-8)


@pytest.mark.slow
def test_fast_path_takes_a_small_but_provable_singular_value():
    """One singular value at 5 cut, the others O(1): the bound 1 / |R11^-1|_F is within a few per cent of it,
    so the QR path proves rank k and its solution (|du| ~ 1 / s_min, conditioned like 1e5) is the SVD's."""
    for _ in range(4):
        pb = _problem(9, 9, 3, RNG.uniform(0.5, 2.0, size=5), small=(5.0,))
        ok, du, dims = _kernel(pb, fast_only=True)
        ref, rdims = _reference(pb)
        assert ok and dims == rdims == (6, 0)
        assert _close(du, ref, 1e-8)


@pytest.mark.slow
def test_zero_x_is_left_to_the_svd_path():
    """X = 0 (no effort moves anything): no cut to prove against, null_space_qr declines; the step gives
    du = 0 and every free direction internal, as the SVD rule (which keeps nothing when |X|_F = 0)."""
    pb = _problem(6, 5, 2, np.ones(3))
    pb['NB'][:] = 0.0
    pb['X'][:] = 0.0
    ok, _, _ = _kernel(pb, fast_only=True)
    assert not ok
    _, du, dims = _kernel(pb)
    assert dims == (0, 3) and not du.any()
