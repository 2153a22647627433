"""What a launch file starts, without ROS launch installed.

`launch_nodes(path, **arguments)` imports the launch file against minimal
stand-ins for `launch`, `launch_ros` and `ament_index_python` (only the names
our launch files use), runs its OpaqueFunction with the given arguments
(declared defaults for the rest) and returns the nodes it would start, with
their parameters as launch_ros hands them over: a file path as
`--params-file path`, a dict as a parameter file for every node (`/**`).
Other packages' launch files (IncludeLaunchDescription) are returned as
`{'include': path}`. `start_node` runs one of our nodes that way; `node_settings`
resolves the settings one of them would start from, without ROS.

When the real `launch`/`launch_ros` are importable, test_launch_files.py
also builds each LaunchDescription with them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class PackageNotFoundError(KeyError):
    pass


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class DeclareLaunchArgument(_Recorder):
    pass


class OpaqueFunction(_Recorder):
    pass


class Node(_Recorder):
    pass


class IncludeLaunchDescription(_Recorder):
    pass


class RegisterEventHandler(_Recorder):
    pass


class OnProcessExit(_Recorder):
    pass


class PythonLaunchDescriptionSource(_Recorder):
    pass


class LaunchDescription(list):
    pass


class LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context[self.name]


def get_package_share_directory(package):
    if package == 'uk_controller':
        return str(ROOT)
    raise PackageNotFoundError(f"package '{package}' not found, searching: [] (not installed here)")


@contextmanager
def stand_ins():
    names = {
        'launch': {'LaunchDescription': LaunchDescription},
        'launch.actions': {
            'DeclareLaunchArgument': DeclareLaunchArgument,
            'OpaqueFunction': OpaqueFunction,
            'IncludeLaunchDescription': IncludeLaunchDescription,
            'RegisterEventHandler': RegisterEventHandler,
        },
        'launch.substitutions': {'LaunchConfiguration': LaunchConfiguration},
        'launch.event_handlers': {'OnProcessExit': OnProcessExit},
        'launch.launch_description_sources': {'PythonLaunchDescriptionSource': PythonLaunchDescriptionSource},
        'launch_ros': {},
        'launch_ros.actions': {'Node': Node},
        'ament_index_python': {},
        'ament_index_python.packages': {
            'get_package_share_directory': get_package_share_directory,
            'PackageNotFoundError': PackageNotFoundError,
        },
    }
    saved = {name: sys.modules.get(name) for name in names}
    for name, attrs in names.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _node_dict(node):
    kw = node.kwargs
    return {
        'package': kw.get('package'),
        'executable': kw.get('executable'),
        'name': kw.get('name'),
        'parameters': list(kw.get('parameters') or []),
        'arguments': list(kw.get('arguments') or []),
    }


def _flatten_actions(actions):
    out = []
    for action in actions:
        if isinstance(action, Node):
            out.append(_node_dict(action))
        elif isinstance(action, IncludeLaunchDescription):
            out.append({'include': action.args[0].args[0]})
        elif isinstance(action, RegisterEventHandler):
            handler = action.args[0]
            out += _flatten_actions(handler.kwargs.get('on_exit') or [])
    return out


def launch_nodes(path, **arguments):
    """[node dicts] the launch file at `path` starts with `arguments` (name=value strings)."""
    path = Path(path)
    with stand_ins():
        spec = importlib.util.spec_from_file_location('launch_under_test_' + path.stem.replace('.', '_'), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
        context = {}
        for action in description:
            if isinstance(action, DeclareLaunchArgument):
                choices = action.kwargs.get('choices')
                name = action.args[0]
                value = arguments.get(name, action.kwargs.get('default_value'))
                if choices is not None and value not in choices:
                    raise ValueError(f"argument '{name}': {value!r} not in {choices}")
                context[name] = value
        unknown = set(arguments) - set(context)
        if unknown:
            raise ValueError(f'undeclared launch arguments {unknown}')
        actions = []
        for action in description:
            if isinstance(action, OpaqueFunction):
                actions += action.kwargs['function'](context)
    return _flatten_actions(actions)


EXECUTABLES = {
    'uk_controller_node': 'uk_controller.ros.controller_node',
    'uk_sim_node': 'uk_controller.ros.sim_node',
    'serial_bridge_node': 'uk_controller.ros.serial_bridge_node',
    'uk_wait_for_topics': 'uk_controller.ros.wait_for_topics',
}


def start_node(node, domain_id, directory):
    """One of our launched nodes as a NodeProcess, parameters passed as launch_ros passes them."""
    from ros_nodes import NodeProcess, params_file

    files = [str(p) if isinstance(p, (str, os.PathLike)) else params_file(p, directory) for p in node['parameters']]
    extra = []
    for path in files[1:]:
        extra += ['--params-file', path]
    if node.get('name'):
        extra += ['-r', f"__node:={node['name']}"]
    return NodeProcess(
        EXECUTABLES[node['executable']],
        files[0] if files else None,
        domain_id,
        directory,
        extra_args=extra,
        arguments=node['arguments'],
    )


def node_settings(node):
    """The settings one of our launched nodes starts from, without rclpy: its parameter files and dicts
    in the order given become its parameters (a file's maps flattened to dotted names, as ROS reads a
    parameter file; a later value wins), then uk_controller.ros.node_setup.read_settings reads them: the
    ``config`` file, every other parameter an override."""
    from uk_controller.files.parameter_file import load_config
    from uk_controller.ros import params as P
    from uk_controller.settings.resolve import resolve

    parameters = {}
    for item in node['parameters']:
        if isinstance(item, (str, os.PathLike)):
            tree, _ = load_config(item)
            parameters.update(P.flatten(tree))
        else:
            parameters.update(item)
    overrides = {k: v for k, v in parameters.items() if k not in P.NODE_ONLY and not P.is_builtin(k)}
    return resolve(parameters.get('config') or None, overrides)
