"""The closed loop of :func:`uk_controller.sim.closed_loop.simulate` as one compiled call per chunk of periods.

Per control period k (zero-order hold, the same sequence as the Python loop in ``simulate``)::

    t_k, x_k = (q_k, q'_k)                      plant state at the control instant
    M, h, S, placements = tree(q_k, q'_k)        kernels.dynamics.tree_terms (own RNEA/CRBA; Pinocchio is the
                                                 reference, test/test_fused_step.py)
    u_k = fused_step_ws(controller program)      the ControllerCore's own compiled program (rows, Baumgarte,
                                                 seed 004 eq 35 servo solve, clipping): same arrays, gains, limits
    tau = B u_k,  x_{k+1} = RK4(x_k; tau)        kernels.plant.plant_period, the UKPlant's period (plant_rk4 wraps it;
                                                 ROS2 instead where the plant runs it, kernels.plant.ros2_period);
                                                 its first stage reuses the tree pass of the controller (same q_k, q'_k)
    t_{k+1} = t_k + dt

Every piece of arithmetic is in uk_controller.kernels (this module only sequences it): the plant's closure solve is
kernels.servo.closure_accel (seed 001 eq 36, seed 000 eq 9: the passive_projection that servo_solve applies
before the servo rows), with the controller's and the plant's scratch arrays allocated once here, so nothing
is allocated per period; plants with q-dependent actuator columns form ``tau = B(q) u`` at every stage
(kernels.plant.plant_accel).

Per period this replaces ~20 Python calls (Pinocchio pass, kernel dispatches, StepResult, array copies, log
row writes) by nothing: the Python loop remains the reference and the fallback. The chunk stops at the first
period whose controller status is not 0 (the Python ControllerCore.step then answers with its safe effort and
reason) or whose plant integration fails (the UKPlant then raises or propagates NaN exactly as its own step).

Only the dynamics source differs from the Python loop (tree_terms instead of Pinocchio's computeAllTerms for
the controller), so trajectories agree to round-off (test/test_sim_compiled_loop.py).

``compute_time`` of the compiled periods is the controller's share of each period (tree pass, rows, servo
solve) read from the CPU cycle counter and converted with the wall clock of the whole run; it excludes the
Python overhead that ``ControllerCore.step`` pays (see the bench ``step`` table for that figure).
"""

from __future__ import annotations

import time

import numpy as np

from ..kernels import codes
from ..kernels.dynamics import frame_placements, tree_terms
from ..kernels.jit import AVAILABLE, borrowed, njit
from ..kernels.plant import plant_period, stage_rows
from ..kernels.rows import fused_step_ws, program_scratch_shape
from ..kernels.servo import servo_scratch_shape

#: exit codes of :func:`closed_loop_chunk`
DONE, CONTROLLER_STOP, PLANT_STOP = 0, 1, 2

if AVAILABLE:  # pragma: no branch
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def _readcyclecounter(typingctx):
        """LLVM's ``readcyclecounter`` (rdtsc on x86; 0 where the target has none)."""

        def codegen(context, builder, signature, args):
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(64), []), 'llvm.readcyclecounter'
            )
            return builder.call(fn, [])

        return types.int64(), codegen
else:  # pragma: no cover

    def _readcyclecounter():
        return 0


@njit(cache=True)
def cycles():
    """The CPU cycle counter (for calibrating :func:`closed_loop_chunk`'s per-period controller times)."""
    return _readcyclecounter()


@njit(cache=True)
def closed_loop_chunk(
    k0,
    k1,
    x,
    t,
    t0,
    dt,
    substeps,
    method,
    share,
    cparents,
    cjtype,
    cmf,
    cgrav,
    cfparents,
    cfm,
    cip,
    cfp,
    cws,
    csat,
    csc,
    ctrans,
    crots,
    parents,
    jtype,
    mf,
    grav,
    fparents,
    fm,
    ip,
    fp,
    ws,
    sc,
    ptrans,
    prots,
    B,
    qdep,
    tau,
    oR,
    opos,
    S,
    M,
    h,
    tw,
    kk,
    xt,
    xb,
    log_t,
    log_q,
    log_qd,
    log_u,
    log_phi,
    log_phid,
    log_sat,
    log_ct,
    log_null,
):
    """Periods k0 .. k1-1 of the closed loop (module docstring); x = (q, q') is advanced in place.

    ``c*``: the controller's model tree, frames and fused program (ControllerCore's CompiledRows) and the
    scratch of its solve; the others: the plant's tree, closure frames, program and solve scratch (UKPlant's).
    ``method``: the plant's integrator (kernels.codes METHOD_RK4 or METHOD_ROS2). ``share``: both trees are the
    same model (no mass mismatch), so the plant's first RK4 stage reuses the controller's tree pass.
    The logs hold the passive and task rows (``log_phi.shape[1]``; a posture term's rows follow them in the
    program and are not logged) and the null-space dimensions of each period (log_null, (steps, 2)).
    Returns ``(k, code, t)``: code DONE (k = k1), CONTROLLER_STOP (period k not started: x, t are its
    start) or PLANT_STOP (period k logged, the integration failed: x restored to its start).

    Every array is used through a :func:`uk_controller.kernels.jit.borrowed` view (no atomic reference counting
    of the views and arguments of each period; the caller holds the arrays)."""
    x, cparents, cjtype, cmf, cgrav = borrowed(x), borrowed(cparents), borrowed(cjtype), borrowed(cmf), borrowed(cgrav)
    cfparents, cfm, cip, cfp, cws = borrowed(cfparents), borrowed(cfm), borrowed(cip), borrowed(cfp), borrowed(cws)
    csat, csc, ctrans, crots = borrowed(csat), borrowed(csc), borrowed(ctrans), borrowed(crots)
    parents, jtype, mf, grav = borrowed(parents), borrowed(jtype), borrowed(mf), borrowed(grav)
    fparents, fm, ip, fp = borrowed(fparents), borrowed(fm), borrowed(ip), borrowed(fp)
    ws, sc, ptrans, prots, B = borrowed(ws), borrowed(sc), borrowed(ptrans), borrowed(prots), borrowed(B)
    tau, oR, opos, S, M, h = borrowed(tau), borrowed(oR), borrowed(opos), borrowed(S), borrowed(M), borrowed(h)
    tw, kk, xt, xb = borrowed(tw), borrowed(kk), borrowed(xt), borrowed(xb)
    log_t, log_q, log_qd, log_u = borrowed(log_t), borrowed(log_q), borrowed(log_qd), borrowed(log_u)
    log_phi, log_phid, log_sat = borrowed(log_phi), borrowed(log_phid), borrowed(log_sat)
    log_ct, log_null = borrowed(log_ct), borrowed(log_null)
    n = x.shape[0] // 2
    p = B.shape[1]
    m = log_phi.shape[1]
    cinfo = cip[codes.IH_INFO]
    ceff = cip[codes.IH_EFF]
    cphi = cip[codes.IH_PHI]
    cphid = cip[codes.IH_PHID]
    for k in range(k0, k1):
        c0 = _readcyclecounter()
        q = x[:n]
        qd = x[n:]
        tree_terms(q, qd, cparents, cjtype, cmf, cgrav, oR, opos, S, M, h, tw)
        frame_placements(oR, opos, cfparents, cfm, ctrans, crots)
        fused_step_ws(M, h, S, ctrans, crots, q, qd, t - t0, cip, cfp, cws, csat, csc)
        if cws[cinfo + codes.INFO_STATUS] != codes.OK:
            return k, CONTROLLER_STOP, t
        c1 = _readcyclecounter()
        log_t[k] = t
        for j in range(n):
            log_q[k, j] = x[j]
            log_qd[k, j] = x[n + j]
        for j in range(p):
            log_u[k, j] = cws[ceff + j]
            log_sat[k, j] = csat[j]
        for j in range(m):
            log_phi[k, j] = cws[cphi + j]
            log_phid[k, j] = cws[cphid + j]
        log_ct[k] = c1 - c0
        log_null[k, 0] = int(cws[cinfo + codes.INFO_NULL_MOTION])
        log_null[k, 1] = int(cws[cinfo + codes.INFO_NULL_INTERNAL])
        # plant: u held over the period (tau = B u, or B(q) u at each stage when qdep)
        u = cws[ceff : ceff + p]
        if not qdep:
            for i in range(n):
                acc = 0.0
                for j in range(p):
                    acc += B[i, j] * u[j]
                tau[i] = acc
        for j in range(2 * n):
            xb[j] = x[j]
        st = plant_period(
            x,
            tau,
            t,
            dt,
            substeps,
            method,
            share,
            parents,
            jtype,
            mf,
            grav,
            fparents,
            fm,
            ip,
            fp,
            ws,
            sc,
            oR,
            opos,
            S,
            M,
            h,
            ptrans,
            prots,
            tw,
            kk,
            xt,
            u,
            qdep,
        )
        if st != codes.OK:
            for j in range(2 * n):
                x[j] = xb[j]
            return k, PLANT_STOP, t
        t = t + dt
    return k1, DONE, t


class CompiledLoop:
    """:func:`closed_loop_chunk` bound to one ControllerCore and one UKPlant (see :meth:`build`)."""

    def __init__(self):
        raise TypeError('use CompiledLoop.build(ctrl, plant)')

    @classmethod
    def build(cls, ctrl, plant):
        """A compiled loop for (ctrl, plant), or None when either lacks its compiled form (no numba, a
        pinv other than 'svd', rows without a compiled form or a callable's, an integrator other than rk4 or
        rosenbrock, a permuted or non-1-DOF joint model)."""
        if not AVAILABLE:
            return None
        backend = getattr(ctrl, 'backend', None)
        integrator = getattr(plant, 'integrator', None)
        if getattr(backend, 'name', None) != 'compiled' or integrator not in ('rk4', 'rosenbrock'):
            return None
        fz = backend.program
        if fz.external:  # callable rows: user Python runs in CompiledRows.run only
            return None
        ctree = ctrl.model.compiled_tree()
        ptree = plant.model.compiled_tree()
        if ctree is None or ptree is None or ctree[0].size != ptree[0].size:
            return None
        n, nj, p = plant.n, ptree[0].size, ctrl.p
        qdep = plant.actuator_matrix is None
        pfz = plant.closure_program()  # with q-dependent actuator columns it forms B(q) u too
        if qdep:
            if pfz is None:
                return None
        elif plant.backend.name != 'compiled' or (plant.closures.m and pfz is None):
            return None
        self = object.__new__(cls)
        self.ctrl, self.plant, self.qdep = ctrl, plant, qdep
        cfparents, cfm = ctrl.model.compiled_frames(fz.frames)
        ncf = len(fz.frames)
        if pfz is not None:
            fparents, fm = plant.model.compiled_frames(pfz.frames)
            npf = len(pfz.frames)
            ip, fp, ws = pfz.ip, pfz.fp, pfz.ws
        else:  # open tree: plant_accel's Cholesky branch (ip[IH_MP] == 0)
            _, _, ip, fp, ws, _, _ = plant.backend.args
            fparents, fm, npf = np.zeros(0, dtype=np.int64), np.zeros(0), 0
        self._plant_program = pfz
        share = all(np.array_equal(a, b) for a, b in zip(ctree, ptree))
        pmodel = (*ptree, fparents[:npf], fm, ip, fp, ws, np.zeros(servo_scratch_shape(n, 0, int(ip[codes.IH_MP]), 0)))
        ptrans, prots = np.zeros((max(npf, 1), 3)), np.zeros((max(npf, 1), 3, 3))
        oR, opos, S, M, h = np.zeros((nj, 3, 3)), np.zeros((nj, 3)), np.zeros((6, n)), np.zeros((n, n)), np.zeros(n)
        tw = np.zeros(codes.TREE_SCRATCH_PER_JOINT * nj + 12)
        kk, xt = np.zeros((stage_rows(n), 2 * n)), np.zeros(2 * n)
        self._args = (
            share,
            *ctree,
            cfparents[:ncf],
            cfm,
            fz.ip,
            fz.fp,
            fz.ws,
            fz.saturated,
            np.zeros(program_scratch_shape(fz.ip)),
            np.zeros((max(ncf, 1), 3)),
            np.zeros((max(ncf, 1), 3, 3)),
            *pmodel,
            ptrans,
            prots,
            np.zeros((n, p)) if qdep else np.ascontiguousarray(plant.actuator_matrix, dtype=float),
            qdep,
            np.zeros(n),
            oR,
            opos,
            S,
            M,
            h,
            tw,
            kk,
            xt,
            np.zeros(2 * n),
        )
        # plant_period's arguments after (x, tau, t, dt, substeps, method, tree_ready)
        self._period_args = (*pmodel, oR, opos, S, M, h, ptrans, prots, tw, kk, xt)
        self.x = np.zeros(2 * n)
        self._warm_up()
        return self

    def _warm_up(self):
        """Load (or compile) the kernel now, on throw-away state and logs (the ws arrays are overwritten by
        every step anyway)."""
        ctrl, plant = self.ctrl, self.plant
        n, p, m = plant.n, ctrl.p, ctrl.setup.passive.m + ctrl.setup.servo.m
        x = np.concatenate((plant.setup.q0, plant.setup.qd0)).astype(float)
        logs = (
            np.zeros(1),
            np.zeros((1, n)),
            np.zeros((1, n)),
            np.zeros((1, p)),
            np.zeros((1, m)),
            np.zeros((1, m)),
            np.zeros((1, p), dtype=bool),
            np.zeros(1),
            np.zeros((1, 2), dtype=np.int64),
        )
        closed_loop_chunk(0, 1, x, 0.0, 0.0, 1e-3, plant.substeps, plant.method, *self._args, *logs)
        cycles()

    def plant_period(self, x, u, t, dt):
        """One plant period under the efforts u by :func:`uk_controller.kernels.plant.plant_period` as the loop runs
        it (x advanced in place; returns the status), for tests against kernels.plant.plant_rk4 and UKPlant.step."""
        u = np.ascontiguousarray(u, dtype=float)
        tau = np.zeros(self.plant.n) if self.qdep else self.plant.actuator_matrix @ u
        plant = self.plant
        return plant_period(x, tau, t, dt, plant.substeps, plant.method, False, *self._period_args, u, self.qdep)

    def run(self, k0, k1, logs):
        """Periods k0 .. k1-1 from the plant's current state; the plant's q, q', t follow.

        Returns ``(k, code)`` as :func:`closed_loop_chunk` (logs rows k0 .. k-1 written; row k too for
        PLANT_STOP)."""
        plant, ctrl = self.plant, self.ctrl
        n = plant.n
        x = self.x
        x[:n] = plant.q
        x[n:] = plant.qd
        if 'null_space' not in logs:  # (callers that do not log the null-space dimensions)
            logs['null_space'] = np.zeros((logs['t'].shape[0], 2), dtype=np.int64)
        k, code, t = closed_loop_chunk(
            k0,
            k1,
            x,
            plant.t,
            ctrl.t0,
            ctrl.dt,
            plant.substeps,
            plant.method,
            *self._args,
            logs['t'],
            logs['q'],
            logs['qd'],
            logs['effort'],
            logs['phi'],
            logs['phidot'],
            logs['saturated'],
            logs['compute_time'],
            logs['null_space'],
        )
        done = k - k0
        logged = k + (code == PLANT_STOP)
        logs['ok'][k0:logged] = True
        if done:
            # q and q' replaced (never mutated), as UKPlant.step does
            plant.q, plant.qd, plant.t = x[:n].copy(), x[n:].copy(), t
            plant.rhs_evaluations += plant.evaluations_per_step * done
        if logged > k0:
            ctrl.remember_effort(logs['effort'][logged - 1])  # as ControllerCore.step does
        return k, code


def cycles_to_seconds(compute_time, compiled_mask, cycle_span, wall_span):
    """Convert the cycle counts of the compiled periods to seconds with the run's cycles-per-second (NaN
    where the target has no cycle counter)."""
    if compiled_mask.any():
        rate = cycle_span / wall_span if cycle_span > 0 and wall_span > 0 else float('nan')
        compute_time[compiled_mask] = compute_time[compiled_mask] / rate
    return compute_time


def clock():
    """(perf_counter, cycle counter) now."""
    return time.perf_counter(), int(cycles())


__all__ = ['CompiledLoop', 'closed_loop_chunk', 'cycles', 'AVAILABLE', 'DONE', 'CONTROLLER_STOP', 'PLANT_STOP']
