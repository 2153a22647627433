"""The one settings schema: every key of a robot setup, declared once.

A robot setup (docs/config.md) is read by the CLI (``uk-controller``), by the
ROS nodes (as ROS parameters: the same keys flattened to dotted names, ``-p``
overrides, ``ros2 param set``) and by the serial layer. Every key they accept
is one :class:`~uk_controller.settings.setting.Setting` in :data:`SETTINGS` below:
dotted key, type, default, unit, accepted range or choices, whether it may
change while the controller runs (``live``) and a one-line description
(uk_controller/settings/setting.py declares the record and checks one value against it). Everything that
reads a setup goes through :func:`uk_controller.settings.resolve.resolve`, which runs this module once:

- :func:`check` walks a loaded parameter tree (the file with its overrides): an unknown key is an error that
  names the file and key and suggests the closest valid key (difflib); every
  known value is checked against its type and range (the range is in the
  message). Cross-key rules (:func:`check_cross`): watchdog longer than the
  control period, stabilization not faster than the loop's sampling rate allows (control.rate, or
  hardware.rate where the bus is slower), at most
  :data:`MAX_STEPS` simulated periods, transient and measurement delay shorter than the run.
- :func:`default` is the only place a default lives.
- :func:`~uk_controller.settings.setting.check_value` checks a single value: every leaf in
  :func:`check`, and a CLI flag as argparse reads it (:func:`arg_type`).
- :func:`markdown_table` generates the reference table of docs/config.md
  (a test checks that the file holds exactly this table).

Maps of named items (``actuators.<name>``, ``constraints.<name>``,
``hardware.<motor>``) are written with ``<name>`` in the key; the item must be
listed in the map's ``names`` list. Keys that exist only for one ``type`` of
constraint or trajectory carry ``when=('type', (...))``: such a key under an
item of another type is an error naming the type and its keys (the trajectory keys are declared by the
table of trajectory types, :func:`trajectory_settings`, so a type added there brings its keys). A key
whose default or range differs between types is declared once per group of types, each with its
default, or ``required=True``: a constraint or trajectory is a typed item, one class per type
(:data:`TYPED_ITEMS`, :func:`item_keys`; uk_controller/settings/types.py). Only a
callable constraint's ``params`` is a user-defined map (passed as is to the
user's function).

Adding a key is ONE entry in the list below (:data:`SETTINGS` is that list with the protocols' keys
inserted; the schema is built once and never appended to); the docs table follows with ``python -m
uk_controller.settings --write-docs``. Named choices implemented by a table elsewhere
(pseudo-inverse methods, motor protocols, plants, integrators, trajectory and constraint types,
ROS output types) are read from that table (:class:`~uk_controller.settings.setting.RegistryNames`),
and each motor protocol's ``hardware.<protocol>.*`` keys come from its codec (``SETTINGS``).
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from ..constraints import PASSIVE_BY_DEFAULT
from ..constraints import TYPES as _CONSTRAINT_TYPES
from ..constraints import trajectories as _trajectories
from ..core.baumgarte import CONVENTIONS
from ..files.description import CLOSURE_KEYS, DESCRIPTION_KEYS
from ..files.parameter_file import ConfigError
from . import protocols as _protocols
from .frozen import FrozenDict
from .setting import NONE, RegistryNames, Setting, check_value, number_ok

#: Largest number of control periods one simulation may run (memory of the log: ~250 B per period).
MAX_STEPS = 2_000_000


def _S(key, type_, default=NONE, unit='', doc='', **kw):
    return Setting(key, type_, default, unit, doc, **kw)


def _pos(key, default, unit, doc, high=None, **kw):
    """A finite number > 0 (and <= high)."""
    return Setting(key, 'float', default, unit, doc, low=0.0, low_open=True, high=high, **kw)


def _nonneg(key, default, unit, doc, high=None, **kw):
    return Setting(key, 'float', default, unit, doc, low=0.0, high=high, **kw)


# Choices implemented by a table elsewhere are read from that table (when first asked, see
# RegistryNames): a name added there is accepted here, by the CLI flags and in docs/config.md.
PINV_METHODS = RegistryNames('uk_controller.core.pinv.reference', 'PINV_METHODS')
PROTOCOLS = RegistryNames('uk_controller.settings.protocols', 'NAMES')  # registered by the hardware layer
PLANTS = RegistryNames('uk_controller.sim.plants', 'PLANTS')
INTEGRATORS = RegistryNames('uk_controller.sim.plants', 'INTEGRATORS')
CONSTRAINT_TYPES = RegistryNames('uk_controller.constraints', 'TYPES')
OUTPUT_TYPES = RegistryNames('uk_controller.settings.ros_section', 'OUTPUT_TYPES')
TRIGGERS = RegistryNames('uk_controller.settings.ros_section', 'TRIGGERS')
EXECUTORS = RegistryNames('uk_controller.settings.ros_section', 'EXECUTORS')
TRAJECTORY_TYPES = RegistryNames('uk_controller.constraints.trajectories', 'TYPES')
_TRAJ = 'constraints.<name>.trajectory'


def trajectory_settings(types=None):
    """The keys of ``constraints.<name>.trajectory`` (also the joint_linear value trajectory), declared by
    the table of trajectory types (:data:`uk_controller.constraints.trajectories.TYPES`, now): ``type`` with the
    table's names, the common keys, then each type's keys in table order; a key several types share (the
    same :class:`~uk_controller.constraints.trajectories.Key`) is one Setting with ``when`` listing those types."""
    types = _trajectories.TYPES if types is None else types
    every = ('type', TRAJECTORY_TYPES)  # the common keys: under every type of the table
    out = [
        Setting(
            f'{_TRAJ}.type', 'str', NONE, '', 'trajectory type', choices=TRAJECTORY_TYPES, when=every, required=True
        )
    ]
    out += [
        Setting(
            f'{_TRAJ}.{k.name}', k.type, k.default, k.unit, k.doc, when=every, required=k.required, **dict(k.limits)
        )
        for k in _trajectories.COMMON_KEYS
    ]
    readers: dict = {}  # Key -> the types that read it, first use first
    for name, entry in types.items():
        for k in entry.keys:
            readers.setdefault(k, []).append(name)
    out += [
        Setting(
            f'{_TRAJ}.{k.name}',
            k.type,
            k.default,
            k.unit,
            k.doc,
            when=('type', tuple(names)),
            required=k.required,
            **dict(k.limits),
        )
        for k, names in readers.items()
    ]
    return out


def all_settings():
    """Every key of the schema: :data:`SETTINGS` with the trajectory keys of the trajectory table as it is
    now (:func:`trajectory_settings`) after their section."""
    if _TRAJ_KEYS['types'] != _trajectories.TYPES:
        _TRAJ_KEYS['types'], _TRAJ_KEYS['settings'] = dict(_trajectories.TYPES), trajectory_settings()
    at = next(i for i, s in enumerate(SETTINGS) if s.key == _TRAJ) + 1
    return [*SETTINGS[:at], *_TRAJ_KEYS['settings'], *SETTINGS[at:]]


#: trajectory_settings() of the trajectory table as all_settings() last saw it
_TRAJ_KEYS: dict[str, Any] = {'types': None, 'settings': []}


#: the roles of a constraint item; the types whose rows are passive unless the item says otherwise, the others
ROLES = ('passive', 'servo')
_PASSIVE_FIRST = PASSIVE_BY_DEFAULT
_SERVO_FIRST = tuple(t for t in _CONSTRAINT_TYPES if t not in PASSIVE_BY_DEFAULT)
FROZEN_EMPTY: FrozenDict = FrozenDict()


def _con(key, type_, types, doc, **kw):
    return Setting(
        f'constraints.<name>.{key}',
        type_,
        kw.pop('default', NONE),
        kw.pop('unit', ''),
        doc,
        when=('type', tuple(types)),
        **kw,
    )


_KEYS = [
    # ------------------------------------------------------------------ robot
    _S('robot.name', 'str', NONE, '', 'robot name (default: the file name)'),
    _S(
        'robot.urdf',
        'str',
        NONE,
        '',
        'URDF or .xacro file (relative to this file, package:// or absolute); one of urdf, mjcf, sdf',
    ),
    _S('robot.xacro_args', 'map', NONE, '', 'xacro arguments (free-form map) when robot.urdf is a .xacro'),
    _S(
        'robot.mjcf',
        'str',
        NONE,
        '',
        'MuJoCo MJCF file; its connect/weld equalities become closures, its joint/tendon equalities couplings',
    ),
    _S('robot.sdf', 'str', NONE, '', 'SDF model file; joints that close loops become closures'),
    _S(
        'robot.base',
        'str',
        'fixed',
        '',
        'a root link that no joint connects to the world (robot.sdf): welded '
        'where the file places it, or free on six coordinates base_x, base_y, base_z, base_yaw, base_pitch, '
        'base_roll',
        choices=('fixed', 'free'),
    ),
    _S('robot.joints', 'strs', NONE, '', 'generalized coordinates, order of q (default: URDF order)'),
    _S('robot.initial_position', 'floats', NONE, 'rad or m', 'q at t = 0 (default: zeros)'),
    _S('robot.initial_velocity', 'floats', NONE, 'rad/s or m/s', "q' at t = 0 (default: zeros)"),
    _S('robot.gravity', 'floats', NONE, 'm/s^2', "gravity vector (default: Pinocchio's)", length=3),
    _S(
        'robot.joint_dynamics',
        'str',
        'description',
        '',
        "passive joint dynamics (damping, springs, armature, "
        "friction): as the description gives them, or none (in the model, both plants and the controller)",
        choices=('description', 'none'),
    ),
    _pos(
        'robot.friction_velocity',
        0.01,
        'rad/s or m/s',
        "Coulomb friction f sign(q') is modelled as f tanh(q'/v) with this v",
        high=10.0,
    ),
    _S(
        'robot.allow_nonphysical',
        'bool',
        False,
        '',
        'accept a description whose moving bodies have a mass '
        '<= 0 or an inertia that is not positive definite or breaks the triangle inequality (warnings instead '
        'of an error; docs/guarantees.md)',
    ),
    # ------------------------------------------------------------------ actuators
    _S('actuators.names', 'strs', NONE, '', 'actuators, order of the effort vector u (default: one per joint)'),
    _S('actuators.<name>.joint', 'str', NONE, '', 'tree joint the actuator drives (or between)'),
    _S('actuators.<name>.between', 'strs', NONE, '', 'two bodies the actuator acts between (or joint)', length=2),
    _S(
        'actuators.<name>.tendon',
        'str',
        NONE,
        '',
        'fixed tendon of the MJCF the actuator pulls (column: its coefficients)',
    ),
    _S('actuators.<name>.axis', 'floats', NONE, '', 'axis of a between actuator (world frame)', length=3),
    _pos('actuators.<name>.effort_limit', NONE, 'N m or N', 'effort limit (default: URDF limit; between: none)'),
    # ------------------------------------------------------------------ constraints
    _S('constraints.names', 'strs', NONE, '', 'constraints, evaluation order'),
    _S('constraints.<name>.type', 'str', NONE, '', 'constraint type', choices=CONSTRAINT_TYPES),
    _con(
        'role',
        'str',
        _SERVO_FIRST,
        'passive: closure of the mechanism; servo: task (Chen)',
        choices=ROLES,
        default='servo',
    ),
    _con(
        'role',
        'str',
        _PASSIVE_FIRST,
        'passive: closure of the mechanism; servo: task (Chen)',
        choices=ROLES,
        default='passive',
    ),
    _con('frame', 'str', ('frame_position', 'frame_orientation'), 'frame that follows the task', required=True),
    _con(
        'axes',
        'strs',
        ('frame_position', 'loop_closure'),
        'position components (subset of x, y, z)',
        choices=('x', 'y', 'z'),
        default=('x', 'y', 'z'),
    ),
    _con(
        'mode',
        'str',
        ('frame_orientation',),
        'planar: one angle about axis; so3: the full attitude',
        choices=('planar', 'so3'),
        default='planar',
    ),
    _con(
        'mode',
        'str',
        ('loop_closure',),
        'position: the frames\' origins coincide; weld: and their orientations',
        choices=('position', 'weld'),
        default='position',
    ),
    _con(
        'axis',
        'floats',
        ('frame_orientation',),
        'rotation axis of a planar orientation',
        length=3,
        default=(0.0, 0.0, 1.0),
    ),
    _con('reference', 'floats', ('frame_orientation', 'loop_closure'), 'reference direction', length=3),
    _con(
        'reference',
        'floats',
        ('joint_polynomial',),
        'the joints\' reference positions r1, r2',
        length=2,
        default=(0.0, 0.0),
        unit='rad or m',
    ),
    _con('zero_direction', 'floats', ('frame_orientation',), 'direction of angle zero', length=3),
    _con('coefficients', 'floats', ('joint_linear',), 'coefficients . q = value', required=True),
    _con('joints', 'strs', ('joint_linear',), 'joints the coefficients belong to (default: every joint, in order)'),
    _con('joints', 'strs', ('joint_polynomial',), '[joint1, joint2]', length=2, required=True),
    _con(
        'polycoef',
        'floats',
        ('joint_polynomial',),
        'MuJoCo joint equality: q1 - r1 = sum c_k (q2 - r2)^k, k = 0..4',
        required=True,
    ),
    _con('value', 'float', ('joint_linear',), 'constant value of coefficients . q (default: 0)', unit='rad or m'),
    _con('frames', 'strs', ('loop_closure',), 'the two frames that coincide', length=2, required=True),
    _con('angle_axis', 'floats', ('loop_closure',), 'axis of the planar relative angle', length=3),
    _con('function', 'str', ('callable',), 'package.module:function or file.py:function', required=True),
    _con('params', 'map', ('callable',), 'user parameters passed to the function (free-form)', default=FROZEN_EMPTY),
    _con('rows', 'int', ('callable',), 'number of rows (default: probed)', low=1),
    _con('order', 'int', ('callable',), '2 (acceleration rows) or 1 (first-order rows)', low=1, high=2, default=2),
    _con(
        'trajectory',
        'section',
        ('frame_position', 'frame_orientation'),
        'the desired motion',
        required=True,
    ),
    _con('trajectory', 'section', ('joint_linear',), 'the desired motion (instead of value)'),
    # constraints.<name>.trajectory.* : declared by the table of trajectory types (trajectory_settings)
    # ------------------------------------------------------------------ stabilization
    _S(
        'stabilization.convention',
        'str',
        'critical',
        '',
        '; '.join(f'{name}: {c.equation}' if c.equation else name for name, c in CONVENTIONS.items()),
        live=True,
        choices=tuple(CONVENTIONS),
    ),
    _S(
        'stabilization.omega',
        'floats',
        10.0,
        'rad/s',
        'critical: natural frequency (one, or one per row)',
        low=0.0,
        low_open=True,
        high=1000.0,
        live=True,
    ),
    _S(
        'stabilization.alpha',
        'floats',
        NONE,
        '1/s',
        'seed000/squared: damping gain (one, or one per row)',
        low=0.0,
        low_open=True,
        high=2000.0,
        live=True,
    ),
    _S(
        'stabilization.beta',
        'floats',
        NONE,
        '1/s^2 or 1/s',
        'seed000: stiffness gain; squared: its square root',
        low=0.0,
        low_open=True,
        high=1.0e6,
        live=True,
    ),
    _nonneg(
        'stabilization.max_speed',
        NONE,
        'm/s or rad/s',
        "saturated Baumgarte: the task rows' stiffness "
        "term kp phi is capped at kd times this speed, so a far-off task is approached at most this fast (each "
        "row in its own unit); the linear law inside the cap (0: no cap; default: 1.0 with gains damped at "
        "ratio >= 0.5 such as critical, no cap with lightly damped ones such as seed 000's)",
        high=1.0e3,
    ),
    # ------------------------------------------------------------------ control
    _pos('control.rate', 1000.0, 'Hz', 'control rate', high=20000.0),
    _S('control.pinv', 'str', 'svd', '', 'pseudo-inverse method', choices=PINV_METHODS),
    _pos('control.rcond', 1.0e-10, '', 'rank tolerance relative to the largest singular value', high=1.0),
    _nonneg('control.damping', 1.0e-6, '', 'damped least squares only', high=1.0e3),
    _S(
        'control.safe_effort',
        'str',
        'zero',
        '',
        'effort on bad input or numerical failure',
        live=True,
        choices=('zero', 'hold'),
    ),
    _S(
        'control.friction_compensation',
        'bool',
        True,
        '',
        "the controller's model includes the description's "
        'Coulomb friction (false: the plant has it, the controller does not)',
    ),
    _pos(
        'control.state_timeout',
        0.1,
        's',
        'ROS node and serial runner: state older than this (by arrival) gives the safe effort',
        high=10.0,
        live=True,
    ),
    _pos(
        'control.clock_skew',
        0.05,
        's',
        'ROS node: a stamp more than this ahead of the node clock is clock skew (rejected)',
        high=10.0,
        live=True,
    ),
    _nonneg(
        'control.soft_start',
        1.0,
        's',
        're-arming after an interruption ramps the stabilization from 0 to '
        'its gains over this time (0: off); the trajectory clock is held during the interruption',
        high=60.0,
        live=True,
    ),
    # ------------------------------------------------------------------ redundancy resolution
    _S(
        'posture.enabled',
        'bool',
        True,
        '',
        'hold the free directions the task leaves (its null space) at a '
        'posture, on the closure-projected dynamics (task and closures untouched); used only where the task '
        'leaves freedom',
    ),
    _S(
        'posture.reference',
        'floats',
        NONE,
        'rad or m',
        'posture q_ref, one per joint (default: robot.initial_position)',
    ),
    _pos(
        'posture.omega',
        5.0,
        'rad/s',
        "natural frequency of the posture: a_p = -w^2 (q - q_ref) - 2 zeta w q'",
        high=1.0e4,
    ),
    _pos('posture.damping_ratio', 1.0, '', 'zeta of the posture (1: critically damped)', high=100.0),
    _nonneg(
        'posture.limit_margin',
        0.05,
        '',
        'joint-limit avoidance: repel a joint inside this fraction of its '
        'URDF range from either end (0: off; joints without limits: none)',
        high=0.5,
    ),
    _pos(
        'posture.limit_omega',
        20.0,
        'rad/s',
        'natural frequency of the joint-limit repulsion (critically damped, acting only inside the margin)',
        high=1.0e4,
    ),
    _nonneg(
        'posture.max_speed',
        0.5,
        'rad/s or m/s',
        "saturated posture: its stiffness term is capped at the "
        "damping gain times this speed, so a far-off posture is approached at most this fast (0: no cap)",
        high=1.0e3,
    ),
    _S(
        'posture.metric',
        'str',
        'joint',
        '',
        'metric the posture acceleration is matched in, in the null space: '
        'joint (every joint alike, light joints damped as much as heavy ones) or mass (the M-norm, which barely '
        'damps light joints)',
        choices=('joint', 'mass'),
    ),
    # ------------------------------------------------------------------ joint limits in the control law
    _S(
        'limits.enabled',
        'bool',
        True,
        '',
        'hold the joint position and velocity limits (URDF <limit>, '
        'hardware.<motor> limits where tighter) in the control law: bounds on the joint accelerations the task '
        'gives way to, and efforts beyond their limits solved as bounded least squares on the task rows instead '
        'of clipped joint by joint (false: clipping only)',
    ),
    _pos('limits.velocity_scale', 0.9, '', 'fraction of each joint speed limit the control law stays under', high=1.0),
    _nonneg('limits.margin', 0.02, '', 'fraction of each joint range kept free at either end', high=0.25),
    _pos(
        'limits.deceleration',
        10.0,
        'rad/s^2 or m/s^2',
        'braking deceleration a joint approaching a position '
        'limit is slowed down with (v <= sqrt(2 a d) at distance d)',
        high=1.0e5,
    ),
    _pos(
        'limits.time_constant',
        0.02,
        's',
        'the joint speed follows its bound with this time constant (at least two control periods are used)',
        high=10.0,
    ),
    _pos(
        'limits.weight',
        1.0e4,
        '',
        'weight of the joint acceleration bounds against the task rows when both '
        'cannot hold (larger: the limits win more strictly)',
        high=1.0e12,
    ),
    _nonneg(
        'limits.singular_threshold',
        1.0e-5,
        '',
        'with the joint-limit stage, the task rows become a damped least squares where the smallest singular '
        'value of the task matrix A_s N B falls below this fraction of its largest (near a singularity: the '
        'effort stays bounded and continuous as the arm crosses it; exactly the undamped law above it; 0: never)',
        high=1.0,
    ),
    _nonneg(
        'limits.singular_damping',
        1.0e-5,
        '',
        'the damping factor the task rows reach at a singularity, relative to the largest singular value of '
        'the task matrix (it grows from 0 at limits.singular_threshold as 1 - (s_min / threshold)^2)',
        high=1.0,
    ),
    # ------------------------------------------------------------------ approach of a far target in joint space
    _S(
        'approach.mode',
        'str',
        'auto',
        '',
        'reach the task from the start in joint space first: the inverse kinematics of the task at its start '
        'time solved within the joint position limits, a quintic joint-space move there re-timed within the '
        'speed and deceleration limits, then a blended hand-over to the task rows (for a target the task '
        'descent would stop short of, against a joint limit or a singularity). auto: only when some task '
        "row's correction is capped at the measured start (stabilization.max_speed: the start lies outside "
        'the linear range of the saturated Baumgarte term), the task is position-level with no closure '
        'through its joints and the inverse kinematics solves it within the limits; on: always (refused '
        'where it does not apply; an unreachable target: its closest point); off: never',
        choices=('auto', 'on', 'off'),
    ),
    _S(
        'approach.restarts',
        'int',
        8,
        '',
        'seeded starts of the inverse kinematics besides the start itself; of the solutions, the one reached '
        'soonest is taken',
        low=0,
        high=1000,
    ),
    _pos(
        'approach.tolerance',
        1.0e-8,
        'm or rad',
        'an inverse kinematics solution holds every task and closure row to this (else the closest one found '
        'is approached, if closer than the start)',
        high=1.0,
    ),
    _pos(
        'approach.speed_scale',
        0.5,
        '',
        "fraction of each joint's speed limit and of limits.deceleration the approach peaks at (the rest is "
        "the servo's room to correct)",
        high=1.0,
    ),
    _nonneg(
        'approach.blend_time',
        0.2,
        's',
        'the effort is blended from the joint-space approach to the task over this time (0: switched)',
        high=60.0,
    ),
    _S(
        'internal_force.effort',
        'floats',
        NONE,
        'N m or N',
        'redundant actuation: internal-force (preload, '
        'squeeze) target, one per actuator; its component that moves nothing is added (default: none, the '
        'minimum-norm distribution)',
    ),
    # ------------------------------------------------------------------ simulation
    _pos('simulation.duration', 10.0, 's', 'simulated seconds (CLI --duration)', high=3600.0),
    _S(
        'simulation.integrator',
        'str',
        'auto',
        '',
        'embedded plant integrator (CLI --integrator): rk4, rosenbrock (the linearly implicit ROS2 W-method, '
        'stable on the stiff damping and friction of light links; trees only), solve_ivp, or auto: rk4 where it '
        'needs no more than simulation.substeps steps per control period, else rosenbrock at simulation.substeps '
        '(closures: rk4)',
        choices=INTEGRATORS,
    ),
    _S(
        'simulation.plant',
        'str',
        'uk',
        '',
        'embedded UK plant or MuJoCo: of uk_sim_node and of uk-controller simulate, emulate and sweep (CLI --plant)',
        choices=PLANTS,
    ),
    _S(
        'simulation.substeps',
        'int',
        4,
        '',
        'integrator steps per control period, at least (CLI --substeps); with simulation.integrator rk4 the '
        'embedded plant raises them to what the fastest passive mode of the description needs (light links '
        'with damping or friction) and says so in the run summary (auto switches to rosenbrock there instead)',
        low=1,
        high=1000,
    ),
    _pos(
        'simulation.mass_scale', 1.0, '', 'plant inertias x this factor, model mismatch (CLI --mass-scale)', high=1000.0
    ),
    _nonneg('simulation.sensor_noise', 0.0, 'rad or m', 'std of position noise (CLI --noise)', high=10.0),
    _S(
        'simulation.measurement_delay',
        'int',
        0,
        'periods',
        'measurement delay (CLI --delay); shorter than the run, '
        'the first periods have no measurement and return the safe effort',
        low=0,
        high=10000,
    ),
    _S(
        'simulation.log_every',
        'int',
        1,
        'periods',
        'log.csv holds every Nth control step (the summary covers all; CLI --log-every)',
        low=1,
        high=1_000_000,
    ),
    _nonneg(
        'simulation.transient',
        NONE,
        's',
        'excluded from the error statistics (default: a fifth of the run, at most 2 s; CLI --transient)',
        high=3600.0,
    ),
    _pos('simulation.closure_omega', 50.0, 'rad/s', "plant's own closure stabilization (critical)", high=1.0e4),
    _pos(
        'simulation.closure_rcond',
        1.0e-10,
        '',
        "rank cut of the plant's closures (as control.rcond): a closure "
        'direction weaker than this, relative to the strongest, is dropped; raise it for nearly dependent '
        'closures such as a slightly non-planar four-bar',
        high=0.1,
    ),
    _pos('simulation.mujoco_timestep', 2.5e-4, 's', 'MuJoCo plant step', high=0.1),
    _pos('simulation.rate', NONE, 'Hz', 'uk_sim_node: plant publish rate (default: control.rate)', high=20000.0),
    _S('simulation.publish_clock', 'bool', False, '', 'uk_sim_node: publish /clock'),
    _S('simulation.lockstep', 'bool', False, '', 'uk_sim_node: advance only when an effort command arrives'),
    _pos('simulation.real_time_factor', 1.0, '', 'uk_sim_node: simulated seconds per wall second', high=1000.0),
    _pos(
        'simulation.lockstep_resend',
        0.1,
        's',
        'uk_sim_node: resend the state after this long without a command (lockstep)',
        high=60.0,
    ),
    _pos('simulation.clock_start', 1.0, 's', 'uk_sim_node: /clock time of the first sample', high=1.0e6),
    _S(
        'simulation.wait_for_subscribers',
        'int',
        1,
        '',
        'uk_sim_node: subscribers to wait for before starting',
        low=0,
        high=100,
    ),
    _S(
        'simulation.max_command_lag',
        'int',
        0,
        'periods',
        'uk_sim_node on /clock: wait after this many periods without a command (0: never)',
        low=0,
        high=100000,
    ),
    # ------------------------------------------------------------------ hardware
    _S('hardware.protocol', 'str', 'uk_binary', '', 'serial protocol (run --protocol)', choices=PROTOCOLS),
    _S('hardware.port', 'str', '/dev/ttyUSB0', '', 'serial port (run --port)'),
    _S('hardware.baud', 'int', 1000000, 'baud', 'baud rate (run --baud)', low=1200, high=20_000_000),
    _pos(
        'hardware.watchdog',
        0.05,
        's',
        'no command or feedback for this long: torque off (run --watchdog); longer than the control period',
        high=10.0,
    ),
    _pos(
        'hardware.rate',
        NONE,
        'Hz',
        'bus rate (default: control.rate, which run --rate sets; run steps the controller at this rate)',
        high=20000.0,
    ),
    _S('hardware.motors', 'strs', NONE, '', 'one motor per actuator, same names as actuators.names'),
    _S('hardware.<name>.id', 'int', NONE, '', 'bus id (default: position in hardware.motors + 1)', low=0, high=253),
    _S('hardware.<name>.gear_ratio', 'float', 1.0, '', 'q = direction theta / gear_ratio + zero_offset'),
    _pos('hardware.<name>.torque_constant', 1.0, 'N m/A', 'motor torque per ampere'),
    _S('hardware.<name>.direction', 'float', 1.0, '', '1.0 or -1.0'),
    _S('hardware.<name>.zero_offset', 'float', 0.0, 'rad or m', 'joint position at motor angle 0'),
    _S('hardware.<name>.position_limit', 'floats', NONE, 'rad or m', '[lower, upper], joint side', length=2),
    _pos('hardware.<name>.velocity_limit', NONE, 'rad/s', 'joint side'),
    _pos(
        'hardware.<name>.torque_limit',
        NONE,
        'N m',
        'motor side (default: effort_limit / gear_ratio); lowered at connect to the limit '
        'the device enforces (Dynamixel Current Limit, ODrive torque_lim)',
    ),
    # hardware.<protocol>.* : declared by each protocol's codec (SETTINGS), inserted here by _protocol_settings
    # ------------------------------------------------------------------ ros (node-only)
    _S('ros.joint_states_topic', 'str', '/joint_states', '', 'joint states in'),
    _S('ros.effort_topic', 'str', '/effort_controller/commands', '', 'efforts out'),
    _S('ros.output_type', 'str', 'float64_multi_array', '', 'message type of the efforts', choices=OUTPUT_TYPES),
    _S('ros.autostart', 'bool', True, '', 'start the trajectory clock on the first complete state'),
    _S(
        'ros.trigger',
        'str',
        'timer',
        '',
        'timer: fixed rate; state: one step per new joint state (in the '
        'loop thread: phase-locked to the publisher, ros.loop.fallback_periods when states stop)',
        choices=TRIGGERS,
    ),
    _S(
        'ros.transport',
        'str',
        'raw',
        '',
        'raw: the loop thread decodes /joint_states and encodes the efforts '
        '(float64_multi_array) as CDR bytes itself; messages: rclpy message objects (the reference)',
        choices=('raw', 'messages'),
    ),
    _S('ros.trajectory_start', 'float', 0.0, 's', 'trajectory time at start', live=True),
    _pos('ros.diagnostics_period', 1.0, 's', '/diagnostics period', high=3600.0),
    _S('ros.executor', 'str', 'single_threaded', '', 'rclpy executor', choices=EXECUTORS),
    _S('ros.effort_joints', 'strs', NONE, '', 'order of the effort command (actuators or their joints)'),
    # the control thread, loop telemetry and overrun policy: checked again by ros/loop_timing.py
    _S(
        'ros.loop.mode',
        'str',
        'thread',
        '',
        'thread: own control thread (wall clock); timer: rclpy timer',
        choices=('thread', 'timer'),
    ),
    _S('ros.loop.priority', 'int', 0, '', 'SCHED_FIFO priority of the loop thread (0: normal)', low=0, high=99),
    _S('ros.loop.cpus', 'floats', NONE, '', 'CPU numbers the loop thread may run on (empty: any)', low=0),
    _S('ros.loop.mlockall', 'bool', False, '', 'lock the process memory'),
    _S('ros.loop.spin_us', 'float', 50.0, 'us', 'busy-wait before each deadline', low=0.0, high=10000.0),
    _S('ros.loop.window', 'float', 1.0, 's', 'telemetry window (~/loop_timing)', low=0.05, high=60.0),
    _S(
        'ros.loop.fallback_periods',
        'float',
        2.0,
        'periods',
        'ros.trigger state in the loop thread: no new state '
        'this long after the last step: step on the wall clock (then every period until states return)',
        low=1.0,
        high=1000.0,
    ),
    _S('ros.overrun.warn_after', 'int', 10, 'periods', 'consecutive missed deadlines before a WARN (0: never)', low=0),
    _S(
        'ros.overrun.safe_after',
        'int',
        100,
        'periods',
        'consecutive missed deadlines before the safe effort (0: never)',
        low=0,
    ),
    _S('ros.overrun.recover_after', 'int', 10, 'periods', 'periods on time in a row before controlling again', low=1),
]


def _protocol_settings():
    """The ``hardware.<protocol>.<option>`` keys: each protocol of the motor registry declares its own
    in ``protocols/<name>/codec.py`` (``SETTINGS``), so adding a protocol is one subpackage and one
    registry line (uk_controller/hardware/registry.py). The schema never imports hardware/ (a layer
    above it): the registry registers its table with uk_controller/settings/protocols.py when the
    package is imported, and the codecs (plain Python: no pyserial, dynamixel_sdk) are read through it."""
    return [s for entry in _protocols.table().values() for s in entry.settings()]


# the protocols' keys after the generic hardware keys, before ros.* (the order of the docs table)
_AT = next(i for i, s in enumerate(_KEYS) if s.key.startswith('ros.'))
#: the schema's keys (with the trajectory keys of :func:`trajectory_settings`: :func:`all_settings`)
SETTINGS = (*_KEYS[:_AT], *_protocol_settings(), *_KEYS[_AT:])

_TREE: dict[str, Any] = {}
_BY_KEY: dict[tuple, Setting] = {}
#: what the index (_TREE, _BY_KEY) was built from (``_index`` rebuilds when either changed)
_INDEXED: dict[str, Any] = {'settings': None, 'trajectory_types': None}


def _add_to_index(s):
    ident = (s.key, s.when)
    if ident in _BY_KEY:
        raise ValueError(f'setting {s.key} declared twice')
    _BY_KEY[ident] = s
    node = _TREE
    parts = s.key.split('.')
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f'setting {s.key}: {part} is a value')
    if s.type == 'section':
        node.setdefault(parts[-1], {})
    else:
        node.setdefault(parts[-1], []).append(s)


def _build():
    _TREE.clear()
    _BY_KEY.clear()
    _INDEXED['settings'], _INDEXED['trajectory_types'] = SETTINGS, dict(_trajectories.TYPES)
    for s in all_settings():
        _add_to_index(s)


def _index():
    """The key index, rebuilt when :data:`SETTINGS` or the trajectory table is not the one it was built
    from (a type added to :data:`uk_controller.constraints.trajectories.TYPES` is accepted with its keys,
    no second edit)."""
    if _INDEXED['settings'] is not SETTINGS or _INDEXED['trajectory_types'] != _trajectories.TYPES:
        _build()


_build()


def lookup(key):
    """The Setting of a dotted key (``control.rate``, ``actuators.motor1.joint`` or with ``<name>``)."""
    for s in all_settings():
        if s.key == key:
            return s
    parts = key.split('.')
    for s in all_settings():
        sp = s.key.split('.')
        if len(sp) == len(parts) and all(a == b or a == '<name>' for a, b in zip(sp, parts)):
            return s
    return None


def default(key):
    """The one default of `key` (None when it has none)."""
    s = lookup(key)
    if s is None:
        raise KeyError(f'{key} is not a setting')
    return s.default


def get(params, key):
    """Value of dotted `key` in a nested parameter dict, or its schema default."""
    node = params
    for part in key.split('.'):
        if not isinstance(node, dict) or node.get(part) is None:
            return default(key)
        node = node[part]
    return node


def is_live(key):
    s = lookup(key)
    return bool(s is not None and s.live)


def live_keys():
    return [s.key for s in all_settings() if s.live]


#: Keys whose default is another key's value, filled by :func:`uk_controller.settings.resolve.resolve`
#: (so a resolved setup always has them): key -> the key it defaults to.
DEFAULT_FROM = {'simulation.rate': 'control.rate', 'hardware.rate': 'control.rate'}
#: Keys a resolved setup always has although the schema gives no default: :data:`DEFAULT_FROM` and
#: ``robot.name`` (the file name).
ALWAYS_FILLED = (*DEFAULT_FROM, 'robot.name')


#: the maps whose keys depend on their ``type`` (the typed items): schema path -> the name their classes end
#: with (uk_controller/settings/types.py: ``FramePositionConstraintSettings``, ``HelixTrajectorySettings``)
TYPED_ITEMS = {'constraints.<name>': 'Constraint', 'constraints.<name>.trajectory': 'Trajectory'}
#: typed items that may be written without a ``type``: they refine the closure of the same name that the
#: robot description declares (``robot.mjcf``, ``robot.sdf``, a URDF's couplings), whose type they take
REFINES_CLOSURE = ('constraints.<name>',)


def section_tree():
    """``(tree, typed_items)``: the schema as the typed sections see it (uk_controller/settings/types.py).

    ``tree`` is {part: Setting | subtree} of the keys that are not under a typed item (:data:`TYPED_ITEMS`;
    a named item is the part ``<name>``); ``typed_items`` the set of map paths whose named items are typed
    items (``constraints``: one class per type, :func:`item_keys`)."""
    tree: dict[str, Any] = {}
    typed_items: set[str] = set()
    for s in all_settings():
        parts = s.key.split('.')
        parent = '.'.join(parts[:-1])
        typed = next((p for p in TYPED_ITEMS if parent == p or parent.startswith(p + '.')), None)
        if typed is not None:
            typed_items.add(typed.rsplit('.<name>', 1)[0])
            continue
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = s
    return tree, typed_items


def item_types(path):
    """The type names of the typed item at schema `path` (the ``type`` key's choices, as the table holds them
    now)."""
    return tuple(lookup(f'{path}.type').choices)


def item_keys(path, kind):
    """{key: Setting} of the typed item at schema `path` (``constraints.<name>``) of type `kind`, in schema
    order: the keys without ``when`` and those whose ``when`` lists `kind` (a ``section`` Setting is a typed
    item of its own, at ``path.key``). `kind` None: every key of the item, the first Setting of each (a
    refinement, :data:`REFINES_CLOSURE`)."""
    out: dict[str, Setting] = {}
    for s in all_settings():
        parent, _, leaf = s.key.rpartition('.')
        if parent == path and (kind is None or not s.when or kind in s.when[1]):
            out.setdefault(leaf, s)
    return out


def check_item(path, spec, file=None, at=None):
    """Check the map `spec` of a typed item at schema `path` as :func:`check` checks it inside a setup:
    unknown keys and keys of another type (with a suggestion), types, ranges; `at` is its dotted key in
    errors (default: `path`)."""
    _index()
    node = _TREE
    for part in path.split('.'):
        node = node[part]
    if not isinstance(spec, dict):
        raise ConfigError(f'must be a map, got {spec!r}', file=file, key=at or path)
    _walk(spec, node, at or path, {}, file)


# ---------------------------------------------------------------------------- the tree


def _suggest(word, candidates):
    close = difflib.get_close_matches(word, list(candidates), 1, 0.6)
    return f' (did you mean {close[0]!r}?)' if close else ''


def _names_of(path, node, root):
    """Names allowed for the ``<name>`` items of the map at `path`."""
    if path == 'hardware':
        names = node.get('motors') or (root.get('actuators') or {}).get('names')
    else:
        names = node.get('names')
    if isinstance(names, str):
        names = [names]
    return [n for n in names if isinstance(n, str)] if isinstance(names, (list, tuple)) else []


def _has_file_closures(root):
    robot = root.get('robot')
    if not isinstance(robot, dict):
        return True  # no description yet: the loader reports that first
    given = [k for k in DESCRIPTION_KEYS if robot.get(k) is not None]
    return not given or any(k in given for k in CLOSURE_KEYS)


def check(params, file=None, *, prefix='', names=None):
    """Check a nested parameter tree against the schema: unknown keys, types, ranges, cross-key rules.

    Raises :class:`ConfigError` naming `file` and the dotted key. Returns `params` unchanged.
    """
    if params is None:
        return params
    if not isinstance(params, dict):
        raise ConfigError('ros__parameters must be a map', file=file)
    _index()
    _walk(params, _TREE, prefix, params, file)
    check_cross(params, file, names=names)
    return params


def _walk(node, tree, path, root, file):
    for key, value in node.items():
        key = str(key)
        dotted = f'{path}.{key}' if path else key
        child = tree.get(key)
        if child is None and '<name>' in tree:
            if key in _names_of(path, node, root) or (path == 'constraints' and _has_file_closures(root)):
                child = tree['<name>']  # (a closure of an MJCF/SDF file may be refined by name)
        if child is None and path == 'hardware' and isinstance(value, dict) and key in protocol_sections():
            _check_protocol_options(key, value, dotted, file)  # a protocol registered without schema keys
            continue
        if child is None:
            options = [
                k
                for k, v in tree.items()
                if k != '<name>'
                and (isinstance(v, dict) or any(_applies(x, node, dotted, file, raise_=False) for x in v))
            ]
            if '<name>' in tree:
                options += _names_of(path, node, root)
            where = f"section '{path}'" if path else 'the top level'
            hint = _suggest(key, options) or _suggest(key, [s.key for s in all_settings()])
            if '<name>' in tree and path in ('actuators', 'constraints', 'hardware') and isinstance(value, dict):
                listed = 'hardware.motors' if path == 'hardware' else f'{path}.names'
                raise ConfigError(
                    f'unknown key: {key!r} is not a key of {where} and not listed in {listed}' + hint,
                    file=file,
                    key=dotted,
                )
            raise ConfigError(
                f'unknown key: {key!r} is not a key of {where}{hint}; valid: ' + ', '.join(sorted(options)),
                file=file,
                key=dotted,
            )
        if isinstance(child, dict):
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ConfigError(f'must be a map, got {value!r}', file=file, key=dotted)
            applies = [s for s in _BY_KEY.values() if s.type == 'section' and _same(s.key, dotted)]
            if applies and not any(_applies(s, node, dotted, file, raise_=False) for s in applies):
                _applies(applies[0], node, dotted, file)  # raises naming the discriminator
            _walk(value, child, dotted, root, file)
            continue
        if value is None:
            continue
        chosen = None
        for s in child:
            if _applies(s, node, dotted, file, raise_=False):
                chosen = s
                break
        if chosen is None:
            _applies(child[0], node, dotted, file)  # raises naming the discriminator
        check_value(chosen, value, file=file, key=dotted)


def protocol_sections():
    """The option sections ``hardware.<section>`` of the protocols registered now (hardware/registry.py,
    through uk_controller/settings/protocols.py)."""
    return _protocols.sections()


def _check_protocol_options(name, value, dotted, file):
    """``hardware.<section>`` of a protocol whose codec declares no ``SETTINGS``: its keys are those of the
    codec's ``OPTIONS`` (uk_controller/hardware/registry.py, ``Protocol.defaults``)."""
    known = next(p for p in _protocols.table().values() if p.section_name == name).defaults()
    for option in value:
        if option not in known:
            raise ConfigError(
                f'unknown key: {option!r} is not an option of protocol {name!r}'
                f'{_suggest(str(option), known)}; valid: {", ".join(sorted(known)) or "none"}',
                file=file,
                key=f'{dotted}.{option}',
            )


def _same(pattern, dotted):
    a, b = pattern.split('.'), dotted.split('.')
    return len(a) == len(b) and all(x == y or x == '<name>' for x, y in zip(a, b))


def _applies(setting, node, dotted, file, raise_=True):
    if not setting.when:
        return True
    sibling, values = setting.when
    actual = node.get(sibling)
    if actual is None or actual in values or not isinstance(actual, str):
        return True
    if not raise_:
        return False
    parent = dotted.rsplit('.', 1)[0]
    valid = sorted(
        {
            s.key.rsplit('.', 1)[1]
            for s in _BY_KEY.values()
            if _same(s.key.rsplit('.', 1)[0], parent) and (not s.when or actual in s.when[1])
        }
    )
    leaf = dotted.rsplit('.', 1)[1]
    raise ConfigError(
        f'unknown key: {leaf!r} is not a key of {sibling} {actual!r}{_suggest(leaf, valid)}; valid: {", ".join(valid)}',
        file=file,
        key=dotted,
    )


# ---------------------------------------------------------------------------- cross-key rules


def natural_frequency(stab):
    """Largest natural frequency [rad/s] of the stabilization section (0 for none; the convention's
    :attr:`~uk_controller.core.baumgarte.Convention.frequency` of the largest magnitude of each gain)."""
    stab = stab or {}
    convention = CONVENTIONS.get(stab.get('convention', default('stabilization.convention')))
    if convention is None:
        return 0.0

    def biggest(key):
        v = stab.get(key, default(f'stabilization.{key}') or 0.0)
        v = v if isinstance(v, (list, tuple)) else [v]
        vals = [abs(float(x)) for x in v if number_ok(x) and math.isfinite(x)]
        return max(vals, default=0.0)

    return convention.frequency(*(biggest(key) for key in convention.gains))


def check_cross(params, file=None, *, names=None):
    """Rules between keys. `names` maps keys to what the user typed (CLI flags) for the messages."""
    names = names or {}

    def label(key):
        return names.get(key, key)

    _check_node_rules(params, file, label)
    _check_gains_given(params, file, label)
    rate = get(params, 'control.rate')
    hw = params.get('hardware') if isinstance(params.get('hardware'), dict) else {}
    bus_rate = hw.get('rate') or rate
    if hw and number_ok(bus_rate) and bus_rate > 0 and number_ok(hw.get('watchdog', 0.05)):
        watchdog = hw.get('watchdog', default('hardware.watchdog'))
        if watchdog <= 1.0 / bus_rate:
            raise ConfigError(
                f'{watchdog:g} s is not longer than the control period 1/{bus_rate:g} Hz = '
                f'{1.0 / bus_rate:g} s; accepted: ({1.0 / bus_rate:g}, 10] s',
                file=file,
                key=label('hardware.watchdog'),
            )
    if number_ok(rate) and rate > 0:
        w = natural_frequency(params.get('stabilization'))
        # the loop is sampled at the slower of the controller and the bus that carries its state and efforts
        sampled, sampled_by = rate, label('control.rate')
        if number_ok(hw.get('rate')) and 0 < hw['rate'] < rate:
            sampled, sampled_by = hw['rate'], label('hardware.rate')
        limit = 0.25 * sampled
        if w > limit:
            raise ConfigError(
                f'natural frequency {w:g} rad/s is too fast for {sampled_by} {sampled:g} Hz '
                f'(a sampled loop needs w <= rate/4 = {limit:g} rad/s)',
                file=file,
                key=label(
                    'stabilization.omega'
                    if 'omega' in (params.get('stabilization') or {}) or not params.get('stabilization')
                    else 'stabilization.beta'
                ),
            )
        sim = params.get('simulation') if isinstance(params.get('simulation'), dict) else {}
        duration = sim.get('duration', default('simulation.duration'))
        if number_ok(duration) and duration * rate > MAX_STEPS:
            raise ConfigError(
                f'{duration:g} s at {rate:g} Hz is {duration * rate:.3g} control periods; at most '
                f'{MAX_STEPS} per run (lower {label("control.rate")} or {label("simulation.duration")})',
                file=file,
                key=label('simulation.duration'),
            )
        delay = sim.get('measurement_delay', default('simulation.measurement_delay'))
        if number_ok(delay) and number_ok(duration) and delay > 0 and delay >= round(duration * rate):
            periods = int(round(duration * rate))
            raise ConfigError(
                f'{delay} periods is not shorter than the run ({periods} periods: {duration:g} s at '
                f'{rate:g} Hz), so no measurement would ever reach the controller; accepted: '
                f'[0, {max(periods - 1, 0)}] periods',
                file=file,
                key=label('simulation.measurement_delay'),
            )
        transient = sim.get('transient')
        if number_ok(transient) and number_ok(duration) and transient >= duration:
            raise ConfigError(
                f'{transient:g} s is not shorter than the run ({duration:g} s); accepted: [0, {duration:g}) s',
                file=file,
                key=label('simulation.transient'),
            )


def _section(params, *path):
    node = params
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _check_gains_given(params, file, label):
    """A ``stabilization`` section that is written out names the gains of its convention (the
    ``stabilization.omega`` default is the gain of a setup without the section)."""
    stab = params.get('stabilization')
    if not isinstance(stab, dict) or not stab:
        return
    convention = stab.get('convention', default('stabilization.convention'))
    gains = CONVENTIONS[convention].gains if convention in CONVENTIONS else ()
    for key in gains:
        if stab.get(key) is None:
            raise ConfigError(
                f'required key is missing (convention {convention!r} needs {" and ".join(gains)})',
                file=file,
                key=label(f'stabilization.{key}'),
            )


def _check_node_rules(params, file, label):
    """Rules of the node settings a type and a range cannot say: topic names not blank, the effort order
    without repeats, CPU numbers whole, a plant that waits for its controller on /clock only."""
    ros = _section(params, 'ros')
    for key in ('joint_states_topic', 'effort_topic'):
        if isinstance(ros.get(key), str) and not ros[key].strip():
            raise ConfigError('must be a topic name', file=file, key=label(f'ros.{key}'))
    joints = ros.get('effort_joints')
    if isinstance(joints, (list, tuple)):
        if not joints:
            raise ConfigError(
                f'must be a non-empty list of joint names, got {joints!r}', file=file, key=label('ros.effort_joints')
            )
        if len(set(joints)) != len(joints):
            raise ConfigError(f'has duplicates: {list(joints)}', file=file, key=label('ros.effort_joints'))
    cpus = _section(params, 'ros', 'loop').get('cpus')
    cpus = [cpus] if number_ok(cpus) else cpus
    if isinstance(cpus, (list, tuple)) and not all(number_ok(c) and c == int(c) for c in cpus):
        raise ConfigError(
            f'must be a list of CPU numbers >= 0 (empty: any), got {cpus!r}', file=file, key=label('ros.loop.cpus')
        )
    sim = _section(params, 'simulation')
    if sim.get('max_command_lag') and not (sim.get('publish_clock') or sim.get('lockstep')):
        raise ConfigError(
            'needs simulation.publish_clock: true (a plant on the wall clock cannot wait for its controller)',
            file=file,
            key=label('simulation.max_command_lag'),
        )


# ---------------------------------------------------------------------------- CLI and docs


def arg_type(key, flag):
    """An argparse ``type=`` that checks a flag against setting `key` (message names flag, key, range)."""
    import argparse

    setting = lookup(key)

    def parse(text):
        try:
            value = int(text) if setting.type == 'int' else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f'{text!r} is not a {"whole number" if setting.type == "int" else "number"} '
                f'({key}; accepted: {setting.range_text()})'
            ) from None
        try:
            checked = check_value(setting, value, key=key)
            return value if setting.type == 'floats' else checked
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(f'{exc.message} ({key})') from None

    parse.__name__ = flag
    return parse


def markdown_table():
    """The reference table of docs/config.md (generated; ``--write-docs`` updates the file)."""
    lines = ['| key | type | default | unit | accepted | live | description |', '|---|---|---|---|---|---|---|']
    for s in all_settings():
        if s.type == 'section':
            continue
        cond = f' (type {", ".join(s.when[1])})' if s.when and len(s.when[1]) < 7 else ''
        default = list(s.default) if isinstance(s.default, tuple) else s.default
        dflt = 'required' if s.required else '' if default is None else f'`{default}`'
        accepted = s.range_text() if s.type not in ('map', 'any') else ''
        doc = (s.doc + cond).replace('|', '\\|')
        lines.append(
            f'| `{s.key}` | {s.type} | {dflt} | {s.unit} | {accepted.replace("|", "/")} | '
            f'{"yes" if s.live else ""} | {doc} |'
        )
    return '\n'.join(lines) + '\n'


DOC_BEGIN = '<!-- settings table: generated by python -m uk_controller.settings --write-docs -->'
DOC_END = '<!-- end of settings table -->'


def write_docs(path):
    from pathlib import Path

    path = Path(path)
    text = path.read_text()
    head, _, rest = text.partition(DOC_BEGIN)
    _, _, tail = rest.partition(DOC_END)
    path.write_text(head + DOC_BEGIN + '\n\n' + markdown_table() + '\n' + DOC_END + tail)
