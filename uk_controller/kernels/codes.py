"""Plain integer codes and layouts shared by the compiled kernels and the NumPy side (no numba here).

Module-level ints, so numba freezes them into the kernels as compile-time constants and NumPy code
reads the same names. One table each:

* trajectory kinds (``TRAJ_*``): :meth:`uk_controller.constraints.trajectories.Trajectory.spec` writes them,
  :func:`uk_controller.kernels.trajectory.trajectory_eval` branches on them;
* statuses (``OK`` ... ``NOT_FINITE_STATE``): what the solve kernels return and write to ``info[INFO_STATUS]``;
* the ``info`` and ``params`` arrays of the servo solve;
* the compiled row program of :class:`uk_controller.constraints.CompiledRows`: the header ``IH_*`` of its
  integer array ``ip``, its term opcodes ``OP_*`` and the fields of its term, trajectory and `between`
  records;
* the packed joint and frame records of :func:`uk_controller.kernels.dynamics.tree_terms`
  (built by :meth:`uk_controller.model.robot_model.RobotModel.compiled_tree` / ``compiled_frames``).

Adding a trajectory kind: one ``TRAJ_*`` code here, its ``spec()`` in trajectories.py, one branch in
kernels/trajectory.py.
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- trajectory kinds
#: kind codes of Trajectory.spec() and trajectory_eval (seed 000 eq 40, seed 003 eq 26, seed 004 eq 64)
TRAJ_HOLD, TRAJ_HELIX, TRAJ_LINE, TRAJ_COSINE_RISE, TRAJ_CIRCLE = 0, 1, 2, 3, 4
#: piecewise kinds: quintic rest-to-rest segments, and a cubic piecewise polynomial (scipy CubicSpline's
#: coefficients); their floats: start time, knot count K, the K knot times, then the segment data
TRAJ_QUINTIC, TRAJ_CUBIC_PIECES = 5, 6

# ----------------------------------------------------------------------------- statuses
#: status of a solve: returned by closure_accel / plant_accel / plant_period / plant_rk4 and written to
#: info[INFO_STATUS] by servo_solve / fused_step_ws. NOT_FINITE_STATE: q, q' or t itself is not finite
#: (nothing else computed).
OK, NOT_PD, NOT_FINITE, NOT_FINITE_STATE = 0, 1, 2, 3

# ----------------------------------------------------------------------------- plant integrators
#: integrators of kernels.plant.plant_period (``method``): classical RK4, the linearly-implicit ROS2
METHOD_RK4, METHOD_ROS2 = 0, 1
#: ROS2 (uk_controller.sim.ros2 and kernels.plant.ros2_period): gamma = 1 + 1/sqrt(2) (L-stability), the
#: ratio of a joint's friction secant over its slope that redoes a step, and the passes of a step at most
ROS2_GAMMA = 1.7071067811865475
ROS2_SECANT_RATIO = 1.5
ROS2_PASSES = 4

# ----------------------------------------------------------------------------- servo solve arrays
#: entries of the ``info`` array (INFO_SIZE floats)
#: (INFO_LIMITED: 1.0 when the joint-limit stage replaced the unbounded effort, INFO_LIMIT_VIOLATION the
#: largest violation of a joint acceleration bound that remained, INFO_LIMIT_ITERATIONS its iterations)
(
    INFO_STATUS,
    INFO_RANK,
    INFO_CONDITION,
    INFO_PASSIVE_RANK,
    INFO_RESIDUAL,
    INFO_CONSISTENT,
    INFO_BBAR_NORM,
    INFO_N_SATURATED,
    INFO_NULL_MOTION,
    INFO_NULL_INTERNAL,
    INFO_LIMITED,
    INFO_LIMIT_VIOLATION,
    INFO_LIMIT_ITERATIONS,
) = range(13)
INFO_SIZE = 13
#: entries of the ``params`` array (PARAMS_SIZE floats): the solver's tolerances, then the redundancy
#: resolution (uk.ServoSolver): how many of the LAST servo rows are secondary (posture) rows, how many of
#: those (the last ones) are one-sided (joint-limit rows, active where phi < 0), the rank cut of the
#: null-space solve, and the internal-force target (1.0 in PARAM_INTERNAL, then the target effort u_int,
#: at most MAX_INTERNAL_TARGET entries)
(
    PARAM_RCOND,
    PARAM_GRAM_FLOOR,
    PARAM_CONSISTENCY_TOL,
    PARAM_MAX_SWEEPS,
    PARAM_N_SECONDARY,
    PARAM_N_ONE_SIDED,
    PARAM_NULL_RCOND,
    PARAM_INTERNAL,
) = range(8)
PARAM_INTERNAL_TARGET = 8
MAX_INTERNAL_TARGET = 16
#: after the internal-force target: the correction speeds of the saturated Baumgarte term (task rows,
#: posture rows; inf: no cap), the metric of the null-space term (0: M, 1: the identity on joint
#: accelerations) and the joint-limit stage (1.0 when on, the weight of the acceleration bounds relative to
#: the task rows, the tie-break weight toward the unbounded effort, the braking deceleration and the time
#: constant of core.joint_limits.acceleration_bounds, the threshold and damping of the task rows near a
#: singularity, core.joint_limits.singular_damping)
(
    PARAM_TASK_SPEED,
    PARAM_POSTURE_SPEED,
    PARAM_JOINT_METRIC,
    PARAM_LIMITS_ON,
    PARAM_LIMIT_WEIGHT,
    PARAM_LIMIT_EPS,
    PARAM_BRAKE,
    PARAM_LIMIT_TC,
    PARAM_SINGULAR_THRESHOLD,
    PARAM_SINGULAR_DAMPING,
) = range(PARAM_INTERNAL_TARGET + MAX_INTERNAL_TARGET, PARAM_INTERNAL_TARGET + MAX_INTERNAL_TARGET + 10)
PARAMS_SIZE = PARAM_SINGULAR_DAMPING + 1

# ----------------------------------------------------------------------------- compiled row program
#: header of the integer program ip (counts, then offsets into ip, then offsets into the workspace ws,
#: then offsets into the float program fp)
(
    IH_N,
    IH_P,
    IH_MP,
    IH_MS,
    IH_F,
    IH_NT,
    IH_NTR,
    IH_NB,
    IH_TERMS,
    IH_TRAJ,
    IH_CHAIN,
    IH_BETW,
    IH_PHI,
    IH_PHID,
    IH_A,
    IH_BV,
    IH_FJ,
    IH_FD,
    IH_BMAT,
    IH_TAU,
    IH_U,
    IH_QDD,
    IH_PF,
    IH_EFF,
    IH_SAT,
    IH_INFO,
    IH_SCR,
    IH_GAINS,
    IH_PARAMS,
    IH_LIMITS,
    IH_TDIM,
) = range(31)
HEADER = 32
#: term opcodes (field TERM_OP of a term record): OP_SO3 a frame's full orientation (FrameOrientation mode
#: so3), OP_WELD a loop closure of the full pose (x, y, z position rows then three rotation rows), OP_EXTERNAL
#: rows written into the workspace before the call (a callable term: user Python; the kernel leaves them)
OP_FRAME_POSITION, OP_PLANAR, OP_JOINT_LINEAR, OP_CLOSURE = 1, 2, 3, 4
#: a joint_polynomial row: joints at TERM_AXES, TERM_AXES + 1; fp[TERM_FOFS:] = c0..c4, r1, r2
OP_JOINT_POLY = 5
OP_SO3, OP_WELD, OP_EXTERNAL = 6, 7, 8
#: fields of a term record (TERM_WIDTH ints): opcode, first row, row count, frames A and B, trajectory
#: index (-1: none), axis count and up to three axis indices, offset of its floats in fp, planar flag
(TERM_OP, TERM_ROW0, TERM_M, TERM_FRAME_A, TERM_FRAME_B, TERM_TRAJ, TERM_NAX, TERM_AXES, TERM_FOFS, TERM_PLANAR) = (
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    10,
    11,
)
TERM_WIDTH = 12
#: floats of a planar angle at fp[TERM_FOFS] (OP_PLANAR, or OP_CLOSURE with TERM_PLANAR set): world axis,
#: in-plane direction e1, frame-fixed reference vector (3 each)
PLANAR_AXIS, PLANAR_E1, PLANAR_REFERENCE = 0, 3, 6
#: fields of a trajectory record (TRAJ_WIDTH ints): kind, dimension, offset of its floats, component count
#: and up to MAX_COMPONENTS component indices
TR_KIND, TR_DIM, TR_FOFS, TR_NCOMP, TR_COMPS = 0, 1, 2, 3, 4
MAX_COMPONENTS = 8
TRAJ_WIDTH = 12
#: the row program's scratch (at ws[IH_SCR]): P, V, Acc of IH_TDIM floats each (the largest trajectory
#: dimension), two n-rows of planar angles, then ROWS_SCRATCH floats for the SO(3) rows (kernels.so3)
ROWS_SCRATCH = 128
#: fields of a `between` actuator record (BETWEEN_WIDTH ints): effort column, frames A and B (-1: world),
#: offset of the axis in fp
BETWEEN_COL, BETWEEN_FRAME_A, BETWEEN_FRAME_B, BETWEEN_FOFS = 0, 1, 2, 3
BETWEEN_WIDTH = 4

# ----------------------------------------------------------------------------- packed tree model
#: joint types of tree_terms
JOINT_REVOLUTE, JOINT_PRISMATIC = 0, 1
#: fields of a joint record (JOINT_WIDTH floats of mf; joint i at i * JOINT_WIDTH, joint 0 = universe unused):
#: placement rotation R0 (9, row-major) and translation p0 (3) in the parent's frame, motion axis (3),
#: mass, lever (3), rotational inertia about the centre of mass I_c (9, row-major); then the passive joint
#: dynamics of uk_controller.model.joint_dynamics: armature, damping, stiffness, spring reference, Coulomb friction and
#: its tanh velocity scale (all zero for a joint without them)
JOINT_R0, JOINT_P0, JOINT_AXIS, JOINT_MASS, JOINT_LEVER, JOINT_INERTIA = 0, 9, 12, 15, 16, 19
JOINT_ARMATURE, JOINT_DAMPING, JOINT_STIFFNESS, JOINT_SPRING_REF, JOINT_FRICTION, JOINT_FRICTION_VEL = (
    28,
    29,
    30,
    31,
    32,
    33,
)
JOINT_WIDTH = 34
#: fields of a frame record (FRAME_WIDTH floats of fm): rotation R (9, row-major) and translation p (3) in
#: its parent joint's frame
FRAME_R, FRAME_P = 0, 9
FRAME_WIDTH = 12
#: tree_terms scratch per joint: V, A, F (6 each), composite inertia (36), + 9 + 6 + 6 + 12
TREE_SCRATCH_PER_JOINT = 64
