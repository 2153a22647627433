"""A simulation run as an MCAP file of ROS 2 messages (Foxglove, PlotJuggler, ``ros2 bag play``).

The topics and types are those of the nodes (docs/ros.md), so a recorded
simulation and a recorded robot open with the same layouts:

=========================================  =============================  ======================================
topic                                      type                           per control instant t_k
=========================================  =============================  ======================================
``/joint_states`` (``ros.joint_states_topic``)  sensor_msgs/JointState    name, position q, velocity q'
``ros.effort_topic`` (``/effort_controller/commands``)  ``ros.output_type``  efforts in ``ros.effort_joints`` order
``/uk_controller_node/task_error``         std_msgs/Float64MultiArray     servo rows' phi (computed steps only)
``/uk_controller_node/constraint_residual``  std_msgs/Float64MultiArray   [phi..., phidot...] (computed steps only)
``/uk_controller_node/efforts``            std_msgs/Float64MultiArray     efforts in actuator order
``/uk_controller_node/loop_timing``        std_msgs/Float64MultiArray     every ``ros.loop.window`` s
=========================================  =============================  ======================================

``loop_timing`` data: ``[achieved_rate_hz, period_jitter_p50_us, period_jitter_p99_us,
period_jitter_max_us, compute_p50_us, compute_p99_us, state_age_p50_us, missed_deadlines]``;
the node's fields and order (``uk_controller.ros.loop_timing.TIMING_FIELDS``, docs/ros.md "Loop
timing"); in a simulation the rate is the nominal one, the jitter zero, the compute times those
measured for the control steps of the window, the state age the measurement delay and
``missed_deadlines`` the steps of the window that took longer than a period.

Stamps (header and MCAP log/publish time) are simulated time: ``start + t_k`` with
``start`` = 1 s by default (a zero stamp reads as "unstamped", as for ``uk_sim_node``'s
``clock_start``). Messages are serialized as ROS 2 CDR by ``mcap-ros2-support`` from
the message definitions below; ROS itself (rclpy) is not needed.
"""
from __future__ import annotations

import numpy as np

_SEP = '=' * 80 + '\n'
_TIME = 'int32 sec\nuint32 nanosec\n'
_HEADER = 'builtin_interfaces/Time stamp\nstring frame_id\n'
_LAYOUT = 'MultiArrayDimension[] dim\nuint32 data_offset\n'
_DIM = 'string label\nuint32 size\nuint32 stride\n'

#: ROS 2 message definitions (dependencies appended in the concatenated form rosbag2 writes).
MSGDEFS = {
    'sensor_msgs/msg/JointState': (
        'std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n'
        + _SEP + 'MSG: std_msgs/Header\n' + _HEADER + _SEP + 'MSG: builtin_interfaces/Time\n' + _TIME),
    'std_msgs/msg/Float64MultiArray': (
        'MultiArrayLayout layout\nfloat64[] data\n' + _SEP + 'MSG: std_msgs/MultiArrayLayout\n' + _LAYOUT
        + _SEP + 'MSG: std_msgs/MultiArrayDimension\n' + _DIM),
    'trajectory_msgs/msg/JointTrajectory': (
        'std_msgs/Header header\nstring[] joint_names\nJointTrajectoryPoint[] points\n'
        + _SEP + 'MSG: std_msgs/Header\n' + _HEADER + _SEP + 'MSG: builtin_interfaces/Time\n' + _TIME
        + _SEP + 'MSG: trajectory_msgs/JointTrajectoryPoint\nfloat64[] positions\nfloat64[] velocities\n'
        'float64[] accelerations\nfloat64[] effort\nbuiltin_interfaces/Duration time_from_start\n'
        + _SEP + 'MSG: builtin_interfaces/Duration\n' + _TIME),
}
OUTPUT_TYPES = {'float64_multi_array': 'std_msgs/msg/Float64MultiArray', 'joint_state': 'sensor_msgs/msg/JointState',
                'joint_trajectory': 'trajectory_msgs/msg/JointTrajectory'}


def _writer_class():
    try:
        from mcap_ros2.writer import Writer
    except ImportError:
        raise RuntimeError("MCAP recording needs the mcap and mcap-ros2-support packages: "
                           "pip install 'uk-controller[sweep]'") from None
    return Writer


def _array(values, label):
    values = [float(v) for v in values]
    return {'layout': {'dim': [{'label': label, 'size': len(values), 'stride': len(values)}], 'data_offset': 0},
            'data': values}


def _stamp(ns):
    return {'sec': int(ns // 1_000_000_000), 'nanosec': int(ns % 1_000_000_000)}


def write_mcap(result, setup, path, *, node_name='uk_controller_node', start=1.0):
    """Write `result` (a :class:`~uk_controller.sim.closed_loop.SimulationResult`) to `path`.

    Returns the number of messages per topic.
    """
    from ..ros import params as P          # plain Python (no rclpy): topic names and effort order
    from ..ros.loop_timing import TIMING_FIELDS, loop_settings
    writer_cls = _writer_class()
    ros = P.ros_settings(setup.config)
    perm, effort_names = P.effort_order(setup.config, result.actuator_names, ros.get('effort_joints'))
    perm = np.asarray(perm, dtype=int)
    node = '/' + node_name.strip('/')
    topics = {'joint_states': ros['joint_states_topic'], 'command': ros['effort_topic'],
              'task_error': f'{node}/task_error', 'residual': f'{node}/constraint_residual',
              'efforts': f'{node}/efforts', 'timing': f'{node}/loop_timing'}
    mp, ms = setup.passive.m, setup.servo.m
    task_label = f'task_error[{ms}]: servo rows ' + ','.join(setup.servo.names)
    residual_label = (f'phi[{mp + ms}] then phidot[{mp + ms}]: passive ' + ','.join(setup.passive.names)
                      + '; servo ' + ','.join(setup.servo.names))
    efforts_label = 'efforts: ' + ','.join(result.actuator_names)
    timing_label = ','.join(TIMING_FIELDS)                   # as the node labels it
    kind = ros['output_type']
    counts = dict.fromkeys(topics.values(), 0)
    period = 1.0 / result.rate
    window = float(loop_settings(setup.config)[0]['window'])
    delay = int(result.settings.get('measurement_delay', 0) or 0)
    stamps = np.round((start + result.t) * 1e9).astype(np.int64)
    with open(path, 'wb') as fh:
        writer = writer_cls(fh)
        schemas = {name: writer.register_msgdef(name, text) for name, text in MSGDEFS.items()}
        f64 = schemas['std_msgs/msg/Float64MultiArray']

        def put(key, schema, msg, ns):
            topic = topics[key]
            writer.write_message(topic, schema, msg, log_time=int(ns), publish_time=int(ns), sequence=counts[topic])
            counts[topic] += 1

        window_start = 0
        for k in range(result.t.size):
            ns = stamps[k]
            header = {'stamp': _stamp(ns), 'frame_id': ''}
            put('joint_states', schemas['sensor_msgs/msg/JointState'],
                {'header': header, 'name': list(result.joint_names), 'position': result.q[k].tolist(),
                 'velocity': result.qd[k].tolist(), 'effort': []}, ns)
            command = result.effort[k][perm].tolist()
            if kind == 'float64_multi_array':
                msg = {'layout': {'dim': [], 'data_offset': 0}, 'data': command}
            elif kind == 'joint_state':
                msg = {'header': header, 'name': list(effort_names), 'position': [], 'velocity': [],
                       'effort': command}
            else:
                msg = {'header': header, 'joint_names': list(effort_names),
                       'points': [{'positions': [], 'velocities': [], 'accelerations': [], 'effort': command,
                                   'time_from_start': {'sec': 0, 'nanosec': 0}}]}
            put('command', schemas[OUTPUT_TYPES[kind]], msg, ns)
            put('efforts', f64, _array(result.effort[k], efforts_label), ns)
            if result.ok[k]:
                put('task_error', f64, _array(result.task_error[k], task_label), ns)
                put('residual', f64, _array(np.concatenate((result.phi[k], result.phidot[k])), residual_label), ns)
            if result.t[k] - result.t[window_start] + period >= window - 1e-9 or k == result.t.size - 1:
                ct = result.compute_time[window_start:k + 1] * 1e6
                missed = int(np.count_nonzero(ct > period * 1e6))
                put('timing', f64, _array([result.rate, 0.0, 0.0, 0.0, np.percentile(ct, 50), np.percentile(ct, 99),
                                           delay * period * 1e6, missed], timing_label), ns)
                window_start = k + 1
        writer.finish()
    return counts
