"""``uk_controller_node``: /joint_states in, actuator efforts out at a fixed rate.

A thin rclpy adapter over :class:`uk_controller.control.controller.ControllerCore`
(Chen's servo control on the UK equation, seed 004 eq 35, with Baumgarte
stabilization, seed 000 eq 52). Per control period::

    (q, q') <- merged /joint_states (by name)      t <- trajectory clock
    u = ControllerCore.step_view(q, q', t)         published in ros.effort_joints order

Stale, non-finite or unsolvable input gives the configured safe effort and an
ERROR diagnostic; the node recovers by itself when good data returns and never
publishes NaN. Topics, parameters and rqt_plot field paths: docs/ros.md.
"""

from __future__ import annotations

import array
import math
import sys

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..control.controller import ControllerCore
from ..control.rearm import ReArm
from ..control.status import Status
from ..robots.setup import setup_from_settings
from . import params as P
from . import rclpy_access
from .cdr import Float64ArrayEncoder
from .control_loop import ControlLoop
from .diagnostics import ERROR, OK, WARN, LoopStats, diagnostic_array, status_level, status_name
from .joint_state_merger import JointStateMerger
from .node_runner import run
from .node_setup import node_options, read_settings, resolve_live

NODE_NAME = 'uk_controller_node'
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


def declare_defaults(node, settings):
    """Declare the node-only settings the YAML left out (``ros.*`` and the ``control`` keys the node
    reads, :data:`~uk_controller.settings.ros_section.NODE_CONTROL_KEYS`), so they are listed and (if
    live) settable."""
    ros = settings.ros.as_dict()
    for key, value in ros.items():
        if key not in ('loop', 'overrun') and value is not None and not node.has_parameter(f'ros.{key}'):
            node.declare_parameter(f'ros.{key}', P.declarable(value))
    for key in P.NODE_CONTROL_KEYS:
        if not node.has_parameter(f'control.{key}'):
            node.declare_parameter(f'control.{key}', float(getattr(settings.control, key)))


def schema_typed(node):
    """Let the settings schema, not rclpy, judge the type of a parameter set while running.

    rclpy refuses a value whose type differs from the declared one before our callback runs, with a
    reason that names neither the key nor the types ("Wrong parameter type, expected '3' got '4'").
    Declared dynamically typed, every value reaches :meth:`ControllerNode.on_set_parameters`, which
    checks it against the schema (``settings.check_value``: the key, what it must be, what it got).
    """
    from rcl_interfaces.msg import ParameterDescriptor

    for name in node.get_parameters_by_prefix(''):
        if not P.is_builtin(name) and name not in P.NODE_ONLY:
            node.set_descriptor(name, ParameterDescriptor(dynamic_typing=True))


def effort_message(kind, values, names, stamp):
    """The effort command in the chosen message type (values already in `names` order)."""
    if kind == 'float64_multi_array':
        return Float64MultiArray(data=values)
    if kind == 'joint_state':
        msg = JointState(name=names, effort=values)
        msg.header.stamp = stamp
        return msg
    msg = JointTrajectory(joint_names=names)
    msg.header.stamp = stamp
    msg.points = [JointTrajectoryPoint(effort=values)]
    return msg


def labelled_array(values, label):
    """Float64MultiArray with one labelled dimension (rqt_plot: <topic>/data[i])."""
    msg = Float64MultiArray(data=values)
    msg.layout.dim = [MultiArrayDimension(label=label, size=len(values), stride=len(values))]
    return msg


class MessageBuffer:
    """A message whose float64 ``data`` is an array('d') filled in place through a NumPy view.

    rosidl checks every element of a list assigned to ``data`` but takes an
    array('d') as it is, so each period writes into ``view`` (no allocation,
    no conversion) and :meth:`ready` hands the same buffer to the message
    (a reference when rosidl checks fields, a copy of n doubles when not).
    """

    def __init__(self, msg, size):
        self.msg = msg
        self.buffer = array.array('d', bytes(8 * size))
        self.view = np.frombuffer(self.buffer, dtype=float)

    def ready(self):
        self.msg.data = self.buffer
        return self.msg


class ControllerNode(Node):
    """The UK controller as a ROS 2 node (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **node_options(kwargs))
        self.node_settings = read_settings(self)
        self.settings, self.config_path = self.node_settings.settings, self.node_settings.config_path
        declare_defaults(self, self.settings)
        self.setup = setup_from_settings(self.settings)
        from ..kernels import jit

        if jit.AVAILABLE:
            self.get_logger().info(
                'loading the compiled kernels (the first start after an install compiles '
                'them: 15-60 s; UK_CONTROLLER_NUMBA=0 uses the NumPy path instead)'
            )
        self.core = ControllerCore(self.setup)
        self.perm, self.effort_names = P.effort_order(
            self.settings, self.core.actuator_names, self.settings.ros.effort_joints
        )
        self.perm = np.asarray(self.perm, dtype=int)
        self._effort_finite = np.empty(self.core.p, dtype=bool)  # control(): reused each period
        self.period = self.core.dt
        control = self.settings.control
        self.merger = JointStateMerger(self.core.joint_names, control.state_timeout, control.clock_skew)
        self.rearm = ReArm(self.core, control.soft_start)
        self.started_once = False
        self.stats = LoopStats(self.period)
        self.running = False
        self.autostarted = False
        self.start_ns = 0
        self.last_state_ns = -1
        self.fault = ''
        self.fault_kind = ''
        self.faults = 0
        self.last_solved = None  # (status, reason) of the latest step that solved (diagnostics)
        self.last_publish_ns = 0
        self._latency_probe = None  # set by benchmarks: callable(receive_ns, publish_ns)
        self._state_receive_ns = 0

        ros = self.settings.ros
        kind = ros.output_type
        self.effort_pub = self.create_publisher(P.message_class(kind), self.settings.ros.effort_topic, COMMAND_QOS)
        self.task_error_pub = self.create_publisher(Float64MultiArray, '~/task_error', 10)
        self.residual_pub = self.create_publisher(Float64MultiArray, '~/constraint_residual', 10)
        self.efforts_pub = self.create_publisher(Float64MultiArray, '~/efforts', 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.raw_effort = None  # ros.transport: raw with float64_multi_array: a reused CDR buffer
        if self.settings.ros.transport == 'raw' and kind == 'float64_multi_array':
            self.raw_effort = Float64ArrayEncoder(self.core.p)
            self._publish_raw_effort = rclpy_access.raw_publisher(self.effort_pub)
        self.loop = ControlLoop(self)  # own thread (ros.loop.mode: thread) or the timer below
        if self.loop.state_callback() is not None:  # None: the loop thread takes the states itself
            self.create_subscription(
                JointState, self.settings.ros.joint_states_topic, self.loop.state_callback(), qos_profile_sensor_data
            )
        self.create_service(Trigger, '~/start', self.loop.guard(self.on_start))
        self.create_service(Trigger, '~/stop', self.loop.guard(self.on_stop))
        self.timer = None if self.loop.threaded else self.create_timer(self.period, self.loop.timer_callback())
        self.diag_timer = self.create_timer(self.settings.ros.diagnostics_period, self.publish_diagnostics)
        schema_typed(self)
        self.add_on_set_parameters_callback(self.loop.guard(self.on_set_parameters))
        self._row_labels()
        self.get_logger().info(
            f'{self.setup.name}: {self.core.n} joints {self.core.joint_names}, efforts on '
            f'{self.settings.ros.effort_topic} ({kind}) for {self.effort_names}, {self.core.rate:g} Hz, '
            f'trigger {ros.trigger}, {"autostart" if ros.autostart else "waiting for ~/start"}'
        )
        self.get_logger().info(self.loop.describe())

    def start_loop(self):
        """Start the control-loop thread (``ros.loop.mode: thread``). :func:`.node_runner.run` calls it once
        the node is built, so that a stop during the build never leaves a thread running on a lost node."""
        self.loop.start()

    # ------------------------------------------------------------------ helpers

    def _row_labels(self):
        mp, ms = self.setup.passive.m, self.setup.servo.m
        self.task_label = f'task_error[{ms}]: servo rows ' + ','.join(self.setup.servo.names)
        self.residual_label = (
            f'phi[{mp + ms}] then phidot[{mp + ms}]: passive '
            + ','.join(self.setup.passive.names)
            + '; servo '
            + ','.join(self.setup.servo.names)
        )
        self.efforts_label = 'efforts: ' + ','.join(self.core.actuator_names)
        # one message object per plotting topic, refilled every period (publish serializes at once)
        self.task_out = MessageBuffer(labelled_array([0.0] * ms, self.task_label), ms)
        self.residual_out = MessageBuffer(labelled_array([0.0] * (2 * (mp + ms)), self.residual_label), 2 * (mp + ms))
        self.efforts_out = MessageBuffer(labelled_array([0.0] * self.core.p, self.efforts_label), self.core.p)
        self.command_out = MessageBuffer(Float64MultiArray(), self.core.p)

    def now_ns(self):
        return self.get_clock().now().nanoseconds

    def raw_time(self, now_ns):
        return (now_ns - self.start_ns) * 1e-9

    def trajectory_time(self, now_ns):
        """Trajectory time; outages (stale state, safe effort, ~/stop) are held out of it (ReArm)."""
        return self.rearm.time(self.raw_time(now_ns)) + self.settings.ros.trajectory_start

    def start(self, now_ns):
        if self.started_once:
            # ~/stop -> ~/start: resume from the held trajectory time with a soft start
            self.rearm.interrupt(self.raw_time(now_ns))
            self.running = True
            self.get_logger().info(
                f'trajectory clock resumed at {self.rearm.held_time():.3f} s (soft start {self.rearm.soft_start:g} s)'
            )
            return
        self.core.reset(0.0)
        self.rearm.reset()
        self.start_ns = now_ns
        self.running = True
        self.started_once = True
        self.get_logger().info('trajectory clock started')
        if self.merger.complete:
            self.prepare()

    def prepare(self):
        """Decide and plan the joint-space approach from the measured start (ControllerCore.prepare) before
        the first control step (an approach starts at that step's time and the task's clock at its hand-over);
        log the decision once."""
        decision = self.core.prepare(self.merger.q)
        if self.core.prepared:  # else a non-finite state: the step refuses it, the next state prepares
            self.get_logger().info(f'joint-space approach: {decision}')

    # ------------------------------------------------------------------ callbacks

    def accept_state(self, match, positions, velocities, stamp_ns, now_ns):
        """Merge one joint state (names already matched: JointStateMerger.match); autostart on the first
        complete state. True when it brought a newer complete state: a step is due under ros.trigger: state."""
        self._state_receive_ns = now_ns
        merger = self.merger
        if not merger.update_matched(match, positions, velocities, stamp_ns, now_ns) or not merger.complete:
            return False
        if not self.running and self.settings.ros.autostart and not self.autostarted:
            self.autostarted = True
            self.start(merger.newest_ns if self.settings.ros.trigger == 'state' else now_ns)
        elif self.running and not self.core.prepared:  # started before the first complete state
            self.prepare()
        if merger.newest_ns > self.last_state_ns:
            self.last_state_ns = merger.newest_ns
            return True
        return False

    def on_joint_state(self, msg):
        """The subscription callback (timer mode, and the loop's 'queue' path): merge; under ros.trigger:
        state in timer mode also run the step."""
        now = self.now_ns()
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        fresh = self.accept_state(self.merger.match(msg.name), msg.position, msg.velocity, stamp, now)
        if fresh and self.settings.ros.trigger == 'state' and not self.loop.threaded:
            self.control(now, self.merger.newest_ns)

    def on_timer(self):
        now = self.now_ns()
        if self.settings.ros.trigger == 'timer':
            self.control(now, now)
        elif self.merger.complete and self.merger.age(now) > self.merger.state_timeout:
            self.control(now, now)  # state trigger: the timer only watches for stale data

    def control(self, now_ns, t_ns):
        """One control period: efforts from the merged state, or the safe effort and why."""
        merger = self.merger
        if not merger.complete:
            return  # nothing known yet: publish nothing
        fault = kind = ''
        age = merger.age(now_ns)
        if age > self.merger.state_timeout:
            kind = 'stale'
            fault = (
                f'stale state: {merger.oldest_joint()} last updated {age * 1e3:.0f} ms ago '
                f'(timeout {self.merger.state_timeout * 1e3:.0f} ms)'
            )
            if merger.last_kind == 'skew':
                kind = 'clock_skew'
                fault = f'{merger.last_rejection}; no usable joint state for {age * 1e3:.0f} ms'
            elif merger.last_kind:
                fault += f'; last message rejected: {merger.last_rejection}'
        elif self.loop.safe_reason:
            kind, fault = 'overrun', self.loop.safe_reason  # ros.overrun.safe_after (control_loop.py)
        if self.running and not fault:
            # read in place (ControllerCore.step_view): everything below uses or copies it before the next period
            result = self.core.step_view(merger.q, merger.qd, self.trajectory_time(t_ns))
            if not result.ok:
                kind = 'controller'
                fault = result.reason or 'controller returned the safe effort'
                self.rearm.interrupt(self.raw_time(t_ns))
        else:
            if self.started_once:
                self.rearm.interrupt(self.raw_time(t_ns))  # hold the trajectory clock during the outage
            result = self.core.safe(fault or 'stopped')
        if result.ok and self.running:
            self.rearm.limit(result.effort)  # soft start: no harder than undisturbed operation
        self.stats.record(result)
        effort = result.effort
        if not np.isfinite(effort, out=self._effort_finite).all():  # belt and braces: never publish NaN
            effort = np.zeros_like(effort)
            kind = kind or 'nonfinite'
            fault = fault or 'non-finite effort replaced by zero'
        if self.raw_effort is not None:
            # ros.transport: raw -- the efforts written into a reused CDR buffer and published as bytes
            # without a copy (rclpy_access.raw_publisher)
            np.take(effort, self.perm, out=self.raw_effort.values)
            self._publish_raw_effort(self.raw_effort.buffer)
        elif self.settings.ros.output_type == 'float64_multi_array':
            np.take(effort, self.perm, out=self.command_out.view)
            self.effort_pub.publish(self.command_out.ready())
        else:
            stamp = self.get_clock().now().to_msg()
            self.effort_pub.publish(
                effort_message(self.settings.ros.output_type, effort[self.perm].tolist(), self.effort_names, stamp)
            )
        if self._latency_probe is not None:
            self._latency_probe(self._state_receive_ns, self.now_ns())
        plots = self.loop.plots  # the plotting topics only while someone listens (control_loop.py)
        if plots:
            self.efforts_out.view[:] = effort
            self.efforts_pub.publish(self.efforts_out.ready())
        if result.ok:  # the reason is read only when there is one to tell
            status = self.stats.last_status  # (LoopStats.record read it)
            self.last_solved = (status, result.reason if status != Status.OK else '')
        if result.ok and plots:
            self.task_out.view[:] = result.task_error
            self.task_error_pub.publish(self.task_out.ready())
            residual, m = self.residual_out.view, result.phi.size
            residual[:m] = result.phi
            residual[m:] = result.phidot
            self.residual_pub.publish(self.residual_out.ready())
        changed = kind != self.fault_kind
        self.fault, self.fault_kind = fault, kind
        if changed:
            if kind:
                self.faults += 1
                self.get_logger().error(f'safe effort: {fault}')
            else:
                self.get_logger().info('recovered: controlling again')
            self.publish_diagnostics()

    def on_start(self, request, response):
        if not self.merger.complete:
            response.success = False
            response.message = f'no complete joint state yet; missing {self.merger.missing()}'
            return response
        state_trigger = self.settings.ros.trigger == 'state'
        self.start(self.merger.newest_ns if state_trigger and not self.started_once else self.now_ns())
        response.success = True
        response.message = 'started'
        return response

    def on_stop(self, request, response):
        was = self.running
        self.running = False
        response.success = True
        response.message = f'stopped; publishing the safe effort ({self.core.safe_effort})' if was else 'not running'
        return response

    # ------------------------------------------------------------------ parameters

    def apply_settings(self, settings):
        """Run on a new resolved setup (live parameters): the controller (safe effort, gains; it refuses
        a change of a key that is not live), the re-arming (soft start, gains) and the state merger
        (state timeout, clock skew) each take their values from it; the node reads ``settings.ros``."""
        self.core.apply_settings(settings)
        self.rearm.apply_settings(settings)
        self.merger.apply_settings(settings)
        self.settings = settings

    def on_set_parameters(self, parameters):
        """Accept live-safe parameters (gains, trajectory start); reject the rest with a reason."""
        updates = {}
        for p in parameters:
            name = p.name
            if P.is_builtin(name):
                continue
            if not P.is_live(name):
                return SetParametersResult(
                    successful=False,
                    reason=f'{name}: cannot change while running (model, topics, rate and task are fixed '
                    f'at start; restart the node); live: stabilization.*, {", ".join(P.LIVE_KEYS)}',
                )
            updates[name] = P.plain(p.value)
        try:
            # one more override, resolved as at start (schema, cross-key rules such as omega <= rate/4), then
            # taken by each consumer (apply_settings)
            settings = resolve_live(self.node_settings, updates) if updates else self.settings
            self.apply_settings(settings)
        except (ValueError, KeyError, TypeError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self.node_settings.overrides.update(updates)
        self.node_settings.settings = settings
        if updates:
            self.get_logger().info(f'live parameters: {updates}')
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ diagnostics

    def publish_diagnostics(self):
        now = self.now_ns()
        mean, peak = self.stats.window()
        merger = self.merger
        age = merger.age(now)
        skew_ms = merger.last_skew * 1e3
        if self.fault:
            level, message = ERROR, self.fault
        elif self.loop.warning:
            level, message = WARN, self.loop.warning
        elif merger.last_kind == 'skew':  # the latest message was stamped ahead of our clock
            level, message = (
                WARN,
                (
                    f'clock skew: joint_states stamped {skew_ms:+.0f} ms from the node clock '
                    f'(tolerance {merger.clock_skew * 1e3:.0f} ms)'
                ),
            )
        elif not merger.complete:
            level, message = WARN, f'waiting for joint states: missing {merger.missing()}'
        elif not self.running:
            level, message = OK, 'stopped (safe effort)'
        elif self.last_solved is not None and self.last_solved[0] != Status.OK:
            level, message = status_level(self.last_solved[0]), self.last_solved[1]
        else:
            level, message = OK, 'controlling'
        counts = merger.counts
        values = [
            ('running', self.running),
            ('compute_time_mean_ms', mean * 1e3),
            ('compute_time_max_ms', peak * 1e3),
            ('control_rate_hz', self.core.rate),
            ('steps', self.stats.steps),
            ('safe_effort_steps', self.stats.safe_steps),
            ('missed_deadlines', self.loop.timing.total_missed),  # the loop's count, both modes
            ('status', status_name(self.stats.last_status)),
            ('rank', self.stats.rank),
            ('condition', self.stats.condition),
            ('saturated_efforts', self.stats.saturated),
            ('saturated_steps', self.stats.saturated_steps),
            ('posture_error', self.stats.posture_error),
            ('null_space_motion', self.stats.null_motion),
            ('null_space_internal', self.stats.null_internal),
            ('state_age_ms', age * 1e3 if math.isfinite(age) else 'never complete'),
            ('messages_used', counts['accepted']),
            ('rejected_nonfinite', counts['nonfinite']),
            ('rejected_late', counts['late']),
            ('rejected_clock_skew', counts['skew']),
            ('clock_skew_ms', skew_ms),
            ('rearms', self.rearm.rearms),
            ('soft_start_active', self.rearm.ramping),
            ('rejected_malformed', counts['malformed']),
            ('rejected_duplicate_names', counts['duplicate_names']),
            ('rejected_no_known_joint', counts['no_known_joint']),
            ('messages_with_unknown_names', counts['unknown_names']),
            ('last_rejection', merger.last_rejection),
            ('faults', self.faults),
        ] + self.loop.diagnostic_values()
        self.diag_pub.publish(
            diagnostic_array(
                self.get_clock().now().to_msg(), f'{NODE_NAME}: control', self.setup.name, level, message, values
            )
        )

    def destroy_node(self):
        loop = getattr(self, 'loop', None)  # None: the constructor failed before the loop existed
        if loop is not None:
            loop.stop()  # the loop thread publishes: stop it before the publishers go
        return super().destroy_node()


def main(args=None):
    return run(ControllerNode, NODE_NAME, args)


if __name__ == '__main__':
    sys.exit(main())
