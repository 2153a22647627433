"""Constrained motion when the mass matrix is only positive semi-definite.

Redundant coordinates (a body described by more coordinates than it has
degrees of freedom, coordinates that carry no inertia of their own) give a
singular M, and the UK forms of :mod:`uk_controller.core.uk` that need ``M^{-1}``
or ``M^{-1/2}`` do not apply. Two explicit forms from seed 002 do:

- seed 002 eqs 37–41 (de Falco, Pennestrì, Vita), from the Moore–Penrose
  inverse of the bordered matrix ``[[M, A^T], [A, 0]]`` (eq 40)::

      E = I - A^+ A                         (eq 37)
      Q = (E M E)^+                         (eq 38)
      q'' = Q F + (A^+ - Q M A^+) gamma     (eq 41)

- seed 002 eqs 42–43 (Udwadia–Phohomsiri 2006)::

      M_bar = [(I - A^+ A) M ; A]           (eq 42)
      q'' = M_bar^+ [F + C ; gamma] + (I - M_bar^+ M_bar) eta    (eq 43)

  with C the non-ideal constraint force description (v^T C is the work of
  the constraint force on every virtual displacement v, ``A v = 0``) and eta
  arbitrary.

Notation as in seed 002: ``F`` the given forces, ``A`` (seed: ``Psi_q``) the
constraint matrix, ``gamma`` (seed: ``{gamma}``) the right-hand side of the
second-order constraints ``A q'' = gamma``. The acceleration is unique iff
``[M; A]`` has full column rank n (:func:`acceleration_is_determined`); then
both forms give it and it coincides with the UK acceleration whenever M is
positive definite. Plain NumPy; every pseudo-inverse takes an explicit
``rcond`` (relative to the largest singular value, see :mod:`uk_controller.core.pinv`).
"""

from __future__ import annotations

import numpy as np

from . import pinv as _pinv
from .uk import as_system

DEFAULT_RCOND = 1e-10


def acceleration_is_determined(M, A, rcond=DEFAULT_RCOND):
    """True iff ``[M; A]`` has full column rank n, i.e. the constrained q'' is unique.

    (Udwadia–Phohomsiri 2006, the condition under which seed 002 eqs 41 and 43
    give the one physical acceleration; with M positive definite it always holds.)
    Rank by SVD with singular values above ``rcond * s_max``.
    """
    M = np.asarray(M, dtype=float)
    stacked = np.vstack((M, np.atleast_2d(np.asarray(A, dtype=float))))
    s = np.linalg.svd(stacked, compute_uv=False)
    return bool(s.size and s[0] > 0 and np.sum(s > rcond * s[0]) == M.shape[0])


def acceleration_pseudoinverse_bordered(M, F, A, gamma, *, rcond=DEFAULT_RCOND, pinv=None):
    """Constrained acceleration for a possibly singular M, seed 002 eqs 37–41.

    ``E = I - A^+ A`` (eq 37) projects onto null(A); ``Q = (E M E)^+`` (eq 38);
    the acceleration is ``q'' = Q F + (A^+ - Q M A^+) gamma`` (eq 41), i.e. the
    particular solution ``A^+ gamma`` plus the null-space part that satisfies
    the dynamics projected on null(A). ``R = M A^+`` (eq 39) is the product
    formed once. Valid for rank-deficient A and singular M; the result is the
    physical acceleration when :func:`acceleration_is_determined` holds.

    `pinv` is any ``f(X, rcond)`` of :mod:`uk_controller.core.pinv` (default SVD);
    it is used for both pseudo-inverses. The tolerance for ``(E M E)^+`` is
    ``rcond * ||M||_2`` (absolute), so an empty null space of A gives Q = 0.
    """
    M, F, A, gamma = as_system(M, F, A, gamma)
    pinv = pinv or _pinv.pinv_svd
    n = M.shape[0]
    A_pinv = pinv(A, rcond)
    E = np.eye(n) - A_pinv @ A  # eq 37
    EME = E @ M @ E
    EME = 0.5 * (EME + EME.T)  # symmetrised against round-off
    # eq 38. The rank of E M E must be judged against the scale of M, not of
    # E M E itself: when null(A) is (numerically) empty, E and E M E are pure
    # round-off and a relative test would invert it.
    scale_M, scale_EME = np.linalg.norm(M, 2), np.linalg.norm(EME, 2)
    if scale_EME <= rcond * scale_M or scale_EME == 0.0:
        Q = np.zeros_like(M)
    else:
        Q = pinv(EME, rcond * scale_M / scale_EME)
    R = M @ A_pinv  # eq 39
    return Q @ F + (A_pinv - Q @ R) @ gamma  # eq 41


def acceleration_udwadia_phohomsiri(M, F, A, gamma, *, C=None, eta=None, rcond=DEFAULT_RCOND, pinv=None):
    """Constrained acceleration for a possibly singular M, Udwadia–Phohomsiri (seed 002 eqs 42–43).

    ``M_bar = [(I - A^+ A) M ; A]`` (eq 42) and
    ``q'' = M_bar^+ [F + C ; gamma] + (I - M_bar^+ M_bar) eta`` (eq 43).

    C (default 0) describes non-ideal constraints: the constraint force does
    work ``v^T C`` on every virtual displacement v with ``A v = 0``. eta
    (default 0) is the free vector of eq 43; it has no effect when
    :func:`acceleration_is_determined` holds (then ``M_bar^+ M_bar = I``).

    The seed writes the upper block of the right-hand side as ``F + C``; the
    upper rows of ``M_bar`` lie in range(I - A^+ A), so the least-squares
    solution is the same as with ``(I - A^+ A)(F + C)`` (the consistent form
    of Udwadia–Phohomsiri's derivation).
    """
    M, F, A, gamma = as_system(M, F, A, gamma)
    pinv = pinv or _pinv.pinv_svd
    n = M.shape[0]
    force = F if C is None else F + np.asarray(C, dtype=float)
    A_pinv = pinv(A, rcond)
    M_bar = np.vstack(((np.eye(n) - A_pinv @ A) @ M, A))  # eq 42
    M_bar_pinv = pinv(M_bar, rcond)
    qdd = M_bar_pinv @ np.concatenate((force, gamma))  # eq 43
    if eta is not None:
        eta = np.asarray(eta, dtype=float)
        qdd = qdd + eta - M_bar_pinv @ (M_bar @ eta)
    return qdd


def constraint_force_singular(M, F, qdd):
    """Total constraint force ``M q'' - F`` for an acceleration from either form above.

    With a singular M it is only defined up to null(M); this is the value the
    equation of motion ``M q'' = F + F^c`` assigns (seed 002 eq 23 with
    ``F^c = Psi_q^T lambda`` for ideal constraints).
    """
    return np.asarray(M, dtype=float) @ np.asarray(qdd, dtype=float) - np.asarray(F, dtype=float)
