"""The embedded plant: true constrained dynamics of a robot setup, integrated in time.

Between control instants the efforts u are held (zero-order hold) and the
state follows the UK equation with the mechanism closures as *passive*
constraints (seed 000 eq 9, seed 001 eq 36):

    M q'' = B u - h + Qc,   Qc = A_p^T (A_p M^{-1} A_p^T)^+ (b_p - A_p M^{-1} (B u - h))

where ``h = C q' + G`` and b_p is Baumgarte-stabilized with the plant's own
closure gains (drift of the integrator, not of the controller). The servo
constraints play no role here: the plant only knows physics.
"""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from .. import uk
from ..baumgarte import Baumgarte

INTEGRATORS = ('rk4', 'solve_ivp')


class UKPlant:
    """Closed-chain rigid-body plant for one robot setup."""

    def __init__(self, setup, *, integrator='rk4', substeps=4, closure_omega=50.0, rtol=1e-8, atol=1e-10):
        if integrator not in INTEGRATORS:
            raise ValueError(f'simulation.integrator must be one of {INTEGRATORS}, got {integrator!r}')
        if int(substeps) < 1:
            raise ValueError(f'simulation.substeps must be >= 1, got {substeps}')
        self.setup = setup
        self.model = setup.model
        self.joint_names = list(setup.joint_names)
        self.n = self.model.n
        self.integrator = integrator
        self.substeps = int(substeps)
        self.rtol, self.atol = rtol, atol
        self.closures = setup.passive
        self.closure_stabilization = Baumgarte.critical(closure_omega)
        self._b = np.zeros(self.closures.m)
        self.rhs_evaluations = 0
        self.reset(setup.q0, setup.qd0)

    @classmethod
    def from_setup(cls, setup, *, mass_scale=1.0, **options):
        """A plant for `setup`; ``mass_scale != 1`` reloads the robot with scaled inertias (model mismatch)."""
        sim = dict(setup.config.get('simulation', {}) or {})
        if mass_scale != 1.0:
            from ..robots import load_robot
            setup = load_robot(setup.config_path, mass_scale=mass_scale)
        options.setdefault('integrator', sim.get('integrator', 'rk4'))
        options.setdefault('substeps', sim.get('substeps', 4))
        options.setdefault('closure_omega', sim.get('closure_omega', 50.0))
        return cls(setup, **options)

    def reset(self, q, qd, t=0.0):
        self.q = np.array(q, dtype=float)
        self.qd = np.array(qd, dtype=float)
        self.t = float(t)
        if self.q.shape != (self.n,) or self.qd.shape != (self.n,):
            raise ValueError(f'plant state must have {self.n} entries')

    def acceleration(self, q, qd, u, t):
        """q'' of the closed chain under efforts u (the UK equation above)."""
        self.rhs_evaluations += 1
        model = self.model
        model.compute(q, qd)
        Q = self.setup.actuators.matrix(model) @ u - model.h
        if self.closures.m == 0:
            return uk.MassFactor(model.M).solve(Q)
        rows = self.closures.evaluate(model, q, qd, t)
        b = self.closure_stabilization.stabilized_rhs(rows, out=self._b)
        return uk.constrained_acceleration(model.M, Q, rows.A, b)

    def closure_residual(self):
        """Closure constraint values phi at the current state (empty without closures)."""
        if self.closures.m == 0:
            return np.zeros(0)
        self.model.compute(self.q, self.qd)
        return self.closures.evaluate(self.model, self.q, self.qd, self.t).phi.copy()

    def step(self, u, dt):
        """Advance by dt with the efforts u held constant."""
        u = np.asarray(u, dtype=float)
        if self.integrator == 'rk4':
            h = dt / self.substeps
            q, qd, t = self.q, self.qd, self.t
            for _ in range(self.substeps):
                k1v, k1a = qd, self.acceleration(q, qd, u, t)
                q2, v2 = q + 0.5 * h * k1v, qd + 0.5 * h * k1a
                k2v, k2a = v2, self.acceleration(q2, v2, u, t + 0.5 * h)
                q3, v3 = q + 0.5 * h * k2v, qd + 0.5 * h * k2a
                k3v, k3a = v3, self.acceleration(q3, v3, u, t + 0.5 * h)
                q4, v4 = q + h * k3v, qd + h * k3a
                k4v, k4a = v4, self.acceleration(q4, v4, u, t + h)
                q = q + (h / 6.0) * (k1v + 2 * k2v + 2 * k3v + k4v)
                qd = qd + (h / 6.0) * (k1a + 2 * k2a + 2 * k3a + k4a)
                t += h
            self.q, self.qd, self.t = q, qd, self.t + dt
        else:
            n = self.n

            def rhs(t, x):
                return np.concatenate((x[n:], self.acceleration(x[:n], x[n:], u, t)))

            sol = solve_ivp(rhs, (self.t, self.t + dt), np.concatenate((self.q, self.qd)),
                            rtol=self.rtol, atol=self.atol)
            if not sol.success:
                raise RuntimeError(f'plant integration failed at t={self.t:.4f}: {sol.message}')
            self.q, self.qd = sol.y[:n, -1].copy(), sol.y[n:, -1].copy()
            self.t += dt
        return self.q, self.qd
