"""The start-up every node of the package shares: its parameters read once, merged and checked.

A node is constructed with :func:`node_options` (``automatically_declare_parameters_from_overrides``:
every ``--params-file`` / ``-p`` value becomes a parameter of the node), then :func:`read_parameters`
merges the robot YAML named by the ``config`` parameter, those overrides and a non-empty
``robot_description`` (precedence: uk_controller.ros.robot_source), checks the merged dictionary against
the settings schema (errors name the file and the dotted key) and returns it with the node's ``ros``
section (defaults filled in and checked, uk_controller.settings.ros_section). The nodes import this module, not
each other.
"""
from __future__ import annotations

from rclpy.parameter import Parameter

from ..settings import schema as S
from . import params as P
from .robot_source import file_parameters


def node_options(kwargs):
    """The keyword arguments of ``rclpy.node.Node`` for one of our nodes: `kwargs`, every parameter
    given on the command line or in a parameter file declared unless the caller says otherwise."""
    return {'automatically_declare_parameters_from_overrides': True, **kwargs}


def node_parameters(node):
    """Read `config`, `robot_description` and every override into (params, config_path).

    Declares the file's parameters that were not overridden, so that the whole
    setup is visible (``ros2 param dump``) and the live ones can be set.
    """
    for name in P.NODE_ONLY:
        if not node.has_parameter(name):
            node.declare_parameter(name, '')
    config = node.get_parameter('config').value or ''
    file_params, path = file_parameters(config)
    flat = {name: P.plain(p.value) for name, p in node.get_parameters_by_prefix('').items()
            if not P.is_builtin(name) and name not in P.NODE_ONLY and p.type_ != Parameter.Type.NOT_SET}
    overrides = P.unflatten(flat)
    S.check(P.merge(file_params, overrides), 'ROS parameters' + (f' over {path}' if path else ''))
    params = P.merge(file_params, overrides)
    description = node.get_parameter('robot_description').value or ''
    robot = params.get('robot') or {}
    if description.strip() and not (robot.get('mjcf') or robot.get('sdf')):   # MJCF/SDF hold the closures: kept
        params = P.merge(params, {'robot': {'urdf': str(P.robot_description_file(description))}})
        params['robot'] = {k: v for k, v in params['robot'].items() if k != 'xacro_args'}   # already expanded
    for name, value in P.flatten(file_params).items():
        value = P.declarable(value)
        if value is not None and not node.has_parameter(name):
            node.declare_parameter(name, value)
    return params, path


def read_parameters(node):
    """(params, config_path, ros): the merged, checked setup dictionary (:func:`node_parameters`), the
    robot YAML it started from (None without ``config``) and its ``ros`` section with defaults."""
    params, path = node_parameters(node)
    return params, path, P.ros_settings(params)
