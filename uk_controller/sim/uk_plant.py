"""The embedded plant: true constrained dynamics of a robot setup, integrated in time.

Between control instants the efforts u are held (zero-order hold) and the
state follows the UK equation with the mechanism closures as *passive*
constraints (seed 000 eq 9, seed 001 eq 36):

    M q'' = B u - h + Qc,   Qc = A_p^T (A_p M^{-1} A_p^T)^+ (b_p - A_p M^{-1} (B u - h))

where ``h = C q' + G`` and b_p is Baumgarte-stabilized with the plant's own
closure gains (drift of the integrator, not of the controller). The servo
constraints play no role here: the plant only knows physics.

Chosen ONCE, at construction (``UKPlant.backend``, its ``name``; ``UKPlant.dynamics``):

- the period: :class:`CompiledPeriod` ``'compiled'`` (a whole RK4 period in one compiled call,
  ``kernels.plant.plant_rk4``: the kernels' own RNEA/CRBA and the closure rows of the plant's
  :class:`~uk_controller.constraints.CompiledRows`), :class:`StagedRK4` ``'compiled_stages'`` (the same RK4
  stage by stage from Python, :func:`uk_controller.sim.rk4.rk4_period`, its stage update compiled, q'' from
  the dynamics below), :class:`NumpyRK4` ``'numpy'`` (the same with the NumPy stage update, the reference)
  or :class:`SolveIvp` ``'solve_ivp'`` (scipy's adaptive integrator);
- the integrator (``UKPlant.integrator``): classical RK4, or on trees with stiff passive dissipation the
  linearly-implicit ROS2 (:mod:`uk_controller.sim.ros2`; the compiled period runs
  ``kernels.plant.ros2_period``, :class:`NumpyRos2` ``'numpy_rosenbrock'`` is its reference and the fallback).
  ``simulation.integrator: auto`` keeps RK4 where the stiffness check (:mod:`.stiffness`) asks for no more
  RK4 steps than ``simulation.substeps``, and switches to ROS2 at ``simulation.substeps`` steps where it asks
  for more (:meth:`UKPlant.fit_substeps`);
- q'' (``dynamics``): ``'aba'`` (open tree with constant actuator columns: Pinocchio's ABA),
  ``'compiled_rows'`` (closures: the compiled program, rows + Baumgarte + UK solve in one call after
  Pinocchio's pass) or ``'reference'`` (Pinocchio's pass, :meth:`ConstraintStack.evaluate` and
  :class:`uk_controller.core.uk.ServoSolver`).

:meth:`UKPlant.step` is the template: ``tau = B u``, ``backend.advance``, the new state. Kernel statuses
(:class:`uk_controller.control.status.Status`): NOT_POSITIVE_DEFINITE raises
:class:`uk_controller.core.uk.NotPositiveDefiniteError`, a non-finite state or acceleration propagates NaN.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from ..control.status import Status
from ..core import uk
from ..core.baumgarte import Baumgarte
from ..kernels import codes, jit
from ..kernels import plant as plant_kernels
from .plants import INTEGRATORS
from .rk4 import rk4_accept, rk4_period
from .ros2 import ros2_period

BACKENDS = ('auto', 'compiled', 'compiled_stages', 'numpy')
_NOT_PD = float(Status.NOT_POSITIVE_DEFINITE)


def _raise_or_nan(status, x):
    """A compiled period's non-zero status: raise for a mass matrix that is not positive definite, else
    (non-finite state or acceleration) propagate NaN as the reference path does."""
    if status == _NOT_PD:
        raise uk.NotPositiveDefiniteError('mass matrix not positive definite')
    x[:] = np.nan


# ----------------------------------------------------------------------------- periods


class PlantBackend:
    """How a :class:`UKPlant` advances one period: ``advance(q, qd, t, dt) -> (q, qd)`` (new arrays; the
    efforts are already in ``plant.tau``)."""

    name = ''

    def __init__(self, plant):
        self.plant = plant

    def __repr__(self):
        return f'{type(self).__name__}({self.name!r})'


class CompiledPeriod(PlantBackend):
    """A whole period (RK4 or ROS2, the plant's ``method``) in one compiled call,
    :func:`uk_controller.kernels.plant.plant_rk4`; ``args`` are its arguments after (x, tau, t, dt, substeps):
    ``(pi, pf, ip, fp, ws, pw, method)``."""

    name = 'compiled'

    def __init__(self, plant, args):
        super().__init__(plant)
        self._arrays = args
        self._kernel = plant_kernels.plant_rk4

    @property
    def args(self):
        return (*self._arrays, self.plant.method)

    @classmethod
    def build(cls, plant):
        """None when not available (q-dependent actuator columns, joints other than revolute/prismatic in
        Pinocchio's order, closures without a compiled program)."""
        program = plant.closure_rows
        if plant.actuator_matrix is None or (plant.closures.m and program is None):
            return None
        tree = plant.model.compiled_tree()
        if tree is None:
            return None
        parents, jtype, mf, grav = tree
        nj, n = parents.size, plant.n
        if program is not None:
            fparents, fm = plant.model.compiled_frames(program.frames)
            ip, fp, ws = program.ip, program.fp, program.ws
            nf = len(program.frames)
        else:
            fparents, fm = np.zeros(0, dtype=np.int64), np.zeros(0)
            ip, fp, ws = np.zeros(codes.HEADER, dtype=np.int64), np.zeros(1), np.zeros(1)
            nf = 0
        pi = np.concatenate(([nj, nf], parents, jtype, fparents[:nf])).astype(np.int64)
        pf = np.concatenate((grav, mf, fm[: nf * codes.FRAME_WIDTH]))
        pw = np.zeros(plant_kernels.plant_work_size(nj, n, nf, int(ip[codes.IH_MP])))
        args = (pi, pf, ip, fp, ws, pw)
        # load (or compile) the kernel now rather than inside the first simulated period
        plant_kernels.plant_rk4(
            np.concatenate((plant.setup.q0, plant.setup.qd0)).astype(float),
            np.zeros(n),
            0.0,
            1e-3,
            1,
            *args,
            codes.METHOD_RK4,
        )
        return cls(plant, args)

    def advance(self, q, qd, t, dt):
        # the whole period in one compiled call on a fresh state array (q and q' are replaced, never
        # mutated, so arrays handed out earlier keep their values)
        plant = self.plant
        x = np.concatenate((q, qd))
        plant.rhs_evaluations += plant.evaluations_per_step
        status = self._kernel(x, plant.tau, t, dt, plant.substeps, *self._arrays, plant.method)
        if status != codes.OK:
            _raise_or_nan(status, x)
        n = plant.n
        return x[:n], x[n:]


class StagedRK4(PlantBackend):
    """The RK4 stage sequence from Python (:func:`uk_controller.sim.rk4.rk4_period`) with the compiled stage
    update (:func:`uk_controller.kernels.plant.rk4_accept`) and q'' from the plant's dynamics with as few
    Python calls as possible (Pinocchio's ABA on open trees, the compiled closure rows, else the reference)."""

    name = 'compiled_stages'

    def __init__(self, plant):
        super().__init__(plant)
        n = plant.n
        self._x, self._xt, self._k = np.zeros(2 * n), np.zeros(2 * n), np.zeros((4, 2 * n))
        self._accept = plant_kernels.rk4_accept
        self.accel, self._counted = self._stage_accel()

    def _stage_accel(self):
        """``(accel(q, qd, t) -> q'', counts itself)``."""
        plant = self.plant
        if plant.dynamics == 'aba' and plant.model.native_coordinates and plant.model.joint_dynamics is None:
            import pinocchio as pin

            aba, pm, aux, tau = pin.aba, plant.model.model, plant.model.aux_data, plant.tau

            def accel(q, qd, t):
                return aba(pm, aux, q, qd, tau)

            return accel, False
        program = plant.closure_rows
        if plant.dynamics == 'compiled_rows':
            run, info, qdd, at = program.make_runner(), program.info, program.qdd, codes.INFO_STATUS

            def accel(q, qd, t):
                run(q, qd, t)
                if info[at] != codes.OK:
                    if info[at] == _NOT_PD:
                        raise uk.NotPositiveDefiniteError('mass matrix not positive definite')
                    qdd[:] = np.nan  # non-finite state: propagate it like the reference path
                return qdd

            return accel, False
        out = np.zeros(plant.n)
        return (lambda q, qd, t: plant.accel(q, qd, t, out)), True

    def advance(self, q, qd, t, dt):
        plant = self.plant
        n, x = plant.n, self._x
        x[:n] = q
        x[n:] = qd
        if not self._counted:  # (the reference dynamics count in UKPlant.accel)
            plant.rhs_evaluations += plant.evaluations_per_step
        rk4_period(x, self._k, self._xt, t, dt, plant.substeps, self.accel, self._accept)
        return x[:n].copy(), x[n:].copy()


class NumpyRK4(StagedRK4):
    """The same RK4 stage sequence with the NumPy stage update (:func:`uk_controller.sim.rk4.rk4_accept`,
    the reference of the compiled one) and the plant's q'' (counted by :meth:`UKPlant.accel`)."""

    name = 'numpy'

    def __init__(self, plant):
        PlantBackend.__init__(self, plant)
        n = plant.n
        self._x, self._xt, self._k = np.zeros(2 * n), np.zeros(2 * n), np.zeros((4, 2 * n))
        self._accept = rk4_accept
        out = np.zeros(n)
        self.accel, self._counted = (lambda q, qd, t: plant.accel(q, qd, t, out)), True


class NumpyRos2(PlantBackend):
    """The ROS2 period from Python (:func:`uk_controller.sim.ros2.ros2_period`, the reference of the compiled
    one) with the plant's q'' (counted by :meth:`UKPlant.accel`) and M from the model at each step's start."""

    name = 'numpy_rosenbrock'

    def __init__(self, plant):
        super().__init__(plant)
        model = plant.model
        jd = model.joint_dynamics
        n = plant.n
        if jd is None:
            zero = np.zeros(n)
            self._passive = (zero, zero, zero, 1.0)
        else:
            self._passive = (jd.damping, jd.stiffness, jd.friction, jd.friction_velocity)
        out = np.zeros(n)

        def accel(q, qd, t):
            return plant.accel(q, qd, t, out).copy()

        def mass(q, qd):
            model.compute(q, qd)
            return model.M.copy()

        self._accel, self._mass = accel, mass

    def advance(self, q, qd, t, dt):
        plant = self.plant
        x = np.concatenate((q, qd))
        ros2_period(x, t, dt, plant.substeps, self._accel, self._mass, *self._passive)
        n = plant.n
        return x[:n].copy(), x[n:].copy()


class SolveIvp(PlantBackend):
    """scipy's ``solve_ivp`` (RK45, ``rtol``/``atol`` of the plant) over the period."""

    name = 'solve_ivp'

    def advance(self, q, qd, t, dt):
        plant = self.plant
        n = plant.n

        def rhs(t, x):
            return np.concatenate((x[n:], plant.accel(x[:n], x[n:], t, np.empty(n))))

        sol = solve_ivp(rhs, (t, t + dt), np.concatenate((q, qd)), rtol=plant.rtol, atol=plant.atol)
        if not sol.success:
            raise RuntimeError(f'plant integration failed at t={t:.4f}: {sol.message}')
        return sol.y[:n, -1].copy(), sol.y[n:, -1].copy()


# ----------------------------------------------------------------------------- the plant


class UKPlant:
    """Closed-chain rigid-body plant for one robot setup (module docstring).

    ``backend`` 'auto' = 'compiled' where numba is installed, else 'numpy'; 'compiled' (the whole period in
    one call where available, else compiled stages), 'compiled_stages' (force :class:`StagedRK4`) or
    'numpy' (NumPy RK4 and the reference dynamics, no compiled code). Public: ``backend`` (the period object),
    ``dynamics``, ``closure_rows`` (the
    compiled closure program or None), ``actuator_matrix`` (constant B, None when it depends on q),
    ``tau`` (B u of the current period), ``evaluations_per_step``.

    The integrator, substeps, closure gain and closure rank cut are the setup's resolved settings
    (``simulation.integrator``, ``substeps``, ``closure_omega``, ``closure_rcond``); the plant integrates
    ``setup.model`` as given (:meth:`from_setup` applies ``simulation.mass_scale``). ``integrator`` is the
    one that runs ('rk4', 'rosenbrock' (the ROS2 W-method) or 'solve_ivp'; 'auto' starts as 'rk4' and
    :meth:`fit_substeps` may switch it to 'rosenbrock'), ``requested_integrator`` the setting. ROS2 is for trees:
    a plant with closure rows refuses ``rosenbrock`` and keeps RK4 under ``auto``.
    """

    def __init__(self, setup, *, rtol=1e-8, atol=1e-10, backend='auto'):
        sim = setup.settings.simulation  # resolved once (uk_controller.settings.resolve)
        integrator, substeps = sim.integrator, sim.substeps
        closure_omega, closure_rcond = sim.closure_omega, sim.closure_rcond
        if integrator not in INTEGRATORS:
            raise ValueError(f'simulation.integrator must be one of {INTEGRATORS}, got {integrator!r}')
        if int(substeps) < 1:
            raise ValueError(f'simulation.substeps must be >= 1, got {substeps}')
        if backend not in BACKENDS:
            raise ValueError(f'backend must be one of {BACKENDS}, got {backend!r}')
        if backend in ('compiled', 'compiled_stages') and not jit.AVAILABLE:
            raise ValueError(f'backend {backend} requested but numba is not installed')
        compiled = backend != 'numpy' and jit.AVAILABLE
        self.setup = setup
        self.model = setup.model
        self.joint_names = list(setup.joint_names)
        self.n = self.model.n
        if integrator == 'rosenbrock' and setup.passive.m:
            raise ValueError(
                'simulation.integrator rosenbrock is for open trees; this plant has closure rows: use rk4 (or auto)'
            )
        self.requested_integrator = integrator
        self.integrator = 'rk4' if integrator == 'auto' else integrator
        self.substeps = int(substeps)
        self.rtol, self.atol = rtol, atol
        self.closures = setup.passive
        self.closure_stabilization = Baumgarte.critical(closure_omega)
        self._closure_rcond = float(closure_rcond)
        self.rhs_evaluations = 0
        n, mp = self.n, self.closures.m
        actuators = setup.actuators
        #: constant actuator columns B (n, p), None when they depend on q
        self.actuator_matrix = actuators.matrix(self.model).copy() if actuators.constant else None
        self.tau = np.zeros(n)
        self.closure_rows = None
        self._gains = None
        if mp:
            self._solver = uk.ServoSolver(n, 0, mp, 0, rcond=closure_rcond)
            self._gains = uk.row_gains(self.closure_stabilization, self.closures.rows.order)
            self._no_B, self._no_As, self._none = np.zeros((n, 0)), np.zeros((0, n)), np.zeros(0)
            if self.actuator_matrix is not None and compiled:
                # closure rows, Baumgarte and the UK acceleration in one compiled call (same equations as
                # ConstraintStack.evaluate + ServoSolver; None when a row type has no compiled form)
                self.closure_rows = self.closures.create_data(
                    self.model, gains=self._gains, rcond=closure_rcond, warm_up=False
                )
                if self.closure_rows is not None:
                    self.tau = self.closure_rows.tau  # B u is written straight into the kernel's input
        if mp == 0 and self.actuator_matrix is not None:
            self.dynamics, self.accel = 'aba', self._accel_aba
        elif self.closure_rows is not None:
            self.dynamics, self.accel = 'compiled_rows', self._accel_rows
        else:
            self.dynamics, self.accel = 'reference', self._accel_reference
        self._u = np.zeros(actuators.p)
        self._compiled, self._staged = compiled, backend == 'compiled_stages'
        self.backend = self._choose_backend(compiled, self._staged)
        if self.closure_rows is not None and not isinstance(self.backend, CompiledPeriod):
            # the periods call the program's own kernel (_accel_rows): compile it now, not in the first period;
            # the compiled period runs the same arrays through plant_rk4 and never calls it
            self.closure_rows.warm_up()
        self.reset(setup.q0, setup.qd0)

    def _choose_backend(self, compiled, staged):
        if self.integrator == 'solve_ivp':
            return SolveIvp(self)
        if self.integrator == 'rosenbrock':
            return (None if staged or not compiled else CompiledPeriod.build(self)) or NumpyRos2(self)
        if compiled:
            return (None if staged else CompiledPeriod.build(self)) or StagedRK4(self)
        return NumpyRK4(self)

    @property
    def evaluations_per_step(self):
        """Right-hand-side evaluations of one period: 4 per RK4 substep, 2 per ROS2 substep (at least: a
        ROS2 step redone at a friction zero crossing evaluates 1 more per pass)."""
        return (2 if self.integrator == 'rosenbrock' else 4) * self.substeps

    @property
    def method(self):
        """The compiled period's integrator code (kernels.codes METHOD_RK4 or METHOD_ROS2)."""
        return codes.METHOD_ROS2 if self.integrator == 'rosenbrock' else codes.METHOD_RK4

    def closure_program(self):
        """The closure rows, their Baumgarte terms and the UK solve as one compiled program
        (``constraints.CompiledRows``) for :mod:`.compiled_loop`, or None when a row type has none.

        With constant actuator columns it is the program this plant runs itself; with q-dependent
        (`between`) actuators it also forms their columns B(q) at every call, as :meth:`step`
        does through ``ActuatorMap.matrix``.
        """
        if self.actuator_matrix is not None:
            return self.closure_rows
        B, between = self.setup.actuators.compiled_form()
        return self.closures.create_data(  # run by the compiled loop's own kernel, never by its own (warm_up)
            self.model,
            p=len(self._u),
            B=B,
            between=between,
            gains=self._gains,
            rcond=self._closure_rcond,
            warm_up=False,
        )

    @classmethod
    def from_setup(cls, setup, *, backend='auto'):
        """The plant of `setup` as its resolved settings say: inertias x ``simulation.mass_scale`` (model
        mismatch), then the integrator, substeps and closure gain of :class:`UKPlant`. A scale other than 1
        reloads the robot with scaled inertias. `backend` as in :class:`UKPlant`."""
        mass_scale = setup.settings.simulation.mass_scale
        if mass_scale != 1.0:  # from the setup's own settings (they may differ from its file)
            from ..robots import setup_from_settings

            setup = setup_from_settings(setup.settings, mass_scale=mass_scale)
        return cls(setup, backend=backend)

    def fit_substeps(self, period):
        """Fit the integration to the description's fastest passive mode for control periods of `period` s
        (:mod:`.stiffness`); returns a sentence when it changed something, None otherwise.

        Where RK4 needs no more steps than ``substeps``, nothing changes. Otherwise, with ``integrator``
        'auto' on a tree, switch to ROS2 at ``substeps`` steps per period (stable on the stiff dissipation);
        with 'rk4' (or 'auto' with closure rows) raise ``substeps`` to what RK4 needs, or raise ValueError
        naming the joint and the step when more than ``stiffness.MAX_SUBSTEPS`` would be needed."""
        from .stiffness import MAX_SUBSTEPS, required_substeps

        if self.integrator != 'rk4':
            return None
        need, j, rate = required_substeps(self.model, self.q, period)
        if need <= self.substeps:
            return None
        name = self.joint_names[j]
        step = period / need
        if self.requested_integrator == 'auto' and self.closures.m == 0:
            self.integrator = 'rosenbrock'
            if not isinstance(self.backend, CompiledPeriod):  # the compiled period reads self.method per call
                self.backend = self._choose_backend(self._compiled, self._staged)
            return (
                f'simulation.integrator auto chose rosenbrock ({self.substeps} steps per control period): '
                f'joint {name!r} (light link, passive dynamics at {rate:.3g} 1/s) would need {need} RK4 steps '
                f'(below {step:.2e} s)'
            )
        if need > MAX_SUBSTEPS:
            raise ValueError(
                f'joint {name!r}: its passive dynamics (damping, friction, spring of the description) '
                f'on its light link relax at {rate:.3g} 1/s and need an RK4 step below {step:.2e} s '
                f'({need} per control period, more than {MAX_SUBSTEPS}); lower the friction slope '
                f'(robot.friction_velocity larger) or the damping, or use simulation.integrator: auto or rosenbrock '
                f'(open trees) or solve_ivp'
            )
        reason = (
            f'simulation.substeps raised from {self.substeps} to {need}: joint {name!r} (light link, passive '
            f'dynamics at {rate:.3g} 1/s) needs an RK4 step below {step:.2e} s'
        )
        self.substeps = need
        return reason

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
        if self.actuator_matrix is not None:
            np.dot(self.actuator_matrix, self._u, out=self.tau)
        return self.accel(q, qd, t, np.empty(self.n))

    # q'' into `out` for the efforts already mapped to ``tau = B u`` (one of three, chosen at construction)

    def _accel_aba(self, q, qd, t, out):
        self.rhs_evaluations += 1
        return self.model.forward_dynamics(q, qd, self.tau, out=out)

    def _accel_rows(self, q, qd, t, out):
        self.rhs_evaluations += 1
        program = self.closure_rows
        program.run(q, qd, t)
        status = program.info[codes.INFO_STATUS]
        if status != codes.OK:
            if status == _NOT_PD:
                raise uk.NotPositiveDefiniteError('mass matrix not positive definite')
            if status == Status.NON_FINITE_STATE:  # propagate it like the reference path
                out[:] = np.nan
                return out
        out[:] = program.qdd
        return out

    def _accel_reference(self, q, qd, t, out):
        self.rhs_evaluations += 1
        model = self.model
        model.compute(q, qd)
        if self.actuator_matrix is None:  # q-dependent actuator columns
            np.dot(self.setup.actuators.matrix(model), self._u, out=self.tau)
        if self.closures.m == 0:
            out[:] = uk.MassFactor(model.M).solve(self.tau - model.h)
            return out
        rows = self.closures.evaluate(model, q, qd, t)
        sol = self._solver.solve_rows(
            model.M_lower,
            self.tau,
            model.h,
            self._no_B,
            self._no_As,
            self._none,
            self._none,
            self._none,
            rows.A,
            rows.b,
            rows.phi,
            rows.phidot,
            self._gains,
        )
        out[:] = sol.qdd
        return out

    def closure_residual(self):
        """Closure constraint values phi at the current state (empty without closures)."""
        if self.closures.m == 0:
            return np.zeros(0)
        self.model.compute(self.q, self.qd)
        return self.closures.evaluate(self.model, self.q, self.qd, self.t).phi.copy()

    def step(self, u, dt):
        """Advance by dt with the efforts u held constant (the template over :attr:`backend`)."""
        u = np.asarray(u, dtype=float)
        self._u = u
        if self.actuator_matrix is not None:
            np.dot(self.actuator_matrix, u, out=self.tau)
        self.q, self.qd = self.backend.advance(self.q, self.qd, self.t, dt)
        self.t += dt
        return self.q, self.qd
