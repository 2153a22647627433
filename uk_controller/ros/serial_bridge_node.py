"""serial_bridge_node: ROS 2 adapter between topics and serial motor drivers.

Owns the serial port (uk_binary | dynamixel | odrive, see docs/serial_protocol.md
and uk_controller.hardware). Every bus period it sends the newest effort
command (``std_msgs/Float64MultiArray`` on config ``ros.effort_topic``, default
``/effort_controller/commands``, ordered as ``ros.effort_joints``) and
publishes the feedback as ``sensor_msgs/JointState`` on ``/joint_states`` with
the robot's joint names (passive joints of closed chains reconstructed from the
closures). ``/diagnostics`` carries bus rate, round-trip latency, CRC errors,
timeouts, watchdog trips, reconnects and the safety state.

Parameters: ``config`` (robot name or YAML path), ``port``, ``baud``,
``protocol``, ``rate`` (Hz, 0 = hardware.rate or control.rate), ``watchdog``
(s, 0 = hardware.watchdog). Empty/zero values fall back to the config's
``hardware`` section. Safety is uk_controller.hardware.safety.SafeBus: no
fresh effort or feedback within the watchdog => torque off; limits before
sending; torque off on shutdown; reconnect with torque off until feedback is
valid again.

Loop timing (issue 13): ``~/loop_timing`` (std_msgs/Float64MultiArray, order
uk_controller.loop_timing.TIMING_FIELDS, as uk_controller_node) every ``ros.loop.window`` seconds,
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
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from .. import settings as S
from ..config import ConfigError
from ..hardware.bus import make_bus
from ..hardware.calibration import HardwareConfig
from ..hardware.safety import ARMED, DISCONNECTED, SafeBus
from ..hardware.state import JointStateAssembler
from ..loop_timing import TIMING_FIELDS, LoopTiming, OverrunPolicy, loop_settings


class SerialBridgeNode(Node):
    def __init__(self, **kwargs):
        super().__init__('serial_bridge_node', **kwargs)
        from ..robots import load_robot
        p = {name: self.declare_parameter(name, default).value for name, default in
             (('config', 'scara'), ('port', ''), ('baud', 0), ('protocol', ''), ('rate', 0.0), ('watchdog', 0.0))}
        self.setup = load_robot(p['config'])
        cfg = self.setup.config
        self.hw = HardwareConfig.from_setup(self.setup)
        # node parameters override the config's hardware section; '' / 0 keep the config (schema checks)
        for name, key in (('protocol', 'hardware.protocol'), ('port', 'hardware.port'), ('baud', 'hardware.baud'),
                          ('rate', 'hardware.rate'), ('watchdog', 'hardware.watchdog')):
            if p[name] not in ('', 0, 0.0):
                S.check_value(S.lookup(key), p[name], file='serial_bridge_node parameter', key=f'{name} ({key})')
        self.protocol = p['protocol'] or self.hw.protocol
        self.port = p['port'] or self.hw.port
        self.baud = int(p['baud'] or self.hw.baud)
        rate = float(p['rate'] or self.hw.rate or S.get(cfg, 'control.rate'))
        self.watchdog = float(p['watchdog'] or self.hw.watchdog)
        S.check_cross({'control': {'rate': rate}, 'hardware': {'watchdog': self.watchdog}},
                      'serial_bridge_node parameter', names={'hardware.watchdog': 'watchdog (hardware.watchdog)'})
        ros = cfg.get('ros') or {}
        self.effort_joints = list(ros.get('effort_joints') or [j for j in self.hw.joints])
        missing = [j for j in self.hw.joints if j not in self.effort_joints]
        if missing:
            raise ValueError(f'{self.setup.config_path}: ros.effort_joints lacks actuated joints {missing}')
        self.effort_index = np.array([self.effort_joints.index(j) for j in self.hw.joints])
        self.assembler = JointStateAssembler(self.setup, self.hw)
        self.joint_names = list(self.setup.joint_names)
        self.measured = self.assembler.measured
        self.safe = SafeBus(self.hw, lambda: make_bus(self.hw, port=self.port, baud=self.baud,
                                                      protocol=self.protocol),
                            watchdog=self.watchdog, log=lambda m: self.get_logger().warning(m))
        self.effort = None
        self.effort_stamp = None
        self.rejected = 0
        self.received = 0
        self._cycles_window = []
        self._last_stamp = None
        self.pub_js = self.create_publisher(JointState, '/joint_states', 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        loop, overrun = loop_settings(cfg)
        self.timing = LoopTiming(1.0 / rate, loop['window'])
        self.policy = OverrunPolicy(**overrun)
        self._last_warn = 0
        self.pub_timing = self.create_publisher(Float64MultiArray, '~/loop_timing', 10)
        self.timing_msg = Float64MultiArray()
        self.timing_msg.layout.dim = [MultiArrayDimension(label=','.join(TIMING_FIELDS), size=len(TIMING_FIELDS),
                                                          stride=len(TIMING_FIELDS))]
        self.create_subscription(Float64MultiArray, ros.get('effort_topic', '/effort_controller/commands'),
                                 self.on_effort, 10)
        if not self.safe.connect():
            self.get_logger().error(f'{self.safe.reason} (retrying)')
        self.timer = self.create_timer(1.0 / rate, self.on_timer_timed)
        self.diag_timer = self.create_timer(1.0, self.on_diagnostics)
        self.get_logger().info(f'{self.protocol} on {self.port} at {rate:g} Hz, watchdog {self.watchdog * 1e3:.0f} ms')

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
            self.get_logger().warning(f'overrun: {self.policy.consecutive} consecutive missed bus periods '
                                      f'(ros.overrun.warn_after {self.policy.warn_after})')
        if timing.due(end):
            self.timing_msg.data = [float(v) for v in timing.window(end)]
            self.pub_timing.publish(self.timing_msg)

    def on_timer(self):
        reading = self.safe.cycle(self.effort, self.effort_stamp)
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
        d['bus_rate'] = float(len(self._cycles_window))
        d['effort_received'] = self.received
        d['effort_rejected'] = self.rejected
        status = DiagnosticStatus()
        status.name = 'serial_bridge_node: motor bus'
        status.hardware_id = f'{self.protocol}:{self.port}'
        if d['state'] == ARMED:
            status.level, status.message = DiagnosticStatus.OK, 'torque on'
        elif d['state'] == DISCONNECTED:
            status.level, status.message = DiagnosticStatus.ERROR, d['reason'] or 'disconnected'
        else:
            status.level, status.message = DiagnosticStatus.WARN, 'torque off: ' + (d['reason'] or 'idle')
        keys = ('bus_rate', 'rtt_p50', 'rtt_p99', 'crc_errors', 'timeouts', 'seq_errors', 'watchdog_trips',
                'reconnects', 'io_errors', 'device_errors', 'clipped', 'position', 'velocity', 'not_finite',
                'effort_received', 'effort_rejected', 'state')
        for k in keys:
            v = d.get(k, '')
            if isinstance(v, float) and k.startswith('rtt'):
                v = 'nan' if math.isnan(v) else f'{v * 1e3:.3f} ms'
            status.values.append(KeyValue(key=k, value=str(v)))
        t, p = self.timing, self.policy
        for k, v in [*zip(('loop_' + f for f in TIMING_FIELDS), t.last), ('loop_periods', t.total_periods),
                     ('loop_missed_deadlines', t.total_missed), ('overrun_state', p.state),
                     ('overrun_consecutive_max', p.longest), ('overrun_warnings', p.warnings)]:
            status.values.append(KeyValue(key=k, value='n/a' if isinstance(v, float) and math.isnan(v) else str(v)))
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [status]
        self.pub_diag.publish(arr)

    def shutdown(self):
        self.safe.shutdown()


def main(args=None):
    from .runner import run
    # torque off before anything else is torn down
    return run(SerialBridgeNode, 'serial_bridge_node', args, on_stop=lambda node: node.shutdown())


if __name__ == '__main__':
    import sys
    sys.exit(main())
