"""The ``ros`` section of a robot setup: topics, output type, effort order and the node-only settings,
with their defaults filled in and checked (plain Python, no rclpy).

The ROS nodes (uk_controller.ros) and the MCAP log of a simulation (uk_controller.sim.mcap_log, which writes
the topics a node would publish) both read it, so it sits below both layers (docs/architecture.md, "Module
map by layer"); uk_controller.ros.params re-exports it. Errors name the dotted key (``ros.effort_joints: ...``).
"""
from __future__ import annotations

import math

from ..files.parameter_file import ConfigError
from . import schema as S

# Node-only settings (section ``ros`` of the robot YAML) and their defaults.
# (the defaults live in the settings schema, uk_controller.settings.schema)
ROS_DEFAULTS = {s.key.split('.', 1)[1]: s.default for s in S.SETTINGS
                if s.key.startswith('ros.') and s.key.count('.') == 1 and s.default is not None}
OUTPUT_TYPES = S.lookup('ros.output_type').choices
TRIGGERS = S.lookup('ros.trigger').choices
# rclpy.experimental.EventsExecutor (Kilted, rclpy 9.1.2) stalled after its first callbacks in our
# node, so only the standard executors are offered.
EXECUTORS = ('single_threaded', 'multi_threaded')
DEFAULT_STATE_TIMEOUT = S.default('control.state_timeout')



def require(cond, key, message):
    """Raise ConfigError ``key: message`` unless `cond`."""
    if not cond:
        raise ConfigError(f'{key}: {message}')


def number(section, key, where, positive=True):
    """``section[key]`` as a float: finite (and > 0 when `positive`), else ConfigError naming `where`."""
    value = section.get(key)
    require(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
            where, f'must be a finite number, got {value!r}')
    if positive:
        require(value > 0, where, f'must be > 0, got {value!r}')
    return float(value)


def ros_settings(params):
    """The ``ros`` section with defaults filled in and checked (names the key on error)."""
    ros = dict(ROS_DEFAULTS)
    ros.update(params.get('ros') or {})
    for key in ('joint_states_topic', 'effort_topic'):
        require(isinstance(ros[key], str) and ros[key].strip() != '', f'ros.{key}', 'must be a topic name')
    require(ros['output_type'] in OUTPUT_TYPES, 'ros.output_type',
            f"{ros['output_type']!r} is not one of {', '.join(OUTPUT_TYPES)}")
    require(ros['trigger'] in TRIGGERS, 'ros.trigger', f"{ros['trigger']!r} is not one of {', '.join(TRIGGERS)}")
    require(ros['executor'] in EXECUTORS, 'ros.executor',
            f"{ros['executor']!r} is not one of {', '.join(EXECUTORS)}")
    require(isinstance(ros['autostart'], bool), 'ros.autostart', f"must be true or false, got {ros['autostart']!r}")
    ros['trajectory_start'] = number(ros, 'trajectory_start', 'ros.trajectory_start', positive=False)
    ros['diagnostics_period'] = number(ros, 'diagnostics_period', 'ros.diagnostics_period')
    control = params.get('control') or {}
    if 'state_timeout' in control:
        ros['state_timeout'] = number(control, 'state_timeout', 'control.state_timeout')
    else:
        ros['state_timeout'] = DEFAULT_STATE_TIMEOUT
    for key in ('clock_skew', 'soft_start'):
        ros[key] = float(S.get(params, f'control.{key}'))
    if 'rate' in control:
        number(control, 'rate', 'control.rate')
    if 'effort_joints' in ros:
        joints = ros['effort_joints']
        require(isinstance(joints, list) and joints and all(isinstance(j, str) for j in joints),
                'ros.effort_joints', f'must be a non-empty list of joint names, got {joints!r}')
        require(len(set(joints)) == len(joints), 'ros.effort_joints', f'has duplicates: {joints}')
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
        require(j in by_name, 'ros.effort_joints',
                f'{j!r} is neither an actuator nor a joint driven by one (actuators: {list(actuator_names)})')
        perm.append(by_name[j])
    require(sorted(perm) == list(range(len(actuator_names))), 'ros.effort_joints',
            f'must list every actuator exactly once: {list(effort_joints)} vs actuators {list(actuator_names)}')
    return perm, list(effort_joints)
