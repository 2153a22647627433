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

The plant's closure solve (:func:`closure_accel`) repeats uk_kernels.servo_kernel's statements for p = ms = 0
without its small heap allocations (same bits, about half the time per RK4 stage on the five-bars); plants
with q-dependent actuator columns form ``tau = B(q) u`` at every stage (:func:`plant_accel`).

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


def closure_scratch_size(n, mp):
    """Length of the scratch array of :func:`closure_accel`."""
    return n * n + n * mp + 4 * mp * mp + 3 * mp + n


@njit(cache=True)
def closure_accel(M, h, tau, ip, fp, ws, sc, qdd):
    """q'' of the plant under its closure rows, after :func:`uk_kernels.fused_rows` filled them (passive rows
    only: p = 0 actuators and ms = 0 servo rows in the program); returns the status (0, 1 M not positive
    definite, 2 non-finite q'').

    The statements of :func:`uk_kernels.servo_kernel` for p = ms = 0 (seed 001 eq 36, seed 000 eq 9)::

        a0 = M^{-1}(tau - h),  G = A_p M^{-1} A_p^T,  r_p = b_p - (kd phi' + kp phi) - A_p a0
        q'' = a0 + M^{-1} A_p^T G^+ r_p        (G^+ on the eigenvalues w > max(rcond^2, floor) w_max)

    in the same order (so the same bits), without servo_kernel's ~17 small heap allocations per call:
    every intermediate lives in the scratch array `sc` (closure_scratch_size(n, mp))."""
    n = M.shape[0]
    mp = ip[K.IH_MP]
    Ap = ws[ip[K.IH_A]:ip[K.IH_A] + mp * n].reshape((mp, n))
    bp = ws[ip[K.IH_BV]:ip[K.IH_BV] + mp]
    phip = ws[ip[K.IH_PHI]:ip[K.IH_PHI] + mp]
    phidp = ws[ip[K.IH_PHID]:ip[K.IH_PHID] + mp]
    gains = fp[ip[K.IH_GAINS]:ip[K.IH_GAINS] + 2 * mp].reshape((2, mp))
    params = fp[ip[K.IH_PARAMS]:ip[K.IH_PARAMS] + K.PARAMS_SIZE]
    rcond = params[0]
    floor = params[1]
    sweeps = int(params[3])
    o = 0
    L = sc[o:o + n * n].reshape((n, n))
    o += n * n
    MApT = sc[o:o + n * mp].reshape((n, mp))
    o += n * mp
    G = sc[o:o + mp * mp].reshape((mp, mp))
    o += mp * mp
    V = sc[o:o + mp * mp].reshape((mp, mp))
    o += mp * mp
    W = sc[o:o + mp * mp].reshape((mp, mp))
    o += mp * mp
    Gp = sc[o:o + mp * mp].reshape((mp, mp))
    o += mp * mp
    w = sc[o:o + mp]
    o += mp
    rp = sc[o:o + mp]
    o += mp
    y = sc[o:o + mp]
    o += mp
    col = sc[o:o + n]
    if not K.cholesky_lower(M, L):
        return 1.0
    a0 = qdd
    for i in range(n):
        a0[i] = tau[i] - h[i]
    K.chol_solve_col(L, a0)
    for j in range(mp):
        for i in range(n):
            col[i] = Ap[j, i]
        K.chol_solve_col(L, col)
        for i in range(n):
            MApT[i, j] = col[i]
    for i in range(mp):
        for j in range(i, mp):
            acc = 0.0
            for k in range(n):
                acc += Ap[i, k] * MApT[k, j]
            G[i, j] = acc
            G[j, i] = acc
    for i in range(mp):
        for j in range(mp):
            W[i, j] = G[i, j]
    K.jacobi_columns(W, V, sweeps)
    wmax = K._norms(W, w)
    for i in range(mp):
        acc = 0.0
        for k in range(n):
            acc += Ap[i, k] * a0[k]
        bstab = bp[i] - (gains[0, i] * phidp[i] + gains[1, i] * phip[i])
        rp[i] = bstab - acc
    if wmax > 0.0:
        cut = max(rcond * rcond, floor) * wmax
        for i in range(mp):
            for j in range(mp):
                Gp[i, j] = 0.0
        for kk in range(mp):
            if w[kk] > cut:
                inv = 1.0 / w[kk]
                for i in range(mp):
                    vi = V[i, kk] * inv
                    for j in range(mp):
                        Gp[i, j] += vi * V[j, kk]
        for i in range(mp):
            acc = 0.0
            for j in range(mp):
                acc += Gp[i, j] * rp[j]
            y[i] = acc
        for k in range(n):
            acc = 0.0
            for i in range(mp):
                acc += MApT[k, i] * y[i]
            a0[k] += acc
    for k in range(n):
        if not np.isfinite(qdd[k]):
            return 2.0
    return 0.0


@njit(cache=True)
def plant_accel(q, qd, t, tree_ready, parents, jtype, mf, grav, fparents, fm, tau, ip, fp, ws, sc, oR, op, S, M,
                h, trans, rots, qdd, tw, L, u, qdep):
    """:func:`uk_controller.uk_kernels.plant_accel` (same statements, same status codes) with the closure
    solve of :func:`closure_accel`; ``tree_ready``: tree_terms(q, q') is already in (oR, op, S, M, h).

    ``qdep``: the actuator columns depend on q (``between`` actuators): the program's rows also fill
    B(q) (uk_kernels.fused_rows) and ``tau = B(q) u`` is formed here at every stage, as UKPlant._accel does
    with ActuatorMap.matrix; otherwise tau is the caller's ``B u``."""
    n = q.shape[0]
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(qd[i])):
            return K.NOT_FINITE_STATE
    if not tree_ready:
        K.tree_terms(q, qd, parents, jtype, mf, grav, oR, op, S, M, h, tw)
    if qdep:
        K.frame_placements(oR, op, fparents, fm, trans, rots)
        if not K.fused_rows(S, trans, rots, q, qd, t, ip, fp, ws):
            return K.NOT_FINITE_STATE
        p = ip[K.IH_P]
        Bq = ws[ip[K.IH_BMAT]:ip[K.IH_BMAT] + n * p].reshape((n, p))
        for i in range(n):
            acc = 0.0
            for j in range(p):
                acc += Bq[i, j] * u[j]
            tau[i] = acc
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
    if not qdep:
        K.frame_placements(oR, op, fparents, fm, trans, rots)
        if not K.fused_rows(S, trans, rots, q, qd, t, ip, fp, ws):
            return K.NOT_FINITE_STATE
    return closure_accel(M, h, tau, ip, fp, ws, sc, qdd)


@njit(cache=True)
def plant_period(x, tau, t, dt, substeps, tree_ready, parents, jtype, mf, grav, fparents, fm, ip, fp, ws, sc,
                 oR, op, S, M, h, trans, rots, tw, L, kk, xt, u, qdep):
    """``substeps`` classical RK4 steps of x = (q, q') over dt with tau held: the arithmetic of
    :func:`uk_controller.uk_kernels.plant_rk4`, accelerations by :func:`plant_accel` (``tree_ready``: the
    tree pass at x is already in the work arrays). Returns the first non-zero status (x then partly
    advanced) or 0. ``u``, ``qdep``: see :func:`plant_accel` (tau = B u given when qdep is False)."""
    n = x.shape[0] // 2
    hstep = dt / substeps
    half = 0.5 * hstep
    for j in range(n):
        kk[0, j] = x[n + j]
    for sub in range(substeps):
        for stage in range(4):
            src = x if stage == 0 else xt
            ts = t if stage == 0 else (t + half if stage < 3 else t + hstep)
            st = plant_accel(src[:n], src[n:], ts, tree_ready and sub == 0 and stage == 0, parents, jtype, mf, grav,
                             fparents, fm, tau, ip, fp, ws, sc, oR, op, S, M, h, trans, rots, kk[stage, n:], tw, L,
                             u, qdep)
            if st != 0.0:
                return st
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
        t += hstep
    return 0.0


@njit(cache=True)
def closed_loop_chunk(k0, k1, x, t, t0, dt, substeps, share,
                      cparents, cjtype, cmf, cgrav, cfparents, cfm, cip, cfp, cws, csat, ctrans, crots,
                      parents, jtype, mf, grav, fparents, fm, ip, fp, ws, sc, ptrans, prots,
                      B, qdep, tau, oR, op, S, M, h, L, tw, kk, xt, xb,
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
        # plant: u held over the period (tau = B u, or B(q) u at each stage when qdep), RK4 as plant_rk4
        u = cws[ceff:ceff + p]
        if not qdep:
            for i in range(n):
                acc = 0.0
                for j in range(p):
                    acc += B[i, j] * u[j]
                tau[i] = acc
        for j in range(2 * n):
            xb[j] = x[j]
        st = plant_period(x, tau, t, dt, substeps, share, parents, jtype, mf, grav, fparents, fm, ip, fp, ws, sc,
                          oR, op, S, M, h, ptrans, prots, tw, L, kk, xt, u, qdep)
        if st != 0.0:
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
        pinv other than 'svd', rows without a compiled form, an integrator other than rk4, a permuted or
        non-1-DOF joint model)."""
        if not AVAILABLE:
            return None
        fz = getattr(ctrl, '_fused', None)
        if fz is None or getattr(plant, 'integrator', None) != 'rk4':
            return None
        ctree = ctrl.model.compiled_tree()
        ptree = plant.model.compiled_tree()
        if ctree is None or ptree is None or ctree[0].size != ptree[0].size:
            return None
        n, nj, p = plant.n, ptree[0].size, ctrl.p
        qdep = plant._B is None
        pfz = plant._fused
        if qdep:
            # q-dependent actuator columns (``between`` actuators): the plant's closure program also carries
            # them, as the controller's does (UKPlant itself evaluates ActuatorMap.matrix at every stage)
            from ..constraints import CompiledRows, ConstraintStack
            actuators = plant.setup.actuators
            between = [(k, act.bodies[0], act.bodies[1], act.axis) for k, act in actuators._between]
            pfz = CompiledRows.build(plant.model, plant.closures, ConstraintStack([], n), p=p, B=actuators._B,
                                     between=between, gains=plant._gains if plant.closures.m else None)
            if pfz is None:
                return None
        elif plant._compiled is None or (plant.closures.m and pfz is None):
            return None
        self = object.__new__(cls)
        self.ctrl, self.plant, self.qdep = ctrl, plant, qdep
        cfparents, cfm = ctrl.model.compiled_frames(fz.frames)
        ncf = len(fz.frames)
        if pfz is not None:
            fparents, fm = plant.model.compiled_frames(pfz.frames)
            npf = len(pfz.frames)
            ip, fp, ws = pfz.ip, pfz.fp, pfz.ws
        else:                                   # open tree: plant_accel's Cholesky branch (ip[IH_MP] == 0)
            _, _, ip, fp, ws, _, _ = plant._compiled
            fparents, fm, npf = np.zeros(0, dtype=np.int64), np.zeros(0), 0
        self._plant_program = pfz
        share = all(np.array_equal(a, b) for a, b in zip(ctree, ptree))
        pmodel = (*ptree, fparents[:npf], fm, ip, fp, ws, np.zeros(closure_scratch_size(n, int(ip[K.IH_MP]))))
        ptrans, prots = np.zeros((max(npf, 1), 3)), np.zeros((max(npf, 1), 3, 3))
        oR, op, S, M, h = np.zeros((nj, 3, 3)), np.zeros((nj, 3)), np.zeros((6, n)), np.zeros((n, n)), np.zeros(n)
        tw, L = np.zeros(K.TREE_SCRATCH_PER_JOINT * nj + 12), np.zeros((n, n))
        kk, xt = np.zeros((4, 2 * n)), np.zeros(2 * n)
        self._args = (
            share,
            *ctree, cfparents[:ncf], cfm, fz.ip, fz.fp, fz.ws, fz.saturated,
            np.zeros((max(ncf, 1), 3)), np.zeros((max(ncf, 1), 3, 3)),
            *pmodel, ptrans, prots,
            np.zeros((n, p)) if qdep else np.ascontiguousarray(plant._B, dtype=float), qdep, np.zeros(n),
            oR, op, S, M, h, L, tw, kk, xt, np.zeros(2 * n),
        )
        # plant_period's arguments after (x, tau, t, dt, substeps, tree_ready)
        self._period_args = (*pmodel, oR, op, S, M, h, ptrans, prots, tw, L, kk, xt)
        self.x = np.zeros(2 * n)
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

    def plant_period(self, x, u, t, dt):
        """One plant period under the efforts u by :func:`plant_period` (x advanced in place; returns the
        status), for tests against :func:`uk_controller.uk_kernels.plant_rk4` and UKPlant.step."""
        u = np.ascontiguousarray(u, dtype=float)
        tau = np.zeros(self.plant.n) if self.qdep else self.plant._B @ u
        return plant_period(x, tau, t, dt, self.plant.substeps, False, *self._period_args, u, self.qdep)

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
