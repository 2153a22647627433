"""serial_bridge_node: ROS 2 adapter between topics and serial motor drivers.

Owns the serial port (uk_binary | dynamixel | odrive, see docs/serial_protocol.md
and uk_controller.hardware). Every bus period it sends the newest effort
command (``std_msgs/Float64MultiArray`` on config ``ros.effort_topic``, default
``/effort_controller/commands``, ordered as ``ros.effort_joints``) and
publishes the feedback as ``sensor_msgs/JointState`` on ``/joint_states`` with
the robot's joint names (passive joints of closed chains reconstructed from the
closures). ``/diagnostics`` carries bus rate, round-trip latency, CRC errors,
timeouts, watchdog trips, reconnects and the safety state.

Parameters are read as by the other nodes (:func:`~.node_setup.read_settings`):
``config`` (robot name or YAML path) and any key of the robot YAML as an override, checked
against the settings schema; the bus is ``hardware.protocol`` (a name of
uk_controller.hardware.registry), ``hardware.port``, ``hardware.baud``, ``hardware.rate``
(Hz; unset: control.rate) and ``hardware.watchdog`` (s), e.g.
``-p config:=scara -p hardware.port:=/dev/ttyUSB0``. The process is started and stopped by
:func:`~.node_runner.run` (exit code 2 with the key for a bad value) and reports on
``/diagnostics`` with :func:`~.diagnostics.diagnostic_array`, as the other nodes do. Safety is
uk_controller.hardware.safety.SafeBus: no
fresh effort or feedback within the watchdog => torque off; limits before
sending; torque off on shutdown; reconnect with torque off until feedback is
valid again.

At start the set-up is checked against the connected bus by the rules of ``uk-controller
run`` (:func:`~uk_controller.hardware.setup_check.check_setup`): the cycle budget is logged, and a
rate above what the bus carries or a motor that cannot hold the start pose (gravity at q0 against
the limits read from the devices) is an error in the log naming what to change, and exit code 2,
torque never on. If the port is not there at start, the check runs at the first connect and no
effort is sent before it.

Loop timing: ``~/loop_timing`` (std_msgs/Float64MultiArray, order
uk_controller.control.loop_timing.TIMING_FIELDS, as uk_controller_node) every ``ros.loop.window`` seconds,
and the same values as ``loop_*`` in ``/diagnostics``. The bridge runs on an rclpy timer: a gap of
more than 1.5 periods between two timer calls misses round(gap / T) - 1 deadlines, a bus cycle longer
than a period one more. ``ros.overrun.*`` (OverrunPolicy) only warns here: the bridge computes no
effort, its safety is SafeBus's watchdog; the state is in /diagnostics (``overrun_state``).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from ..control.loop_timing import TIMING_FIELDS, LoopTiming, overrun_policy
from ..hardware.calibration import HardwareConfig
from ..hardware.joint_state_assembler import JointStateAssembler
from ..hardware.registry import make_bus
from ..hardware.safety import ARMED, DISCONNECTED, SATURATED, SafeBus
from ..hardware.setup_check import check_setup
from ..robots.setup import setup_from_settings
from .diagnostics import ERROR, OK, WARN, diagnostic_array
from .node_runner import run
from .node_setup import node_options, read_settings

NODE_NAME = 'serial_bridge_node'


class SetupRefused(ValueError):
    """The bus cannot carry the rate or a motor cannot hold the start pose (exit code 2, the message
    names what to change)."""

    what = 'set-up refused'


class SerialBridgeNode(Node):
    """The motor bus as a ROS 2 node (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **node_options(kwargs))
        state = read_settings(self)  # the YAML + ROS overrides, resolved once (watchdog vs bus rate too)
        self.settings, self.config_path = state.settings, state.config_path
        self.ros = self.settings.ros
        self.setup = setup_from_settings(self.settings)
        self.hw = HardwareConfig.from_setup(self.setup)
        self.protocol, self.port, self.baud = self.hw.protocol, self.hw.port, self.hw.baud
        rate = self.hw.rate  # hardware.rate, else control.rate
        self.watchdog = self.hw.watchdog
        self.effort_joints = list(self.ros.effort_joints or [j for j in self.hw.joints])
        missing = [j for j in self.hw.joints if j not in self.effort_joints]
        if missing:
            raise ValueError(f'{self.config_path}: ros.effort_joints lacks actuated joints {missing}')
        self.effort_index = np.array([self.effort_joints.index(j) for j in self.hw.joints])
        self.assembler = JointStateAssembler(self.setup, self.hw)
        self.joint_names = list(self.setup.joint_names)
        self.measured = self.assembler.measured
        self.safe = SafeBus(
            self.hw, lambda: make_bus(self.hw), watchdog=self.watchdog, log=lambda m: self.get_logger().warning(m)
        )
        self.effort = None
        self.effort_stamp = None
        self.rejected = 0
        self.received = 0
        self._cycles_window = []
        self._last_stamp = None
        self.pub_js = self.create_publisher(JointState, '/joint_states', 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.timing = LoopTiming(1.0 / rate, self.settings.ros.loop.window)
        self.policy = overrun_policy(self.settings.ros.overrun)
        self._last_warn = 0
        self.pub_timing = self.create_publisher(Float64MultiArray, '~/loop_timing', 10)
        self.timing_msg = Float64MultiArray()
        self.timing_msg.layout.dim = [
            MultiArrayDimension(label=','.join(TIMING_FIELDS), size=len(TIMING_FIELDS), stride=len(TIMING_FIELDS))
        ]
        self.create_subscription(Float64MultiArray, self.ros.effort_topic, self.on_effort, 10)
        self.rate = rate
        self.checked = False  # the set-up checked against the connected bus (check_setup)
        self.refused = None  # why the set-up was refused after start: the process ends with exit 2
        if not self.safe.connect():
            self.get_logger().error(
                f'{self.safe.reason} (retrying; the set-up is checked at the first connect, '
                f'torque stays off until then)'
            )
        else:
            problem = self._check_setup()
            if problem:
                raise SetupRefused(problem)
        self.timer = self.create_timer(1.0 / rate, self.on_timer_timed)
        self.diag_timer = self.create_timer(self.ros.diagnostics_period, self.on_diagnostics)
        self.get_logger().info(f'{self.protocol} on {self.port} at {rate:g} Hz, watchdog {self.watchdog * 1e3:.0f} ms')

    def _check_setup(self):
        """The set-up against the bus just connected, by the rules of ``uk-controller run``
        (:func:`~uk_controller.hardware.setup_check.check_setup`: the cycle budget and the rate it carries,
        the motors' limits against the static load at the start pose). The report goes to the log; on an
        error the bus is shut down (torque was never on) and the reason returned, else None."""
        lines, errors = check_setup(self.setup, self.hw, self.safe.bus, self.protocol, self.port, self.rate)
        self.checked = True
        self.get_logger().info('\n'.join(lines))
        if not errors:
            return None
        for error in errors:
            self.get_logger().error(error)
        self.safe.shutdown()
        return 'torque never on: ' + '; '.join(errors)

    def on_effort(self, msg):
        data = np.asarray(msg.data, float)
        if data.size != len(self.effort_joints) or not np.all(np.isfinite(data)):
            self.rejected += 1
            return
        self.received += 1
        self.effort = data[self.effort_index]
        self.effort_stamp = time.monotonic()

    def on_timer_timed(self):
        """on_timer with the loop statistics (monotonic clock) and the overrun policy (warning only)."""
        timing = self.timing
        period_ns = timing.period_ns
        start = time.monotonic_ns()
        last = timing.last_start_ns
        self.on_timer()
        end = time.monotonic_ns()
        missed = 0
        if last is not None and start - last > 1.5 * period_ns:
            missed = int(round((start - last) / period_ns)) - 1
        if end - start > period_ns:
            missed += 1
        timing.record(start, end - start)
        if missed:
            timing.miss(missed)
        if self.policy.update(missed) in ('warn', 'safe') and end - self._last_warn > 1_000_000_000:
            self._last_warn = end
            self.get_logger().warning(
                f'overrun: {self.policy.consecutive} consecutive missed bus periods '
                f'(ros.overrun.warn_after {self.policy.warn_after})'
            )
        if timing.due(end):
            self.timing_msg.data = [float(v) for v in timing.window(end)]
            self.pub_timing.publish(self.timing_msg)

    def on_timer(self):
        if self.refused is not None:
            return
        # until the set-up is checked (the first connect failed at start) no effort reaches the bus
        reading = self.safe.cycle(self.effort if self.checked else None, self.effort_stamp)
        if not self.checked and self.safe.bus is not None and self.safe.state != DISCONNECTED:
            self.refused = self._check_setup()
            if self.refused is not None:
                self.timer.cancel()  # node_runner.run ends the process with exit code 2
                return
        self._cycles_window.append(time.monotonic())
        if reading is None or not reading.valid or reading.stamp == self._last_stamp:
            return
        self._last_stamp = reading.stamp
        q, qd = self.assembler(reading.q, reading.qd)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            return
        effort = np.zeros(len(q))
        effort[self.measured] = np.nan_to_num(reading.effort)
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = self.joint_names
        msg.position = q.tolist()
        msg.velocity = qd.tolist()
        msg.effort = effort.tolist()
        self.pub_js.publish(msg)

    def on_diagnostics(self):
        now = time.monotonic()
        self._cycles_window = [t for t in self._cycles_window if now - t <= 1.0]
        d = self.safe.diagnostics()
        if d['state'] == ARMED:
            level, message = OK, 'torque on'
        elif d['state'] == SATURATED:
            level, message = (
                WARN,
                ('torque on, saturated: ' + ', '.join(d['saturated_motors']) + ' at the limit the motor gives'),
            )
        elif d['state'] == DISCONNECTED:
            level, message = ERROR, d['reason'] or 'disconnected'
        else:
            level, message = WARN, 'torque off: ' + (d['reason'] or 'idle')
        values = [('bus_rate', float(len(self._cycles_window)))]
        values += [(f'{k}_ms', d.get(k, math.nan) * 1e3) for k in ('rtt_p50', 'rtt_p99')]
        values += [
            (k, d.get(k, ''))
            for k in (
                'crc_errors',
                'timeouts',
                'seq_errors',
                'watchdog_trips',
                'reconnects',
                'io_errors',
                'device_errors',
                'clipped',
                'position',
                'velocity',
                'not_finite',
                'saturated_cycles',
            )
        ]
        values += [('effort_received', self.received), ('effort_rejected', self.rejected), ('state', d['state'])]
        t, p = self.timing, self.policy
        values += [
            *zip(('loop_' + f for f in TIMING_FIELDS), t.last),
            ('loop_periods', t.total_periods),
            ('loop_missed_deadlines', t.total_missed),
            ('overrun_state', p.state),
            ('overrun_consecutive_max', p.longest),
            ('overrun_warnings', p.warnings),
        ]
        values = [(k, 'n/a' if isinstance(v, float) and math.isnan(v) else v) for k, v in values]
        self.pub_diag.publish(
            diagnostic_array(
                self.get_clock().now().to_msg(),
                f'{NODE_NAME}: motor bus',
                f'{self.protocol}:{self.port}',
                level,
                message,
                values,
            )
        )

    def shutdown(self):
        """Torque off and close the port (idempotent)."""
        self.safe.shutdown()

    def destroy_node(self):
        self.shutdown()  # torque off before anything else is torn down
        return super().destroy_node()


def main(args=None):
    return run(SerialBridgeNode, NODE_NAME, args)


if __name__ == '__main__':
    sys.exit(main())
