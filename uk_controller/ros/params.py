"""ROS parameters <-> the nested robot-setup dictionary (docs/config.md), without rclpy.

A robot YAML is a ROS 2 parameter file: ROS flattens its nested maps to dotted
names (``control.rate``, ``constraints.tool_path.frame``). The nodes declare
those flat names, and this module turns them back into the nested dictionary
that :class:`uk_controller.control.controller.ControllerCore` reads, adds the
node-only defaults of the ``ros`` section and checks them, naming the dotted
key of anything wrong.
"""

from __future__ import annotations

import array
import atexit
import importlib
import os
import tempfile
from pathlib import Path

from ..files.parameter_file import ConfigError
from ..settings import schema as S

# The ``ros`` section itself (defaults, checks, effort order) is plain Python shared with sim/mcap_log:
# it lives in uk_controller.settings.ros_section, below both layers, and is re-exported here.
from ..settings.ros_section import (  # noqa: F401 - re-exported
    EXECUTORS,
    NODE_CONTROL_KEYS,
    OUTPUT_TYPES,
    TRIGGERS,  # noqa: F401
    actuator_joint,
    effort_order,
    require,
)  # noqa: F401

# Parameters a running controller accepts (everything else needs a restart).
LIVE_PREFIXES = ('stabilization.',)
LIVE_KEYS = tuple(k for k in S.live_keys() if not k.startswith(LIVE_PREFIXES))
# Parameters ROS itself manages on every node.
ROS_BUILTIN = ('use_sim_time', 'start_type_description_service')
ROS_BUILTIN_PREFIXES = ('qos_overrides.',)
# Parameters of our nodes that are not part of the robot setup dictionary.
NODE_ONLY = ('config', 'robot_description')


def message_class(output_type):
    """The rclpy message class of ``ros.output_type`` `output_type`, from the one table
    (:data:`uk_controller.settings.ros_section.OUTPUT_TYPES`, ``'std_msgs/msg/Float64MultiArray'`` ->
    ``std_msgs.msg.Float64MultiArray``)."""
    package, folder, name = OUTPUT_TYPES[output_type].split('/')
    return getattr(importlib.import_module(f'{package}.{folder}'), name)


def is_builtin(name):
    return name in ROS_BUILTIN or name.startswith(ROS_BUILTIN_PREFIXES)


def is_live(name):
    """True when `name` may change while the controller runs (gains, trajectory start)."""
    return S.is_live(name)


def flatten(tree, prefix=''):
    """Nested dict -> {dotted name: value} (what ROS makes of a parameter file)."""
    flat = {}
    for key, value in (tree or {}).items():
        name = f'{prefix}{key}'
        if isinstance(value, dict):
            flat.update(flatten(value, name + '.'))
        else:
            flat[name] = value
    return flat


def plain(value):
    """A ROS parameter value as plain Python (arrays -> lists)."""
    if isinstance(value, (array.array, tuple)):
        return list(value)
    if hasattr(value, 'tolist'):
        return value.tolist()
    return value


def unflatten(flat):
    """{dotted name: value} -> nested dict. Later keys never silently replace a map by a scalar."""
    tree = {}
    for name in sorted(flat):
        parts = name.split('.')
        node = tree
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{'.'.join(parts[: depth + 1])}: is a value and also has sub-keys ({name})")
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise ConfigError(f'{name}: is a value and also has sub-keys')
        node[parts[-1]] = plain(flat[name])
    return tree


def declarable(value):
    """A value rclpy can declare (uniform scalar lists; ints promoted in float lists), or None."""
    if isinstance(value, (list, tuple)):
        if not value:
            return None
        if all(isinstance(v, bool) for v in value):
            return list(value)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            if any(isinstance(v, float) for v in value):
                return [float(v) for v in value]
            return list(value)
        if all(isinstance(v, str) for v in value):
            return list(value)
        return None
    if value is None:
        return None
    return value


def merge(base, overrides):
    """Deep-merge `overrides` into a copy of `base` (overrides win)."""
    out = dict(base or {})
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def robot_description_file(xml, directory=None):
    """Write a ``robot_description`` string to a file Pinocchio can load; returns the path."""
    text = str(xml).strip()
    require(text.startswith('<') and '<robot' in text, 'robot_description', 'is not URDF XML')
    fd, path = tempfile.mkstemp(prefix='uk_robot_description_', suffix='.urdf', dir=directory)
    with os.fdopen(fd, 'w') as handle:
        handle.write(text)
    atexit.register(_remove, path)  # no /tmp/uk_robot_description_* left behind
    return Path(path)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
