"""Seed 002's five-bar parallelogram: the mechanism, seed 002 eq 32 in NumPy and compiled, the reduced model.

The mechanism (seed 002, SIMULATION RESULTS and Figure 1): three parallel links (L = 1,
m = 1, I = 0.1) pinned to the ground at x = 0, 1, 2 and to a coupler (L2 = 2, m2 = 2,
I2 = 0.2) at its ends and middle; gravity, no dissipation. Absolute (Nikravesh)
coordinates: each body has (x, y, phi) of its centroid, n = 12; six revolute pairs give
12 constraints whose Jacobian has rank 11 (the middle link is redundant), one degree of
freedom.

The equation integrated is seed 002 eq 32 with the chosen pseudo-inverse:

    q'' = q''_f + M^{-1/2} D^+ (gamma - 2 alpha Psi' - beta^2 Psi - Psi_q q''_f),  D = Psi_q M^{-1/2}

which is uk.constraint_force_reference; as M is constant here its square roots are
computed once (Parallelogram.acceleration; test_seed002_parallelogram checks it against uk.py),
with alpha = 1000, beta = 100 (the paper's Baumgarte gains) or alpha = beta = 0. As in the
paper the pseudo-inverse rank threshold equals the integrator tolerance TOL (``rcond = TOL``,
relative here). The initial configuration is not printed in the seed; we start at rest with
the links 30 degrees below the horizontal, so the links swing between -30 and -150 degrees
and never reach the flat configurations theta = 0, pi, where the three links lie on the
ground line, the parallelogram can change branch and the Jacobian rank drops to 10
(``--theta0 60`` starts 60 degrees above the horizontal and passes through them).

Independent reference: the mechanism is a one-degree-of-freedom pendulum in the link angle
theta (coupler translating), ``J theta'' = -3.5 g cos(theta)`` with
``J = 3 (I + m L^2/4) + m2 L^2 = 3.05`` (`REDUCED_J`, `REDUCED_GRAV`, `reference_angle`).

Compiled twins (for the compiled BDF of `bench.bdf`): `constraints_k` of
`Parallelogram.constraints`, `rhs_k` of `Parallelogram.acceleration` (seed 002 eq 32) with the
pseudo-inverse twins of `uk_controller.core.pinv.compiled` (`pinv_k`); test/test_seed002_parallelogram.py
(``test_compiled_rhs_is_eq32``) checks them against the NumPy model, and
``test_model_jacobian_gamma_and_rank`` / ``test_acceleration_matches_reduced_model`` check the model
against finite differences and the reduced model.
"""

from __future__ import annotations

import os

# 12 x 12 factorizations: BLAS threads only add overhead (and distort the timings)
for _var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

from uk_controller.core.pinv import compiled_pinv  # noqa: E402

try:
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - numba is optional
    HAVE_NUMBA = False

    def njit(*args, **kwargs):
        def wrap(f):
            return f

        return wrap(args[0]) if args and callable(args[0]) else wrap


G = 9.81
LINK_L, LINK_M, LINK_I = 1.0, 1.0, 0.1
COUP_L, COUP_M, COUP_I = 2.0, 2.0, 0.2
GROUND = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])  # ground pins of links 1..3
COUPLER_PINS = np.array([[-1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])  # on the coupler, local
LINK_BASE, LINK_TIP = np.array([-LINK_L / 2, 0.0]), np.array([LINK_L / 2, 0.0])
THETA0 = -np.pi / 6
PAPER_GAINS = (1000.0, 100.0)  # seed 002: alpha, beta
METHODS = ['svd', 'varga', 'greville', 'householder', 'mgs']


def limit_blas_threads(n=1):
    """Set the thread count of the OpenBLAS copies already loaded (numpy's and scipy's wheels).

    For a process that imported numpy before this module (pytest), where the environment
    variables above come too late. Returns how many libraries were set; 0 if none found.
    """
    import ctypes

    done = 0
    try:
        with open('/proc/self/maps') as maps:
            paths = {line.split()[-1] for line in maps if 'openblas' in line.lower() and '/' in line}
    except OSError:
        return 0
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in (
            'scipy_openblas_set_num_threads64_',
            'scipy_openblas_set_num_threads',
            'openblas_set_num_threads64_',
            'openblas_set_num_threads',
        ):
            if hasattr(lib, name):
                getattr(lib, name)(int(n))
                done += 1
                break
    return done


class Parallelogram:
    """Mass matrix, forces and the 12 revolute-pair constraints in absolute coordinates.

    q = (x1, y1, phi1, x2, y2, phi2, x3, y3, phi3, x4, y4, phi4), bodies 1–3 the links,
    body 4 the coupler. A revolute pair joins point s_i' of body i to point s_j' of body j
    (or a ground point): ``Psi = r_i + R(phi_i) s_i' - r_j - R(phi_j) s_j'``; its Jacobian
    has ``I`` and ``R'(phi) s'`` blocks and ``gamma = R(phi_i) s_i' phi_i'^2 - R(phi_j) s_j' phi_j'^2``
    (Nikravesh 1988, as seed 002 uses).
    """

    n = 12
    m = 12

    def __init__(self):
        self.M = np.diag([LINK_M, LINK_M, LINK_I] * 3 + [COUP_M, COUP_M, COUP_I])
        self.F = np.zeros(12)
        self.F[[1, 4, 7]] = -LINK_M * G
        self.F[10] = -COUP_M * G
        # constant part of the Jacobian (translation blocks) and the index sets of the rest
        J0 = np.zeros((12, 12))
        for i in range(3):
            J0[4 * i : 4 * i + 2, 3 * i : 3 * i + 2] = np.eye(2)
            J0[4 * i + 2 : 4 * i + 4, 3 * i : 3 * i + 2] = np.eye(2)
            J0[4 * i + 2 : 4 * i + 4, 9:11] = -np.eye(2)
        self._J0 = J0
        self._rows_g = np.array([4 * i + k for i in range(3) for k in (0, 1)])
        self._rows_c = self._rows_g + 2
        self._cols_phi = np.repeat([2, 5, 8], 2)
        m_diag = np.diag(self.M)
        self.m_inv_half = 1.0 / np.sqrt(m_diag)  # M is diagonal and constant
        self.qdd_free = self.F / m_diag  # q''_f = M^{-1} F (eq 25)

    def acceleration(self, q, qd, pinv, rcond, alpha=0.0, beta=0.0):
        """Seed 002 eq 32 (eq 31 when alpha = beta = 0); returns (q'', Psi)."""
        Psi, J, gamma = self.constraints(q, qd)
        D = J * self.m_inv_half  # eq 28b
        rhs = gamma - 2.0 * alpha * (J @ qd) - beta * beta * Psi - J @ self.qdd_free
        return self.qdd_free + self.m_inv_half * (pinv(D, rcond) @ rhs), Psi

    def constraints(self, q, qd):
        """Return Psi (12,), Psi_q (12, 12), gamma (12,) with Psi' = Psi_q q'.

        Rows 4i, 4i+1: link i to ground; rows 4i+2, 4i+3: link i to coupler. For a pin at
        ``s' = (a, 0)`` on a body at angle phi, ``R s' = a u``, ``R' s' = a n`` with
        ``u = (cos phi, sin phi)``, ``n = (-sin phi, cos phi)``.
        """
        phi = q[[2, 5, 8]]
        w = qd[[2, 5, 8]]
        r = q[[0, 1, 3, 4, 6, 7]].reshape(3, 2)
        u = np.column_stack((np.cos(phi), np.sin(phi)))
        nrm = np.column_stack((-u[:, 1], u[:, 0]))
        u4 = np.array([np.cos(q[11]), np.sin(q[11])])
        n4 = np.array([-u4[1], u4[0]])
        c = COUPLER_PINS[:, :1]  # coupler pin abscissae (3, 1)
        h = LINK_L / 2
        Psi = np.empty((3, 2, 2))
        Psi[:, 0] = r - h * u - GROUND
        Psi[:, 1] = r + h * u - q[9:11] - c * u4
        gamma = np.empty((3, 2, 2))
        gamma[:, 0] = -h * u * (w**2)[:, None]
        gamma[:, 1] = h * u * (w**2)[:, None] - c * u4 * qd[11] ** 2
        J = self._J0.copy()
        J[self._rows_g, self._cols_phi] = (-h * nrm).ravel()
        J[self._rows_c, self._cols_phi] = (h * nrm).ravel()
        J[self._rows_c, 11] = (-c * n4).ravel()
        return Psi.ravel(), J, gamma.ravel()

    def state(self, theta, thetad):
        """Consistent state with all links at angle theta (rate thetad), coupler translating."""
        q = np.zeros(12)
        qd = np.zeros(12)
        u = np.array([np.cos(theta), np.sin(theta)])
        du = np.array([-np.sin(theta), np.cos(theta)]) * thetad
        for i in range(3):
            q[3 * i : 3 * i + 2] = GROUND[i] + u * LINK_L / 2
            q[3 * i + 2] = theta
            qd[3 * i : 3 * i + 2] = du * LINK_L / 2
            qd[3 * i + 2] = thetad
        q[9:11] = GROUND[1] + u * LINK_L
        qd[9:11] = du * LINK_L
        return np.concatenate((q, qd))


# ------------------------------------------------------------------ compiled right-hand side
#
# The same eq 32 and the same pseudo-inverse methods (uk_controller.core.pinv.compiled_pinv,
# tested equal to the NumPy references), for the compiled BDF of bench.bdf.

METHOD_CODE = {name: code for code, name in enumerate(METHODS)}
#: the compiled twins (numba dispatchers; plain Python without numba), in METHODS order: pinv_k
#: calls them as globals, so numba compiles them into its one specialisation
_TWIN_SVD, _TWIN_VARGA, _TWIN_GREVILLE, _TWIN_HOUSEHOLDER, _TWIN_MGS = (compiled_pinv(name) for name in METHODS)


@njit(cache=True)
def pinv_k(code, D, rcond):
    """The compiled twin of METHODS[code] (one specialisation for all five, so numba can cache it;
    a dispatcher passed as an argument is recompiled in every process). numba does not see
    changes of pinv/compiled.py in this file's cache: kernels.jit.drop_stale_caches clears it when
    the twins change."""
    if code == 0:
        return _TWIN_SVD(D, rcond)
    if code == 1:
        return _TWIN_VARGA(D, rcond)
    if code == 2:
        return _TWIN_GREVILLE(D, rcond)
    if code == 3:
        return _TWIN_HOUSEHOLDER(D, rcond)
    return _TWIN_MGS(D, rcond)


@njit(cache=True)
def constraints_k(y, Psi, J, gamma):
    """`Parallelogram.constraints` written out, on the state y = (q, q')."""
    h = LINK_L / 2
    c4, s4, w4 = np.cos(y[11]), np.sin(y[11]), y[23]
    for a in range(12):
        for b in range(12):
            J[a, b] = 0.0
    for i in range(3):
        x, yy, ph, w = y[3 * i], y[3 * i + 1], y[3 * i + 2], y[14 + 3 * i]
        c, s = np.cos(ph), np.sin(ph)
        a = COUPLER_PINS[i, 0]
        r = 4 * i
        Psi[r] = x - h * c - GROUND[i, 0]
        Psi[r + 1] = yy - h * s - GROUND[i, 1]
        Psi[r + 2] = x + h * c - y[9] - a * c4
        Psi[r + 3] = yy + h * s - y[10] - a * s4
        gamma[r] = -h * c * w * w
        gamma[r + 1] = -h * s * w * w
        gamma[r + 2] = h * c * w * w - a * c4 * w4 * w4
        gamma[r + 3] = h * s * w * w - a * s4 * w4 * w4
        J[r, 3 * i] = 1.0
        J[r + 1, 3 * i + 1] = 1.0
        J[r + 2, 3 * i] = 1.0
        J[r + 3, 3 * i + 1] = 1.0
        J[r + 2, 9] = -1.0
        J[r + 3, 10] = -1.0
        J[r, 3 * i + 2] = h * s
        J[r + 1, 3 * i + 2] = -h * c
        J[r + 2, 3 * i + 2] = -h * s
        J[r + 3, 3 * i + 2] = h * c
        J[r + 2, 11] = a * s4
        J[r + 3, 11] = -a * c4


@njit(cache=True)
def rhs_k(y, pinv, rcond, alpha, beta, mih, qf, out, jac, want_jac):
    """Seed 002 eq 32 as a first-order system: out = (q', q''). Returns False if not finite.

    With ``want_jac`` also the stiff part of its Jacobian into ``jac`` (24 x 24):
    ``[[0, I], [-beta^2 P Psi_q, -2 alpha P Psi_q]]``, ``P = M^{-1/2} D^+`` (the other terms,
    of the size of the pendulum's omega^2, are left out: the Jacobian only drives the Newton
    iteration, whose convergence is tested, so it changes the cost, never the solution).
    """
    n = 12
    Psi = np.empty(n)
    J = np.empty((n, n))
    gamma = np.empty(n)
    constraints_k(y, Psi, J, gamma)
    D = np.empty((n, n))
    r = np.empty(n)
    for i in range(n):
        acc = gamma[i] - beta * beta * Psi[i]
        for j in range(n):
            D[i, j] = J[i, j] * mih[j]  # eq 28b
            acc -= J[i, j] * (2.0 * alpha * y[n + j] + qf[j])
        r[i] = acc
    X = pinv_k(pinv, D, rcond)
    ok = True
    for j in range(n):
        out[j] = y[n + j]
        t = 0.0
        for i in range(n):
            t += X[j, i] * r[i]
        out[n + j] = qf[j] + mih[j] * t
        if not np.isfinite(out[n + j]):
            ok = False
    if want_jac:
        for a in range(2 * n):
            for b in range(2 * n):
                jac[a, b] = 0.0
        for a in range(n):
            jac[a, n + a] = 1.0
            for b in range(n):
                pj = 0.0
                for i in range(n):
                    pj += X[a, i] * J[i, b]
                pj *= mih[a]
                jac[n + a, b] = -beta * beta * pj
                jac[n + a, n + b] = -2.0 * alpha * pj
    return ok


REDUCED_J = 3 * (LINK_I + LINK_M * LINK_L**2 / 4) + COUP_M * LINK_L**2  # 3.05
REDUCED_GRAV = (3 * LINK_M * LINK_L / 2 + COUP_M * LINK_L) * G  # 3.5 g


def reference_angle(t, tf, theta0=THETA0):
    """Link angle at times t (within [0, tf]) from the one-degree-of-freedom reduced model."""
    sol = solve_ivp(
        lambda _, s: [s[1], -REDUCED_GRAV / REDUCED_J * np.cos(s[0])],
        (0.0, tf),
        [theta0, 0.0],
        method='DOP853',
        rtol=1e-12,
        atol=1e-12,
        dense_output=True,
    )
    return sol.sol(np.asarray(t, dtype=float))[0]
