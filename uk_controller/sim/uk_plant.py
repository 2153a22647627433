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

from .. import settings as S
from .. import uk
from ..baumgarte import Baumgarte
from ..constraints import CompiledRows, ConstraintStack
from ..kernels import codes, jit
from ..kernels import plant as plant_kernels
from .rk4 import rk4_accept, rk4_period

INTEGRATORS = ('rk4', 'solve_ivp')
_K = plant_kernels if jit.AVAILABLE else None


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
        n, mp = self.n, self.closures.m
        actuators = setup.actuators
        self._B = actuators.matrix(self.model).copy() if actuators.constant else None
        self._tree = mp == 0 and self._B is not None        # pin.aba on the open tree
        self._tau = np.zeros(n)
        self._fused = None
        if mp:
            self._solver = uk.ServoSolver(n, 0, mp, 0)
            self._gains = uk.row_gains(self.closure_stabilization, self.closures.rows.order)
            self._no_B, self._no_As, self._none = np.zeros((n, 0)), np.zeros((0, n)), np.zeros(0)
            if self._B is not None:
                # closure rows, Baumgarte and the UK acceleration in one compiled call (same equations as
                # ConstraintStack.evaluate + ServoSolver; None when a row type has no compiled form)
                self._fused = CompiledRows.build(self.model, self.closures, ConstraintStack([], n),
                                                 gains=self._gains)
                if self._fused is not None:
                    self._tau = self._fused.tau          # B u is written straight into the kernel's input
        self._u = np.zeros(actuators.p)
        self._x = np.zeros(2 * n)
        self._xt = np.zeros(2 * n)
        self._k = np.zeros((4, 2 * n))
        self._qdd = np.zeros(n)
        self._stage_accel = self._make_stage_accel()
        self._compiled = self._make_compiled()
        self.reset(setup.q0, setup.qd0)

    def closure_program(self):
        """The closure rows, their Baumgarte terms and the UK solve as one compiled program
        (``constraints.CompiledRows``) for :mod:`.compiled_loop`, or None when a row type has none.

        With constant actuator columns it is the program this plant runs itself; with q-dependent
        (`between`) actuators it also forms their columns B(q) at every call, as :meth:`step`
        does through ``ActuatorMap.matrix``.
        """
        if self._B is not None:
            return self._fused
        B, between = self.setup.actuators.compiled_form()
        return CompiledRows.build(self.model, self.closures, ConstraintStack([], self.n), p=len(self._u), B=B,
                                  between=between, gains=self._gains if self.closures.m else None)

    @property
    def _fast_args(self):
        return self._compiled if self.integrator == 'rk4' else None

    @property
    def _evals_per_step(self):
        return 4 * self.substeps

    def _make_compiled(self):
        """Arguments of :func:`uk_controller.kernels.plant.plant_rk4` (a whole RK4 period in one compiled call,
        the dynamics by the kernel's own RNEA/CRBA, closures by the fused rows), or None when not available
        (no numba, q-dependent actuator columns, joints other than revolute/prismatic, rows without a
        compiled form)."""
        if _K is None or self._B is None or (self.closures.m and self._fused is None):
            return None
        tree = self.model.compiled_tree()
        if tree is None:
            return None
        parents, jtype, mf, grav = tree
        nj, n = parents.size, self.n
        if self._fused is not None:
            fz = self._fused
            fparents, fm = self.model.compiled_frames(fz.frames)
            ip, fp, ws = fz.ip, fz.fp, fz.ws
            nf = len(fz.frames)
        else:
            fparents, fm = np.zeros(0, dtype=np.int64), np.zeros(0)
            ip, fp, ws = np.zeros(codes.HEADER, dtype=np.int64), np.zeros(1), np.zeros(1)
            nf = 0
        pi = np.concatenate(([nj, nf], parents, jtype, fparents[:nf])).astype(np.int64)
        pf = np.concatenate((grav, mf, fm[:nf * codes.FRAME_WIDTH]))
        pw = np.zeros(plant_kernels.plant_work_size(nj, n, nf, int(ip[codes.IH_MP])))
        args = (pi, pf, ip, fp, ws, pw)
        # load (or compile) the kernel now rather than inside the first simulated period
        _K.plant_rk4(np.concatenate((self.setup.q0, self.setup.qd0)).astype(float), np.zeros(n), 0.0, 1e-3, 1,
                     *args)
        return args

    def _make_stage_accel(self):
        """``accel(q, qd, t) -> q''`` for the compiled RK4 loop, with as few Python calls as possible
        (pin.aba on open trees, the fused kernel on closures, else :meth:`_accel`)."""
        if self._tree and self.model._perm is None:
            import pinocchio as pin
            aba, pm, aux, tau = pin.aba, self.model.model, self.model._aux, self._tau

            def accel(q, qd, t):
                return aba(pm, aux, q, qd, tau)
            return accel
        fz = self._fused
        if fz is not None:
            run, info, qdd = fz.make_runner(), fz.info, fz.qdd

            def accel(q, qd, t):
                run(q, qd, t)
                if info[0] != 0.0:
                    if info[0] == 1.0:
                        raise uk.NotPositiveDefiniteError('mass matrix not positive definite')
                    qdd[:] = np.nan                 # non-finite state: propagate it like the reference path
                return qdd
            return accel
        return self._accel_fallback

    def _accel_fallback(self, q, qd, t):
        return self._accel(q, qd, t, self._qdd)

    @classmethod
    def from_setup(cls, setup, *, mass_scale=1.0, **options):
        """A plant for `setup`; ``mass_scale != 1`` reloads the robot with scaled inertias (model mismatch)."""
        sim = dict(setup.config.get('simulation', {}) or {})
        if mass_scale != 1.0:       # from the setup's own parameters (they may differ from its file)
            from ..robots import setup_from_params
            setup = setup_from_params(setup.config, setup.config_path, mass_scale=mass_scale)
        options.setdefault('integrator', sim.get('integrator', S.default('simulation.integrator')))
        options.setdefault('substeps', sim.get('substeps', S.default('simulation.substeps')))
        options.setdefault('closure_omega', sim.get('closure_omega', S.default('simulation.closure_omega')))
        return cls(setup, **options)

    def reset(self, q, qd, t=0.0):
        self.q = np.array(q, dtype=float)
        self.qd = np.array(qd, dtype=float)
        self.t = float(t)
        if self.q.shape != (self.n,) or self.qd.shape != (self.n,):
            raise ValueError(f'plant state must have {self.n} entries')

    def acceleration(self, q, qd, u, t):
        """q'' of the closed chain under efforts u (the UK equation above)."""
        q, qd = np.asarray(q, dtype=float), np.asarray(qd, dtype=float)
        self._u = np.asarray(u, dtype=float)
        if self._B is not None:
            np.dot(self._B, self._u, out=self._tau)
        return self._accel(q, qd, t, np.empty(self.n))

    def _accel(self, q, qd, t, out):
        """q'' into `out` for the efforts already mapped to ``self._tau = B u``."""
        self.rhs_evaluations += 1
        model = self.model
        if self._tree:
            return model.forward_dynamics(q, qd, self._tau, out=out)
        fz = self._fused
        if fz is not None:
            fz.run(q, qd, t)
            status = fz.info[0]
            if status == 1.0:
                raise uk.NotPositiveDefiniteError('mass matrix not positive definite')
            if status == 3.0:                         # non-finite state: propagate it like the reference path
                out[:] = np.nan
                return out
            out[:] = fz.qdd
            return out
        model.compute(q, qd)
        if self._B is None:                       # q-dependent actuator columns
            np.dot(self.setup.actuators.matrix(model), self._u, out=self._tau)
        if self.closures.m == 0:
            out[:] = uk.MassFactor(model.M).solve(self._tau - model.h)
            return out
        rows = self.closures.evaluate(model, q, qd, t)
        sol = self._solver.solve_rows(model.M_lower, self._tau, model.h, self._no_B, self._no_As, self._none, self._none,
                                      self._none, rows.A, rows.b, rows.phi, rows.phidot, self._gains)
        out[:] = sol.qdd
        return out

    def closure_residual(self):
        """Closure constraint values phi at the current state (empty without closures)."""
        if self.closures.m == 0:
            return np.zeros(0)
        self.model.compute(self.q, self.qd)
        return self.closures.evaluate(self.model, self.q, self.qd, self.t).phi.copy()

    def step(self, u, dt):
        """Advance by dt with the efforts u held constant."""
        u = np.asarray(u, dtype=float)
        self._u = u
        fast = self._fast_args
        if fast is not None and _K is not None:
            # the whole period in one compiled call on a fresh state array (q and q' are replaced,
            # never mutated, so arrays handed out earlier keep their values)
            np.dot(self._B, u, out=self._tau)
            x = np.concatenate((self.q, self.qd))
            self.rhs_evaluations += self._evals_per_step
            status = _K.plant_rk4(x, self._tau, self.t, dt, self.substeps, *fast)
            if status != 0.0:
                if status == 1.0:
                    raise uk.NotPositiveDefiniteError('mass matrix not positive definite')
                x[:] = np.nan                    # non-finite state or acceleration: propagate it
            n = self.n
            self.q, self.qd, self.t = x[:n], x[n:], self.t + dt
            return self.q, self.qd
        if self._B is not None:
            np.dot(self._B, u, out=self._tau)
        if self.integrator == 'rk4':
            n = self.n
            x, xt, k = self._x, self._xt, self._k
            x[:n] = self.q
            x[n:] = self.qd
            t = self.t
            if self._compiled is not None and _K is not None:   # the whole period compiled (same RK4, dynamics)
                self.rhs_evaluations += 4 * self.substeps
                status = _K.plant_rk4(x, self._tau, t, dt, self.substeps, *self._compiled)
                if status != 0.0:
                    if status == 1.0:
                        raise uk.NotPositiveDefiniteError('mass matrix not positive definite')
                    x[:] = np.nan                    # non-finite state or acceleration: propagate it
            else:       # the same RK4 stage by stage from Python (its stage update compiled when numba is there)
                accel = self._stage_accel if _K is not None else self._accel_fallback
                if accel != self._accel_fallback:   # (the fallback counts in _accel; bound methods: ==, not is)
                    self.rhs_evaluations += 4 * self.substeps
                rk4_period(x, k, xt, t, dt, self.substeps, accel, rk4_accept if _K is None else _K.rk4_accept)
            self.q, self.qd, self.t = x[:n].copy(), x[n:].copy(), self.t + dt
        else:
            n = self.n

            def rhs(t, x):
                return np.concatenate((x[n:], self._accel(x[:n], x[n:], t, np.empty(n))))

            sol = solve_ivp(rhs, (self.t, self.t + dt), np.concatenate((self.q, self.qd)),
                            rtol=self.rtol, atol=self.atol)
            if not sol.success:
                raise RuntimeError(f'plant integration failed at t={self.t:.4f}: {sol.message}')
            self.q, self.qd = sol.y[:n, -1].copy(), sol.y[n:, -1].copy()
            self.t += dt
        return self.q, self.qd
