"""The packed joint and frame records of the kernels' tree pass, written from a RobotModel.

:func:`uk_controller.kernels.dynamics.tree_terms` (RNEA + CRBA, Featherstone ch. 5-6) and
``frame_placements`` read the robot from flat arrays whose layout is :mod:`uk_controller.kernels.codes`
(``JOINT_*``, ``FRAME_*``); these functions fill them from Pinocchio's model through the public
:class:`~uk_controller.model.robot_model.RobotModel` (its methods ``compiled_tree`` and ``compiled_frames``). Pinocchio
stays the reference of the kernels' dynamics (test/test_fused_step.py).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..kernels import codes as C


def tree_records(robot):
    """``(parents, jtype, mf, gravity)`` of `robot` (a RobotModel), or None.

    Available for Pinocchio's own coordinate order (no permutation) when every joint is a 1-DOF
    revolute (joint-frame motion axis ``(0, a)``) or prismatic (``(a, 0)``) joint; helical or other
    joints give None. The axis is read from Pinocchio's motion subspace at the neutral configuration.
    """
    pm = robot.model
    if robot.order_permuted:
        return None
    # A continuous joint is a revolute joint here: the kernel rotates by the angle q[i] about the
    # axis (kernels.dynamics.tree_terms), with no limits; our q holds that angle.
    nj = pm.njoints
    data = pm.createData()
    q0 = pin.neutral(pm)
    pin.computeJointJacobians(pm, data, q0)
    parents = np.zeros(nj, dtype=np.int64)
    jtype = np.zeros(nj, dtype=np.int64)
    mf = np.zeros(nj * C.JOINT_WIDTH)
    for i in range(1, nj):
        if pm.idx_vs[i] != i - 1:
            return None
        local = data.oMi[i].actInv(pin.Motion(data.J.reshape(6, -1)[:, i - 1]))  # (6,) with one coordinate
        v, w = np.array(local.linear), np.array(local.angular)
        if np.linalg.norm(v) < 1e-12 and abs(np.linalg.norm(w) - 1.0) < 1e-12:
            jtype[i], axis = C.JOINT_REVOLUTE, w
        elif np.linalg.norm(w) < 1e-12 and abs(np.linalg.norm(v) - 1.0) < 1e-12:
            jtype[i], axis = C.JOINT_PRISMATIC, v
        else:
            return None
        parents[i] = pm.parents[i]
        placement, inertia = pm.jointPlacements[i], pm.inertias[i]
        o = i * C.JOINT_WIDTH
        mf[o + C.JOINT_R0 : o + C.JOINT_R0 + 9] = np.asarray(placement.rotation).ravel()
        mf[o + C.JOINT_P0 : o + C.JOINT_P0 + 3] = placement.translation
        mf[o + C.JOINT_AXIS : o + C.JOINT_AXIS + 3] = axis
        mf[o + C.JOINT_MASS] = inertia.mass
        mf[o + C.JOINT_LEVER : o + C.JOINT_LEVER + 3] = inertia.lever
        mf[o + C.JOINT_INERTIA : o + C.JOINT_INERTIA + 9] = np.asarray(inertia.inertia).ravel()
    jd = robot.joint_dynamics  # passive joint dynamics (q order = Pinocchio's here)
    if jd is not None:
        for i in range(1, nj):
            o = i * C.JOINT_WIDTH
            arm, d, s, ref, f = (
                jd.armature[i - 1],
                jd.damping[i - 1],
                jd.stiffness[i - 1],
                jd.spring_reference[i - 1],
                jd.friction[i - 1],
            )
            mf[o + C.JOINT_ARMATURE], mf[o + C.JOINT_DAMPING], mf[o + C.JOINT_STIFFNESS] = arm, d, s
            mf[o + C.JOINT_SPRING_REF], mf[o + C.JOINT_FRICTION] = ref, f
            mf[o + C.JOINT_FRICTION_VEL] = jd.friction_velocity
    return parents, jtype, mf, np.array(pm.gravity.linear, dtype=float)


def frame_records(robot, names):
    """``(parent joints, placements)`` of the frames `names` of `robot` (a RobotModel)."""
    pm = robot.model
    parents = np.zeros(len(names), dtype=np.int64)
    fm = np.zeros(max(1, len(names)) * C.FRAME_WIDTH)
    for f, name in enumerate(names):
        frame = pm.frames[robot.frame_id(name)]
        parents[f] = frame.parentJoint
        o = f * C.FRAME_WIDTH
        fm[o + C.FRAME_R : o + C.FRAME_R + 9] = np.asarray(frame.placement.rotation).ravel()
        fm[o + C.FRAME_P : o + C.FRAME_P + 3] = frame.placement.translation
    return parents, fm
