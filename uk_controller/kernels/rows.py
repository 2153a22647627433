"""Compiled constraint rows (numba): frame kinematics, every row of the row program, and the fused step.

One compiled call per control step (or plant right-hand side): frame Jacobians and drifts from the world
joint Jacobian, desired trajectories, every constraint row, Baumgarte (seed 000 eq 52), the servo solve
(:mod:`.servo`, seed 004 eq 35) and effort clipping. The program arrays (``ip`` ints, ``fp`` floats,
``ws`` workspace; layout in :mod:`.codes`) are built by :class:`uk_controller.constraints.CompiledRows`.

NumPy references, module :mod:`uk_controller.constraints`: :func:`position_rows` / :func:`frame_position_rows`
twin ``FramePosition.fill``; :func:`closure_position_rows` ``LoopClosure.fill``; :func:`joint_polynomial_row`
``JointPolynomial.fill``; :func:`planar_angle`
``constraints.planar_angle`` and :func:`wrap_angle` ``constraints._wrap``; :func:`fused_rows`
``ConstraintStack.evaluate`` (the SO(3) rows of ``FrameOrientation`` mode so3 and ``LoopClosure`` mode weld
through :mod:`.so3`; plus ``ActuatorMap.matrix`` of :mod:`uk_controller.robots.actuators` for the
`between` columns); :func:`frame_kinematics` Pinocchio's ``getFrameJacobian`` (LOCAL_WORLD_ALIGNED) and
``getFrameClassicalAcceleration``; :func:`fused_step_ws` / :func:`fused_step` the ``ServoSolver`` step of
:class:`uk_controller.control.controller.ControllerCore` (:func:`period_mass_lower`, :func:`friction_load`
``uk_controller.core.implicit_dissipation``: ``test/test_implicit_dissipation.py``). Tests: ``test/test_fused_step.py``
(``test_frame_kinematics_equal_pinocchio``, ``test_compiled_rows_equal_constraint_stack``,
``test_fused_controller_equals_servo_solver_path``, ``test_fused_plant_rhs_equals_unfused``) and
``test/test_uk_fast.py::test_compiled_rows_equal_reference_rows``.
"""

from __future__ import annotations

import numpy as np

from .codes import (
    BETWEEN_COL,
    BETWEEN_FOFS,
    BETWEEN_FRAME_A,
    BETWEEN_FRAME_B,
    BETWEEN_WIDTH,
    IH_A,
    IH_BETW,
    IH_BMAT,
    IH_BV,
    IH_CHAIN,
    IH_EFF,
    IH_F,
    IH_FD,
    IH_FJ,
    IH_GAINS,
    IH_INFO,
    IH_LIMITS,
    IH_MP,
    IH_MS,
    IH_N,
    IH_NB,
    IH_NT,
    IH_P,
    IH_PARAMS,
    IH_PF,
    IH_PHI,
    IH_PHID,
    IH_QDD,
    IH_SCR,
    IH_TAU,
    IH_TDIM,
    IH_TERMS,
    IH_TRAJ,
    IH_U,
    INFO_SIZE,
    INFO_STATUS,
    NOT_FINITE_STATE,
    OK,
    OP_CLOSURE,
    OP_FRAME_POSITION,
    OP_JOINT_LINEAR,
    OP_JOINT_POLY,
    OP_PLANAR,
    OP_SO3,
    OP_WELD,
    PARAM_BRAKE,
    PARAM_LIMIT_TC,
    PARAM_LIMITS_ON,
    PARAMS_SIZE,
    PLANAR_AXIS,
    PLANAR_E1,
    PLANAR_REFERENCE,
    ROWS_SCRATCH,
    TERM_AXES,
    TERM_FOFS,
    TERM_FRAME_A,
    TERM_FRAME_B,
    TERM_NAX,
    TERM_OP,
    TERM_PLANAR,
    TERM_ROW0,
    TERM_TRAJ,
    TERM_WIDTH,
    TR_COMPS,
    TR_DIM,
    TR_FOFS,
    TR_KIND,
    TR_NCOMP,
    TRAJ_HOLD,
    TRAJ_WIDTH,
)
from .jit import borrowed, njit
from .limits import acceleration_bounds
from .linalg import view2, view3
from .servo import servo_scratch_shape, servo_solve
from .so3 import so3_desired, so3_rows
from .trajectory import hold_eval, trajectory_eval

_TWO_PI = 2.0 * np.pi


@njit(cache=True)
def position_rows(J, trans, drift, idx, comp, P, V, Acc, qd, phi, phidot, A, b):
    """Frame position rows (seed 000 eqs 47-49 for S = (x, y, z)): ``phi = S (p - p_d)``,
    ``phi' = S J_lin q' - v_d``, ``A = S J_lin``, ``b = a_d - S drift`` (S: rows idx of the frame's
    Jacobian, translation and drift). Row r's desired values are entry ``comp[r]`` of P, V, Acc (entry r
    when comp is empty)."""
    n = J.shape[1]
    for r in range(idx.shape[0]):
        k = idx[r]
        c = comp[r] if comp.shape[0] > 0 else r
        acc = 0.0
        for j in range(n):
            A[r, j] = J[k, j]
            acc += J[k, j] * qd[j]
        phi[r] = trans[k] - P[c]
        phidot[r] = acc - V[c]
        b[r] = Acc[c] - drift[k]


@njit(cache=True)
def frame_position_rows(J, trans, drift, idx, p_d, v_d, a_d, qd, phi, phidot, A, b):
    """:func:`position_rows` with the desired p_d, v_d, a_d given row by row (FramePosition.fill)."""
    position_rows(J, trans, drift, idx, idx[:0], p_d, v_d, a_d, qd, phi, phidot, A, b)


@njit(cache=True)
def closure_position_rows(JA, JB, tA, tB, dA, dB, idx, qd, phi, phidot, A, b):
    """Loop-closure position rows (the five-bar's E1 = E2, seed 003): ``phi = S (p_A - p_B)``,
    ``A = S (J_A - J_B)_lin``, ``phi' = A q'``, ``b = S (drift_B - drift_A)`` (LoopClosure.fill, fused_rows)."""
    n = JA.shape[1]
    for r in range(idx.shape[0]):
        k = idx[r]
        acc = 0.0
        for j in range(n):
            a = JA[k, j] - JB[k, j]
            A[r, j] = a
            acc += a * qd[j]
        phi[r] = tA[k] - tB[k]
        phidot[r] = acc
        b[r] = dB[k] - dA[k]


@njit(cache=True)
def planar_angle(R, J, drift, qd, axis, e1, reference, row):
    """Angle of a frame about a world axis and its derivatives (see constraints.planar_angle).

    ``J`` (6, n) and ``drift`` (6,) are the full frame Jacobian and drift (angular part rows 3..5).
    Writes ``row`` (n,) with ``theta'' = row . q'' + gamma``; returns ``(theta, theta', gamma)``.
    """
    n = J.shape[1]
    e2 = np.empty(3)
    e2[0] = axis[1] * e1[2] - axis[2] * e1[1]
    e2[1] = axis[2] * e1[0] - axis[0] * e1[2]
    e2[2] = axis[0] * e1[1] - axis[1] * e1[0]
    v = np.empty(3)
    w = np.empty(3)
    for i in range(3):
        acc = 0.0
        for j in range(3):
            acc += R[i, j] * reference[j]
        v[i] = acc
        acc = 0.0
        for j in range(n):
            acc += J[3 + i, j] * qd[j]
        w[i] = acc
    u0 = w[1] * v[2] - w[2] * v[1]
    u1 = w[2] * v[0] - w[0] * v[2]
    u2 = w[0] * v[1] - w[1] * v[0]
    vx = e1[0] * v[0] + e1[1] * v[1] + e1[2] * v[2]
    vy = e2[0] * v[0] + e2[1] * v[1] + e2[2] * v[2]
    vxd = e1[0] * u0 + e1[1] * u1 + e1[2] * u2
    vyd = e2[0] * u0 + e2[1] * u1 + e2[2] * u2
    rho2 = vx * vx + vy * vy
    g0 = (vx * e2[0] - vy * e1[0]) / rho2
    g1 = (vx * e2[1] - vy * e1[1]) / rho2
    g2 = (vx * e2[2] - vy * e1[2]) / rho2
    c = 2.0 * (vx * vxd + vy * vyd) / rho2
    gd0 = (vxd * e2[0] - vyd * e1[0]) / rho2 - c * g0
    gd1 = (vxd * e2[1] - vyd * e1[1]) / rho2 - c * g1
    gd2 = (vxd * e2[2] - vyd * e1[2]) / rho2 - c * g2
    k0 = v[1] * g2 - v[2] * g1
    k1 = v[2] * g0 - v[0] * g2
    k2 = v[0] * g1 - v[1] * g0
    kd0 = (u1 * g2 - u2 * g1) + (v[1] * gd2 - v[2] * gd1)
    kd1 = (u2 * g0 - u0 * g2) + (v[2] * gd0 - v[0] * gd2)
    kd2 = (u0 * g1 - u1 * g0) + (v[0] * gd1 - v[1] * gd0)
    for j in range(n):
        row[j] = k0 * J[3, j] + k1 * J[4, j] + k2 * J[5, j]
    theta = np.arctan2(vy, vx)
    thetad = k0 * w[0] + k1 * w[1] + k2 * w[2]
    gamma = k0 * drift[3] + k1 * drift[4] + k2 * drift[5] + kd0 * w[0] + kd1 * w[1] + kd2 * w[2]
    return theta, thetad, gamma


@njit(cache=True)
def frame_kinematics(Jw, qd, chain, c0, trans, Jf, df):
    """LOCAL_WORLD_ALIGNED Jacobian Jf (6, n) and drift ``df = J' q'`` (6,) of a frame at world point p.

    Jw is Pinocchio's joint Jacobian in the WORLD frame (``data.J``: column i is the spatial motion
    axis S_i of coordinate i at the world origin), ``chain[c0]`` the number of coordinates supporting
    the frame and ``chain[c0 + 1:]`` their indices root first. Then::

        Jf_lin[:, i] = v_i + w_i x p,   Jf_ang[:, i] = w_i            (velocity of the point p)
        a0 = sum_i q'_i (V_i x S_i),   V_i = sum_{k <= i} S_k q'_k    (dS_i/dt = V_i x S_i, q'' = 0)
        df_lin = a0_lin + a0_ang x p + w x v_p,   df_ang = a0_ang      (classical acceleration of p)
    """
    n = Jf.shape[1]
    for r in range(6):
        for j in range(n):
            Jf[r, j] = 0.0
    px = trans[0]
    py = trans[1]
    pz = trans[2]
    Vv0 = Vv1 = Vv2 = Vw0 = Vw1 = Vw2 = 0.0
    al0 = al1 = al2 = aw0 = aw1 = aw2 = 0.0
    for r in range(chain[c0]):
        i = chain[c0 + 1 + r]
        sv0 = Jw[0, i]
        sv1 = Jw[1, i]
        sv2 = Jw[2, i]
        sw0 = Jw[3, i]
        sw1 = Jw[4, i]
        sw2 = Jw[5, i]
        qi = qd[i]
        Vv0 += sv0 * qi
        Vv1 += sv1 * qi
        Vv2 += sv2 * qi
        Vw0 += sw0 * qi
        Vw1 += sw1 * qi
        Vw2 += sw2 * qi
        # V x S (spatial motion cross product): (w_V x v_S + v_V x w_S, w_V x w_S)
        al0 += qi * ((Vw1 * sv2 - Vw2 * sv1) + (Vv1 * sw2 - Vv2 * sw1))
        al1 += qi * ((Vw2 * sv0 - Vw0 * sv2) + (Vv2 * sw0 - Vv0 * sw2))
        al2 += qi * ((Vw0 * sv1 - Vw1 * sv0) + (Vv0 * sw1 - Vv1 * sw0))
        aw0 += qi * (Vw1 * sw2 - Vw2 * sw1)
        aw1 += qi * (Vw2 * sw0 - Vw0 * sw2)
        aw2 += qi * (Vw0 * sw1 - Vw1 * sw0)
        Jf[0, i] = sv0 + (sw1 * pz - sw2 * py)
        Jf[1, i] = sv1 + (sw2 * px - sw0 * pz)
        Jf[2, i] = sv2 + (sw0 * py - sw1 * px)
        Jf[3, i] = sw0
        Jf[4, i] = sw1
        Jf[5, i] = sw2
    vp0 = Vv0 + (Vw1 * pz - Vw2 * py)
    vp1 = Vv1 + (Vw2 * px - Vw0 * pz)
    vp2 = Vv2 + (Vw0 * py - Vw1 * px)
    df[0] = al0 + (aw1 * pz - aw2 * py) + (Vw1 * vp2 - Vw2 * vp1)
    df[1] = al1 + (aw2 * px - aw0 * pz) + (Vw2 * vp0 - Vw0 * vp2)
    df[2] = al2 + (aw0 * py - aw1 * px) + (Vw0 * vp1 - Vw1 * vp0)
    df[3] = aw0
    df[4] = aw1
    df[5] = aw2


@njit(cache=True)
def joint_polynomial_row(q, qd, i1, i2, c, reference, phi, phidot, row, b):
    """The row of ``q1 - r1 = P(q2 - r2)`` (twin of ``constraints.JointPolynomial.fill``): ``phi``,
    ``phi' = q1' - P' q2'``, ``row = e1 - P' e2``, ``b = P'' q2'^2`` (P of degree 4, coefficients c)."""
    d = q[i2] - reference[1]
    P = c[0] + d * (c[1] + d * (c[2] + d * (c[3] + d * c[4])))
    dP = c[1] + d * (2.0 * c[2] + d * (3.0 * c[3] + d * 4.0 * c[4]))
    ddP = 2.0 * c[2] + d * (6.0 * c[3] + d * 12.0 * c[4])
    phi[0] = q[i1] - reference[0] - P
    phidot[0] = qd[i1] - dP * qd[i2]
    for j in range(row.shape[0]):
        row[j] = 0.0
    row[i1] = 1.0
    row[i2] = -dP
    b[0] = ddP * qd[i2] * qd[i2]


@njit(cache=True)
def wrap_angle(a):
    return (a + np.pi) % _TWO_PI - np.pi


@njit(cache=True)
def fused_rows(Jw, trans, rots, q, qd, t, ip, fp, ws):
    """Frame kinematics, actuator columns and every constraint row of the program (ws views filled).

    Rows of OP_EXTERNAL terms (a callable's, written into ws before the call) are left as they are.
    Returns False (nothing computed) when q, q' or t is not finite."""
    n = ip[IH_N]
    p = ip[IH_P]
    m = ip[IH_MP] + ip[IH_MS]
    ok = np.isfinite(t)
    for i in range(n):
        if not (np.isfinite(q[i]) and np.isfinite(qd[i])):
            ok = False
    if not ok:
        return False
    nf = ip[IH_F]
    FJ = view3(ws, ip[IH_FJ], nf, 6, n)
    FD = view2(ws, ip[IH_FD], nf, 6)
    for f in range(nf):
        frame_kinematics(Jw, qd, ip, ip[IH_CHAIN] + f * (n + 1), trans[f], FJ[f], FD[f])
    phi = ws[ip[IH_PHI] : ip[IH_PHI] + m]
    phid = ws[ip[IH_PHID] : ip[IH_PHID] + m]
    A = view2(ws, ip[IH_A], m, n)
    b = ws[ip[IH_BV] : ip[IH_BV] + m]
    td = ip[IH_TDIM]
    scr = ws[ip[IH_SCR] : ip[IH_SCR] + 3 * td + 2 * n + ROWS_SCRATCH]
    P = scr[0:td]
    V = scr[td : 2 * td]
    Acc = scr[2 * td : 3 * td]
    ra = scr[3 * td : 3 * td + n]
    rb = scr[3 * td + n : 3 * td + 2 * n]
    s3 = scr[3 * td + 2 * n :]
    for k in range(ip[IH_NT]):
        o = ip[IH_TERMS] + k * TERM_WIDTH
        opcode = ip[o + TERM_OP]
        r0 = ip[o + TERM_ROW0]
        tr = ip[o + TERM_TRAJ]
        ncomp = 0
        to = 0
        if tr >= 0:
            to = ip[IH_TRAJ] + tr * TRAJ_WIDTH
            kind = ip[to + TR_KIND]
            if kind == TRAJ_HOLD:  # inlined: no trajectory_eval call for each posture row
                hold_eval(ip[to + TR_DIM], fp, ip[to + TR_FOFS], P, V, Acc)
            else:
                trajectory_eval(kind, ip[to + TR_DIM], fp, ip[to + TR_FOFS], t, P, V, Acc)
            ncomp = ip[to + TR_NCOMP]
        if opcode == OP_FRAME_POSITION:
            f = ip[o + TERM_FRAME_A]
            ax = o + TERM_AXES
            comps = to + TR_COMPS
            position_rows(
                FJ[f],
                trans[f],
                FD[f],
                ip[ax : ax + ip[o + TERM_NAX]],
                ip[comps : comps + ncomp],
                P,
                V,
                Acc,
                qd,
                phi[r0:],
                phid[r0:],
                A[r0:],
                b[r0:],
            )
        elif opcode == OP_PLANAR:
            f = ip[o + TERM_FRAME_A]
            fo = ip[o + TERM_FOFS]
            c = ip[to + TR_COMPS] if ncomp > 0 else 0
            pa, pe, pr = fo + PLANAR_AXIS, fo + PLANAR_E1, fo + PLANAR_REFERENCE
            th, thd, gam = planar_angle(
                rots[f], FJ[f], FD[f], qd, fp[pa : pa + 3], fp[pe : pe + 3], fp[pr : pr + 3], A[r0]
            )
            phi[r0] = wrap_angle(th - P[c])
            phid[r0] = thd - V[c]
            b[r0] = Acc[c] - gam
        elif opcode == OP_SO3:
            # the trajectory's (components of) r, r', r'' -> R_d, omega_d, omega_d' (in the SO(3) scratch s3[64:88])
            f = ip[o + TERM_FRAME_A]
            rv = s3[64:73]
            for i in range(3):
                c = ip[to + TR_COMPS + i] if ncomp > 0 else i
                rv[i] = P[c]
                rv[3 + i] = V[c]
                rv[6 + i] = Acc[c]
            Rd = view2(s3, 73, 3, 3)
            wd = s3[82:85]
            wdd = s3[85:88]
            so3_desired(rv[0:3], rv[3:6], rv[6:9], Rd, wd, wdd, s3[0:64])
            so3_rows(
                rots[f],
                FJ[f],
                FD[f],
                qd,
                Rd,
                wd,
                wdd,
                FJ[f],
                FD[f],
                False,
                phi[r0 : r0 + 3],
                phid[r0 : r0 + 3],
                A[r0 : r0 + 3],
                b[r0 : r0 + 3],
                s3[0:64],
            )
        elif opcode == OP_WELD:
            # x, y, z of frame A on frame B, then log(R_B^T R_A) = 0 with omega_d = J_ang,B q'
            fa = ip[o + TERM_FRAME_A]
            fb = ip[o + TERM_FRAME_B]
            ax = o + TERM_AXES
            closure_position_rows(
                FJ[fa],
                FJ[fb],
                trans[fa],
                trans[fb],
                FD[fa],
                FD[fb],
                ip[ax : ax + 3],
                qd,
                phi[r0:],
                phid[r0:],
                A[r0:],
                b[r0:],
            )
            wd = s3[82:85]
            wdd = s3[85:88]
            for i in range(3):
                acc = 0.0
                for j in range(n):
                    acc += FJ[fb, 3 + i, j] * qd[j]
                wd[i] = acc
                wdd[i] = 0.0
            rw = r0 + 3
            so3_rows(
                rots[fa],
                FJ[fa],
                FD[fa],
                qd,
                rots[fb],
                wd,
                wdd,
                FJ[fb],
                FD[fb],
                True,
                phi[rw : rw + 3],
                phid[rw : rw + 3],
                A[rw : rw + 3],
                b[rw : rw + 3],
                s3[0:64],
            )
        elif opcode == OP_JOINT_LINEAR:
            fo = ip[o + TERM_FOFS]
            c = ip[to + TR_COMPS] if ncomp > 0 else 0
            s0 = 0.0
            s1 = 0.0
            for j in range(n):
                cj = fp[fo + j]
                A[r0, j] = cj
                s0 += cj * q[j]
                s1 += cj * qd[j]
            phi[r0] = s0 - P[c]
            phid[r0] = s1 - V[c]
            b[r0] = Acc[c]
        elif opcode == OP_JOINT_POLY:
            fo = ip[o + TERM_FOFS]
            joint_polynomial_row(
                q,
                qd,
                ip[o + TERM_AXES],
                ip[o + TERM_AXES + 1],
                fp[fo : fo + 5],
                fp[fo + 5 : fo + 7],
                phi[r0:],
                phid[r0:],
                A[r0],
                b[r0:],
            )
        elif opcode == OP_CLOSURE:
            fa = ip[o + TERM_FRAME_A]
            fb = ip[o + TERM_FRAME_B]
            nax = ip[o + TERM_NAX]
            ax = o + TERM_AXES
            closure_position_rows(
                FJ[fa],
                FJ[fb],
                trans[fa],
                trans[fb],
                FD[fa],
                FD[fb],
                ip[ax : ax + nax],
                qd,
                phi[r0:],
                phid[r0:],
                A[r0:],
                b[r0:],
            )
            if ip[o + TERM_PLANAR]:
                fo = ip[o + TERM_FOFS]
                pa, pe, pr = fo + PLANAR_AXIS, fo + PLANAR_E1, fo + PLANAR_REFERENCE
                rl = r0 + nax
                ta, tad, ga = planar_angle(
                    rots[fa], FJ[fa], FD[fa], qd, fp[pa : pa + 3], fp[pe : pe + 3], fp[pr : pr + 3], ra
                )
                tb, tbd, gb = planar_angle(
                    rots[fb], FJ[fb], FD[fb], qd, fp[pa : pa + 3], fp[pe : pe + 3], fp[pr : pr + 3], rb
                )
                phi[rl] = wrap_angle(ta - tb)
                phid[rl] = tad - tbd
                for j in range(n):
                    A[rl, j] = ra[j] - rb[j]
                b[rl] = gb - ga
    # actuator columns that act between bodies: B[:, col] = axis . (J_ang(a) - J_ang(b))
    if ip[IH_NB] > 0:
        B = view2(ws, ip[IH_BMAT], n, p)
        for k in range(ip[IH_NB]):
            o = ip[IH_BETW] + k * BETWEEN_WIDTH
            col = ip[o + BETWEEN_COL]
            fa = ip[o + BETWEEN_FRAME_A]
            fb = ip[o + BETWEEN_FRAME_B]
            fo = ip[o + BETWEEN_FOFS]
            for j in range(n):
                acc = 0.0
                for i in range(3):
                    wa = FJ[fa, 3 + i, j] if fa >= 0 else 0.0
                    wb = FJ[fb, 3 + i, j] if fb >= 0 else 0.0
                    acc += fp[fo + i] * (wa - wb)
                B[j, col] = acc
    return True


@njit(cache=True)
def program_scratch_shape(ip):
    """Shape of the scratch array of :func:`fused_step_ws` for the program ip: the servo solve's, then two
    rows for the joint acceleration bounds, then n + 1 rows for the dissipation over the period (M + dt D,
    h + dF)."""
    rows, cols = servo_scratch_shape(ip[IH_N], ip[IH_P], ip[IH_MP], ip[IH_MS])
    return rows + 3 + ip[IH_N], cols


@njit(cache=True)
def program_rows(ip, fp, ws, m):
    """Views of the first m rows fused_rows leaves in ws (passive rows first, then servo): phi, phi', A, b,
    and the program's gains (2, mp + ms) and solver parameters."""
    n = ip[IH_N]
    mg = ip[IH_MP] + ip[IH_MS]
    return (
        ws[ip[IH_PHI] : ip[IH_PHI] + m],
        ws[ip[IH_PHID] : ip[IH_PHID] + m],
        view2(ws, ip[IH_A], m, n),
        ws[ip[IH_BV] : ip[IH_BV] + m],
        view2(fp, ip[IH_GAINS], 2, mg),
        fp[ip[IH_PARAMS] : ip[IH_PARAMS] + PARAMS_SIZE],
    )


@njit(cache=True)
def gather_frames(translations, rotations, trans, rots):
    """Copy the frames' world placements into ``trans`` (nf, 3) and ``rots`` (nf, 3, 3), the arrays
    :func:`fused_step` reads: ``translations`` and ``rotations`` are tuples of Pinocchio's live vectors and
    matrices (``data.oMf[i].translation`` and ``.rotation``).

    numba compiles a kernel once for each length of a tuple argument. This small kernel takes the tuples, so
    the large :func:`fused_step` keeps one machine-code version for every number of frames (compiling it
    takes 10-15 s on a fresh machine; this copy, a fraction of a second)."""
    for f in range(len(translations)):
        tf = translations[f]
        rf = rotations[f]
        for r in range(3):
            trans[f, r] = tf[r]
            for c in range(3):
                rots[f, r, c] = rf[r, c]


@njit(cache=True)
def fused_step_ws(Mlow, h, Jw, trans, rots, q, qd, t, ip, fp, ws, sat, sc):
    """:func:`fused_rows` then :func:`servo_solve` on the rows (passive rows first, then servo) with the
    program's gains, parameters and limits; no heap allocation.

    ``Mlow``: an (n, n) array whose lower triangle is M; ``h = C q' + G``; the efforts' generalized
    force ``tau`` and the outputs (u, q'', passive force, effort, info) live in ws (offsets in the header
    of ip); ``sat`` (p, bool) flags clipped efforts; ``sc``: a program_scratch_shape(ip) array. info[INFO_STATUS] is
    the status (codes: OK, NOT_PD, NOT_FINITE result, NOT_FINITE_STATE). With the program's dissipation block
    set (a controller whose joints have damping or friction) the solve runs on ``M + dt D`` and, with friction,
    a second time on ``h + dF`` (:mod:`uk_controller.core.implicit_dissipation`, the reference of the
    block's helpers :func:`period_mass_lower` and :func:`friction_load`)."""
    n = ip[IH_N]
    p = ip[IH_P]
    info = ws[ip[IH_INFO] : ip[IH_INFO] + INFO_SIZE]
    if not fused_rows(Jw, trans, rots, q, qd, t, ip, fp, ws):
        for i in range(INFO_SIZE):
            info[i] = 0.0
        info[INFO_STATUS] = NOT_FINITE_STATE
        return
    params = fp[ip[IH_PARAMS] : ip[IH_PARAMS] + PARAMS_SIZE]
    rows = sc.shape[0] - 3 - n
    alo = sc[rows, :n]
    ahi = sc[rows + 1, :n]
    if params[PARAM_LIMITS_ON] != 0.0:
        table = view2(fp, ip[IH_LIMITS] + p, 3, n)
        acceleration_bounds(q, qd, table, params[PARAM_BRAKE], params[PARAM_LIMIT_TC], alo, ahi)
    # the dissipation block: dt, v_s, dt d (n), f (n); dt = 0: none, v_s = 0: no friction
    fo = ip[IH_LIMITS] + p + 3 * n
    if fp[fo] > 0.0:
        # the joints' damping and friction over the period (core/implicit_dissipation.py): the solve on
        # M + dt D, then with friction once more with h + dF, dF the friction's change up to the speed asked for
        Md = sc[rows + 2 : rows + 2 + n, :n]
        period_mass_lower(Mlow, fp[fo + 2 : fo + 2 + n], Md)
        fused_solve(Md, h, ip, fp, ws, sat, alo, ahi, sc[:rows])
        if fp[fo + 1] > 0.0 and info[INFO_STATUS] == OK:
            hf = sc[rows + 2 + n, :n]
            qdd = ws[ip[IH_QDD] : ip[IH_QDD] + n]
            friction_load(qd, qdd, h, fp[fo], fp[fo + 1], fp[fo + 2 + n : fo + 2 + 2 * n], hf)
            fused_solve(Md, hf, ip, fp, ws, sat, alo, ahi, sc[:rows])
        return
    # Mlow[:, :n]: all of Mlow, typed as a strided view like Md above, so that numba compiles fused_solve
    # and the servo solve under it once, not once per layout of M
    fused_solve(Mlow[:, :n], h, ip, fp, ws, sat, alo, ahi, sc[:rows])


@njit(cache=True)
def period_mass_lower(Mlow, dtd, Md):
    """The lower triangle of ``M + dt D`` into Md (``dtd`` = dt d per coordinate): the twin of
    :func:`uk_controller.core.implicit_dissipation.period_mass` on the lower triangle the solve reads."""
    n = dtd.shape[0]
    for i in range(n):
        for k in range(i):
            Md[i, k] = Mlow[i, k]
        Md[i, i] = Mlow[i, i] + dtd[i]


@njit(cache=True)
def friction_load(qd, qdd, h, dt, vs, f, hf):
    """``hf = h + dF``, ``dF_k = f_k (tanh((q'_k + dt q''_k) / v_s) - tanh(q'_k / v_s))``: the twin of
    :func:`uk_controller.core.implicit_dissipation.friction_change`."""
    for k in range(f.shape[0]):
        hf[k] = h[k] + f[k] * (np.tanh((qdd[k] * dt + qd[k]) / vs) - np.tanh(qd[k] / vs))


@njit(cache=True)
def fused_solve(Mlow, h, ip, fp, ws, sat, alo, ahi, sc):
    """The servo solve of :func:`fused_step_ws` on the rows fused_rows left in ws, with M (lower triangle of
    Mlow) and h given."""
    n = ip[IH_N]
    p = ip[IH_P]
    mp = ip[IH_MP]
    phi, phid, A, b, gains, params = program_rows(ip, fp, ws, mp + ip[IH_MS])
    B = view2(ws, ip[IH_BMAT], n, p)
    servo_solve(
        Mlow,
        ws[ip[IH_TAU] : ip[IH_TAU] + n],
        h,
        B,
        A[mp:],
        b[mp:],
        phi[mp:],
        phid[mp:],
        A[:mp],
        b[:mp],
        phi[:mp],
        phid[:mp],
        gains,
        params,
        fp[ip[IH_LIMITS] : ip[IH_LIMITS] + p],
        alo,
        ahi,
        ws[ip[IH_U] : ip[IH_U] + p],
        ws[ip[IH_QDD] : ip[IH_QDD] + n],
        ws[ip[IH_PF] : ip[IH_PF] + n],
        ws[ip[IH_EFF] : ip[IH_EFF] + p],
        sat,
        ws[ip[IH_INFO] : ip[IH_INFO] + INFO_SIZE],
        sc,
    )


@njit(cache=True)
def fused_step(Mlow, h, Jw, trans, rots, q, qd, t, ip, fp, ws, sat):
    """:func:`fused_step_ws` with its scratch array allocated here (one allocation per call;
    CompiledRows' entry point). The array arguments are passed on as :func:`.jit.borrowed` views (no atomic
    reference counting in the step; the caller holds them). ``trans`` (nf, 3) and ``rots`` (nf, 3, 3) hold the
    frames' world placements (:func:`gather_frames` copies them from Pinocchio's Data). The
    scratch allocated here is NOT borrowed: numba frees a local array after its last use, which would be the
    borrow."""
    fused_step_ws(
        borrowed(Mlow),
        borrowed(h),
        borrowed(Jw),
        borrowed(trans),
        borrowed(rots),
        borrowed(q),
        borrowed(qd),
        t,
        borrowed(ip),
        borrowed(fp),
        borrowed(ws),
        borrowed(sat),
        np.empty(program_scratch_shape(ip)),
    )
