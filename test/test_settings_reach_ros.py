"""Settings of a setup file and of ``-p`` parameters reach the running ROS nodes (a representative subset).

uk_controller_node and uk_sim_node are built in this process (rclpy, loopback only) from a setup file
that sets keys away from their defaults, one more given as a node parameter (``-p``, an override of
resolve()); the test reads the values back off the nodes' ControllerCore, plant, publishers and loop
(test/test_settings_reach.py probes every key below the nodes).
"""

import os

from parallel import domain_id

os.environ['ROS_DOMAIN_ID'] = str(domain_id(88))  # this module's id (test/parallel.py)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.pop('ROS_STATIC_PEERS', None)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

rclpy = pytest.importorskip('rclpy')
from rclpy.parameter import Parameter  # noqa: E402

from uk_controller.files import rcl_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def _setup_file(tmp_path):
    """config/planar_3r.yaml with keys set away from their defaults (and from the shipped file's)."""
    tree = yaml.safe_load((ROOT / 'config' / 'planar_3r.yaml').read_text())
    params = tree['/**']['ros__parameters']
    params['control'].update(rate=500.0, state_timeout=0.3, clock_skew=0.2, soft_start=2.0)
    params['stabilization'] = {'convention': 'critical', 'omega': 12.0}
    params['simulation'].update(substeps=3, publish_clock=True, real_time_factor=2.0)
    params.setdefault('ros', {}).update(effort_topic='/reach/efforts', joint_states_topic='/reach/states')
    params['ros']['loop'] = {'window': 0.5, 'mode': 'thread'}
    params['ros'].update(output_type='joint_trajectory', diagnostics_period=2.5, transport='messages')
    params['simulation'].update(clock_start=3.0)
    path = tmp_path / 'planar_3r_reach.yaml'
    path.write_text(rcl_yaml.dump(tree))
    return path


def _node(cls, path, *parameters):
    return cls(parameter_overrides=[Parameter('config', value=str(path)), *parameters])


def test_controller_node_runs_the_file_and_its_parameters(tmp_path):
    from uk_controller.ros.controller_node import ControllerNode

    path = _setup_file(tmp_path)
    rclpy.init()
    node = None
    try:
        node = _node(ControllerNode, path, Parameter('control.safe_effort', value='hold'))
        node.loop.stop()
        core = node.core
        assert core.rate == 500.0 and core.dt == 1.0 / 500.0
        assert float(core.stabilization.kp) == 144.0  # omega 12 from the file
        assert core.safe_effort == 'hold'  # the -p parameter
        assert node.count_publishers('/reach/efforts') == 1
        assert node.loop.timing.window_ns == 500_000_000
        assert node.merger.state_timeout == 0.3 and node.merger.clock_skew == 0.2
        assert node.rearm.soft_start == 2.0
        # ros.output_type, as DDS sees the publisher; ros.diagnostics_period; ros.transport: messages
        types = dict(node.get_publisher_names_and_types_by_node(node.get_name(), node.get_namespace()))
        assert types['/reach/efforts'] == ['trajectory_msgs/msg/JointTrajectory'], types
        assert node.diag_timer.timer_period_ns == 2_500_000_000
        assert node.raw_effort is None
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def test_sim_node_runs_the_file_and_its_parameters(tmp_path):
    from uk_controller.ros.sim_node import SimNode

    path = _setup_file(tmp_path)
    rclpy.init()
    node = None
    try:
        node = _node(SimNode, path, Parameter('simulation.mass_scale', value=2.0))
        assert node.dt == 1.0 / 500.0  # simulation.rate defaults to the file's control.rate
        assert node.plant.substeps == 3
        assert node.clock_pub is not None  # simulation.publish_clock
        assert node.timer.timer_period_ns == 1_000_000  # 2 ms periods at simulation.real_time_factor 2
        assert node.settings.simulation.mass_scale == 2.0
        from uk_controller.robots import load_robot
        from uk_controller.sim.uk_plant import UKPlant

        def mass(plant):
            return sum(i.mass for i in plant.model.model.inertias)

        scaled = UKPlant.from_setup(load_robot(path, {'simulation.mass_scale': 2.0}))
        assert mass(node.plant) == mass(scaled) > mass(UKPlant.from_setup(load_robot(path)))
        assert node.count_publishers('/reach/states') == 1
        assert node.count_subscribers('/reach/efforts') == 1
        types = dict(node.get_subscriber_names_and_types_by_node(node.get_name(), node.get_namespace()))
        assert types['/reach/efforts'] == ['trajectory_msgs/msg/JointTrajectory'], types  # ros.output_type
        stamp = node.stamp()  # simulation.clock_start on the published /clock
        assert stamp.sec + 1e-9 * stamp.nanosec == pytest.approx(3.0 + node.plant.t)
        node.destroy_node()
        node = _node(
            SimNode,
            path,
            Parameter('simulation.lockstep', value=True),
            Parameter('simulation.lockstep_resend', value=0.25),
        )
        assert node.waiting and node.timer.timer_period_ns == 250_000_000  # lockstep: resend, not ticks
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
