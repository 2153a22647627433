"""The typed sections of a resolved robot setup: one frozen dataclass per map of the schema.

GENERATED from uk_controller/settings/schema.py by ``python -m uk_controller.settings --write-types``: do
not edit (test/test_settings_types.py checks that this file is what the schema generates; the rules of
the types are in uk_controller/settings/generate.py). :func:`uk_controller.settings.resolve.resolve`
returns a :class:`Settings`; its sections are read by attribute (``settings.control.rate``,
``settings.ros.loop.window``, ``settings.hardware.items['motor1'].gear_ratio``; a constraint is the class
of its type: ``settings.constraints.items['tool_path'].trajectory.radius``) and never changed in
place (a changed value is a new ``Settings``: ``resolve`` again with the change as one more override;
a running consumer takes it through its ``apply_settings``, e.g. ``ControllerCore.apply_settings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .frozen import FrozenDict, Item, Section


@dataclass(frozen=True, slots=True, kw_only=True)
class RobotSettings(Section):
    """Section ``robot`` of a robot setup."""

    #: robot name (default: the file name)
    name: str
    #: URDF or .xacro file (relative to this file, package:// or absolute); one of urdf, mjcf, sdf
    urdf: str | None
    #: xacro arguments (free-form map) when robot.urdf is a .xacro
    xacro_args: FrozenDict[str, Any] | None
    #: MuJoCo MJCF file; its connect/weld equalities become closures, its joint/tendon equalities couplings
    mjcf: str | None
    #: SDF model file; joints that close loops become closures
    sdf: str | None
    #: a root link that no joint connects to the world (robot.sdf): welded where the file places it, or free on six
    #: coordinates base_x, base_y, base_z, base_yaw, base_pitch, base_roll
    base: str
    #: generalized coordinates, order of q (default: URDF order)
    joints: tuple[str, ...] | None
    #: q at t = 0 (default: zeros) [rad or m]
    initial_position: tuple[float, ...] | None
    #: q' at t = 0 (default: zeros) [rad/s or m/s]
    initial_velocity: tuple[float, ...] | None
    #: gravity vector (default: Pinocchio's) [m/s^2]
    gravity: tuple[float, ...] | None
    #: passive joint dynamics (damping, springs, armature, friction): as the description gives them, or none (in the
    #: model, both plants and the controller)
    joint_dynamics: str
    #: Coulomb friction f sign(q') is modelled as f tanh(q'/v) with this v [rad/s or m/s]
    friction_velocity: float
    #: accept a description whose moving bodies have a mass <= 0 or an inertia that is not positive definite or breaks
    #: the triangle inequality (warnings instead of an error; docs/guarantees.md)
    allow_nonphysical: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ActuatorsItemSettings(Section):
    """Section ``actuators.<name>`` of a robot setup."""

    #: tree joint the actuator drives (or between)
    joint: str | None
    #: two bodies the actuator acts between (or joint)
    between: tuple[str, ...] | None
    #: fixed tendon of the MJCF the actuator pulls (column: its coefficients)
    tendon: str | None
    #: axis of a between actuator (world frame)
    axis: tuple[float, ...] | None
    #: effort limit (default: URDF limit; between: none) [N m or N]
    effort_limit: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActuatorsSettings(Section):
    """Section ``actuators`` of a robot setup."""

    #: actuators, order of the effort vector u (default: one per joint)
    names: tuple[str, ...] | None
    #: the named items of actuators (name -> section)
    items: FrozenDict[str, ActuatorsItemSettings]


@dataclass(frozen=True, slots=True, kw_only=True)
class HelixTrajectorySettings(Item):
    """Item ``constraints.<name>.trajectory`` of type ``helix``."""

    #: trajectory type
    type: Literal['helix']
    #: trajectory time of t = 0 [s]
    start_time: float
    #: indices of the components used
    components: tuple[float, ...] | None
    #: phase [rad]
    phase: float
    #: radius [m]
    radius: float
    #: angular frequency [rad/s]
    omega: float
    #: centre [m]
    centre: tuple[float, ...]
    #: axial speed (default: 0, or from pitch) [m/s]
    rate: float | None
    #: axial advance per turn (instead of rate) [m]
    pitch: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LineTrajectorySettings(Item):
    """Item ``constraints.<name>.trajectory`` of type ``line``."""

    #: trajectory type
    type: Literal['line']
    #: trajectory time of t = 0 [s]
    start_time: float
    #: indices of the components used
    components: tuple[float, ...] | None
    #: phase [rad]
    phase: float
    #: angular frequency [rad/s]
    omega: float
    #: centre [m]
    centre: tuple[float, ...]
    #: direction of the line (default: the first axis)
    direction: tuple[float, ...] | None
    #: amplitude [m]
    amplitude: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectMotionTrajectorySettings(Item):
    """Item ``constraints.<name>.trajectory`` of type ``object_motion``."""

    #: trajectory type
    type: Literal['object_motion']
    #: trajectory time of t = 0 [s]
    start_time: float
    #: indices of the components used
    components: tuple[float, ...] | None
    #: phase [rad]
    phase: float
    #: angular frequency [rad/s]
    omega: float
    #: amplitude (default: 0, length/2, 0)
    amplitude: tuple[float, ...] | None
    #: object length [m]
    length: float
    #: object offset (default: 1.5 length, 0, 0) [m]
    offset: tuple[float, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CircleTrajectorySettings(Item):
    """Item ``constraints.<name>.trajectory`` of type ``circle``."""

    #: trajectory type
    type: Literal['circle']
    #: trajectory time of t = 0 [s]
    start_time: float
    #: indices of the components used
    components: tuple[float, ...] | None
    #: phase [rad]
    phase: float
    #: radius [m]
    radius: float
    #: angular frequency [rad/s]
    omega: float
    #: centre [m]
    centre: tuple[float, ...]
    #: first plane axis (default: the first axis)
    u: tuple[float, ...] | None
    #: second plane axis (default: the second axis)
    v: tuple[float, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PolynomialTrajectorySettings(Item):
    """Item ``constraints.<name>.trajectory`` of type ``polynomial``."""

    #: trajectory type
    type: Literal['polynomial']
    #: trajectory time of t = 0 [s]
    start_time: float
    #: indices of the components used
    components: tuple[float, ...] | None
    #: waypoint times [s]
    times: tuple[float, ...]
    #: waypoints, flat list
    waypoints: tuple[float, ...]
    #: components per waypoint (default: from times and waypoints)
    dim: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SplineTrajectorySettings(Item):
    """Item ``constraints.<name>.trajectory`` of type ``spline``."""

    #: trajectory type
    type: Literal['spline']
    #: trajectory time of t = 0 [s]
    start_time: float
    #: indices of the components used
    components: tuple[float, ...] | None
    #: waypoint times [s]
    times: tuple[float, ...]
    #: waypoints, flat list
    waypoints: tuple[float, ...]
    #: components per waypoint (default: from times and waypoints)
    dim: int | None
    #: boundary condition
    bc_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldTrajectorySettings(Item):
    """Item ``constraints.<name>.trajectory`` of type ``hold``."""

    #: trajectory type
    type: Literal['hold']
    #: trajectory time of t = 0 [s]
    start_time: float
    #: indices of the components used
    components: tuple[float, ...] | None
    #: held value (frame and joint rows: default where the row is at the start)
    value: tuple[float, ...] | None


#: an item ``constraints.<name>.trajectory`` of any type
TrajectoryItem = (
    HelixTrajectorySettings
    | LineTrajectorySettings
    | ObjectMotionTrajectorySettings
    | CircleTrajectorySettings
    | PolynomialTrajectorySettings
    | SplineTrajectorySettings
    | HoldTrajectorySettings
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FramePositionConstraintSettings(Item):
    """Item ``constraints.<name>`` of type ``frame_position``."""

    #: constraint type
    type: Literal['frame_position']
    #: passive: closure of the mechanism; servo: task (Chen)
    role: str
    #: frame that follows the task
    frame: str
    #: position components (subset of x, y, z)
    axes: tuple[str, ...]
    #: the desired motion
    trajectory: TrajectoryItem


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameOrientationConstraintSettings(Item):
    """Item ``constraints.<name>`` of type ``frame_orientation``."""

    #: constraint type
    type: Literal['frame_orientation']
    #: passive: closure of the mechanism; servo: task (Chen)
    role: str
    #: frame that follows the task
    frame: str
    #: planar: one angle about axis; so3: the full attitude
    mode: str
    #: rotation axis of a planar orientation
    axis: tuple[float, ...]
    #: reference direction
    reference: tuple[float, ...] | None
    #: direction of angle zero
    zero_direction: tuple[float, ...] | None
    #: the desired motion
    trajectory: TrajectoryItem


@dataclass(frozen=True, slots=True, kw_only=True)
class JointLinearConstraintSettings(Item):
    """Item ``constraints.<name>`` of type ``joint_linear``."""

    #: constraint type
    type: Literal['joint_linear']
    #: passive: closure of the mechanism; servo: task (Chen)
    role: str
    #: coefficients . q = value
    coefficients: tuple[float, ...]
    #: joints the coefficients belong to (default: every joint, in order)
    joints: tuple[str, ...] | None
    #: constant value of coefficients . q (default: 0) [rad or m]
    value: float | None
    #: the desired motion (instead of value)
    trajectory: TrajectoryItem | None


@dataclass(frozen=True, slots=True, kw_only=True)
class JointPolynomialConstraintSettings(Item):
    """Item ``constraints.<name>`` of type ``joint_polynomial``."""

    #: constraint type
    type: Literal['joint_polynomial']
    #: passive: closure of the mechanism; servo: task (Chen)
    role: str
    #: the joints' reference positions r1, r2 [rad or m]
    reference: tuple[float, ...]
    #: [joint1, joint2]
    joints: tuple[str, ...]
    #: MuJoCo joint equality: q1 - r1 = sum c_k (q2 - r2)^k, k = 0..4
    polycoef: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopClosureConstraintSettings(Item):
    """Item ``constraints.<name>`` of type ``loop_closure``."""

    #: constraint type
    type: Literal['loop_closure']
    #: passive: closure of the mechanism; servo: task (Chen)
    role: str
    #: position components (subset of x, y, z)
    axes: tuple[str, ...]
    #: position: the frames' origins coincide; weld: and their orientations
    mode: str
    #: reference direction
    reference: tuple[float, ...] | None
    #: the two frames that coincide
    frames: tuple[str, ...]
    #: axis of the planar relative angle
    angle_axis: tuple[float, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallableConstraintSettings(Item):
    """Item ``constraints.<name>`` of type ``callable``."""

    #: constraint type
    type: Literal['callable']
    #: passive: closure of the mechanism; servo: task (Chen)
    role: str
    #: package.module:function or file.py:function
    function: str
    #: user parameters passed to the function (free-form)
    params: FrozenDict[str, Any]
    #: number of rows (default: probed)
    rows: int | None
    #: 2 (acceleration rows) or 1 (first-order rows)
    order: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstraintRefinementSettings(Item):
    """Item ``constraints.<name>`` without ``type``: refines the closure of the same name that the
    robot description declares (which gives the type)."""

    #: constraint type
    type: None
    #: passive: closure of the mechanism; servo: task (Chen)
    role: str | None
    #: frame that follows the task
    frame: str | None
    #: position components (subset of x, y, z)
    axes: tuple[str, ...] | None
    #: planar: one angle about axis; so3: the full attitude
    mode: str | None
    #: rotation axis of a planar orientation
    axis: tuple[float, ...] | None
    #: reference direction
    reference: tuple[float, ...] | None
    #: direction of angle zero
    zero_direction: tuple[float, ...] | None
    #: coefficients . q = value
    coefficients: tuple[float, ...] | None
    #: joints the coefficients belong to (default: every joint, in order)
    joints: tuple[str, ...] | None
    #: MuJoCo joint equality: q1 - r1 = sum c_k (q2 - r2)^k, k = 0..4
    polycoef: tuple[float, ...] | None
    #: constant value of coefficients . q (default: 0) [rad or m]
    value: float | None
    #: the two frames that coincide
    frames: tuple[str, ...] | None
    #: axis of the planar relative angle
    angle_axis: tuple[float, ...] | None
    #: package.module:function or file.py:function
    function: str | None
    #: user parameters passed to the function (free-form)
    params: FrozenDict[str, Any] | None
    #: number of rows (default: probed)
    rows: int | None
    #: 2 (acceleration rows) or 1 (first-order rows)
    order: int | None
    #: the desired motion
    trajectory: TrajectoryItem | None


#: an item ``constraints.<name>`` of any type
ConstraintItem = (
    FramePositionConstraintSettings
    | FrameOrientationConstraintSettings
    | JointLinearConstraintSettings
    | JointPolynomialConstraintSettings
    | LoopClosureConstraintSettings
    | CallableConstraintSettings
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstraintsSettings(Section):
    """Section ``constraints`` of a robot setup."""

    #: constraints, evaluation order
    names: tuple[str, ...] | None
    #: the named items of constraints (name -> the item of its type)
    items: FrozenDict[str, ConstraintItem | ConstraintRefinementSettings]


@dataclass(frozen=True, slots=True, kw_only=True)
class StabilizationSettings(Section):
    """Section ``stabilization`` of a robot setup."""

    #: critical: phi''+2w phi'+w^2 phi=0; seed000: phi''+a phi'+b phi=0; squared: phi''+2a phi'+b^2 phi=0; none
    convention: str
    #: critical: natural frequency (one, or one per row) [rad/s]
    omega: tuple[float, ...]
    #: seed000/squared: damping gain (one, or one per row) [1/s]
    alpha: tuple[float, ...] | None
    #: seed000: stiffness gain; squared: its square root [1/s^2 or 1/s]
    beta: tuple[float, ...] | None
    #: saturated Baumgarte: the task rows' stiffness term kp phi is capped at kd times this speed, so a far-off task is
    #: approached at most this fast (each row in its own unit); the linear law inside the cap (0: no cap; default: 1.0
    #: with gains damped at ratio >= 0.5 such as critical, no cap with lightly damped ones such as seed 000's) [m/s or
    #: rad/s]
    max_speed: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlSettings(Section):
    """Section ``control`` of a robot setup."""

    #: control rate [Hz]
    rate: float
    #: pseudo-inverse method
    pinv: str
    #: rank tolerance relative to the largest singular value
    rcond: float
    #: damped least squares only
    damping: float
    #: effort on bad input or numerical failure
    safe_effort: str
    #: the controller's model includes the description's Coulomb friction (false: the plant has it, the controller does
    #: not)
    friction_compensation: bool
    #: ROS node and serial runner: state older than this (by arrival) gives the safe effort [s]
    state_timeout: float
    #: ROS node: a stamp more than this ahead of the node clock is clock skew (rejected) [s]
    clock_skew: float
    #: re-arming after an interruption ramps the stabilization from 0 to its gains over this time (0: off); the
    #: trajectory clock is held during the interruption [s]
    soft_start: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PostureSettings(Section):
    """Section ``posture`` of a robot setup."""

    #: hold the free directions the task leaves (its null space) at a posture, on the closure-projected dynamics (task
    #: and closures untouched); used only where the task leaves freedom
    enabled: bool
    #: posture q_ref, one per joint (default: robot.initial_position) [rad or m]
    reference: tuple[float, ...] | None
    #: natural frequency of the posture: a_p = -w^2 (q - q_ref) - 2 zeta w q' [rad/s]
    omega: float
    #: zeta of the posture (1: critically damped)
    damping_ratio: float
    #: joint-limit avoidance: repel a joint inside this fraction of its URDF range from either end (0: off; joints
    #: without limits: none)
    limit_margin: float
    #: natural frequency of the joint-limit repulsion (critically damped, acting only inside the margin) [rad/s]
    limit_omega: float
    #: saturated posture: its stiffness term is capped at the damping gain times this speed, so a far-off posture is
    #: approached at most this fast (0: no cap) [rad/s or m/s]
    max_speed: float
    #: metric the posture acceleration is matched in, in the null space: joint (every joint alike, light joints damped
    #: as much as heavy ones) or mass (the M-norm, which barely damps light joints)
    metric: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitsSettings(Section):
    """Section ``limits`` of a robot setup."""

    #: hold the joint position and velocity limits (URDF <limit>, hardware.<motor> limits where tighter) in the control
    #: law: bounds on the joint accelerations the task gives way to, and efforts beyond their limits solved as bounded
    #: least squares on the task rows instead of clipped joint by joint (false: clipping only)
    enabled: bool
    #: fraction of each joint speed limit the control law stays under
    velocity_scale: float
    #: fraction of each joint range kept free at either end
    margin: float
    #: braking deceleration a joint approaching a position limit is slowed down with (v <= sqrt(2 a d) at distance d)
    #: [rad/s^2 or m/s^2]
    deceleration: float
    #: the joint speed follows its bound with this time constant (at least two control periods are used) [s]
    time_constant: float
    #: weight of the joint acceleration bounds against the task rows when both cannot hold (larger: the limits win more
    #: strictly)
    weight: float
    #: with the joint-limit stage, the task rows become a damped least squares where the smallest singular value of the
    #: task matrix A_s N B falls below this fraction of its largest (near a singularity: the effort stays bounded and
    #: continuous as the arm crosses it; exactly the undamped law above it; 0: never)
    singular_threshold: float
    #: the damping factor the task rows reach at a singularity, relative to the largest singular value of the task
    #: matrix (it grows from 0 at limits.singular_threshold as 1 - (s_min / threshold)^2)
    singular_damping: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproachSettings(Section):
    """Section ``approach`` of a robot setup."""

    #: reach the task from the start in joint space first: the inverse kinematics of the task at its start time solved
    #: within the joint position limits, a quintic joint-space move there re-timed within the speed and deceleration
    #: limits, then a blended hand-over to the task rows (for a target the task descent would stop short of, against a
    #: joint limit or a singularity). auto: only when some task row's correction is capped at the measured start
    #: (stabilization.max_speed: the start lies outside the linear range of the saturated Baumgarte term), the task is
    #: position-level with no closure through its joints and the inverse kinematics solves it within the limits; on:
    #: always (refused where it does not apply; an unreachable target: its closest point); off: never
    mode: str
    #: seeded starts of the inverse kinematics besides the start itself; of the solutions, the one reached soonest is
    #: taken
    restarts: int
    #: an inverse kinematics solution holds every task and closure row to this (else the closest one found is
    #: approached, if closer than the start) [m or rad]
    tolerance: float
    #: fraction of each joint's speed limit and of limits.deceleration the approach peaks at (the rest is the servo's
    #: room to correct)
    speed_scale: float
    #: the effort is blended from the joint-space approach to the task over this time (0: switched) [s]
    blend_time: float


@dataclass(frozen=True, slots=True, kw_only=True)
class InternalForceSettings(Section):
    """Section ``internal_force`` of a robot setup."""

    #: redundant actuation: internal-force (preload, squeeze) target, one per actuator; its component that moves nothing
    #: is added (default: none, the minimum-norm distribution) [N m or N]
    effort: tuple[float, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationSettings(Section):
    """Section ``simulation`` of a robot setup."""

    #: simulated seconds (CLI --duration) [s]
    duration: float
    #: embedded plant integrator (CLI --integrator): rk4, rosenbrock (the linearly implicit ROS2 W-method, stable on the
    #: stiff damping and friction of light links; trees only), solve_ivp, or auto: rk4 where it needs no more than
    #: simulation.substeps steps per control period, else rosenbrock at simulation.substeps (closures: rk4)
    integrator: str
    #: embedded UK plant or MuJoCo: of uk_sim_node and of uk-controller simulate, emulate and sweep (CLI --plant)
    plant: str
    #: integrator steps per control period, at least (CLI --substeps); with simulation.integrator rk4 the embedded plant
    #: raises them to what the fastest passive mode of the description needs (light links with damping or friction) and
    #: says so in the run summary (auto switches to rosenbrock there instead)
    substeps: int
    #: plant inertias x this factor, model mismatch (CLI --mass-scale)
    mass_scale: float
    #: std of position noise (CLI --noise) [rad or m]
    sensor_noise: float
    #: measurement delay (CLI --delay); shorter than the run, the first periods have no measurement and return the safe
    #: effort [periods]
    measurement_delay: int
    #: log.csv holds every Nth control step (the summary covers all; CLI --log-every) [periods]
    log_every: int
    #: excluded from the error statistics (default: a fifth of the run, at most 2 s; CLI --transient) [s]
    transient: float | None
    #: plant's own closure stabilization (critical) [rad/s]
    closure_omega: float
    #: rank cut of the plant's closures (as control.rcond): a closure direction weaker than this, relative to the
    #: strongest, is dropped; raise it for nearly dependent closures such as a slightly non-planar four-bar
    closure_rcond: float
    #: MuJoCo plant step [s]
    mujoco_timestep: float
    #: uk_sim_node: plant publish rate (default: control.rate) [Hz]
    rate: float
    #: uk_sim_node: publish /clock
    publish_clock: bool
    #: uk_sim_node: advance only when an effort command arrives
    lockstep: bool
    #: uk_sim_node: simulated seconds per wall second
    real_time_factor: float
    #: uk_sim_node: resend the state after this long without a command (lockstep) [s]
    lockstep_resend: float
    #: uk_sim_node: /clock time of the first sample [s]
    clock_start: float
    #: uk_sim_node: subscribers to wait for before starting
    wait_for_subscribers: int
    #: uk_sim_node on /clock: wait after this many periods without a command (0: never) [periods]
    max_command_lag: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareDynamixelSettings(Section):
    """Section ``hardware.dynamixel`` of a robot setup."""

    #: rad per position tick [rad]
    position_unit: float | None
    #: rad/s per velocity unit [rad/s]
    velocity_unit: float | None
    #: A per current unit [A]
    current_unit: float | None
    #: current limit register [units]
    current_limit: int | None
    #: expected model number
    model_number: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareOdriveSettings(Section):
    """Section ``hardware.odrive`` of a robot setup."""

    #: device watchdog = factor x hardware.watchdog
    device_watchdog_factor: float


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareCanSettings(Section):
    """Section ``hardware.can`` of a robot setup."""

    #: python-can interface (slcan, socketcan, gs_usb, pcan, virtual, ...); the channel is hardware.port (slcan: the
    #: adapter's serial device, socketcan: can0)
    interface: str
    #: CAN bit rate (slcan: 10k, 20k, 50k, 100k, 125k, 250k, 500k, 750k, 1M) [bit/s]
    bitrate: int
    #: CAN id the motors reply to (Damiao: their MST_ID)
    master_id: int
    #: wait after opening an slcan adapter (2 s for adapters that reset on open) [s]
    open_delay: float
    #: Damiao motor timeout = factor x hardware.watchdog
    device_watchdog_factor: float


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareItemMitSettings(Section):
    """Section ``hardware.<name>.mit`` of a robot setup."""

    #: preset of the MIT ranges and reply format (documents: docs/hardware.md)
    model: str
    #: reply format (default: the model's)
    reply: str | None
    #: position range +-p_max (default: the model's) [rad]
    p_max: float | None
    #: velocity range +-v_max (default: the model's) [rad/s]
    v_max: float | None
    #: torque range +-t_max (default: the model's) [N m]
    t_max: float | None
    #: kp range [0, kp_max] (default: the model's) [N m/rad]
    kp_max: float | None
    #: kd range [0, kd_max] (default: the model's) [N m s/rad]
    kd_max: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareItemSettings(Section):
    """Section ``hardware.<name>`` of a robot setup."""

    #: bus id (default: position in hardware.motors + 1)
    id: int | None
    #: q = direction theta / gear_ratio + zero_offset
    gear_ratio: float
    #: motor torque per ampere [N m/A]
    torque_constant: float
    #: 1.0 or -1.0
    direction: float
    #: joint position at motor angle 0 [rad or m]
    zero_offset: float
    #: [lower, upper], joint side [rad or m]
    position_limit: tuple[float, ...] | None
    #: joint side [rad/s]
    velocity_limit: float | None
    #: motor side (default: effort_limit / gear_ratio); lowered at connect to the limit the device enforces (Dynamixel
    #: Current Limit, ODrive torque_lim) [N m]
    torque_limit: float | None
    #: the section hardware.<name>.mit
    mit: HardwareItemMitSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareSettings(Section):
    """Section ``hardware`` of a robot setup."""

    #: serial protocol (run --protocol)
    protocol: str
    #: serial port (run --port)
    port: str
    #: baud rate (run --baud) [baud]
    baud: int
    #: no command or feedback for this long: torque off (run --watchdog); longer than the control period [s]
    watchdog: float
    #: bus rate (default: control.rate, which run --rate sets; run steps the controller at this rate) [Hz]
    rate: float
    #: one motor per actuator, same names as actuators.names
    motors: tuple[str, ...] | None
    #: the section hardware.dynamixel
    dynamixel: HardwareDynamixelSettings
    #: the section hardware.odrive
    odrive: HardwareOdriveSettings
    #: the section hardware.can
    can: HardwareCanSettings
    #: the named items of hardware (name -> section)
    items: FrozenDict[str, HardwareItemSettings]
    #: protocol option section name -> its options as the file writes them
    options: FrozenDict[str, FrozenDict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RosLoopSettings(Section):
    """Section ``ros.loop`` of a robot setup."""

    #: thread: own control thread (wall clock); timer: rclpy timer
    mode: str
    #: SCHED_FIFO priority of the loop thread (0: normal)
    priority: int
    #: CPU numbers the loop thread may run on (empty: any)
    cpus: tuple[float, ...] | None
    #: lock the process memory
    mlockall: bool
    #: busy-wait before each deadline [us]
    spin_us: float
    #: telemetry window (~/loop_timing) [s]
    window: float
    #: ros.trigger state in the loop thread: no new state this long after the last step: step on the wall clock (then
    #: every period until states return) [periods]
    fallback_periods: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RosOverrunSettings(Section):
    """Section ``ros.overrun`` of a robot setup."""

    #: consecutive missed deadlines before a WARN (0: never) [periods]
    warn_after: int
    #: consecutive missed deadlines before the safe effort (0: never) [periods]
    safe_after: int
    #: periods on time in a row before controlling again [periods]
    recover_after: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RosSettings(Section):
    """Section ``ros`` of a robot setup."""

    #: joint states in
    joint_states_topic: str
    #: efforts out
    effort_topic: str
    #: message type of the efforts
    output_type: str
    #: start the trajectory clock on the first complete state
    autostart: bool
    #: timer: fixed rate; state: one step per new joint state (in the loop thread: phase-locked to the publisher,
    #: ros.loop.fallback_periods when states stop)
    trigger: str
    #: raw: the loop thread decodes /joint_states and encodes the efforts (float64_multi_array) as CDR bytes itself;
    #: messages: rclpy message objects (the reference)
    transport: str
    #: trajectory time at start [s]
    trajectory_start: float
    #: /diagnostics period [s]
    diagnostics_period: float
    #: rclpy executor
    executor: str
    #: order of the effort command (actuators or their joints)
    effort_joints: tuple[str, ...] | None
    #: the section ros.loop
    loop: RosLoopSettings
    #: the section ros.overrun
    overrun: RosOverrunSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings(Section):
    """A resolved robot setup: one typed, immutable section per top-level map of the schema, and the
    setup file it came from (``file``; None for a setup made of parameters only). Made by
    :func:`uk_controller.settings.resolve.resolve`, never by hand."""

    robot: RobotSettings
    actuators: ActuatorsSettings
    constraints: ConstraintsSettings
    stabilization: StabilizationSettings
    control: ControlSettings
    posture: PostureSettings
    limits: LimitsSettings
    approach: ApproachSettings
    internal_force: InternalForceSettings
    simulation: SimulationSettings
    hardware: HardwareSettings
    ros: RosSettings
    file: Path | None = None


#: dotted schema path of a map -> its class (uk_controller/settings/sections.py builds them)
CLASSES: dict[str, type[Section]] = {
    'robot': RobotSettings,
    'actuators.<name>': ActuatorsItemSettings,
    'actuators': ActuatorsSettings,
    'constraints': ConstraintsSettings,
    'stabilization': StabilizationSettings,
    'control': ControlSettings,
    'posture': PostureSettings,
    'limits': LimitsSettings,
    'approach': ApproachSettings,
    'internal_force': InternalForceSettings,
    'simulation': SimulationSettings,
    'hardware.dynamixel': HardwareDynamixelSettings,
    'hardware.odrive': HardwareOdriveSettings,
    'hardware.can': HardwareCanSettings,
    'hardware.<name>.mit': HardwareItemMitSettings,
    'hardware.<name>': HardwareItemSettings,
    'hardware': HardwareSettings,
    'ros.loop': RosLoopSettings,
    'ros.overrun': RosOverrunSettings,
    'ros': RosSettings,
}
#: (schema path of a typed item, its type) -> its class (type None: a refinement of a closure)
ITEM_CLASSES: dict[tuple[str, str | None], type[Item]] = {
    ('constraints.<name>.trajectory', 'helix'): HelixTrajectorySettings,
    ('constraints.<name>.trajectory', 'line'): LineTrajectorySettings,
    ('constraints.<name>.trajectory', 'object_motion'): ObjectMotionTrajectorySettings,
    ('constraints.<name>.trajectory', 'circle'): CircleTrajectorySettings,
    ('constraints.<name>.trajectory', 'polynomial'): PolynomialTrajectorySettings,
    ('constraints.<name>.trajectory', 'spline'): SplineTrajectorySettings,
    ('constraints.<name>.trajectory', 'hold'): HoldTrajectorySettings,
    ('constraints.<name>', 'frame_position'): FramePositionConstraintSettings,
    ('constraints.<name>', 'frame_orientation'): FrameOrientationConstraintSettings,
    ('constraints.<name>', 'joint_linear'): JointLinearConstraintSettings,
    ('constraints.<name>', 'joint_polynomial'): JointPolynomialConstraintSettings,
    ('constraints.<name>', 'loop_closure'): LoopClosureConstraintSettings,
    ('constraints.<name>', 'callable'): CallableConstraintSettings,
    ('constraints.<name>', None): ConstraintRefinementSettings,
}
