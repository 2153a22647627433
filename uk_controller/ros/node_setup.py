"""The start-up every node of the package shares: its settings resolved once from the file and its parameters.

A node is constructed with :func:`node_options` (``automatically_declare_parameters_from_overrides``:
every ``--params-file`` / ``-p`` value becomes a parameter of the node), then :func:`read_settings`
reads the robot YAML named by the ``config`` parameter, takes every other parameter of the node as a
dotted-key override (and a non-empty ``robot_description`` as ``robot.urdf``; precedence:
uk_controller.ros.robot_source) and resolves them once (uk_controller.settings.resolve: the schema, its
cross-key rules and the defaults; errors name the file and the dotted key). A live parameter
(``ros2 param set``) is one more override: :func:`resolve_live`. The nodes import this module, not
each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rclpy.parameter import Parameter

from ..files.description import CLOSURE_KEYS
from ..settings.resolve import Settings, resolve
from . import params as P
from .robot_source import file_parameters


def node_options(kwargs):
    """The keyword arguments of ``rclpy.node.Node`` for one of our nodes: `kwargs`, every parameter
    given on the command line or in a parameter file declared unless the caller says otherwise."""
    return {'automatically_declare_parameters_from_overrides': True, **kwargs}


@dataclass
class NodeSettings:
    """What a node starts from: the resolved settings and how to resolve them again (live parameters)."""

    settings: Settings
    config_path: Path | None
    file_params: dict = field(repr=False)
    overrides: dict = field(repr=False)

    @property
    def source(self):
        return 'ROS parameters' + (f' over {self.config_path}' if self.config_path else '')


def read_settings(node):
    """Resolve the node's settings once: the ``config`` file, then every parameter of the node as an
    override, then ``robot_description`` (module docstring).

    Declares the file's parameters that were not overridden, so that the whole
    setup is visible (``ros2 param dump``) and the live ones can be set.
    """
    for name in P.NODE_ONLY:
        if not node.has_parameter(name):
            node.declare_parameter(name, '')
    config = node.get_parameter('config').value or ''
    file_params, path = file_parameters(config)
    overrides = {
        name: P.plain(p.value)
        for name, p in sorted(node.get_parameters_by_prefix('').items())
        if not P.is_builtin(name) and name not in P.NODE_ONLY and p.type_ != Parameter.Type.NOT_SET
    }
    description = node.get_parameter('robot_description').value or ''
    if description.strip():
        robot = P.merge(
            file_params.get('robot'),
            P.unflatten({k.split('.', 1)[1]: v for k, v in overrides.items() if k.startswith('robot.')}),
        )
        if not any(robot.get(key) for key in CLOSURE_KEYS):  # an MJCF/SDF holds the closures: kept
            overrides['robot.urdf'] = str(P.robot_description_file(description))
            overrides['robot.xacro_args'] = None  # already expanded
    state = NodeSettings(None, path, file_params, overrides)
    state.settings = resolve(path, overrides, params=file_params, source=state.source)
    for name, value in P.flatten(file_params).items():
        value = P.declarable(value)
        if value is not None and not node.has_parameter(name):
            node.declare_parameter(name, value)
    return state


def resolve_live(state, updates):
    """The settings with the live `updates` ({dotted key: value}) as the last overrides (checked once,
    cross-key rules included); `state` is left unchanged (the caller keeps the result if it accepts it)."""
    return resolve(state.config_path, {**state.overrides, **updates}, params=state.file_params, source=state.source)
