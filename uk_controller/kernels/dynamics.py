"""Compiled rigid-body dynamics of a tree (numba): placements, motion axes, M and h in one pass.

Rigid-body dynamics of a tree of 1-DOF revolute/prismatic joints in world-frame spatial algebra
(Featherstone, "Rigid Body Dynamics Algorithms", ch. 5-6: RNEA and CRBA), so that a whole RK4 period of
the simulated plant (:mod:`.plant`) and a whole control step (:mod:`.packed`) are ONE compiled call. The
packed joint and frame records (layout in :mod:`.codes`) come from
:meth:`uk_controller.model.robot_model.RobotModel.compiled_tree` and ``compiled_frames``.

Reference: Pinocchio (``computeAllTerms``: ``data.M``, ``data.nle``, ``data.oMi``, ``data.J``;
``updateFramePlacements``: ``data.oMf``), as wrapped by :class:`uk_controller.model.robot_model.RobotModel`. Tests:
``test/test_fused_step.py::test_compiled_tree_dynamics_equal_pinocchio`` (M, h, frame placements,
Jacobians), ``test/test_packed_step.py`` (the whole packed step) and
``test/test_fused_step.py::test_compiled_plant_period_equals_reference_rk4`` (plant trajectory). The passive joint
dynamics (:func:`joint_passive_terms`) twin ``RobotModel.compute`` with ``JointDynamics.force``:
``test/test_description_couplings.py::test_model_and_compiled_tree_carry_armature_and_joint_forces``.
"""

from __future__ import annotations

import numpy as np

from .codes import (
    FRAME_P,
    FRAME_R,
    FRAME_WIDTH,
    JOINT_ARMATURE,
    JOINT_AXIS,
    JOINT_DAMPING,
    JOINT_FRICTION,
    JOINT_FRICTION_VEL,
    JOINT_INERTIA,
    JOINT_LEVER,
    JOINT_MASS,
    JOINT_P0,
    JOINT_R0,
    JOINT_REVOLUTE,
    JOINT_SPRING_REF,
    JOINT_STIFFNESS,
    JOINT_WIDTH,
    TREE_SCRATCH_PER_JOINT,
)
from .jit import njit
from .linalg import view2, view3


@njit(cache=True)
def tree_terms(q, qd, parents, jtype, mf, grav, oR, opos, S, M, h, tw=None):
    """World placements (oR, opos), world motion axes S (6, n; = Pinocchio's data.J), M and h = C q' + G.

    Joint i (1..nj-1, coordinate i-1, parent parents[i] < i): placement R0, p0 in the parent's frame,
    then a rotation by q about `axis` (JOINT_REVOLUTE) or a translation q axis (JOINT_PRISMATIC). Spatial vectors are
    (linear, angular) at the world origin: S_i = (-w x p, w) or (R a, 0); V_i = V_parent + S_i q'_i;
    bias acceleration A_i = A_parent + (V_i x S_i) q'_i with A_0 = (-g, 0) (gravity as base acceleration);
    h_i = S_i . f_i, f_i = I_i A_i + V_i x* (I_i V_i) summed from the leaves (RNEA); M by the composite
    rigid-body algorithm in the same world frame. Joint i's passive dynamics (uk_controller.model.joint_dynamics) are
    added last: ``M[k, k] += armature``, ``h[k] += d q'_k + s (q_k - q_ref) + f tanh(q'_k / v_s)``
    (:func:`joint_passive_terms`)."""
    nj = parents.shape[0]
    if tw is None:
        tw = np.empty(TREE_SCRATCH_PER_JOINT * nj + 12)
    V = view2(tw, 0, nj, 6)
    Acc = view2(tw, 6 * nj, nj, 6)
    F = view2(tw, 12 * nj, nj, 6)
    Ic = view3(tw, 18 * nj, nj, 6, 6)
    Rl = view2(tw, 54 * nj, 3, 3)
    IV = tw[TREE_SCRATCH_PER_JOINT * nj : TREE_SCRATCH_PER_JOINT * nj + 6]
    Fs = tw[TREE_SCRATCH_PER_JOINT * nj + 6 : TREE_SCRATCH_PER_JOINT * nj + 12]
    for r in range(6):
        V[0, r] = 0.0
        Acc[0, r] = 0.0
        for i in range(1, nj):
            F[i, r] = 0.0
            for cc in range(6):
                Ic[i, r, cc] = 0.0
    Acc[0, 0] = -grav[0]
    Acc[0, 1] = -grav[1]
    Acc[0, 2] = -grav[2]
    for r in range(3):  # the universe (frames fixed to the world hang on it)
        opos[0, r] = 0.0
        for cc in range(3):
            oR[0, r, cc] = 1.0 if r == cc else 0.0
    for i in range(1, nj):
        o = i * JOINT_WIDTH
        par = parents[i]
        qi = q[i - 1]
        r0 = o + JOINT_R0
        p0 = o + JOINT_P0
        ax0 = mf[o + JOINT_AXIS]
        ax1 = mf[o + JOINT_AXIS + 1]
        ax2 = mf[o + JOINT_AXIS + 2]
        # local transform R0 * Rj, p0 + R0 pj
        if jtype[i] == JOINT_REVOLUTE:
            s = np.sin(qi)
            c1 = 1.0 - np.cos(qi)
            Rj00 = 1.0 - c1 * (ax1 * ax1 + ax2 * ax2)
            Rj11 = 1.0 - c1 * (ax0 * ax0 + ax2 * ax2)
            Rj22 = 1.0 - c1 * (ax0 * ax0 + ax1 * ax1)
            Rj01 = -s * ax2 + c1 * ax0 * ax1
            Rj10 = s * ax2 + c1 * ax0 * ax1
            Rj02 = s * ax1 + c1 * ax0 * ax2
            Rj20 = -s * ax1 + c1 * ax0 * ax2
            Rj12 = -s * ax0 + c1 * ax1 * ax2
            Rj21 = s * ax0 + c1 * ax1 * ax2
            pj0 = pj1 = pj2 = 0.0
        else:
            Rj00 = Rj11 = Rj22 = 1.0
            Rj01 = Rj10 = Rj02 = Rj20 = Rj12 = Rj21 = 0.0
            pj0 = ax0 * qi
            pj1 = ax1 * qi
            pj2 = ax2 * qi
        for r in range(3):
            a0 = mf[r0 + 3 * r]
            a1 = mf[r0 + 3 * r + 1]
            a2 = mf[r0 + 3 * r + 2]
            Rl[r, 0] = a0 * Rj00 + a1 * Rj10 + a2 * Rj20
            Rl[r, 1] = a0 * Rj01 + a1 * Rj11 + a2 * Rj21
            Rl[r, 2] = a0 * Rj02 + a1 * Rj12 + a2 * Rj22
        pl0 = mf[p0] + mf[r0] * pj0 + mf[r0 + 1] * pj1 + mf[r0 + 2] * pj2
        pl1 = mf[p0 + 1] + mf[r0 + 3] * pj0 + mf[r0 + 4] * pj1 + mf[r0 + 5] * pj2
        pl2 = mf[p0 + 2] + mf[r0 + 6] * pj0 + mf[r0 + 7] * pj1 + mf[r0 + 8] * pj2
        if par == 0:
            for r in range(3):
                for cc in range(3):
                    oR[i, r, cc] = Rl[r, cc]
            opos[i, 0] = pl0
            opos[i, 1] = pl1
            opos[i, 2] = pl2
        else:
            for r in range(3):
                for cc in range(3):
                    oR[i, r, cc] = oR[par, r, 0] * Rl[0, cc] + oR[par, r, 1] * Rl[1, cc] + oR[par, r, 2] * Rl[2, cc]
                opos[i, r] = opos[par, r] + oR[par, r, 0] * pl0 + oR[par, r, 1] * pl1 + oR[par, r, 2] * pl2
        # world axis (direction R a, a expressed in the joint frame = after Rj, unchanged by it)
        wa0 = oR[i, 0, 0] * ax0 + oR[i, 0, 1] * ax1 + oR[i, 0, 2] * ax2
        wa1 = oR[i, 1, 0] * ax0 + oR[i, 1, 1] * ax1 + oR[i, 1, 2] * ax2
        wa2 = oR[i, 2, 0] * ax0 + oR[i, 2, 1] * ax1 + oR[i, 2, 2] * ax2
        k = i - 1
        if jtype[i] == JOINT_REVOLUTE:
            px = opos[i, 0]
            py = opos[i, 1]
            pz = opos[i, 2]
            S[0, k] = -(wa1 * pz - wa2 * py)
            S[1, k] = -(wa2 * px - wa0 * pz)
            S[2, k] = -(wa0 * py - wa1 * px)
            S[3, k] = wa0
            S[4, k] = wa1
            S[5, k] = wa2
        else:
            S[0, k] = wa0
            S[1, k] = wa1
            S[2, k] = wa2
            S[3, k] = 0.0
            S[4, k] = 0.0
            S[5, k] = 0.0
        qdi = qd[k]
        for r in range(6):
            V[i, r] = V[par, r] + S[r, k] * qdi
        # V x S: (w x s_v + v x s_w, w x s_w)
        vv0, vv1, vv2, vw0, vw1, vw2 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
        sv0, sv1, sv2, sw0, sw1, sw2 = S[0, k], S[1, k], S[2, k], S[3, k], S[4, k], S[5, k]
        Acc[i, 0] = Acc[par, 0] + qdi * ((vw1 * sv2 - vw2 * sv1) + (vv1 * sw2 - vv2 * sw1))
        Acc[i, 1] = Acc[par, 1] + qdi * ((vw2 * sv0 - vw0 * sv2) + (vv2 * sw0 - vv0 * sw2))
        Acc[i, 2] = Acc[par, 2] + qdi * ((vw0 * sv1 - vw1 * sv0) + (vv0 * sw1 - vv1 * sw0))
        Acc[i, 3] = Acc[par, 3] + qdi * (vw1 * sw2 - vw2 * sw1)
        Acc[i, 4] = Acc[par, 4] + qdi * (vw2 * sw0 - vw0 * sw2)
        Acc[i, 5] = Acc[par, 5] + qdi * (vw0 * sw1 - vw1 * sw0)
        # spatial inertia at the world origin: [[m 1, -m [c]], [m [c], I_w - m [c][c]]]
        m = mf[o + JOINT_MASS]
        lc0 = mf[o + JOINT_LEVER]
        lc1 = mf[o + JOINT_LEVER + 1]
        lc2 = mf[o + JOINT_LEVER + 2]
        c0 = opos[i, 0] + oR[i, 0, 0] * lc0 + oR[i, 0, 1] * lc1 + oR[i, 0, 2] * lc2
        c1_ = opos[i, 1] + oR[i, 1, 0] * lc0 + oR[i, 1, 1] * lc1 + oR[i, 1, 2] * lc2
        c2 = opos[i, 2] + oR[i, 2, 0] * lc0 + oR[i, 2, 1] * lc1 + oR[i, 2, 2] * lc2
        I6 = Ic[i]
        for r in range(3):
            for cc in range(3):
                acc = 0.0
                for a in range(3):
                    for b in range(3):
                        acc += oR[i, r, a] * mf[o + JOINT_INERTIA + 3 * a + b] * oR[i, cc, b]
                I6[3 + r, 3 + cc] = acc
            I6[r, r] = m
        # [c]
        C = ((0.0, -c2, c1_), (c2, 0.0, -c0), (-c1_, c0, 0.0))
        for r in range(3):
            for cc in range(3):
                I6[r, 3 + cc] = -m * C[r][cc]
                I6[3 + r, cc] = m * C[r][cc]
                acc = 0.0
                for a in range(3):
                    acc += C[r][a] * C[a][cc]
                I6[3 + r, 3 + cc] -= m * acc
        # f = I A + V x* (I V);  V x* f = (w x f_l, w x f_a + v x f_l)
        for r in range(6):
            acc = 0.0
            acc2 = 0.0
            for cc in range(6):
                acc += I6[r, cc] * V[i, cc]
                acc2 += I6[r, cc] * Acc[i, cc]
            IV[r] = acc
            F[i, r] = acc2
        F[i, 0] += vw1 * IV[2] - vw2 * IV[1]
        F[i, 1] += vw2 * IV[0] - vw0 * IV[2]
        F[i, 2] += vw0 * IV[1] - vw1 * IV[0]
        F[i, 3] += (vw1 * IV[5] - vw2 * IV[4]) + (vv1 * IV[2] - vv2 * IV[1])
        F[i, 4] += (vw2 * IV[3] - vw0 * IV[5]) + (vv2 * IV[0] - vv0 * IV[2])
        F[i, 5] += (vw0 * IV[4] - vw1 * IV[3]) + (vv0 * IV[1] - vv1 * IV[0])
    # backward pass: h and composite inertias, then M (CRBA)
    for i in range(nj - 1, 0, -1):
        k = i - 1
        acc = 0.0
        for r in range(6):
            acc += S[r, k] * F[i, r]
        h[k] = acc
        par = parents[i]
        if par > 0:
            for r in range(6):
                F[par, r] += F[i, r]
                for cc in range(6):
                    Ic[par, r, cc] += Ic[i, r, cc]
    for i in range(nj - 1, 0, -1):
        k = i - 1
        for r in range(6):
            acc = 0.0
            for cc in range(6):
                acc += Ic[i, r, cc] * S[cc, k]
            Fs[r] = acc
        j = i
        while j > 0:
            kj = j - 1
            acc = 0.0
            for r in range(6):
                acc += S[r, kj] * Fs[r]
            M[k, kj] = acc
            M[kj, k] = acc
            j = parents[j]
    joint_passive_terms(q, qd, mf, M, h)


@njit(cache=True)
def joint_passive_terms(q, qd, mf, M, h):
    """Armature on the diagonal of M and the passive joint force in h, per joint record (twin of
    ``RobotModel.compute`` with ``JointDynamics.force``; joints whose five values are zero are skipped, so a robot
    without passive dynamics computes exactly what it did before)."""
    nj = mf.shape[0] // JOINT_WIDTH
    for i in range(1, nj):
        o = i * JOINT_WIDTH
        arm = mf[o + JOINT_ARMATURE]
        d = mf[o + JOINT_DAMPING]
        s = mf[o + JOINT_STIFFNESS]
        f = mf[o + JOINT_FRICTION]
        if arm == 0.0 and d == 0.0 and s == 0.0 and f == 0.0:
            continue
        k = i - 1
        M[k, k] += arm
        force = d * qd[k] + s * (q[k] - mf[o + JOINT_SPRING_REF])
        if f != 0.0:
            force += f * np.tanh(qd[k] / mf[o + JOINT_FRICTION_VEL])
        h[k] += force


@njit(cache=True)
def add_spring_damper(h, q, qd, damping, stiffness, reference):
    """``h += d q' + k (q - q_ref)`` per coordinate: ``JointDynamics.force`` without friction added to h, the
    same operations in the same order as its NumPy form (so the same bits), in one call instead of five
    (:meth:`uk_controller.model.robot_model.RobotModel.pinocchio_pass`; test:
    ``test/test_model.py::test_pinocchio_pass_gives_the_bits_of_compute``)."""
    for i in range(h.shape[0]):
        h[i] += damping[i] * qd[i] + (q[i] - reference[i]) * stiffness[i]


@njit(cache=True)
def frame_placements(oR, opos, fparents, fm, trans, rots):
    """World placement of each frame: ``R = oR[parent] R_pl``, ``p = opos[parent] + oR[parent] p_pl``."""
    for f in range(fparents.shape[0]):
        i = fparents[f]
        o = f * FRAME_WIDTH + FRAME_R
        po = f * FRAME_WIDTH + FRAME_P
        for r in range(3):
            for cc in range(3):
                rots[f, r, cc] = oR[i, r, 0] * fm[o + cc] + oR[i, r, 1] * fm[o + 3 + cc] + oR[i, r, 2] * fm[o + 6 + cc]
            trans[f, r] = opos[i, r] + oR[i, r, 0] * fm[po] + oR[i, r, 1] * fm[po + 1] + oR[i, r, 2] * fm[po + 2]
