"""Compiled embedded plant (numba): plant acceleration, the classical RK4 and the ROS2 of the UK plant.

The plant's q'' (seed 000 eq 9, seed 001 eq 36: ``M^{-1}(tau - h)`` on a tree, the UK acceleration under
the closure rows alone otherwise) with the tree pass of :mod:`.dynamics` and the closure rows of
:mod:`.rows`; :func:`plant_period` integrates a whole control period (efforts held) with :func:`rk4_accept`,
the one compiled RK4 of the project (:func:`uk_controller.sim.compiled_loop.closed_loop_chunk` and
:func:`plant_rk4` both run it through :func:`plant_period`), or with :func:`ros2_period`, the
linearly-implicit W-method for stiff passive dissipation (NumPy reference :mod:`uk_controller.sim.ros2`;
tests: ``test/test_ros2.py``).

NumPy reference: :class:`uk_controller.sim.uk_plant.UKPlant` stepped without its compiled period
(``UKPlant._accel`` on Pinocchio, its NumPy RK4 loop). Tests:
``test/test_fused_step.py::test_compiled_plant_period_equals_reference_rk4``,
``test/test_uk_fast.py::test_plant_rk4_kernel_equals_numpy_rk4`` and
``test/test_sim_compiled_loop.py::test_plant_period_equals_plant_rk4_bit_for_bit``.
"""

from __future__ import annotations

import numpy as np

from .codes import (
    IH_BMAT,
    IH_MP,
    IH_P,
    JOINT_DAMPING,
    JOINT_FRICTION,
    JOINT_FRICTION_VEL,
    JOINT_STIFFNESS,
    JOINT_WIDTH,
    METHOD_ROS2,
    NOT_FINITE,
    NOT_FINITE_STATE,
    NOT_PD,
    OK,
    ROS2_GAMMA,
    ROS2_PASSES,
    ROS2_SECANT_RATIO,
    TREE_SCRATCH_PER_JOINT,
)
from .dynamics import frame_placements, tree_terms
from .jit import njit
from .linalg import chol_solve_col, cholesky_lower, scratch_mat, scratch_vec
from .rows import fused_rows, program_rows
from .servo import closure_accel, free_accel, servo_scratch_shape


def stage_rows(n):
    """Rows of plant_period's (rows, 2n) slope array ``kk``: RK4's four stages, ROS2's slopes and solve
    vectors, and two n x n blocks side by side (M at the step's start, the Cholesky factor of W)."""
    return 5 + n


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
def ros2_period(
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
    """``substeps`` steps of the linearly-implicit W-method ROS2 (Verwer, Spee, Blom & Hundsdorfer, SIAM J.
    Sci. Comput. 20(4), 1999; gamma = 1 + 1/sqrt(2)) of x = (q, q') over dt with the efforts held::

        W k1_v = M r1_v - gamma h K r1_q,  r1 = f(x)
        W k2_v = M r2_v - gamma h K r2_q,  r2 = f(x + h k1) - 2 k1,   k_q = r_q + gamma h k_v
        x+ = x + 3/2 h k1 + 1/2 h k2,      W = M + gamma h diag(s) + (gamma h)^2 K

    with M of the step's start, K the joints' springs and s the slope of their damping and friction
    ``d + f / v_s sech^2(q' / v_s)``, raised and the step redone where the friction's secant over the speeds
    the step visited exceeds it (the zero crossing; :mod:`uk_controller.sim.ros2`, the NumPy reference, says
    why). Accelerations by :func:`plant_accel` (arguments as :func:`plant_period`); ``kk`` rows: 0 and 1
    the stages, 2 the accelerations, 3 the slopes and a solve vector, 4 the scaled springs, then the n x n
    blocks M0 | L; W is formed in M (free once M0 is copied: the second stage's tree pass rewrites it), so the
    Cholesky runs on the argument types free_accel gives it. Returns the first non-zero status or 0."""
    n = x.shape[0] // 2
    nj = parents.shape[0]
    H = dt / substeps
    gh = ROS2_GAMMA * H
    k1 = kk[0]
    k2 = kk[1]
    a0 = kk[2, :n]
    a1 = kk[2, n:]
    s = kk[3, :n]
    r = kk[3, n:]
    ks = kk[4, :n]
    M0 = kk[5 : 5 + n, :n]
    L = kk[5 : 5 + n, n:]
    W = M
    for i in range(1, nj):
        ks[i - 1] = gh * mf[i * JOINT_WIDTH + JOINT_STIFFNESS]
    for sub in range(substeps):
        # one plant_accel call site (each one is compiled into this kernel): evaluation 0 is the step's start
        # (a0, M0, slopes), every later one the second stage of a pass
        ps = 0
        first = True
        while True:
            src = x if first else xt
            st = plant_accel(
                src[:n],
                src[n:],
                t if first else t + H,
                tree_ready and sub == 0 and first,
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
                a0 if first else a1,
                tw,
                u,
                qdep,
            )
            if st != OK:
                return st
            if first:
                first = False
                for i in range(n):
                    for j in range(n):
                        M0[i, j] = M[i, j]
                for i in range(1, nj):  # the passive slopes at the step's start
                    o = i * JOINT_WIDTH
                    f = mf[o + JOINT_FRICTION]
                    sl = mf[o + JOINT_DAMPING]
                    if f != 0.0:
                        th = np.tanh(x[n + i - 1] / mf[o + JOINT_FRICTION_VEL])
                        sl += f / mf[o + JOINT_FRICTION_VEL] * (1.0 - th * th)
                    s[i - 1] = sl
            else:
                # stage 2: r2 = f(x + h k1) - 2 k1 (its q part kept in k2[:n] until k2_v is known)
                for i in range(n):
                    k2[i] = xt[n + i] - 2.0 * k1[i]
                    k2[n + i] = a1[i] - 2.0 * k1[n + i]
                for i in range(n):
                    acc = 0.0
                    for j in range(n):
                        acc += M0[i, j] * k2[n + j]
                    r[i] = acc - ks[i] * k2[i]
                chol_solve_col(L, r)
                for i in range(n):
                    k2[n + i] = r[i]
                    k2[i] += gh * r[i]
                if ps == ROS2_PASSES - 1:
                    break
                # the friction's secant over the speeds the step visited (start, stage 2, end)
                raised = False
                for i in range(1, nj):
                    o = i * JOINT_WIDTH
                    f = mf[o + JOINT_FRICTION]
                    if f == 0.0:
                        continue
                    k = i - 1
                    vs = mf[o + JOINT_FRICTION_VEL]
                    v0 = x[n + k]
                    v1 = xt[n + k]
                    v2 = v0 + H * (1.5 * k1[n + k] + 0.5 * k2[n + k])
                    lo = min(v0, v1, v2)
                    hi = max(v0, v1, v2)
                    if not hi - lo > 1e-12 * vs:
                        continue
                    d = mf[o + JOINT_DAMPING]
                    sec = d + f * (np.tanh(hi / vs) - np.tanh(lo / vs)) / (hi - lo)
                    if sec > ROS2_SECANT_RATIO * s[k]:
                        s[k] = d + f / vs if ps == ROS2_PASSES - 2 else sec
                        raised = True
                if not raised:
                    break
                ps += 1
            # a pass: W = M0 + gamma h diag(s) + (gamma h)^2 K, its Cholesky, stage 1 and the second stage's state
            for i in range(n):
                for j in range(i + 1):
                    W[i, j] = M0[i, j]
                W[i, i] += gh * s[i] + gh * ks[i]
            if not cholesky_lower(W, L):
                return NOT_PD
            for i in range(n):  # stage 1: r1 = (q', q'')
                acc = 0.0
                for j in range(n):
                    acc += M0[i, j] * a0[j]
                r[i] = acc - ks[i] * x[n + i]
            chol_solve_col(L, r)
            for i in range(n):
                k1[n + i] = r[i]
                k1[i] = x[n + i] + gh * r[i]
            for j in range(2 * n):
                xt[j] = x[j] + H * k1[j]
        for j in range(2 * n):
            x[j] += H * (1.5 * k1[j] + 0.5 * k2[j])
        t += H
    return OK


@njit(cache=True)
def plant_period(
    x,
    tau,
    t,
    dt,
    substeps,
    method,
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
    ``u``, ``qdep``: see there), or with ``method`` METHOD_ROS2 as many steps of :func:`ros2_period`.
    ``kk``: a (stage_rows(n), 2n) array. Returns the first non-zero status (x then partly advanced) or 0."""
    if method == METHOD_ROS2:
        return ros2_period(
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
        )
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
def plant_rk4(x, tau, t, dt, substeps, pi, pf, ip, fp, ws, pw, method):
    """:func:`plant_period` (tau held, no tree pass ready; ``method`` METHOD_RK4 or METHOD_ROS2) on a packed
    model, for UKPlant.step.

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
    kk, o = scratch_mat(pw, o, 5 + n, 2 * n)  # stage_rows(n)
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
        method,
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
    kk = stage_rows(n) * 2 * n
    return 12 * nj + 6 * n + n * n + n + 12 * mf1 + kk + 2 * n + TREE_SCRATCH_PER_JOINT * nj + 12 + rows * cols
