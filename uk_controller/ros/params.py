"""ROS parameters <-> the nested robot-setup dictionary (docs/config.md), without rclpy.

A robot YAML is a ROS 2 parameter file: ROS flattens its nested maps to dotted
names (``control.rate``, ``constraints.tool_path.frame``). The nodes declare
those flat names, and this module turns them back into the nested dictionary
that :class:`uk_controller.controller.ControllerCore` reads, adds the
node-only defaults of the ``ros`` section and checks them, naming the dotted
key of anything wrong.
"""
from __future__ import annotations

import array
import atexit
import math
import os
import tempfile
from pathlib import Path

from .. import settings as S

# Node-only settings (section ``ros`` of the robot YAML) and their defaults.
# (the defaults live in the settings schema, uk_controller.settings)
ROS_DEFAULTS = {s.key.split('.', 1)[1]: s.default for s in S.SETTINGS
                if s.key.startswith('ros.') and s.key.count('.') == 1 and s.default is not None}
OUTPUT_TYPES = S.lookup('ros.output_type').choices
TRIGGERS = S.lookup('ros.trigger').choices
# rclpy.experimental.EventsExecutor (Kilted, rclpy 9.1.2) stalled after its first callbacks in our
# node, so only the standard executors are offered.
EXECUTORS = ('single_threaded', 'multi_threaded')
DEFAULT_STATE_TIMEOUT = S.default('control.state_timeout')

# Parameters a running controller accepts (everything else needs a restart).
LIVE_PREFIXES = ('stabilization.',)
LIVE_KEYS = tuple(k for k in S.live_keys() if not k.startswith(LIVE_PREFIXES))
# Parameters ROS itself manages on every node.
ROS_BUILTIN = ('use_sim_time', 'start_type_description_service')
ROS_BUILTIN_PREFIXES = ('qos_overrides.',)
# Parameters of our nodes that are not part of the robot setup dictionary.
NODE_ONLY = ('config', 'robot_description')


class ParameterError(ValueError):
    """A node parameter is invalid; the message starts with the dotted key."""


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
                raise ParameterError(f"{'.'.join(parts[:depth + 1])}: is a value and also has sub-keys ({name})")
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise ParameterError(f'{name}: is a value and also has sub-keys')
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


def _need(cond, key, message):
    if not cond:
        raise ParameterError(f'{key}: {message}')


def _number(section, key, where, positive=True):
    value = section.get(key)
    _need(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
          where, f'must be a finite number, got {value!r}')
    if positive:
        _need(value > 0, where, f'must be > 0, got {value!r}')
    return float(value)


def ros_settings(params):
    """The ``ros`` section with defaults filled in and checked (names the key on error)."""
    ros = dict(ROS_DEFAULTS)
    ros.update(params.get('ros') or {})
    for key in ('joint_states_topic', 'effort_topic'):
        _need(isinstance(ros[key], str) and ros[key].strip() != '', f'ros.{key}', 'must be a topic name')
    _need(ros['output_type'] in OUTPUT_TYPES, 'ros.output_type',
          f"{ros['output_type']!r} is not one of {', '.join(OUTPUT_TYPES)}")
    _need(ros['trigger'] in TRIGGERS, 'ros.trigger', f"{ros['trigger']!r} is not one of {', '.join(TRIGGERS)}")
    _need(ros['executor'] in EXECUTORS, 'ros.executor',
          f"{ros['executor']!r} is not one of {', '.join(EXECUTORS)}")
    _need(isinstance(ros['autostart'], bool), 'ros.autostart', f"must be true or false, got {ros['autostart']!r}")
    ros['trajectory_start'] = _number(ros, 'trajectory_start', 'ros.trajectory_start', positive=False)
    ros['diagnostics_period'] = _number(ros, 'diagnostics_period', 'ros.diagnostics_period')
    control = params.get('control') or {}
    if 'state_timeout' in control:
        ros['state_timeout'] = _number(control, 'state_timeout', 'control.state_timeout')
    else:
        ros['state_timeout'] = DEFAULT_STATE_TIMEOUT
    for key in ('clock_skew', 'soft_start'):
        ros[key] = float(S.get(params, f'control.{key}'))
    if 'rate' in control:
        _number(control, 'rate', 'control.rate')
    if 'effort_joints' in ros:
        joints = ros['effort_joints']
        _need(isinstance(joints, list) and joints and all(isinstance(j, str) for j in joints),
              'ros.effort_joints', f'must be a non-empty list of joint names, got {joints!r}')
        _need(len(set(joints)) == len(joints), 'ros.effort_joints', f'has duplicates: {joints}')
    return ros


def actuator_joint(params, actuator):
    """The tree joint an actuator drives, or None for a torque between two bodies."""
    spec = (params.get('actuators') or {}).get(actuator) or {}
    return spec.get('joint') if isinstance(spec, dict) else None


def effort_order(params, actuator_names, effort_joints=None):
    """Index array ``perm`` with ``effort_msg[i] = u[perm[i]]`` for the effort controller's joint order.

    Each entry of ``ros.effort_joints`` names an actuator or the joint it drives;
    every actuator must appear exactly once (an effort that is never sent would
    leave the robot uncontrolled).
    """
    by_name = {}
    for k, name in enumerate(actuator_names):
        by_name[name] = k
        joint = actuator_joint(params, name)
        if joint is not None:
            by_name.setdefault(joint, k)
    if effort_joints is None:
        return [k for k in range(len(actuator_names))], [
            actuator_joint(params, a) or a for a in actuator_names]
    perm = []
    for j in effort_joints:
        _need(j in by_name, 'ros.effort_joints',
              f'{j!r} is neither an actuator nor a joint driven by one (actuators: {list(actuator_names)})')
        perm.append(by_name[j])
    _need(sorted(perm) == list(range(len(actuator_names))), 'ros.effort_joints',
          f'must list every actuator exactly once: {list(effort_joints)} vs actuators {list(actuator_names)}')
    return perm, list(effort_joints)


def robot_description_file(xml, directory=None):
    """Write a ``robot_description`` string to a file Pinocchio can load; returns the path."""
    text = str(xml).strip()
    _need(text.startswith('<') and '<robot' in text, 'robot_description', 'is not URDF XML')
    fd, path = tempfile.mkstemp(prefix='uk_robot_description_', suffix='.urdf', dir=directory)
    with os.fdopen(fd, 'w') as handle:
        handle.write(text)
    atexit.register(_remove, path)            # no /tmp/uk_robot_description_* left behind
    return Path(path)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
