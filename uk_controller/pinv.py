"""Moore–Penrose pseudo-inverse methods (seed 002), each with an explicit rank tolerance.

Every method has the signature ``pinv_xxx(A, rcond) -> A^+`` where ``rcond``
is relative to the largest singular value (or the largest pivot / column norm
for the QR-based methods, as each docstring says). `PINV_METHODS` maps the
names used in config files (``control.pinv``) to the functions.
"""
from __future__ import annotations

import numpy as np

DEFAULT_RCOND = 1e-10


def pinv_svd(A, rcond=DEFAULT_RCOND):
    """Pseudo-inverse by singular value decomposition (seed 002, SVD method).

    ``A = U S V^T``, ``A^+ = V S^+ U^T`` with singular values below
    ``rcond * s_max`` treated as zero.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    if A.size == 0:
        return np.zeros(A.T.shape)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    keep = s > rcond * s[0] if s[0] > 0 else np.zeros_like(s, dtype=bool)
    return (Vt[keep].T / s[keep]) @ U[:, keep].T


def pinv_damped(A, rcond=DEFAULT_RCOND, damping=1e-6):
    """Damped least-squares inverse ``A^T (A A^T + lambda^2 I)^{-1}``.

    Not a Moore–Penrose inverse: it trades exactness for bounded output near
    singular configurations (control use). ``damping`` is lambda relative to
    the largest singular value; ``rcond`` is accepted for a uniform signature.
    """
    A = np.atleast_2d(np.asarray(A, dtype=float))
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return np.zeros(A.T.shape)
    lam2 = (damping * s[0]) ** 2
    return (Vt.T * (s / (s * s + lam2))) @ U.T


PINV_METHODS = {
    'svd': pinv_svd,
    'damped': pinv_damped,
}


def get_pinv(name):
    """Return the pseudo-inverse function registered under `name`."""
    try:
        return PINV_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown pseudo-inverse method {name!r}; choose one of {sorted(PINV_METHODS)}") from None
