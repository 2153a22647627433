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
        + _SEP
        + 'MSG: std_msgs/Header\n'
        + _HEADER
        + _SEP
        + 'MSG: builtin_interfaces/Time\n'
        + _TIME
    ),
    'std_msgs/msg/Float64MultiArray': (
        'MultiArrayLayout layout\nfloat64[] data\n'
        + _SEP
        + 'MSG: std_msgs/MultiArrayLayout\n'
        + _LAYOUT
        + _SEP
        + 'MSG: std_msgs/MultiArrayDimension\n'
        + _DIM
    ),
    'trajectory_msgs/msg/JointTrajectory': (
        'std_msgs/Header header\nstring[] joint_names\nJointTrajectoryPoint[] points\n'
        + _SEP
        + 'MSG: std_msgs/Header\n'
        + _HEADER
        + _SEP
        + 'MSG: builtin_interfaces/Time\n'
        + _TIME
        + _SEP
        + 'MSG: trajectory_msgs/JointTrajectoryPoint\nfloat64[] positions\nfloat64[] velocities\n'
        'float64[] accelerations\nfloat64[] effort\nbuiltin_interfaces/Duration time_from_start\n'
        + _SEP
        + 'MSG: builtin_interfaces/Duration\n'
        + _TIME
    ),
}


def writer_class():
    """mcap_ros2's Writer; RuntimeError naming the extra that installs it when it is missing."""
    try:
        from mcap_ros2.writer import Writer
    except ImportError:
        raise RuntimeError(
            "MCAP recording needs the mcap and mcap-ros2-support packages: pip install 'uk-controller[sweep]'"
        ) from None
    return Writer


def _array(values, label):
    values = [float(v) for v in values]
    return {
        'layout': {'dim': [{'label': label, 'size': len(values), 'stride': len(values)}], 'data_offset': 0},
        'data': values,
    }


def _stamp(ns):
    return {'sec': int(ns // 1_000_000_000), 'nanosec': int(ns % 1_000_000_000)}


def write_mcap(result, setup, path, *, node_name='uk_controller_node', start=1.0, flag='--mcap'):
    """Write `result` (a :class:`~uk_controller.sim.closed_loop.SimulationResult`) to `path`, complete or not
    at all under that name (see :class:`McapLog`). Returns the number of messages per topic."""
    log = McapLog(
        setup,
        path,
        rate=result.rate,
        settings=result.settings,
        actuator_names=result.actuator_names,
        node_name=node_name,
        start=start,
        flag=flag,
    )
    log(result)
    return log.close()


class McapLog:
    """An MCAP recording written while the run goes (a ``sink`` of
    :func:`~uk_controller.sim.closed_loop.simulate`): each chunk of the log becomes messages at once.

    The file is ``<path>.part`` until :meth:`close` renames it (:class:`~uk_controller.files.io_safety.StreamingFile`);
    a write error stops the recording, keeps ``<path>.part`` and :meth:`close` raises ConfigError naming
    `path`, `flag` and the simulated time recorded."""

    def __init__(
        self, setup, path, *, rate, settings, actuator_names, node_name='uk_controller_node', start=1.0, flag='--mcap'
    ):
        from ..control.loop_timing import TIMING_FIELDS
        from ..files.io_safety import StreamingFile
        from ..settings import ros_section as R  # the topics a node would publish and its effort order

        writer_cls = writer_class()
        ros = setup.settings.ros
        perm, self.effort_names = R.effort_order(setup.settings, actuator_names, ros.effort_joints)
        self.perm = np.asarray(perm, dtype=int)
        node = '/' + node_name.strip('/')
        self.topics = {
            'joint_states': ros.joint_states_topic,
            'command': ros.effort_topic,
            'task_error': f'{node}/task_error',
            'residual': f'{node}/constraint_residual',
            'efforts': f'{node}/efforts',
            'timing': f'{node}/loop_timing',
        }
        mp, ms = setup.passive.m, setup.servo.m
        self.task_label = f'task_error[{ms}]: servo rows ' + ','.join(setup.servo.names)
        self.residual_label = (
            f'phi[{mp + ms}] then phidot[{mp + ms}]: passive '
            + ','.join(setup.passive.names)
            + '; servo '
            + ','.join(setup.servo.names)
        )
        self.efforts_label = 'efforts: ' + ','.join(actuator_names)
        self.timing_label = ','.join(TIMING_FIELDS)  # as the node labels it
        self.kind = ros.output_type
        self.command_type = R.OUTPUT_TYPES[self.kind]  # its ROS message type (the one table)
        self.counts = dict.fromkeys(self.topics.values(), 0)
        self.rate = float(rate)
        self.period = 1.0 / self.rate
        self.window = ros.loop.window
        self.delay = int(settings.get('measurement_delay', 0) or 0)
        self.start = start
        self.window_t0 = None  # time of the first step of the open loop-timing window
        self.window_ct = []  # its compute times [us]
        self.last_t = None
        self.file = StreamingFile(path, flag=flag, binary=True)
        try:
            self.writer = writer_cls(self.file.stream)
            self.schemas = {name: self.writer.register_msgdef(name, text) for name, text in MSGDEFS.items()}
        except OSError as exc:
            self.file.failed(exc)

    def _put(self, key, schema, msg, ns):
        topic = self.topics[key]
        self.writer.write_message(
            topic, schema, msg, log_time=int(ns), publish_time=int(ns), sequence=self.counts[topic]
        )
        self.counts[topic] += 1

    def __call__(self, result):
        if self.file.error is not None:
            return
        try:
            self._add(result)
        except OSError as exc:
            self.file.failed(exc)

    def _add(self, result):
        put, schemas, perm = self._put, self.schemas, self.perm
        f64 = schemas['std_msgs/msg/Float64MultiArray']
        stamps = np.round((self.start + result.t) * 1e9).astype(np.int64)
        for k in range(result.t.size):
            ns = stamps[k]
            t = float(result.t[k])
            header = {'stamp': _stamp(ns), 'frame_id': ''}
            put(
                'joint_states',
                schemas['sensor_msgs/msg/JointState'],
                {
                    'header': header,
                    'name': list(result.joint_names),
                    'position': result.q[k].tolist(),
                    'velocity': result.qd[k].tolist(),
                    'effort': [],
                },
                ns,
            )
            command = result.effort[k][perm].tolist()
            if self.kind == 'float64_multi_array':
                msg = {'layout': {'dim': [], 'data_offset': 0}, 'data': command}
            elif self.kind == 'joint_state':
                msg = {
                    'header': header,
                    'name': list(self.effort_names),
                    'position': [],
                    'velocity': [],
                    'effort': command,
                }
            else:
                msg = {
                    'header': header,
                    'joint_names': list(self.effort_names),
                    'points': [
                        {
                            'positions': [],
                            'velocities': [],
                            'accelerations': [],
                            'effort': command,
                            'time_from_start': {'sec': 0, 'nanosec': 0},
                        }
                    ],
                }
            put('command', schemas[self.command_type], msg, ns)
            put('efforts', f64, _array(result.effort[k], self.efforts_label), ns)
            if result.ok[k]:
                put('task_error', f64, _array(result.task_error[k], self.task_label), ns)
                put('residual', f64, _array(np.concatenate((result.phi[k], result.phidot[k])), self.residual_label), ns)
            if self.window_t0 is None:
                self.window_t0 = t
            self.window_ct.append(result.compute_time[k] * 1e6)
            self.last_t = t
            self.last_ns = ns
            if t - self.window_t0 + self.period >= self.window - 1e-9:
                self._timing(ns)

    def _timing(self, ns):
        ct = np.asarray(self.window_ct)
        missed = int(np.count_nonzero(ct > self.period * 1e6))
        self._put(
            'timing',
            self.schemas['std_msgs/msg/Float64MultiArray'],
            _array(
                [
                    self.rate,
                    0.0,
                    0.0,
                    0.0,
                    np.percentile(ct, 50),
                    np.percentile(ct, 99),
                    self.delay * self.period * 1e6,
                    missed,
                ],
                self.timing_label,
            ),
            ns,
        )
        self.window_t0, self.window_ct = None, []

    def close(self):
        """Finish the file (the last, partial loop-timing window included) and rename it; returns the
        messages per topic. After a write error: ConfigError saying what was recorded and what was lost."""
        if self.file.error is None:
            try:
                if self.window_ct:
                    self._timing(self.last_ns)
                self.writer.finish()
            except OSError as exc:
                self.file.failed(exc)
        given = '' if self.last_t is None else f' (the run up to t = {self.last_t:.4f} s was given to the recording)'
        self.file.close(lost=f'the messages that did not reach the disk{given}')
        return self.counts

    def abandon(self):
        self.file.abandon()
