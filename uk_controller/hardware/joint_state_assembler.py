"""Full joint state (q, q') of a robot from the joints its motors measure.

On a serial chain every joint is motorised and measured. On a closed chain
(the five-bar) only the actuated joints carry motors; the passive joints follow
from the closure constraints phi(q) = 0 (seed 003 eq 18, written as passive
rows by :class:`~uk_controller.constraints.ConstraintStack`). With the
measured block q_m fixed, the passive block q_u solves

    phi(q_m, q_u) = 0                 (Gauss-Newton: A_u dq_u = -phi)
    A_u q'_u = -A_m q'_m              (phi' = A q' = 0 for holonomic rows)

where A = d phi / d q are the passive rows' constraint matrix columns. The
previous solution is the initial guess (branch continuity); ``q0`` of the
setup seeds the first solve.
"""

from __future__ import annotations

import numpy as np


class JointStateAssembler:
    def __init__(self, setup, hw, *, tol=1e-11, max_iter=20):
        self.setup = setup
        self.names = list(setup.joint_names)
        n = len(self.names)
        self.measured = []
        for j in hw.joints:
            if j is None or j not in self.names:
                raise ValueError(f'motor for actuator without a tree joint ({j}): cannot measure q')
            if self.names.index(j) in self.measured:
                raise ValueError(
                    f'joint {j!r} is measured by two motors: which reading is its position is '
                    'unknowable; give each joint one motor (hardware.motors)'
                )
            self.measured.append(self.names.index(j))
        self.unmeasured = [i for i in range(n) if i not in self.measured]
        if self.unmeasured and setup.passive.m == 0:
            raise ValueError(
                f'joints {[self.names[i] for i in self.unmeasured]} have no motor and no '
                f'closure constraint to reconstruct them from'
            )
        self.tol, self.max_iter = tol, max_iter
        self.q = np.array(setup.q0, float)
        self.qd = np.zeros(n)
        self.residual = 0.0
        self.rejected = 0

    def __call__(self, q_m, qd_m, t=0.0):
        """-> (q, qd) of all joints (NaN when the closure cannot be solved, or when the reading does not
        hold exactly one position and one velocity per measured joint: such a reading is counted in
        ``rejected`` and never becomes a state)."""
        q, qd = self.q.copy(), np.zeros_like(self.qd)
        if np.size(q_m) != len(self.measured) or np.size(qd_m) != len(self.measured):
            self.rejected += 1
            return np.full_like(q, np.nan), np.full_like(qd, np.nan)
        q[self.measured] = q_m
        qd[self.measured] = qd_m
        if self.unmeasured:
            model, passive = self.setup.model, self.setup.passive
            u, m = self.unmeasured, self.measured
            for _ in range(self.max_iter):
                model.compute(q, qd)
                rows = passive.evaluate(model, q, qd, t)
                self.residual = float(np.max(np.abs(rows.phi), initial=0.0))
                if self.residual < self.tol:
                    break
                dq, *_ = np.linalg.lstsq(rows.A[:, u], -rows.phi, rcond=None)
                q[u] += dq
            else:
                if not self.residual < 1e-6:
                    return np.full_like(q, np.nan), np.full_like(qd, np.nan)
            A = rows.A
            qd[u], *_ = np.linalg.lstsq(A[:, u], -A[:, m] @ np.asarray(qd_m, float), rcond=None)
        self.q, self.qd = q, qd
        return q.copy(), qd.copy()
