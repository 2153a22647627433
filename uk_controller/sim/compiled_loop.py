"""The closed loop of :func:`uk_controller.sim.closed_loop.simulate` as one compiled call per chunk of periods.

Per control period k (zero-order hold, the same sequence as the Python loop in ``simulate``)::

    t_k, x_k = (q_k, q'_k)                      plant state at the control instant
    M, h, S, placements = tree(q_k, q'_k)        uk_kernels.tree_terms (own RNEA/CRBA; Pinocchio is the
                                                 reference, test/test_fused_step.py)
    u_k = fused_step(controller program)         the ControllerCore's own compiled program (rows, Baumgarte,
                                                 seed 004 eq 35 servo solve, clipping): same arrays, gains, limits
    tau = B u_k,  x_{k+1} = RK4(x_k; tau)        the UKPlant's period (uk_kernels.plant_rk4 arithmetic); its first
                                                 stage reuses the tree pass of the controller (same q_k, q'_k)
    t_{k+1} = t_k + dt

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

from .. import uk_kernels as K

AVAILABLE = K.AVAILABLE
njit = K.njit

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
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                                'llvm.readcyclecounter')
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
def _plant_accel_after_tree(q, qd, t, fparents, fm, tau, ip, fp, ws, sat, oR, op, S, M, h, trans, rots, qdd, L):
    """uk_kernels.plant_accel with tree_terms(q, q') already in (oR, op, S, M, h): the same statements."""
    n = q.shape[0]
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(qd[i])):
            return K.NOT_FINITE_STATE
    if ip[K.IH_MP] == 0:
        if not K.cholesky_lower(M, L):
            return 1.0
        for i in range(n):
            qdd[i] = tau[i] - h[i]
        K.chol_solve_col(L, qdd)
        for i in range(n):
            if not np.isfinite(qdd[i]):
                return 2.0
        return 0.0
    K.frame_placements(oR, op, fparents, fm, trans, rots)
    wt = ws[ip[K.IH_TAU]:ip[K.IH_TAU] + n]
    for i in range(n):
        wt[i] = tau[i]
    K.fused_step(M, h, S, trans, rots, q, qd, t, ip, fp, ws, sat)
    o = ip[K.IH_QDD]
    for i in range(n):
        qdd[i] = ws[o + i]
    return ws[ip[K.IH_INFO]]


@njit(cache=True)
def closed_loop_chunk(k0, k1, x, t, t0, dt, substeps, share,
                      cparents, cjtype, cmf, cgrav, cfparents, cfm, cip, cfp, cws, csat, ctrans, crots,
                      parents, jtype, mf, grav, fparents, fm, ip, fp, ws, sat, ptrans, prots,
                      B, tau, oR, op, S, M, h, L, tw, kk, xt, xb,
                      log_t, log_q, log_qd, log_u, log_phi, log_phid, log_sat, log_ct):
    """Periods k0 .. k1-1 of the closed loop (module docstring); x = (q, q') is advanced in place.

    ``c*``: the controller's model tree, frames and fused program (ControllerCore's CompiledRows);
    the others: the plant's tree, closure frames and program (UKPlant's). ``share``: both trees are the
    same model (no mass mismatch), so the plant's first RK4 stage reuses the controller's tree pass.
    Returns ``(k, code, t)``: code DONE (k = k1), CONTROLLER_STOP (period k not started: x, t are its
    start) or PLANT_STOP (period k logged, the integration failed: x restored to its start)."""
    n = x.shape[0] // 2
    p = B.shape[1]
    m = cip[K.IH_MP] + cip[K.IH_MS]
    cinfo = cip[K.IH_INFO]
    ceff = cip[K.IH_EFF]
    cphi = cip[K.IH_PHI]
    cphid = cip[K.IH_PHID]
    hstep = dt / substeps
    half = 0.5 * hstep
    for k in range(k0, k1):
        c0 = _readcyclecounter()
        q = x[:n]
        qd = x[n:]
        K.tree_terms(q, qd, cparents, cjtype, cmf, cgrav, oR, op, S, M, h, tw)
        K.frame_placements(oR, op, cfparents, cfm, ctrans, crots)
        K.fused_step(M, h, S, ctrans, crots, q, qd, t - t0, cip, cfp, cws, csat)
        if cws[cinfo] != 0.0:
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
        # plant: tau = B u held over the period, RK4 as uk_kernels.plant_rk4
        for i in range(n):
            acc = 0.0
            for j in range(p):
                acc += B[i, j] * cws[ceff + j]
            tau[i] = acc
        for j in range(2 * n):
            xb[j] = x[j]
            kk[0, j] = 0.0
        for j in range(n):
            kk[0, j] = x[n + j]
        ts = t
        for sub in range(substeps):
            for stage in range(4):
                src = x if stage == 0 else xt
                tst = ts if stage == 0 else (ts + half if stage < 3 else ts + hstep)
                if share and sub == 0 and stage == 0:
                    st = _plant_accel_after_tree(src[:n], src[n:], tst, fparents, fm, tau, ip, fp, ws, sat,
                                                 oR, op, S, M, h, ptrans, prots, kk[0, n:], L)
                else:
                    st = K.plant_accel(src[:n], src[n:], tst, parents, jtype, mf, grav, fparents, fm, tau, ip, fp,
                                       ws, sat, oR, op, S, M, h, ptrans, prots, kk[stage, n:], tw, L)
                if st != 0.0:
                    for j in range(2 * n):
                        x[j] = xb[j]
                    return k, PLANT_STOP, t
                if stage < 3:
                    hh = half if stage < 2 else hstep
                    for j in range(2 * n):
                        xt[j] = x[j] + hh * kk[stage, j]
                    for j in range(n):
                        kk[stage + 1, j] = xt[n + j]
                else:
                    c = hstep / 6.0
                    for j in range(2 * n):
                        x[j] += c * (kk[0, j] + 2.0 * (kk[1, j] + kk[2, j]) + kk[3, j])
                    for j in range(n):
                        kk[0, j] = x[n + j]
            ts += hstep
        t = t + dt
    return k1, DONE, t


class CompiledLoop:
    """:func:`closed_loop_chunk` bound to one ControllerCore and one UKPlant (see :meth:`build`)."""

    def __init__(self):
        raise TypeError('use CompiledLoop.build(ctrl, plant)')

    @classmethod
    def build(cls, ctrl, plant):
        """A compiled loop for (ctrl, plant), or None when either lacks its compiled form (no numba, a
        pinv other than 'svd', rows without a compiled form, q-dependent actuator columns in the plant,
        a permuted or non-1-DOF joint model)."""
        if not AVAILABLE:
            return None
        fz = getattr(ctrl, '_fused', None)
        pargs = getattr(plant, '_compiled', None)
        if fz is None or pargs is None or getattr(plant, 'integrator', None) != 'rk4' or plant._B is None:
            return None
        ctree = ctrl.model.compiled_tree()
        ptree = plant.model.compiled_tree()
        if ctree is None or ptree is None or ctree[0].size != ptree[0].size:
            return None
        self = object.__new__(cls)
        self.ctrl, self.plant = ctrl, plant
        n, nj = plant.n, ptree[0].size
        cfparents, cfm = ctrl.model.compiled_frames(fz.frames)
        ncf = len(fz.frames)
        pfz = plant._fused
        if pfz is not None:
            fparents, fm = plant.model.compiled_frames(pfz.frames)
            npf = len(pfz.frames)
            ip, fp, ws, sat = pfz.ip, pfz.fp, pfz.ws, pfz.saturated
        else:                                   # open tree: plant_accel's Cholesky branch (ip[IH_MP] == 0)
            _, _, ip, fp, ws, sat, _ = pargs
            fparents, fm, npf = np.zeros(0, dtype=np.int64), np.zeros(0), 0
        share = all(np.array_equal(a, b) for a, b in zip(ctree, ptree))
        self._args = (
            share,
            *ctree, cfparents[:ncf], cfm, fz.ip, fz.fp, fz.ws, fz.saturated,
            np.zeros((max(ncf, 1), 3)), np.zeros((max(ncf, 1), 3, 3)),
            *ptree, fparents[:npf], fm, ip, fp, ws, sat, np.zeros((max(npf, 1), 3)), np.zeros((max(npf, 1), 3, 3)),
            np.ascontiguousarray(plant._B, dtype=float), np.zeros(n),
            np.zeros((nj, 3, 3)), np.zeros((nj, 3)), np.zeros((6, n)), np.zeros((n, n)), np.zeros(n),
            np.zeros((n, n)), np.zeros(K.TREE_SCRATCH_PER_JOINT * nj + 12), np.zeros((4, 2 * n)), np.zeros(2 * n),
            np.zeros(2 * n),
        )
        self.x = np.zeros(2 * n)
        self.cycle_count = 0
        self._warm_up()
        return self

    def _warm_up(self):
        """Load (or compile) the kernel now, on throw-away state and logs (the ws arrays are overwritten by
        every step anyway)."""
        ctrl, plant = self.ctrl, self.plant
        n, p, m = plant.n, ctrl.p, ctrl._mp + ctrl._ms
        x = np.concatenate((plant.setup.q0, plant.setup.qd0)).astype(float)
        logs = (np.zeros(1), np.zeros((1, n)), np.zeros((1, n)), np.zeros((1, p)), np.zeros((1, m)),
                np.zeros((1, m)), np.zeros((1, p), dtype=bool), np.zeros(1))
        closed_loop_chunk(0, 1, x, 0.0, 0.0, 1e-3, plant.substeps, *self._args, *logs)
        cycles()

    def run(self, k0, k1, logs):
        """Periods k0 .. k1-1 from the plant's current state; the plant's q, q', t follow.

        Returns ``(k, code)`` as :func:`closed_loop_chunk` (logs rows k0 .. k-1 written; row k too for
        PLANT_STOP)."""
        plant, ctrl = self.plant, self.ctrl
        n = plant.n
        x = self.x
        x[:n] = plant.q
        x[n:] = plant.qd
        k, code, t = closed_loop_chunk(k0, k1, x, plant.t, ctrl.t0, ctrl.dt, plant.substeps, *self._args,
                                       logs['t'], logs['q'], logs['qd'], logs['effort'], logs['phi'],
                                       logs['phidot'], logs['saturated'], logs['compute_time'])
        done = k - k0
        logged = k + (code == PLANT_STOP)
        logs['ok'][k0:logged] = True
        if done:
            # q and q' replaced (never mutated), as UKPlant.step does
            plant.q, plant.qd, plant.t = x[:n].copy(), x[n:].copy(), t
            plant.rhs_evaluations += plant._evals_per_step * done
        if logged > k0 and ctrl.safe_effort == 'hold':
            ctrl._last_effort[:] = logs['effort'][logged - 1]     # what ControllerCore.step keeps for 'hold'
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
