"""Baumgarte stabilization of constraint drift.

The second-order constraint ``phi'' = 0`` (i.e. ``A q'' = b``) is replaced by
a stable linear error equation, for holonomic (order-2) rows

    phi'' + kd phi' + kp phi = 0   =>   A q'' = b - kd phi' - kp phi

and, for first-order (nonholonomic) rows ``phi(q, q', t) = 0``,

    phi' + k1 phi = 0              =>   A q'' = b - k1 phi.

The seeds write the gains in two conventions; both are supported explicitly:

- seed 000 eq 52:           ``phi'' + alpha phi' + beta phi = 0``       (kd = alpha, kp = beta)
- seeds 002 and 004:        ``phi'' + 2 alpha phi' + beta^2 phi = 0``   (kd = 2 alpha, kp = beta^2)
- default, one natural frequency w with critical damping:
                            ``phi'' + 2 w phi' + w^2 phi = 0``          (kd = 2 w, kp = w^2, k1 = w)

Gains may be scalars or per-row arrays (seed 000 writes them as diagonal
matrices alpha = diag(alpha_i)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Baumgarte:
    """Stabilization gains in the normalised form ``phi'' + kd phi' + kp phi = 0``."""

    kd: float | np.ndarray = 0.0
    kp: float | np.ndarray = 0.0
    k1: float | np.ndarray = 0.0

    @classmethod
    def seed000(cls, alpha, beta):
        """``phi'' + alpha phi' + beta phi = 0`` (seed 000 eq 52)."""
        return cls(kd=alpha, kp=beta, k1=alpha)

    @classmethod
    def squared(cls, alpha, beta):
        """``phi'' + 2 alpha phi' + beta^2 phi = 0`` (seed 002, seed 004)."""
        beta = np.asarray(beta, dtype=float)
        return cls(kd=2.0 * np.asarray(alpha, dtype=float), kp=beta * beta, k1=2.0 * np.asarray(alpha, dtype=float))

    @classmethod
    def critical(cls, omega):
        """Critically damped with natural frequency omega [rad/s]."""
        w = np.asarray(omega, dtype=float)
        return cls(kd=2.0 * w, kp=w * w, k1=w)

    @classmethod
    def none(cls):
        """No stabilization: ``phi'' = 0`` as given."""
        return cls(0.0, 0.0, 0.0)

    @classmethod
    def from_config(cls, cfg, where='stabilization'):
        """Build from the ``stabilization`` section of a robot setup (docs/config.md): its ``convention``
        (default critical) and the gains :data:`CONVENTIONS` says that convention reads."""
        cfg = dict(cfg or {})
        name = cfg.get('convention', 'critical')
        convention = CONVENTIONS.get(name)
        if convention is None:
            raise ValueError(f'{where}.convention: {name!r} is not one of {", ".join(CONVENTIONS)}')
        missing = [key for key in convention.gains if key not in cfg]
        if missing:
            raise KeyError(f'{where}.{missing[0]} is required for convention {name!r}')
        return convention.make(*(cfg[key] for key in convention.gains))

    def stabilized_rhs(self, rows, out=None, speed=np.inf):
        """Return ``b`` with the Baumgarte terms added (writes into `out` if given); the stiffness term of
        the order-2 rows saturated at the correction speed `speed` (:func:`correction`)."""
        first = rows.order == 1
        m = rows.phi.shape[0]
        kd = np.broadcast_to(np.asarray(self.kd, dtype=float), (m,))
        kp = np.broadcast_to(np.asarray(self.kp, dtype=float), (m,))
        term = np.where(first, self.k1 * rows.phi, correction(kd, kp, rows.phi, rows.phidot, speed))
        if out is None:
            return rows.b - term
        np.subtract(rows.b, term, out=out)
        return out


@dataclass(frozen=True)
class Convention:
    """One way the gains of ``stabilization`` are written: the keys it reads (``stabilization.<gain>``, in
    the order :attr:`make` takes them), the :class:`Baumgarte` they make, its error equation (for the
    schema's description) and its largest natural frequency [rad/s] from the largest magnitude of each
    gain (the settings' rule ``w <= rate / 4``)."""

    gains: tuple[str, ...]
    make: Callable[..., Baumgarte]
    equation: str
    frequency: Callable[..., float]


#: The stabilization conventions, name -> :class:`Convention`: the one table. The schema's
#: ``stabilization.convention`` choices and description, its check that a written section names the gains
#: of its convention and its natural-frequency rule, :meth:`Baumgarte.from_config` and the CLI's
#: ``--convention`` read it.
CONVENTIONS = {
    'critical': Convention(('omega',), Baumgarte.critical, "phi''+2w phi'+w^2 phi=0", lambda omega: omega),
    'seed000': Convention(
        ('alpha', 'beta'),
        Baumgarte.seed000,
        "phi''+a phi'+b phi=0",
        lambda alpha, beta: max(math.sqrt(beta), alpha / 2.0),
    ),
    'squared': Convention(
        ('alpha', 'beta'), Baumgarte.squared, "phi''+2a phi'+b^2 phi=0", lambda alpha, beta: max(beta, alpha)
    ),
    'none': Convention((), Baumgarte.none, '', lambda: 0.0),
}


def correction(kd, kp, phi, phidot, speed):
    """The Baumgarte term ``kd phi' + kp phi`` (seed 000 eq 52) with its stiffness part saturated at the
    correction speed ``v`` = `speed` (per row or one for all):

        kd phi' + kd sat_v(kp phi / kd)     (kd > 0; sat_v(x) = max(-v, min(v, x)))

    The linear law asks for ``phi'' = -kp phi``, i.e. ``w^2 phi``: a 3 rad error at w = 15 rad/s is an
    acceleration no arm has. Saturated, ``phi'' = -kd (phi' + sat(kp phi / kd))`` approaches a far-off
    row at most at speed v and still converges: ``V = phi'^2 / 2 + kd int_0^phi sat(kp s / kd) ds``
    decreases as ``dV/dt = -kd phi'^2`` (LaSalle). Inside the saturation the term is the linear one bit
    for bit; rows with ``kd <= 0`` (first-order rows, no stabilization) and ``v = inf`` are not capped.
    The twin of :func:`uk_controller.kernels.servo.correction`."""
    stiff = kp * phi
    positive = kd > 0.0
    cap = np.where(positive, np.where(positive, kd, 1.0) * speed, np.inf)
    return kd * phidot + np.clip(stiff, -cap, cap)
