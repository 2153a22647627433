"""Compiled embedded plant (numba): plant acceleration and the classical RK4 of the UK plant.

The plant's q'' (seed 000 eq 9, seed 001 eq 36: ``M^{-1}(tau - h)`` on a tree, the UK acceleration under
the closure rows alone otherwise) with the tree pass of :mod:`.dynamics` and the closure rows of
:mod:`.rows`; :func:`plant_period` integrates a whole control period (efforts held) with :func:`rk4_accept`,
the one compiled RK4 of the project (:func:`uk_controller.sim.compiled_loop.closed_loop_chunk` and
:func:`plant_rk4` both run it through :func:`plant_period`).

NumPy reference: :class:`uk_controller.sim.uk_plant.UKPlant` stepped without its compiled period
(``UKPlant._accel`` on Pinocchio, its NumPy RK4 loop). Tests:
``test/test_fused_step.py::test_compiled_plant_period_equals_reference_rk4``,
``test/test_uk_fast.py::test_plant_rk4_kernel_equals_numpy_rk4`` and
``test/test_sim_compiled_loop.py::test_plant_period_equals_plant_rk4_bit_for_bit``.
"""

from __future__ import annotations

import numpy as np

from .codes import IH_BMAT, IH_MP, IH_P, JOINT_WIDTH, NOT_FINITE, NOT_FINITE_STATE, NOT_PD, OK, TREE_SCRATCH_PER_JOINT
from .dynamics import frame_placements, tree_terms
from .jit import njit
from .linalg import scratch_mat, scratch_vec
from .rows import fused_rows, program_rows
from .servo import closure_accel, free_accel, servo_scratch_shape


@njit(cache=True)
def rk4_accept(x, k, i, h, xt, qdd):
    """Classical RK4 on x = (q, q'), x' = (q', q''), one stage at a time: store stage i's acceleration,
    ``k[i][n:] = qdd``, then for i < 3 the next stage's state ``xt = x + h k[i]`` and its velocity slope
    ``k[i+1][:n] = xt[n:]`` (h = dt/2, dt/2, dt); for i = 3 the update ``x += h/6 (k0 + 2 k1 + 2 k2 + k3)``
    and ``k[0][:n] = x[n:]`` for the next step (h = dt). ``qdd`` may be the view ``k[i, n:]`` itself."""
    n = qdd.shape[0]
    for j in range(n):
        k[i, n + j] = qdd[j]
    if i < 3:
        for j in range(x.shape[0]):
            xt[j] = x[j] + h * k[i, j]
        for j in range(n):
            k[i + 1, j] = xt[n + j]
    else:
        c = h / 6.0
        for j in range(x.shape[0]):
            x[j] += c * (k[0, j] + 2.0 * (k[1, j] + k[2, j]) + k[3, j])
        for j in range(n):
            k[0, j] = x[n + j]


@njit(cache=True)
def plant_accel(
    q,
    qd,
    t,
    tree_ready,
    parents,
    jtype,
    mf,
    grav,
    fparents,
    fm,
    tau,
    ip,
    fp,
    ws,
    sc,
    oR,
    opos,
    S,
    M,
    h,
    trans,
    rots,
    qdd,
    tw,
    u,
    qdep,
):
    """q'' of the plant (seed 000 eq 9): ``M^{-1}(tau - h)`` for a tree (ip[IH_MP] == 0), else the UK
    acceleration under the compiled closure rows alone (:func:`closure_accel`, seed 001 eq 36). Returns the
    status (codes: OK, NOT_PD, NOT_FINITE q'', NOT_FINITE_STATE).

    ``tree_ready``: tree_terms(q, q') is already in (oR, opos, S, M, h). ``qdep``: the actuator columns depend
    on q (``between`` actuators): the program's rows also fill B(q) (fused_rows) and ``tau = B(q) u`` is
    formed here, as UKPlant._accel does with ActuatorMap.matrix; otherwise tau is the caller's ``B u``
    (u unused). ``sc``: a servo_scratch_shape(n, 0, ip[IH_MP], 0) array (its head also serves the tree's
    Cholesky factor); no heap allocation."""
    n = q.shape[0]
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(qd[i])):
            return NOT_FINITE_STATE
    if not tree_ready:
        tree_terms(q, qd, parents, jtype, mf, grav, oR, opos, S, M, h, tw)
    if qdep:
        frame_placements(oR, opos, fparents, fm, trans, rots)
        if not fused_rows(S, trans, rots, q, qd, t, ip, fp, ws):
            return NOT_FINITE_STATE
        p = ip[IH_P]
        Bq = ws[ip[IH_BMAT] : ip[IH_BMAT] + n * p].reshape((n, p))
        for i in range(n):
            acc = 0.0
            for j in range(p):
                acc += Bq[i, j] * u[j]
            tau[i] = acc
    if ip[IH_MP] == 0:
        if not free_accel(M, tau, h, sc[:n, :n], qdd):
            return NOT_PD
        for i in range(n):
            if not np.isfinite(qdd[i]):
                return NOT_FINITE
        return OK
    if not qdep:
        frame_placements(oR, opos, fparents, fm, trans, rots)
        if not fused_rows(S, trans, rots, q, qd, t, ip, fp, ws):
            return NOT_FINITE_STATE
    phi, phid, A, b, gains, params = program_rows(ip, fp, ws, ip[IH_MP])  # the passive rows only
    return closure_accel(M, tau, h, A, b, phi, phid, gains, params, sc, qdd)


@njit(cache=True)
def plant_period(
    x,
    tau,
    t,
    dt,
    substeps,
    tree_ready,
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
    trans,
    rots,
    tw,
    kk,
    xt,
    u,
    qdep,
):
    """``substeps`` classical RK4 steps (:func:`rk4_accept`) of x = (q, q') over dt with the efforts held,
    accelerations by :func:`plant_accel` (``tree_ready``: the tree pass at x is already in the work arrays;
    ``u``, ``qdep``: see there). Returns the first non-zero status (x then partly advanced) or 0."""
    n = x.shape[0] // 2
    hstep = dt / substeps
    half = 0.5 * hstep
    for j in range(n):
        kk[0, j] = x[n + j]
    for sub in range(substeps):
        for stage in range(4):
            src = x if stage == 0 else xt
            ts = t if stage == 0 else (t + half if stage < 3 else t + hstep)
            qdd = kk[stage, n:]
            st = plant_accel(
                src[:n],
                src[n:],
                ts,
                tree_ready and sub == 0 and stage == 0,
                parents,
                jtype,
                mf,
                grav,
                fparents,
                fm,
                tau,
                ip,
                fp,
                ws,
                sc,
                oR,
                opos,
                S,
                M,
                h,
                trans,
                rots,
                qdd,
                tw,
                u,
                qdep,
            )
            if st != OK:
                return st
            rk4_accept(x, kk, stage, half if stage < 2 else hstep, xt, qdd)
        t += hstep
    return OK


@njit(cache=True)
def plant_rk4(x, tau, t, dt, substeps, pi, pf, ip, fp, ws, pw):
    """:func:`plant_period` (tau held, no tree pass ready) on a packed model, for UKPlant.step.

    Packed model (few arguments: each costs dispatch time): ``pi = (nj, nf, parents, jtype, frame
    parents)``, ``pf = (gravity, joints (JOINT_WIDTH each), frames (FRAME_WIDTH each))``; ``pw`` is the
    work array (placements, S, M, h, frames, RK4 slopes, tree scratch, solve scratch), sized by
    plant_work_size."""
    n = x.shape[0] // 2
    nj = pi[0]
    nf = pi[1]
    mf1 = max(nf, 1)
    oR, o = scratch_mat(pw, 0, nj, 9)
    opos, o = scratch_mat(pw, o, nj, 3)
    S, o = scratch_mat(pw, o, 6, n)
    M, o = scratch_mat(pw, o, n, n)
    h, o = scratch_vec(pw, o, n)
    trans, o = scratch_mat(pw, o, mf1, 3)
    rots, o = scratch_mat(pw, o, mf1, 9)
    kk, o = scratch_mat(pw, o, 4, 2 * n)
    xt, o = scratch_vec(pw, o, 2 * n)
    tw, o = scratch_vec(pw, o, TREE_SCRATCH_PER_JOINT * nj + 12)
    rows, cols = servo_scratch_shape(n, 0, ip[IH_MP], 0)
    sc, o = scratch_mat(pw, o, rows, cols)
    # no shared tree pass, no q-dependent B: False typed as a run-time bool, as the closed loop passes its
    # flags (the literal False would make numba compile plant_period and plant_accel a second time)
    off = n < 0
    return plant_period(
        x,
        tau,
        t,
        dt,
        substeps,
        off,
        pi[2 : 2 + nj],
        pi[2 + nj : 2 + 2 * nj],
        pf[3 : 3 + nj * JOINT_WIDTH],
        pf[0:3],
        pi[2 + 2 * nj : 2 + 2 * nj + nf],
        pf[3 + nj * JOINT_WIDTH :],
        ip,
        fp,
        ws,
        sc,
        oR.reshape((nj, 3, 3)),
        opos,
        S,
        M,
        h,
        trans,
        rots.reshape((mf1, 3, 3)),
        tw,
        kk,
        xt,
        tau[:0],
        off,
    )


def plant_work_size(nj, n, nf, mp=0):
    """Length of plant_rk4's work array (mp: passive rows of the plant's program)."""
    mf1 = max(nf, 1)
    rows, cols = servo_scratch_shape(n, 0, mp, 0)
    return 12 * nj + 6 * n + n * n + n + 12 * mf1 + 10 * n + TREE_SCRATCH_PER_JOINT * nj + 12 + rows * cols
