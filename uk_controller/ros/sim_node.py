"""``uk_sim_node``: the embedded UK plant as a ROS 2 node.

Stands in for Gazebo + ros2_control: subscribes to the effort command topic
(the message type of ``ros.output_type``, joints in ``ros.effort_joints``
order), holds the latest command (zero-order hold, clipped to the actuator
limits), integrates the true closed-chain dynamics of
:class:`uk_controller.sim.uk_plant.UKPlant` (seed 000 eq 9 with the closures
as passive constraints) at a fixed rate and publishes ``/joint_states``.

Physics (``simulation.plant``): ``uk`` (default) the embedded UK plant; ``mujoco``
the MuJoCo engine loading the same URDF with its own loop-closure equality
constraints (:class:`uk_controller.sim.mujoco_plant.MujocoPlant`, as
``uk-controller simulate --plant mujoco``): a simulator that shares nothing of
our dynamics, for closed chains and the dual arms that Gazebo cannot close.

Modes (section ``simulation`` of the robot YAML):

- free running (default): a wall-clock timer at ``simulation.rate`` (default
  ``control.rate``) advances the plant by one period per tick;
- ``publish_clock: true``: also publishes ``/clock`` with the simulated time
  ``clock_start + t`` (default 1 s: a zero stamp reads as "unstamped" in ROS)
  for nodes with ``use_sim_time``; ``real_time_factor`` scales the tick rate;
  ``max_command_lag: k`` (periods, 0 = off) makes the plant wait whenever it has
  integrated k periods without receiving a command, like a simulator that
  steps its controllers synchronously (gz_ros2_control), so a controller
  descheduled by a busy machine cannot fall further behind than k periods
  (until the first command arrives it runs freely: a controller that missed
  the first states must still see the clock move to start);
- ``lockstep: true`` (implies ``publish_clock``): after publishing the state of
  t_k the plant waits for the next effort command, then advances to t_k+1 --
  the DDS loop then reproduces the in-process closed-loop simulation exactly
  (controller with ``ros.trigger: state`` and ``use_sim_time``). The first
  state goes out once ``wait_for_subscribers`` (default 1) nodes subscribe
  to the joint states, so a recorder can see the loop from its start.
"""

from __future__ import annotations

import sys

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time as RosTime
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from ..files.parameter_file import ConfigError
from ..robots.setup import setup_from_settings
from ..sim.uk_plant import UKPlant
from . import params as P
from .diagnostics import OK, WARN, diagnostic_array
from .node_runner import run
from .node_setup import node_options, read_settings

NODE_NAME = 'uk_sim_node'
STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
COMMAND_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


def make_plant(setup):
    """The physics of ``settings.simulation`` (the setup's resolved settings): UKPlant, or MujocoPlant for
    ``plant: mujoco``."""
    if setup.settings.simulation.plant == 'mujoco':
        try:
            import mujoco  # noqa: F401

            from ..sim.mujoco_plant import MujocoPlant
        except ImportError:
            raise ConfigError(
                'mujoco needs the MuJoCo Python package (pip install mujoco), or use plant:=uk', key='simulation.plant'
            ) from None
        return MujocoPlant.from_setup(setup)  # simulation.mass_scale applied to the file MuJoCo reads
    return UKPlant(setup)  # the setup's model is already scaled by simulation.mass_scale (SimNode)


def to_time(t):
    """Seconds -> builtin_interfaces/Time (nanosecond resolution)."""
    return RosTime(nanoseconds=int(round(t * 1e9))).to_msg()


class SimNode(Node):
    """Embedded plant node (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **node_options(kwargs))
        state = read_settings(self)
        self.settings, self.config_path = state.settings, state.config_path
        self.ros = self.settings.ros
        self.sim = self.settings.simulation  # simulation.rate and publish_clock (lockstep) filled by resolve
        if self.sim.publish_clock and self.get_parameter('use_sim_time').value:
            raise ConfigError('use_sim_time: must be false for the node that publishes /clock')
        setup = setup_from_settings(self.settings, mass_scale=self.sim.mass_scale)
        self.plant = make_plant(setup)
        self.setup = setup
        self.joint_names = list(self.plant.joint_names)
        actuators = list(setup.actuators.names)
        perm, self.effort_names = P.effort_order(self.settings, actuators, self.ros.effort_joints)
        self.perm = np.asarray(perm, dtype=int)
        self.limits = np.asarray(setup.actuators.effort_limits, dtype=float)
        self.u = np.zeros(len(actuators))
        self.dt = 1.0 / float(self.sim.rate)
        self.rng = np.random.default_rng(0)
        self.counts = {'commands': 0, 'rejected': 0, 'steps': 0, 'overruns': 0, 'paced': 0}
        self.steps_since_command = 0  # plant periods integrated with the same held command
        self.waiting = False  # lockstep: state published, waiting for its command
        self.start_ns = None  # wall time of plant time 0 (free running)
        kind = self.ros.output_type
        self.kind = kind
        self.state_pub = self.create_publisher(JointState, self.ros.joint_states_topic, STATE_QOS)
        self.clock_pub = self.create_publisher(Clock, '/clock', 10) if self.sim.publish_clock else None
        self.diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.create_subscription(P.message_class(kind), self.ros.effort_topic, self.on_command, COMMAND_QOS)
        if self.sim.lockstep:
            self.timer = self.create_timer(self.sim.lockstep_resend, self.resend)
        else:
            self.timer = self.create_timer(self.dt / self.sim.real_time_factor, self.on_tick)
        self.create_timer(1.0, self.publish_diagnostics)
        self.get_logger().info(
            f'{setup.name}: {self.sim.plant} plant with {self.plant.n} joints at {self.sim.rate:g} Hz '
            f'({"lockstep" if self.sim.lockstep else "free running"}'
            f'{", /clock" if self.sim.publish_clock else ""}); efforts from {self.ros.effort_topic}'
        )
        if not self.sim.lockstep:
            self.publish_state()
        self.waiting = self.sim.lockstep

    def stamp(self):
        if self.sim.publish_clock:
            return to_time(self.sim.clock_start + self.plant.t)
        if self.start_ns is None:
            self.start_ns = self.get_clock().now().nanoseconds
        return RosTime(nanoseconds=self.start_ns + int(round(self.plant.t * 1e9))).to_msg()

    def publish_state(self):
        stamp = self.stamp()
        if self.clock_pub is not None:
            self.clock_pub.publish(Clock(clock=stamp))
        q = self.plant.q
        if self.sim.sensor_noise > 0:
            q = q + self.rng.normal(0.0, self.sim.sensor_noise, q.shape)
        msg = JointState(name=self.joint_names, position=q.tolist(), velocity=self.plant.qd.tolist())
        msg.header.stamp = stamp
        self.state_pub.publish(msg)

    def advance(self):
        self.plant.step(self.u, self.dt)
        self.counts['steps'] += 1
        self.steps_since_command += 1
        self.publish_state()

    def on_tick(self):
        """Keep plant time = wall time: a late tick integrates the periods it missed (at most 5).

        On its own clock the plant steps one period per tick; with ``max_command_lag`` = k > 0
        it waits (the clock stops) once k periods passed without a new command, so a
        controller that is descheduled acts on a state at most k periods old. Before the
        first command it never waits: states published before the controller matched
        are lost (volatile), and a controller on sim time only acts when the clock moves.
        """
        if self.sim.publish_clock:
            lag = self.sim.max_command_lag
            if (
                lag
                and not self.counts['steps']
                and self.state_pub.get_subscription_count() < self.sim.wait_for_subscribers
            ):
                # Paced: the clock starts once `wait_for_subscribers` nodes listen (the initial
                # state goes out meanwhile), so a controller still being discovered does not
                # miss a stretch of free running it could never have acted on.
                self.publish_state()
                return
            if lag and self.counts['commands'] and self.steps_since_command >= lag:
                self.counts['paced'] += 1
                return
            self.advance()
            return
        behind = (self.get_clock().now().nanoseconds - self.start_ns) * 1e-9 - self.plant.t
        steps = min(5, max(1, int(behind / self.dt + 1e-9)))
        if behind > 5 * self.dt:
            self.counts['overruns'] += 1
            self.start_ns += int((behind - 5 * self.dt) * 1e9)  # give up real time, keep stepping
        for _ in range(steps - 1):
            self.plant.step(self.u, self.dt)
            self.counts['steps'] += 1
        self.advance()

    def resend(self):
        """Lockstep: (re)publish the awaited state once `wait_for_subscribers` nodes listen."""
        if self.waiting and self.state_pub.get_subscription_count() >= self.sim.wait_for_subscribers:
            self.publish_state()

    def on_command(self, msg):
        values = self.command_values(msg)
        if values is None:
            self.counts['rejected'] += 1
            return
        self.counts['commands'] += 1
        self.steps_since_command = 0
        self.u[self.perm] = np.clip(values, -self.limits[self.perm], self.limits[self.perm])
        if self.sim.lockstep:
            self.advance()

    def command_values(self, msg):
        """Effort values in ros.effort_joints order, or None when the message is unusable."""
        if self.kind == 'float64_multi_array':
            values = np.asarray(msg.data, dtype=float)
        else:
            if self.kind == 'joint_state':
                names, efforts = list(msg.name), list(msg.effort)
            else:
                names = list(msg.joint_names)
                efforts = list(msg.points[-1].effort) if msg.points else []
            if len(names) != len(efforts):
                return None
            lookup = dict(zip(names, efforts))
            if any(n not in lookup for n in self.effort_names):
                return None
            values = np.asarray([lookup[n] for n in self.effort_names], dtype=float)
        if values.shape != (len(self.effort_names),) or not np.isfinite(values).all():
            return None
        return values

    def publish_diagnostics(self):
        level = OK if self.counts['rejected'] == 0 else WARN
        values = [
            ('plant', self.sim.plant),
            ('sim_time_s', self.plant.t),
            ('steps', self.counts['steps']),
            ('real_time_overruns', self.counts['overruns']),
            ('ticks_waiting_for_command', self.counts['paced']),
            ('commands', self.counts['commands']),
            ('rejected_commands', self.counts['rejected']),
            ('effort', np.array2string(self.u, precision=4)),
        ]
        if hasattr(self.plant, 'closure_residual') and self.sim.plant == 'mujoco':
            residual = self.plant.closure_residual()  # MuJoCo's loops are soft: how far apart
            values.append(('closure_residual_max_m', float(residual.max()) if residual.size else 0.0))
        self.diag_pub.publish(
            diagnostic_array(
                self.get_clock().now().to_msg(), f'{NODE_NAME}: plant', self.setup.name, level, 'simulating', values
            )
        )


def main(args=None):
    return run(SimNode, NODE_NAME, args)


if __name__ == '__main__':
    sys.exit(main())
