"""Settings of a setup file and of ``-p`` parameters reach the running ROS nodes.

uk_controller_node, uk_sim_node and serial_bridge_node are built in this process (rclpy, loopback only).
The first two tests start them from a setup file named by ``config`` with keys away from their defaults,
one more given as a node parameter (``-p``, an override of resolve()), and read the values back off the
nodes' ControllerCore, plant, publishers and loop. :func:`test_every_key_reaches_the_running_nodes`
starts them with each batched setup file of test/reach_entry.py as their params file and reads every key
of the schema back off the node that runs it (the keys no node runs: reach_entry.NOT_APPLICABLE).
"""

import dataclasses
import os

from parallel import domain_id

os.environ['ROS_DOMAIN_ID'] = str(domain_id(88))  # this module's id (test/parallel.py)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.pop('ROS_STATIC_PEERS', None)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

rclpy = pytest.importorskip('rclpy')
import reach_entry as R  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from test_settings_reach import schema_keys  # noqa: E402

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


# ----------------------------------------------------------------------------- every key, batched


def _views(nodes):
    views = {}
    if 'uk_controller_node' in nodes:
        n = nodes['uk_controller_node']
        views['uk_controller_node'] = R.View(
            settings=n.settings, setup=n.setup, ctrl=n.core, loop=(n.loop.loop, n.loop.policy)
        )
    if 'uk_sim_node' in nodes:
        n = nodes['uk_sim_node']
        views['uk_sim_node'] = R.View(settings=n.settings, setup=n.setup, plant=n.plant)
    if 'serial_bridge_node' in nodes:
        from uk_controller.hardware.registry import make_bus

        n = nodes['serial_bridge_node']
        # the bus the node's SafeBus makes at each connect (make_bus(node.hw)), built here, not opened
        views['serial_bridge_node'] = R.View(
            settings=n.settings, setup=n.setup, hw=n.hw, bus=make_bus(n.hw), loop=(n.settings.ros.loop, n.policy)
        )
    return views


def _start(names, path):
    """The nodes `names`, each started from the params file `path` (``--ros-args --params-file``)."""
    from uk_controller.ros.controller_node import ControllerNode
    from uk_controller.ros.serial_bridge_node import SerialBridgeNode
    from uk_controller.ros.sim_node import SimNode

    classes = {'uk_controller_node': ControllerNode, 'uk_sim_node': SimNode, 'serial_bridge_node': SerialBridgeNode}
    nodes = {}
    for name in names:
        nodes[name] = classes[name](cli_args=['--ros-args', '--params-file', str(path)])
        if name == 'uk_controller_node':
            nodes[name].loop.stop()  # built, its loop thread never started (node_runner starts it)
    return nodes


def test_every_key_reaches_the_running_nodes(tmp_path):
    """Each setup file of reach_entry.batches('ros') is the params file of the nodes that run its keys:
    every key is read back off the running node (its settings, its parameters, the objects it built and
    what it does with the node-only keys: reach_entry.check_batch, check_parameters, check_node_reads)."""
    proven = {}
    rclpy.init()
    nodes = {}
    try:
        for batch in R.batches(tmp_path, 'ros'):
            by_node = {}
            for key in batch.keys:
                by_node.setdefault(R.ros_nodes(key)[0], []).append(key)
            # one node at a time: the bridge's command subscription and the controller's publisher of a
            # ros.output_type other than float64_multi_array cannot share a topic in one process
            for name, keys in sorted(by_node.items()):
                part = dataclasses.replace(batch, keys=keys)
                part.__dict__['resolved'] = batch.resolved  # resolve(file) once per file
                nodes = _start([name], batch.path)
                done = R.check_batch(part, _views(nodes), tmp_path, R.ros_nodes)
                for key in done:
                    R.check_parameters(part, key, nodes[name], tmp_path)
                R.check_node_reads(part, nodes, tmp_path)
                R.removed_keys_absent(part, _views(nodes)[name], tmp_path)
                proven.update(done)
                nodes.pop(name).destroy_node()
    finally:
        for node in nodes.values():
            node.destroy_node()
        rclpy.try_shutdown()
    assert set(proven) == {k for k in schema_keys() if not R.not_applicable('ros', k)}


# ----------------------------------------------------------------------------- launch arguments

#: launch file -> {argument: (the key it sets, its value in the setup file, the value given, the nodes)};
#: every other argument of our launch files is not a setting (LAUNCH_NOT_SETTINGS)
LAUNCH_ARGUMENTS = {
    'sim.launch.py': {
        'rate': ('control.rate', 500.0, '250', ('uk_sim_node', 'uk_controller_node')),
        'plant': ('simulation.plant', 'mujoco', 'uk', ('uk_sim_node',)),
        'real_time_factor': ('simulation.real_time_factor', 0.5, '2.0', ('uk_sim_node',)),
        'max_command_lag': ('simulation.max_command_lag', 2, '1', ('uk_sim_node',)),
    },
    'hardware.launch.py': {
        'rate': ('control.rate', 500.0, '400', ('serial_bridge_node', 'uk_controller_node')),
        'port': ('hardware.port', '/dev/ttyREACHFILE', '/dev/ttyREACHGIVEN', ('serial_bridge_node',)),
        'baud': ('hardware.baud', 57600, '115200', ('serial_bridge_node',)),
        'protocol': ('hardware.protocol', 'dynamixel', 'odrive', ('serial_bridge_node',)),
        'bus_rate': ('hardware.rate', 250.0, '200', ('serial_bridge_node',)),
        'watchdog': ('hardware.watchdog', 0.05, '0.1', ('serial_bridge_node',)),
    },
}
#: more keys of the setup file: max_command_lag needs the /clock the plant of sim.launch.py publishes
LAUNCH_FILE_EXTRA = {'sim.launch.py': {'simulation.publish_clock': True}}
#: which setup file (robot, config), gz sim's command line, the controller_manager file, the plot viewer
LAUNCH_NOT_SETTINGS = {'robot', 'config', 'gz_args', 'controllers', 'tool'}


def test_launch_tables_cover_every_argument():
    from test_launch_files import LAUNCH_FILES, LaunchSource

    for path in LAUNCH_FILES:
        src = LaunchSource(path)
        declared = {c.args[0].value for c in src.calls if src.name(c) == 'DeclareLaunchArgument'}
        assert declared - LAUNCH_NOT_SETTINGS == set(LAUNCH_ARGUMENTS.get(path.name, {})), path.name


def _launched(node, directory):
    """One node of a launch description built in this process with its parameters as launch_ros hands
    them over: each file and each dict (written as a ``/**`` params file) a ``--params-file``, in order."""
    from ros_nodes import params_file

    from uk_controller.ros.controller_node import ControllerNode
    from uk_controller.ros.serial_bridge_node import SerialBridgeNode
    from uk_controller.ros.sim_node import SimNode

    classes = {'uk_controller_node': ControllerNode, 'uk_sim_node': SimNode, 'serial_bridge_node': SerialBridgeNode}
    args = ['--ros-args']
    for item in node['parameters']:
        args += ['--params-file', str(item) if isinstance(item, (str, os.PathLike)) else params_file(item, directory)]
    built = classes[node['executable']](cli_args=[*args, '-r', f'__node:={node["name"]}'])
    if node['executable'] == 'uk_controller_node':
        built.loop.stop()  # its loop thread never started
    return built


@pytest.mark.parametrize('launch', sorted(LAUNCH_ARGUMENTS))
def test_launch_arguments_reach_the_nodes_and_the_file_holds_the_rest(launch, tmp_path):
    """With no argument given, each node runs the setup file's value of every key a launch argument could
    set; with every argument given, the node's parameter and settings are the argument's value."""
    from launch_stub import launch_nodes

    table = LAUNCH_ARGUMENTS[launch]
    tree = yaml.safe_load((ROOT / 'config' / 'scara.yaml').read_text())
    params = tree['/**']['ros__parameters']
    extra = LAUNCH_FILE_EXTRA.get(launch, {})
    for key, in_file in [*((k, f) for k, f, _g, _n in table.values()), *extra.items()]:
        section, name = key.split('.')
        params.setdefault(section, {})[name] = in_file
    path = tmp_path / 'scara_launch.yaml'
    path.write_text(rcl_yaml.dump(tree))
    path_of = ROOT / 'launch' / launch
    given = {argument: value for argument, (_k, _f, value, _n) in table.items()}
    rclpy.init()
    try:
        for arguments in ({}, given):
            started = {n['executable']: n for n in launch_nodes(path_of, config=str(path), **arguments)}
            for name in sorted({n for *_, nodes in table.values() for n in nodes}):
                node = _launched(started[name], tmp_path)
                try:
                    for argument, (key, in_file, value, nodes) in table.items():
                        if name not in nodes:
                            continue
                        want = type(in_file)(value) if argument in arguments else in_file
                        assert R.same_value(want, R.setting_at(node.settings, key)), (launch, name, key, arguments)
                        assert R.same_value(want, R.plain(node.get_parameter(key).value)), (launch, name, key)
                finally:
                    node.destroy_node()
    finally:
        rclpy.try_shutdown()
