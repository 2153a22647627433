"""The so3 orientation error at and near a rotation of pi (the cut locus of the principal log).

- log3 (compiled and NumPy twins) returns a rotation vector whose exp is the rotation, for every axis at
  exactly pi and within the 1e-2 band below it, including axes with components of both signs (the old
  per-component signing returned a vector that is not the axis there);
- it equals ``pinocchio.log3`` where the principal log is unique (th < pi), and at th = pi one of the two logs;
- the three so3 rows (compiled ``so3_rows`` and the reference ``terms._so3_rows``) are finite, bounded and equal
  at an error of exactly pi, and phi' equals a finite difference of the log just below pi.
"""

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.constraints.so3 import log3 as log3_numpy
from uk_controller.constraints.terms import _so3_rows
from uk_controller.kernels import jit

pytestmark = pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')


def _rodrigues(r):
    """exp([r]x) written out (an independent exp: R = cos th I + sin th [a] + (1 - cos th) a a^T)."""
    th = np.linalg.norm(r)
    a = r / th
    K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.cos(th) * np.eye(3) + np.sin(th) * K + (1.0 - np.cos(th)) * np.outer(a, a)


def _axes(rng, count):
    fixed = [(1, -1, 0), (1, 1, 0), (0, 1, -1), (1, -2, 3), (-1, 1, 1), (1, 0, 0), (0, 0, -1), (1, 1e-9, -1)]
    out = [np.array(a, float) / np.linalg.norm(a) for a in fixed]
    for _ in range(count):
        a = rng.standard_normal(3)
        out.append(a / np.linalg.norm(a))
    return out


@pytest.mark.parametrize('gap', [0.0, 1e-15, 1e-12, 1e-9, 1e-6, 1e-3, 5e-3, 1e-2 - 1e-9])
def test_log3_near_pi_is_a_log_of_the_rotation(gap):
    """exp(log3(R)) == R to round-off and |log3(R)| == th, compiled == NumPy; below pi the principal log
    is unique and equals pinocchio.log3 and the rotation vector itself; at pi it is +-th a."""
    from uk_controller.kernels.so3 import log3

    rng = np.random.default_rng(7)
    e = np.zeros(3)
    th = np.pi - gap
    for a in _axes(rng, 60):
        R = _rodrigues(th * a)
        log3(R, e)
        np.testing.assert_allclose(e, log3_numpy(R), rtol=0, atol=1e-15)
        np.testing.assert_allclose(_rodrigues(e), R, rtol=0, atol=2e-15)
        assert abs(np.linalg.norm(e) - th) < 1e-14
        # the axis: e parallel to a (|e x a| ~ 0) whatever the sign
        assert np.linalg.norm(np.cross(e, a)) < 1e-12
        if gap >= 1e-6:  # v = 2 sin th a carries the sign: the principal log is th a
            np.testing.assert_allclose(e, th * a, rtol=0, atol=1e-9)
            np.testing.assert_allclose(e, pin.log3(R), rtol=0, atol=1e-9)


def _rows_both(R, Rd, J, drift, qd, wd, wdd):
    from uk_controller.kernels.so3 import SO3_SCRATCH, so3_rows

    n = J.shape[1]
    out_k = [np.zeros(3), np.zeros(3), np.zeros((3, n)), np.zeros(3)]
    out_r = [np.zeros(3), np.zeros(3), np.zeros((3, n)), np.zeros(3)]
    so3_rows(R, J, drift, qd, Rd, wd, wdd, J, drift, False, *out_k, np.zeros(SO3_SCRATCH))
    _so3_rows(R, J[3:], drift[3:], qd, Rd, wd, wdd, None, None, *out_r)
    return out_k, out_r


def test_so3_rows_finite_bounded_and_twins_at_pi():
    """An orientation error of exactly pi (and 1e-9, 1e-6, 1e-3 below): phi, phi', A, b finite, compiled ==
    reference, |A| <= |Jr^-1| |J| with |Jr^-1(pi a)| = pi/2 (its largest singular value: 1 along a, pi/2
    across, from I + [e]/2 + [e]^2/pi^2), and phi' equals a central difference of log3 along the motion."""
    rng = np.random.default_rng(3)
    n = 7
    for gap in (0.0, 1e-9, 1e-6, 1e-3):
        for a in _axes(rng, 20):
            R = _rodrigues(rng.standard_normal(3))
            Rd = R @ _rodrigues((np.pi - gap) * a).T  # R_d^T R = exp((pi - gap) a)
            J = rng.standard_normal((6, n))
            drift, qd = rng.standard_normal(6), rng.standard_normal(n)
            wd, wdd = rng.standard_normal(3), rng.standard_normal(3)
            k, r = _rows_both(R, Rd, J, drift, qd, wd, wdd)
            for x, y in zip(k, r):
                assert np.all(np.isfinite(x))
                np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * (1.0 + np.abs(y).max()))
            phi, phid, A, b = k
            assert np.linalg.norm(A, 2) <= (np.pi / 2) * np.linalg.norm(R.T @ J[3:], 2) * (1 + 1e-12)
            e = phi
            Jinv = np.eye(3) + 0.5 * pin.skew(e) + pin.skew(e) @ pin.skew(e) / np.pi**2
            assert np.linalg.svd(Jinv, compute_uv=False).max() <= np.pi / 2 + 1e-6
            if gap >= 1e-3:  # the log is smooth there: phi' by a central difference
                we = R.T @ (J[3:] @ qd - wd)
                h = 1e-6
                Ep = Rd.T @ R @ _rodrigues(h * we)  # d/dt (R_d^T R) = (R_d^T R) [omega_e]x
                Em = Rd.T @ R @ _rodrigues(-h * we)
                fd = (log3_numpy(Ep) - log3_numpy(Em)) / (2 * h)
                np.testing.assert_allclose(phid, fd, rtol=0, atol=1e-5 * (1 + np.abs(fd).max()))
