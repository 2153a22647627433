"""Constraint rows: the plain-NumPy currency between constraint terms and the UK core.

A set of m constraint rows carries, at one (q, q', t):

    phi     the constraint functions (position level for holonomic rows,
            velocity level for first-order/nonholonomic rows)
    phidot  time derivative of phi (holonomic rows; unused for first-order rows)
    A, b    the second-order form ``A q'' = b`` (seed 000 eq 5, seed 004 eq 23)
    order   2 for holonomic rows (differentiated twice), 1 for first-order rows

Baumgarte stabilization (:mod:`uk_controller.core.baumgarte`) replaces b by a
stabilized right-hand side using phi and phidot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ConstraintRows:
    phi: np.ndarray
    phidot: np.ndarray
    A: np.ndarray
    b: np.ndarray
    order: np.ndarray

    @classmethod
    def empty(cls, m, n):
        """Preallocated rows (zeros, all second order) to be filled in place."""
        return cls(np.zeros(m), np.zeros(m), np.zeros((m, n)), np.zeros(m), np.full(m, 2, dtype=np.int8))

    @property
    def m(self):
        return self.A.shape[0]

    @classmethod
    def stack(cls, parts, n):
        """Stack several row sets (in order) into one."""
        parts = list(parts)
        if not parts:
            return cls.empty(0, n)
        return cls(
            np.concatenate([p.phi for p in parts]),
            np.concatenate([p.phidot for p in parts]),
            np.vstack([p.A for p in parts]),
            np.concatenate([p.b for p in parts]),
            np.concatenate([p.order for p in parts]).astype(np.int8),
        )
