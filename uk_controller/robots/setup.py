"""Build a :class:`RobotSetup` from resolved settings (docs/config.md).

:func:`load_robot` resolves a setup file (uk_controller.settings.resolve: the schema and cross-key rules
run there, once) and :func:`setup_from_settings` builds the model, rows, actuators and gains from the
typed sections; nothing here re-checks a value or restates a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..constraints import ConstraintStack, build_stacks
from ..constraints.stack import hold_where_they_start
from ..core.baumgarte import CONVENTIONS, Baumgarte
from ..files.description import (
    DescriptionError,
    check_urdf_text,
    check_xacro_args,
    description_key,
    is_xacro,
    load_sdf,
    merge_closures,
    read_mjcf,
    urdf_text,
)
from ..files.description_extras import DescriptionExtras, ExtrasError, tendon_column, urdf_extras
from ..files.parameter_file import ConfigError
from ..files.sdf import FREE_BASE_JOINTS
from ..model import validity as model_validity
from ..model.joint_dynamics import JointDynamics
from ..model.robot_model import ModelError, RobotModel
from ..paths import missing_file_message, resolve_data_file
from ..settings.frozen import FrozenDict, thaw
from ..settings.resolve import resolve
from ..settings.sections import constraint_item
from ..settings.types import (
    ActuatorsSettings,
    ConstraintItem,
    ConstraintRefinementSettings,
    RobotSettings,
    Settings,
    StabilizationSettings,
)
from .actuators import Actuator, ActuatorMap

FREE_BASE_JOINT_NAMES = tuple(name for name, _, _ in FREE_BASE_JOINTS)


@dataclass
class RobotSetup:
    """Everything the controller needs about one robot: its model, rows, actuators and gains.

    ``joint_names`` is the order of q (``robot.joints``, default URDF order);
    ``actuators.names`` the order of u. ``settings`` is what the setup was built from (typed, immutable;
    every reader takes its values there); ``constraints`` the typed constraint items the rows were built
    from (name -> item: the file's and the description's closures, read by attribute).
    """

    name: str
    settings: Settings = field(repr=False)
    config_path: Path | None
    model: RobotModel
    joint_names: list
    q0: np.ndarray
    qd0: np.ndarray
    passive: ConstraintStack
    servo: ConstraintStack
    actuators: ActuatorMap
    stabilization: Baumgarte
    urdf_path: Path | None = None
    constraints: FrozenDict[str, ConstraintItem | ConstraintRefinementSettings] = field(
        default_factory=FrozenDict, repr=False
    )
    extras: DescriptionExtras = field(default_factory=DescriptionExtras, repr=False)

    def controller_model(self):
        """The model the controller uses: :attr:`model`, or a copy without Coulomb friction when
        ``control.friction_compensation`` is false (the plant keeps its friction;
        uk_controller.model.joint_dynamics)."""
        jd = self.model.joint_dynamics
        if jd is None or not jd.has_friction or self.settings.control.friction_compensation:
            return self.model
        return self.model.with_joint_dynamics(jd.without_friction())

    @property
    def n(self):
        return self.model.n

    def evaluate(self, q, qd, t):
        """One model pass and all rows: ``(passive_rows, servo_rows, B)`` at (q, q', t).

        The returned objects are internal buffers reused by the next call.
        """
        self.model.compute(q, qd)
        return (
            self.passive.evaluate(self.model, q, qd, t),
            self.servo.evaluate(self.model, q, qd, t),
            self.actuators.matrix(self.model),
        )


def _actuators(section: ActuatorsSettings, model, extras=None, file=None):
    """The actuator map of ``settings.actuators`` (typed items; errors name file and key)."""

    def error(name, key, message):
        return ConfigError(message, file=file, key=f'actuators.{name}' + (f'.{key}' if key else ''))

    if not section.names and not section.items:
        # no actuators section: every joint carries a motor (URDF effort limits), the free base's coordinates
        # excepted (nothing pushes a free base but its contacts)
        limits = model.effort_limits
        return ActuatorMap(
            [
                Actuator(j, joint=i, effort_limit=limits[i])
                for i, j in enumerate(model.joint_names)
                if j not in model.free_base
            ],
            model.n,
        )
    urdf_limits = model.effort_limits
    if not section.names:
        raise ConfigError('list the actuators (order of the effort vector u)', file=file, key='actuators.names')
    if len(set(section.names)) != len(section.names):
        raise ConfigError(f'entries must be unique, got {list(section.names)!r}', file=file, key='actuators.names')
    extra = [k for k in section.items if k not in section.names]
    if extra:
        raise ConfigError(
            f'actuator {extra[0]!r} is not listed in actuators.names', file=file, key=f'actuators.{extra[0]}'
        )
    acts = []
    for name in section.names:
        a = section.items.get(name)
        if a is None:
            raise ConfigError('required section is missing', file=file, key=f'actuators.{name}')
        if sum(v is not None for v in (a.joint, a.between, a.tendon)) != 1:
            raise error(name, None, "give exactly one of 'joint', 'between' or 'tendon'")
        limit = a.effort_limit
        if a.tendon is not None:
            tendon = a.tendon
            known = sorted(extras.tendons if extras is not None else {})
            if tendon not in known:
                raise error(
                    name,
                    'tendon',
                    f'unknown tendon {tendon!r}; fixed tendons of the description: {", ".join(known) or "none"}',
                )
            try:
                column = tendon_column(extras, tendon, model.joint_names)
            except ExtrasError as exc:
                raise error(name, 'tendon', str(exc)) from None
            acts.append(Actuator(name, column=column, effort_limit=np.inf if limit is None else limit))
        elif a.joint is not None:
            joint = a.joint
            if joint not in model.joint_names:
                raise error(name, 'joint', f'unknown joint {joint!r}; joints: {model.joint_names}')
            if joint in model.free_base:
                raise error(
                    name,
                    'joint',
                    f'{joint!r} is a coordinate of the free base (robot.base: free): no '
                    'motor drives it; for a robot held in place use robot.base: fixed',
                )
            index = model.joint_index(joint)
            acts.append(Actuator(name, joint=index, effort_limit=urdf_limits[index] if limit is None else limit))
        else:
            bodies = a.between
            assert bodies is not None  # exactly one of joint, between, tendon (above)
            resolved: list = []
            for body in bodies:
                if body == 'world' and not model.has_frame('world'):
                    resolved.append(None)
                elif not model.has_frame(body):
                    raise error(name, 'between', f'unknown body {body!r}; bodies: {", ".join(model.body_names())}')
                else:
                    resolved.append(body)
            if resolved[0] == resolved[1]:
                raise error(name, 'between', 'the two bodies must differ')
            if a.axis is None:
                raise error(name, 'axis', 'required key is missing')
            axis = np.asarray(a.axis, dtype=float)
            norm = np.linalg.norm(axis)
            if norm == 0.0:
                raise error(name, 'axis', 'must be non-zero')
            acts.append(
                Actuator(
                    name, bodies=tuple(resolved), axis=axis / norm, effort_limit=np.inf if limit is None else limit
                )
            )
    return ActuatorMap(acts, model.n)


def stabilization_gains(stab: StabilizationSettings, file=None) -> Baumgarte:
    """The Baumgarte gains of ``settings.stabilization``: the gains its convention reads
    (:data:`uk_controller.core.baumgarte.CONVENTIONS`; that they are given is checked by the schema), one
    value or one per row."""
    values = {}
    for key in CONVENTIONS[stab.convention].gains:
        given = getattr(stab, key)
        values[key] = float(given[0]) if len(given) == 1 else np.asarray(given, dtype=float)
    try:
        return Baumgarte.from_config({'convention': stab.convention, **values}, where='stabilization')
    except (KeyError, ValueError) as exc:
        raise ConfigError(str(exc).strip("'"), file=file, key='stabilization.convention') from None


def load_description(robot: RobotSettings, path, joints=None, gravity=None, mass_scale=1.0):
    """``(RobotModel, closures)`` from ``robot.urdf`` (URDF or .xacro with ``robot.xacro_args``),
    ``robot.mjcf`` or ``robot.sdf`` (:mod:`uk_controller.files.description`); `robot` is the ``robot``
    section of the resolved settings, `path` the setup file. ``model.source`` is the file,
    ``model.source_kind`` one of urdf, xacro, mjcf, sdf."""

    def error(name, message):
        return ConfigError(message, file=path, key=f'robot.{name}')

    key = description_key(robot, path)
    value = getattr(robot, key)
    file = resolve_data_file(value, path)
    if file is None:
        raise error(key, missing_file_message(value, path))
    xacro_args = robot.xacro_args
    if xacro_args is not None and not isinstance(xacro_args, dict):
        raise error('xacro_args', 'must be a map of xacro argument names to values')
    check_xacro_args(key, value, file, xacro_args, path)
    if robot.base != 'fixed' and key != 'sdf':
        raise error(
            'base',
            f'free is read for robot.sdf (a root link without a joint to the world); '
            f'robot.{key} roots are fixed to the world',
        )
    closures, text, extras = {}, None, DescriptionExtras()
    try:
        if key == 'urdf':  # checked before Pinocchio's parser sees it (a cycle crashes it)
            written = urdf_text(file, thaw(xacro_args), path)
            check_urdf_text(written, file)
            extras = urdf_extras(written, str(file))  # <mimic> rows and <dynamics> (description_extras)
            closures = dict(extras.constraints)
            text = written if is_xacro(file) else None
        if key == 'urdf' and is_xacro(file):
            model = RobotModel.from_urdf_string(text, joints, gravity, mass_scale)
        elif key == 'urdf':
            model = RobotModel.from_urdf(file, joints, gravity, mass_scale)
        elif key == 'mjcf':
            pin_model, closures, extras = read_mjcf(file)
            model = RobotModel.from_pinocchio_model(pin_model, joints, gravity, mass_scale, source=file)
        else:
            pin_model, closures, extras = load_sdf(file, robot.base)
            model = RobotModel.from_pinocchio_model(pin_model, joints, gravity, mass_scale, source=file)
    except ExtrasError as exc:
        raise error(key, str(exc)) from None
    except DescriptionError as exc:  # the file itself is wrong, whatever it names
        raise error(key, str(exc)) from None
    except ModelError as exc:
        raise error('joints' if joints is not None and 'joint' in str(exc) else key, str(exc)) from None
    model.source = file
    model.source_kind = 'xacro' if text is not None else key
    model.free_base = (
        tuple(name for name in FREE_BASE_JOINT_NAMES if name in model.joint_names)
        if (key == 'sdf' and robot.base == 'free')
        else ()
    )
    model.source_text = text
    if mass_scale == 1.0:  # the description as written; a plant's scaled copy (model mismatch) is not re-judged
        model_validity.check_loaded(model, robot, key, path)  # masses, inertias, a movable joint
    return model, closures, extras


def _joint_dynamics(robot: RobotSettings, model, extras, path=None):
    """The description's passive joint dynamics on `model` (``robot.joint_dynamics``: description | none)."""
    if robot.joint_dynamics == 'none' or not extras.joint_dynamics:
        model.set_joint_dynamics(None)
        return
    try:
        model.set_joint_dynamics(
            JointDynamics.from_joints(extras.joint_dynamics, model.joint_names, robot.friction_velocity)
        )
    except ValueError as exc:  # e.g. a negative damping: the description's value, named with its file
        raise ConfigError(
            f'{model.source}: {exc}; fix the joint\'s dynamics in the '
            'description, or set robot.joint_dynamics: none to leave them out',
            file=path,
            key=f'robot.{description_key(robot)}',
        ) from None


def _state(values, n, file, key):
    """``robot.initial_position`` / ``initial_velocity`` as an (n,) array (zeros when not given)."""
    if values is None:
        return np.zeros(n)
    if len(values) != n:
        raise ConfigError(f'must have {n} entries, got {len(values)}', file=file, key=key)
    return np.array(values, dtype=float)


def _constraint_items(
    s: Settings, closures: dict, path: Path | None
) -> tuple[list[str], FrozenDict[str, ConstraintItem | ConstraintRefinementSettings]]:
    """``(names, items)``: the constraints to build, in evaluation order, and their typed items: the setup
    file's (resolve()'s ``constraints``) with the closures and couplings the description declares
    (`closures`, maps) made the same typed items, merged by name (description.merge_closures: a file item
    of a closure's name refines it with the keys it writes)."""
    names = list(s.constraints.names or ())
    items = s.constraints.items
    if not closures:
        return names, items
    written = {'names': names, **{name: item.written() for name, item in items.items()}}
    merged = merge_closures(written, closures, path)
    out = {
        name: items[name] if name in items and name not in closures else constraint_item(name, spec, path)
        for name, spec in merged.items()
        if name != 'names'
    }
    return list(merged['names']), FrozenDict(out)


def setup_from_settings(s: Settings, *, mass_scale: float = 1.0) -> RobotSetup:
    """Build a :class:`RobotSetup` from resolved :class:`~uk_controller.settings.resolve.Settings`."""
    path = s.file
    rob = s.robot
    if rob.joints is not None and len(set(rob.joints)) != len(rob.joints):
        raise ConfigError(f'entries must be unique, got {list(rob.joints)!r}', file=path, key='robot.joints')
    joints = list(rob.joints) if rob.joints is not None else None
    gravity = np.asarray(rob.gravity, dtype=float) if rob.gravity is not None else None
    model, closures, extras = load_description(rob, path, joints, gravity, mass_scale)
    _joint_dynamics(rob, model, extras, path)
    urdf_path = model.source
    names, constraints = _constraint_items(s, closures, path)
    model.name = rob.name
    n = model.n
    q0 = _state(rob.initial_position, n, path, 'robot.initial_position')
    qd0 = _state(rob.initial_velocity, n, path, 'robot.initial_velocity')
    actuators = _actuators(s.actuators, model, extras, path)
    base_dir = Path(path).parent if path else None
    passive, servo = build_stacks(names, constraints, model, base_dir, file=path)
    for stack in (passive, servo):  # `hold` rows without a value: where they start
        hold_where_they_start(stack, model, q0, qd0)
    stabilization = stabilization_gains(s.stabilization, path)
    return RobotSetup(
        name=rob.name,
        settings=s,
        config_path=Path(path) if path else None,
        model=model,
        joint_names=list(model.joint_names),
        q0=q0,
        qd0=qd0,
        passive=passive,
        servo=servo,
        actuators=actuators,
        stabilization=stabilization,
        urdf_path=urdf_path,
        constraints=constraints,
        extras=extras,
    )


def load_robot(name_or_path, overrides=None, *, mass_scale=1.0, node=None, labels=None):
    """Load a robot setup: ``'scara'`` (shipped config) or a path to a setup file, with dotted
    `overrides` (uk_controller.settings.resolve).

    `mass_scale` scales every link's mass and inertia of the model (for a
    model-mismatch plant). Raises :class:`~uk_controller.files.parameter_file.ConfigError`
    naming the file and dotted key on any bad entry.
    """
    return setup_from_settings(resolve(name_or_path, overrides, node=node, labels=labels), mass_scale=mass_scale)
