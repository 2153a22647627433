"""The ``ros`` section of resolved settings as the nodes use it: topics, output type, effort order and the
node-only settings (plain Python, no rclpy).

The ROS nodes (uk_controller.ros) and the MCAP log of a simulation (uk_controller.sim.mcap_log, which writes
the topics a node would publish) both read it, so it sits below both layers (docs/architecture.md, "Module
map by layer"). Values, defaults and checks come from :func:`uk_controller.settings.resolve.resolve`
(the schema and its cross-key rules); this module only arranges them.
"""

from __future__ import annotations

from ..files.parameter_file import ConfigError

#: The message types of the effort command (``ros.output_type``), name -> ROS message type: the one table.
#: The schema's choices (hence docs/config.md), the controller node's publisher, the sim node's subscriber
#: (uk_controller.ros.params.message_class) and the MCAP log's channel schema read it.
OUTPUT_TYPES = {
    'float64_multi_array': 'std_msgs/msg/Float64MultiArray',
    'joint_trajectory': 'trajectory_msgs/msg/JointTrajectory',
    'joint_state': 'sensor_msgs/msg/JointState',
}
#: What steps the node's loop (``ros.trigger``): the schema's choices (hence docs/config.md) read this table,
#: so this module needs no schema import.
TRIGGERS = ('timer', 'state')
# rclpy.experimental.EventsExecutor (Kilted, rclpy 9.1.2) stalled after its first callbacks in our
# node, so only the standard executors are offered.
#: The rclpy executors a node may use (``ros.executor``), read by the schema's choices as TRIGGERS is.
EXECUTORS = ('single_threaded', 'multi_threaded')
#: the ``control`` settings the controller node reads beside its ``ros`` section (declared as its
#: parameters even when the file leaves them out, so ``ros2 param set`` can change them)
NODE_CONTROL_KEYS = ('state_timeout', 'clock_skew', 'soft_start')


def require(cond, key, message):
    """Raise ConfigError ``key: message`` unless `cond`."""
    if not cond:
        raise ConfigError(message, key=key)


def actuator_joint(settings, actuator):
    """The tree joint an actuator drives, or None for a torque between two bodies."""
    item = settings.actuators.items.get(actuator)
    return None if item is None else item.joint


def effort_order(settings, actuator_names, effort_joints=None):
    """Index array ``perm`` with ``effort_msg[i] = u[perm[i]]`` for the effort controller's joint order.

    Each entry of ``ros.effort_joints`` names an actuator or the joint it drives;
    every actuator must appear exactly once (an effort that is never sent would
    leave the robot uncontrolled).
    """
    by_name = {}
    for k, name in enumerate(actuator_names):
        by_name[name] = k
        joint = actuator_joint(settings, name)
        if joint is not None:
            by_name.setdefault(joint, k)
    if effort_joints is None:
        return [k for k in range(len(actuator_names))], [actuator_joint(settings, a) or a for a in actuator_names]
    perm = []
    for j in effort_joints:
        require(
            j in by_name,
            'ros.effort_joints',
            f'{j!r} is neither an actuator nor a joint driven by one (actuators: {list(actuator_names)})',
        )
        perm.append(by_name[j])
    require(
        sorted(perm) == list(range(len(actuator_names))),
        'ros.effort_joints',
        f'must list every actuator exactly once: {list(effort_joints)} vs actuators {list(actuator_names)}',
    )
    return perm, list(effort_joints)
