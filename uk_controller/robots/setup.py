"""Build a :class:`RobotSetup` from a setup file (docs/config.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.baumgarte import Baumgarte
from ..files.parameter_file import ConfigView, load_config
from ..constraints import ConstraintStack, build_stacks
from ..model.robot_model import ModelError, RobotModel
from ..files.description import (
    DescriptionError, description_key, is_xacro, load_sdf, merge_closures, read_mjcf, urdf_text)
from ..files.description_extras import DescriptionExtras, ExtrasError, tendon_column, urdf_extras
from ..model.joint_dynamics import JointDynamics
from ..files.paths import missing_file_message, resolve_config, resolve_data_file
from ..model import validity as model_validity
from ..settings import schema as settings
from .actuators import Actuator, ActuatorMap

#: Natural frequency [rad/s] of the critically damped Baumgarte default when a
#: setup has no ``stabilization`` section (the schema's default, uk_controller.settings.schema).
DEFAULT_OMEGA = settings.default('stabilization.omega')


@dataclass
class RobotSetup:
    """Everything the controller needs about one robot: its model, rows, actuators and gains.

    ``joint_names`` is the order of q (``robot.joints``, default URDF order);
    ``actuators.names`` the order of u.
    """

    name: str
    config: dict = field(repr=False)
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
    view: ConfigView = field(default=None, repr=False)
    extras: DescriptionExtras = field(default_factory=DescriptionExtras, repr=False)

    def controller_model(self):
        """The model the controller uses: :attr:`model`, or a copy without Coulomb friction when
        ``control.friction_compensation`` is false (the plant keeps its friction; uk_controller.model.joint_dynamics)."""
        jd = self.model.joint_dynamics
        compensate = (self.config.get('control') or {}).get('friction_compensation',
                                                            settings.default('control.friction_compensation'))
        if jd is None or not jd.has_friction or compensate:
            return self.model
        return self.model.with_joint_dynamics(jd.without_friction())

    @property
    def n(self):
        return self.model.n

    def section(self, name):
        """A config section as a ConfigView (empty if absent), e.g. ``setup.section('control')``."""
        return self.view.section(name, required=False)

    def evaluate(self, q, qd, t):
        """One model pass and all rows: ``(passive_rows, servo_rows, B)`` at (q, q', t).

        The returned objects are internal buffers reused by the next call.
        """
        self.model.compute(q, qd)
        return (self.passive.evaluate(self.model, q, qd, t), self.servo.evaluate(self.model, q, qd, t),
                self.actuators.matrix(self.model))


def _actuators(cv, model, extras=None):
    if not cv.data:
        # no actuators section: every joint carries a motor (URDF effort limits)
        limits = model.effort_limits
        return ActuatorMap([Actuator(j, joint=i, effort_limit=limits[i]) for i, j in enumerate(model.joint_names)],
                           model.n)
    urdf_limits = model.effort_limits
    items = cv.named_items()
    if not items:
        raise cv.error('names', 'list the actuators (order of the effort vector u)')
    listed = set(cv.get_strs('names'))
    extra = [k for k in cv.keys() if k != 'names' and k not in listed]
    if extra:
        raise cv.error(extra[0], f'actuator {extra[0]!r} is not listed in {cv.key("names")}')
    acts = []
    for name, a in items:
        if sum(k in a for k in ('joint', 'between', 'tendon')) != 1:
            raise a.error(None, "give exactly one of 'joint', 'between' or 'tendon'")
        limit = a.get_float('effort_limit', None, positive=True)
        if 'tendon' in a:
            tendon = a.get_str('tendon')
            known = sorted((extras.tendons if extras is not None else {}))
            if tendon not in known:
                raise a.error('tendon', f'unknown tendon {tendon!r}; fixed tendons of the description: '
                              f'{", ".join(known) or "none"}')
            try:
                column = tendon_column(extras, tendon, model.joint_names)
            except ExtrasError as exc:
                raise a.error('tendon', str(exc)) from None
            acts.append(Actuator(name, column=column, effort_limit=np.inf if limit is None else limit))
        elif 'joint' in a:
            joint = a.get_str('joint')
            if joint not in model.joint_names:
                raise a.error('joint', f'unknown joint {joint!r}; joints: {model.joint_names}')
            index = model.joint_index(joint)
            acts.append(Actuator(name, joint=index, effort_limit=urdf_limits[index] if limit is None else limit))
        else:
            bodies = a.get_strs('between', length=2)
            resolved = []
            for body in bodies:
                if body == 'world' and not model.has_frame('world'):
                    resolved.append(None)
                elif not model.has_frame(body):
                    raise a.error('between', f'unknown body {body!r}; bodies: {", ".join(model.body_names())}')
                else:
                    resolved.append(body)
            if resolved[0] == resolved[1]:
                raise a.error('between', 'the two bodies must differ')
            axis = a.get_floats('axis', length=3)
            norm = np.linalg.norm(axis)
            if norm == 0.0:
                raise a.error('axis', 'must be non-zero')
            acts.append(Actuator(name, bodies=tuple(resolved), axis=axis / norm,
                                 effort_limit=np.inf if limit is None else limit))
    return ActuatorMap(acts, model.n)


def _stabilization(cv):
    if not cv.data:
        return Baumgarte.critical(DEFAULT_OMEGA)
    convention = cv.get_str('convention', 'critical', choices=('critical', 'seed000', 'squared', 'none'))
    needs = {'critical': ('omega',), 'seed000': ('alpha', 'beta'), 'squared': ('alpha', 'beta'), 'none': ()}
    values = {}
    for key in needs[convention]:
        values[key] = cv.get_floats(key)
        settings.check_value(settings.lookup(f'stabilization.{key}'), values[key].tolist(), file=cv.file,
                             key=cv.key(key))
        if values[key].size == 1:
            values[key] = float(values[key][0])
    try:
        return Baumgarte.from_config({'convention': convention, **values}, where=cv.prefix)
    except (KeyError, ValueError) as exc:
        raise cv.error('convention', str(exc).strip("'")) from None


def load_description(robot, path, joints=None, gravity=None, mass_scale=1.0):
    """``(RobotModel, closures)`` from ``robot.urdf`` (URDF or .xacro with ``robot.xacro_args``),
    ``robot.mjcf`` or ``robot.sdf`` (:mod:`uk_controller.files.description`); `robot` is the ConfigView of the
    ``robot`` section. ``model.source`` is the file, ``model.source_kind`` one of urdf, xacro, mjcf, sdf."""
    key = description_key(robot.data, path)
    value = robot.get_str(key)
    file = resolve_data_file(value, path)
    if file is None:
        raise robot.error(key, missing_file_message(value, path))
    xacro_args = robot.raw('xacro_args', None)
    if xacro_args is not None and not isinstance(xacro_args, dict):
        raise robot.error('xacro_args', 'must be a map of xacro argument names to values')
    if xacro_args and (key != 'urdf' or not is_xacro(file)):
        raise robot.error('xacro_args', f'given, but robot.{key} ({value}) is not a .xacro file')
    closures, text, extras = {}, None, DescriptionExtras()
    try:
        if key == 'urdf' and is_xacro(file):
            text = urdf_text(file, xacro_args, path)
            model = RobotModel.from_urdf_string(text, joints, gravity, mass_scale)
        elif key == 'urdf':
            model = RobotModel.from_urdf(file, joints, gravity, mass_scale)
        elif key == 'mjcf':
            pin_model, closures, extras = read_mjcf(file)
            model = RobotModel.from_pinocchio_model(pin_model, joints, gravity, mass_scale, source=file)
        else:
            pin_model, closures = load_sdf(file)
            model = RobotModel.from_pinocchio_model(pin_model, joints, gravity, mass_scale, source=file)
        if key == 'urdf':          # <mimic> rows and <dynamics> (description_extras)
            extras = urdf_extras(text if text is not None else Path(file).read_text(encoding='utf-8'), str(file))
            closures = dict(extras.constraints)
    except ExtrasError as exc:
        raise robot.error(key, str(exc)) from None
    except (ModelError, DescriptionError) as exc:
        raise robot.error('joints' if joints is not None and 'joint' in str(exc) else key, str(exc)) from None
    model.source = file
    model.source_kind = 'xacro' if text is not None else key
    model.source_text = text
    if mass_scale == 1.0:   # the description as written; a plant's scaled copy (model mismatch) is not re-judged
        model_validity.check_loaded(model, robot, key)     # masses, inertias, a movable joint (issue 25)
    return model, closures, extras


def _joint_dynamics(robot, model, extras):
    """The description's passive joint dynamics on `model` (``robot.joint_dynamics``: description | none)."""
    use = robot.get_str('joint_dynamics', settings.default('robot.joint_dynamics'), choices=('description', 'none'))
    velocity = robot.get_float('friction_velocity', settings.default('robot.friction_velocity'), positive=True)
    if use == 'none' or not extras.joint_dynamics:
        model.set_joint_dynamics(None)
        return
    try:
        model.set_joint_dynamics(JointDynamics.from_joints(extras.joint_dynamics, model.joint_names, velocity))
    except ValueError as exc:
        raise robot.error(description_key(robot.data), str(exc)) from None


def setup_from_params(params, path=None, *, mass_scale=1.0):
    """Build a :class:`RobotSetup` from an already loaded parameter dict."""
    settings.check(params, path)          # unknown keys, types, ranges, cross-key rules (one schema)
    cv = ConfigView(params, path)
    robot = cv.section('robot')
    name = robot.get_str('name', Path(path).stem if path else 'robot')
    joints = robot.get_strs('joints', None, unique=True)
    gravity = robot.get_floats('gravity', None, length=3)
    model, closures, extras = load_description(robot, path, joints, gravity, mass_scale)
    _joint_dynamics(robot, model, extras)
    urdf_path = model.source
    if closures:
        # closures and couplings read from the description join the YAML's constraints (description.merge_closures)
        params = dict(params)
        params['constraints'] = merge_closures(params.get('constraints'), closures, path)
        cv = ConfigView(params, path)
    model.name = name
    n = model.n
    q0 = robot.get_floats('initial_position', np.zeros(n), length=n)
    qd0 = robot.get_floats('initial_velocity', np.zeros(n), length=n)
    actuators = _actuators(cv.section('actuators', required=False), model, extras)
    base_dir = Path(path).parent if path else None
    passive, servo = build_stacks(cv.section('constraints', required=False), model, base_dir)
    stabilization = _stabilization(cv.section('stabilization', required=False))
    return RobotSetup(name=name, config=params, config_path=Path(path) if path else None, model=model,
                      joint_names=list(model.joint_names), q0=np.array(q0, dtype=float),
                      qd0=np.array(qd0, dtype=float), passive=passive, servo=servo, actuators=actuators,
                      stabilization=stabilization, urdf_path=urdf_path, view=cv, extras=extras)


def load_robot(name_or_path, *, mass_scale=1.0, node=None):
    """Load a robot setup: ``'scara'`` (shipped config) or a path to a setup file.

    `mass_scale` scales every link's mass and inertia of the model (for a
    model-mismatch plant). Raises :class:`~uk_controller.files.parameter_file.ConfigError`
    naming the file and dotted key on any bad entry.
    """
    params, path = load_config(resolve_config(name_or_path), node=node)
    return setup_from_params(params, path, mass_scale=mass_scale)
