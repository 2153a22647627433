"""Launch files, controller configuration and package manifest, checked without a ROS install.

- With the real `launch`/`launch_ros` importable, every launch file returns a
  LaunchDescription (skipped only when they are not installed).
- Always: every package, executable, share file, launch argument and node
  parameter a launch file names exists (parsed from the source with `ast`);
  controller joint lists in config/controllers.yaml are actuated URDF joints
  and equal each robot's ros.effort_joints; package.xml declares every ROS
  package that our nodes import and our launch files use.
"""

import ast
import importlib
import importlib.util
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from launch_stub import launch_nodes, node_settings

from uk_controller.files import rcl_yaml
from uk_controller.paths import available_configs, resolve_data_file
from uk_controller.ros import params as P
from uk_controller.settings import schema as S

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / 'launch').glob('*.launch.py'))
PACKAGE = 'uk_controller'


def _package_xml_depends():
    tree = ET.parse(ROOT / 'package.xml')
    return {
        e.text.strip()
        for e in tree.getroot()
        if e.tag in ('depend', 'exec_depend', 'build_depend', 'test_depend', 'buildtool_depend')
    }


def _console_scripts():
    source = (ROOT / 'setup.py').read_text()
    return set(re.findall(r"'([\w-]+)\s*=\s*uk_controller[\w.]*:\w+'", source))


def _robot_params(robot):
    return yaml.safe_load((ROOT / 'config' / f'{robot}.yaml').read_text())['/**']['ros__parameters']


def _urdf_joints(robot):
    urdf = ET.parse(resolve_data_file(_robot_params(robot)['robot']['urdf'])).getroot()
    return {j.get('name'): j.get('type') for j in urdf.iter('joint') if j.get('type') is not None}


class LaunchSource:
    """What one launch file names, read from its AST."""

    def __init__(self, path):
        self.path = path
        self.tree = ast.parse(path.read_text(), str(path))
        self.calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)]

    @staticmethod
    def name(call):
        f = call.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ''

    def kw(self, call, key):
        return next((k.value for k in call.keywords if k.arg == key), None)

    def constant(self, name):
        """Module-level literal `name` (dicts: key -> first element of a tuple value)."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == name for t in node.targets):
                if isinstance(node.value, ast.Dict):
                    return {
                        k.value: (v.elts[0].value if isinstance(v, ast.Tuple) else ast.literal_eval(v))
                        for k, v in zip(node.value.keys, node.value.values)
                    }
                try:
                    return ast.literal_eval(node.value)
                except ValueError:  # computed when the file runs (ROBOTS = tuple(available_configs()))
                    return None
        return None

    def value(self, node):
        """A string argument: a literal or a module constant."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.constant(node.id)
        return None

    def nodes(self):
        out = []
        for call in self.calls:
            if self.name(call) == 'Node':
                pkg, exe = self.kw(call, 'package'), self.kw(call, 'executable')
                out.append((self.value(pkg), self.value(exe), call))
        return out

    def strings_in(self, node):
        return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    def node_parameter_names(self, call):
        """Keys of the dict literals (and dict(..., key=...) calls) in `parameters=[...]`."""
        names = set()
        value = self.kw(call, 'parameters')
        if value is None:
            return names
        for n in ast.walk(value):
            if isinstance(n, ast.Dict):
                names |= {k.value for k in n.keys if isinstance(k, ast.Constant)}
            if isinstance(n, ast.Call) and self.name(n) == 'dict':
                names |= {k.arg for k in n.keywords if k.arg}
            if isinstance(n, ast.Name):  # a dict built in the function: follow its assignments
                names |= self.dict_keys_of(n.id)
        return names

    def dict_keys_of(self, var):
        keys = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == var for t in node.targets):
                for n in ast.walk(node.value):
                    if isinstance(n, ast.Dict):
                        keys |= {k.value for k in n.keys if isinstance(k, ast.Constant)}
                    if isinstance(n, ast.Call) and self.name(n) == 'dict':
                        keys |= {k.arg for k in n.keywords if k.arg}
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Subscript)
                and getattr(node.targets[0].value, 'id', None) == var
                and isinstance(node.targets[0].slice, ast.Constant)
            ):
                keys.add(node.targets[0].slice.value)
        return keys


def _real_launch_available():
    """The ROS `launch` package, not our own launch/ folder seen as a namespace package."""
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != ROOT]
        sys.modules.pop('launch', None)
        launch = importlib.import_module('launch')
        importlib.import_module('launch_ros')
        return hasattr(launch, 'LaunchDescription')
    except ImportError:
        return False
    finally:
        sys.path[:] = saved


def test_there_are_the_four_launch_files():
    assert {p.name for p in LAUNCH_FILES} >= {
        'sim.launch.py',
        'gazebo.launch.py',
        'hardware.launch.py',
        'plot.launch.py',
    }


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_returns_a_launch_description(path, monkeypatch):
    if not _real_launch_available():
        pytest.skip('ROS 2 launch/launch_ros are not installed')
    import launch

    spec = importlib.util.spec_from_file_location(path.stem.replace('.', '_'), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert isinstance(module.generate_launch_description(), launch.LaunchDescription)


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_every_package_executable_and_argument_exists(path):
    src = LaunchSource(path)
    depends = _package_xml_depends()
    scripts = _console_scripts()
    nodes = src.nodes()
    assert nodes, 'a launch file that starts nothing'
    for package, executable, _ in nodes:
        if package == PACKAGE:
            assert executable in scripts, f'{path.name}: {executable} is not a console script of setup.py'
        else:
            assert package in depends, f'{path.name}: package {package} is not in package.xml'
    declared = {c.args[0].value for c in src.calls if src.name(c) == 'DeclareLaunchArgument'}
    used = {
        c.args[0].value
        for c in src.calls
        if src.name(c) == 'LaunchConfiguration' and isinstance(c.args[0], ast.Constant)
    }
    # LaunchConfiguration(argument) in a loop over a table of arguments
    used |= set(src.constant('BRIDGE_ARGUMENTS') or ()) | set(src.constant('SIM_ARGUMENTS') or ())
    assert used <= declared, f'{path.name}: undeclared launch arguments {used - declared}'
    for call in src.calls:
        if src.name(call) == 'get_package_share_directory':
            assert src.value(call.args[0]) in depends | {PACKAGE}


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_every_share_file_a_launch_file_names_exists(path):
    src = LaunchSource(path)
    robots = src.constant('ROBOTS') or ()
    if not robots and 'available_configs()' in path.read_text():  # the shipped setups, read from config/
        robots = available_configs()
        assert {'scara', 'five_bar', 'planar_3r'} <= set(robots)
    for robot in robots:
        assert (ROOT / 'config' / f'{robot}.yaml').is_file(), f'{path.name}: robot {robot} has no config'
        robot_section = _robot_params(robot)['robot']
        description = next(robot_section[k] for k in ('urdf', 'mjcf', 'sdf') if k in robot_section)
        assert resolve_data_file(description) is not None, f'{robot}: {description} missing'
    for call in src.calls:
        if src.name(call) == 'join' and len(call.args) >= 3 and getattr(call.args[0], 'id', '') == 'share':
            parts = call.args[1:]
            if all(isinstance(a, ast.Constant) for a in parts):
                assert (ROOT.joinpath(*[a.value for a in parts])).is_file(), ast.unparse(call)


def _our_node_parameters():
    """Parameters uk_controller_node / uk_sim_node understand: config keys of docs/config.md + node-only ones."""
    return (
        {'config', 'robot_description', 'use_sim_time'}
        | {s.key for s in S.SETTINGS if s.key.startswith('ros.') and s.key.count('.') == 1}
        | {
            'ros.effort_joints',
            'control.rate',
            'control.state_timeout',
            'simulation.publish_clock',
            'simulation.lockstep',
            'simulation.real_time_factor',
            'simulation.rate',
            'simulation.clock_start',
            'simulation.max_command_lag',
            'simulation.plant',
        }
    )


def _is_bridge_parameter(name):
    """serial_bridge_node reads its parameters as the other nodes do: `config`, `robot_description`
    and keys of the robot YAML (the settings schema), e.g. hardware.port."""
    return name in P.NODE_ONLY or name == 'use_sim_time' or S.lookup(name) is not None


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_node_parameters_named_in_launch_files_exist(path):
    src = LaunchSource(path)
    for package, executable, call in src.nodes():
        names = src.node_parameter_names(call)
        if package == PACKAGE and executable in ('uk_controller_node', 'uk_sim_node'):
            if executable == 'uk_sim_node':
                names |= set((src.constant('SIM_ARGUMENTS') or {}).values())
            unknown = names - _our_node_parameters()
            assert not unknown, f'{path.name}: {executable} has no parameters {unknown}'
        elif executable == 'serial_bridge_node':
            wanted = names | set((src.constant('BRIDGE_ARGUMENTS') or {}).values())
            unknown = {name for name in wanted if not _is_bridge_parameter(name)}
            assert not unknown, f'{path.name}: serial_bridge_node does not declare {unknown}'
        elif executable == 'robot_state_publisher':
            assert names <= {'robot_description', 'use_sim_time'}


#: launch arguments that are not settings of the robot setup: which setup file to read (robot), gz sim's
#: own command line (gz_args) and the plot viewer (tool); their defaults are the launch file's
NOT_SETTINGS = {'robot', 'gz_args', 'tool'}
#: parameters a launch file sets on its nodes by itself: the file and how the nodes are wired to each other
#: (the plant of sim.launch.py drives /clock, gazebo.launch.py's controller publishes to Gazebo's effort
#: controller); every other setting comes from the setup file or a launch argument that was given
WIRING = {'config', 'use_sim_time', 'robot_description', 'simulation.publish_clock', 'ros.effort_topic'}


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_arguments_default_to_the_setup_file(path):
    """A launch argument that sets a setting defaults to nothing, and nothing reaches a node for it unless
    it is given: the default is the setup file's value, else the schema's, never the launch file's."""
    src = LaunchSource(path)
    for call in src.calls:
        if src.name(call) == 'DeclareLaunchArgument' and call.args[0].value not in NOT_SETTINGS:
            default = src.kw(call, 'default_value')
            assert default is not None and default.value == '', (
                f'{path.name}: {call.args[0].value} has the default {ast.unparse(default)}, not the setup file\'s'
            )
    try:
        nodes = launch_nodes(path)
    except KeyError:  # PackageNotFoundError: gazebo.launch.py includes ros_gz_sim's, not installed here
        nodes = []
    for node in nodes:
        for item in node.get('parameters', ()):
            if isinstance(item, dict):
                extra = set(item) - WIRING
                assert not extra, f'{path.name}: {node["executable"]} gets {extra} without a launch argument'


def _setup_file(tmp_path, robot, **sections):
    """A copy of config/<robot>.yaml (its files named by package://) with `sections` merged in."""
    tree = yaml.safe_load((ROOT / 'config' / f'{robot}.yaml').read_text())
    params = tree['/**']['ros__parameters']
    for section, values in sections.items():
        params.setdefault(section, {}).update(values)
    path = tmp_path / f'my_{robot}.yaml'
    path.write_text(rcl_yaml.dump(tree))  # names such as y quoted, as ROS needs them
    return path


def test_sim_launch_keeps_the_simulation_settings_of_the_file(tmp_path):
    """config:=my.yaml with no other argument: the nodes run the file's plant, real-time factor, command
    lag and rate; the arguments that are given still win."""
    path = _setup_file(
        tmp_path,
        'five_bar',
        control={'rate': 500.0},
        simulation={'plant': 'mujoco', 'real_time_factor': 0.5, 'max_command_lag': 2, 'publish_clock': True},
    )
    launch = ROOT / 'launch' / 'sim.launch.py'
    nodes = {
        n['executable']: node_settings(n) for n in launch_nodes(launch, config=str(path)) if n['package'] == PACKAGE
    }
    sim = nodes['uk_sim_node'].simulation
    assert (sim.plant, sim.real_time_factor, sim.max_command_lag, sim.publish_clock) == ('mujoco', 0.5, 2, True)
    assert nodes['uk_sim_node'].control.rate == nodes['uk_controller_node'].control.rate == 500.0
    given = launch_nodes(launch, config=str(path), plant='uk', rate='250', real_time_factor='2.0', max_command_lag='1')
    nodes = {n['executable']: node_settings(n) for n in given if n['package'] == PACKAGE}
    sim = nodes['uk_sim_node'].simulation
    assert (sim.plant, sim.real_time_factor, sim.max_command_lag) == ('uk', 2.0, 1)
    assert nodes['uk_sim_node'].control.rate == nodes['uk_controller_node'].control.rate == 250.0


def test_hardware_launch_rate_is_the_control_rate_and_the_bus_follows(tmp_path):
    """rate:= is control.rate of both nodes; the bus runs at it unless the file (or bus_rate:=) sets
    hardware.rate."""
    launch = ROOT / 'launch' / 'hardware.launch.py'
    nodes = {n['executable']: node_settings(n) for n in launch_nodes(launch, robot='scara', rate='200')}
    assert nodes['serial_bridge_node'].control.rate == nodes['uk_controller_node'].control.rate == 200.0
    assert nodes['serial_bridge_node'].hardware.rate == 200.0
    path = _setup_file(tmp_path, 'scara', hardware={'rate': 400.0})
    nodes = {n['executable']: node_settings(n) for n in launch_nodes(launch, config=str(path), rate='200')}
    assert nodes['serial_bridge_node'].hardware.rate == 400.0
    assert nodes['uk_controller_node'].control.rate == 200.0


def test_controllers_yaml_joints_are_actuated_urdf_joints_in_effort_joint_order():
    controllers = yaml.safe_load((ROOT / 'config' / 'controllers.yaml').read_text())
    manager = controllers['controller_manager']['ros__parameters']
    assert manager['joint_state_broadcaster']['type'] == 'joint_state_broadcaster/JointStateBroadcaster'
    effort = {k: v['ros__parameters'] for k, v in controllers.items() if k.endswith('_effort_controller')}
    gazebo = LaunchSource(ROOT / 'launch' / 'gazebo.launch.py').constant('ROBOTS')
    assert {f'{r}_effort_controller' for r in gazebo} <= set(effort)
    for name, spec in effort.items():
        robot = name[: -len('_effort_controller')]
        assert spec['type'] == 'effort_controllers/JointGroupEffortController'
        joints = _urdf_joints(robot)
        for j in spec['joints']:
            assert joints.get(j) in ('revolute', 'continuous', 'prismatic'), f'{name}: {j} not a URDF joint'
        params = _robot_params(robot)
        expected = (params.get('ros') or {}).get('effort_joints') or [
            P.actuator_joint(params, a) or a for a in params['actuators']['names']
        ]
        assert spec['joints'] == expected, f'{name}: joints differ from {robot}.yaml ros.effort_joints'


ROS_PACKAGES_OF_LAUNCH = {'launch', 'launch_ros', 'ament_index_python'}


def _imported_ros_packages():
    """Top-level ROS packages imported by uk_controller/ros/*.py and launch/*.py."""
    known = {
        'rclpy',
        'sensor_msgs',
        'std_msgs',
        'std_srvs',
        'diagnostic_msgs',
        'trajectory_msgs',
        'rcl_interfaces',
        'rosgraph_msgs',
        'builtin_interfaces',
        'geometry_msgs',
        'launch',
        'launch_ros',
        'ament_index_python',
    }
    found = {}
    for path in [*(ROOT / 'uk_controller' / 'ros').glob('*.py'), *LAUNCH_FILES]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                mods = [node.module]
            else:
                continue
            for mod in mods:
                top = mod.split('.')[0]
                if top in known:
                    found.setdefault(top, path.name)
    return found


def test_package_xml_lists_every_ros_package_used():
    depends = _package_xml_depends()
    used = dict(_imported_ros_packages())
    for path in LAUNCH_FILES:
        src = LaunchSource(path)
        for package, _, _ in src.nodes():
            if package != PACKAGE:
                used.setdefault(package, path.name)
        for call in src.calls:
            if src.name(call) == 'get_package_share_directory' and src.value(call.args[0]) != PACKAGE:
                used.setdefault(src.value(call.args[0]), path.name)
    missing = {pkg: where for pkg, where in used.items() if pkg not in depends}
    assert not missing, f'package.xml lacks <exec_depend> for {missing} (package: file that uses it)'


# every setup described by a URDF (the *_mjcf setups have none: no Gazebo/ros2_control blocks)
ALL_ROBOTS = sorted(
    p.stem
    for p in (ROOT / 'config').glob('*.yaml')
    if not p.stem.startswith('controllers') and 'urdf' in _robot_params(p.stem)['robot']
)


@pytest.mark.parametrize('robot', ALL_ROBOTS)
def test_urdf_ros2_control_and_gazebo_blocks_match_the_setup(robot):
    params = _robot_params(robot)
    urdf = ET.parse(resolve_data_file(params['robot']['urdf'])).getroot()
    blocks = urdf.findall('ros2_control')
    assert len(blocks) == 1, 'one <ros2_control> block'
    assert blocks[0].find('hardware/plugin').text.strip() == 'gz_ros2_control/GazeboSimSystem'
    declared = {j.get('name'): j for j in blocks[0].findall('joint')}
    assert list(declared) == params['robot']['joints'], 'every model joint, in q order'
    for name, joint in declared.items():
        states = [s.get('name') for s in joint.findall('state_interface')]
        assert states == ['position', 'velocity'], name
    commanded = [
        n for n, j in declared.items() if [c.get('name') for c in j.findall('command_interface')] == ['effort']
    ]
    controllers = yaml.safe_load((ROOT / 'config' / 'controllers.yaml').read_text())
    spec = controllers.get(f'{robot}_effort_controller')
    if spec is not None:
        assert commanded == spec['ros__parameters']['joints']
    tree_joints = _urdf_joints(robot)
    for name in commanded:
        limit = float(next(j for j in urdf.iter('joint') if j.get('name') == name).find('limit').get('effort'))
        cmd = declared[name].find('command_interface')
        assert (
            float(cmd.find("param[@name='max']").text) == limit and float(cmd.find("param[@name='min']").text) == -limit
        )
        assert tree_joints[name] != 'fixed'
    plugins = [p for g in urdf.findall('gazebo') for p in g.findall('plugin')]
    assert [p.get('filename') for p in plugins] == ['gz_ros2_control-system']
    parameters = plugins[0].find('parameters').text.strip()
    assert parameters == '$(find uk_controller)/config/controllers.yaml'
    assert (ROOT / 'config' / 'controllers.yaml').is_file()
    links = {link.get('name') for link in urdf.iter('link')} | {'world'}
    closures = [
        n
        for n in (params.get('constraints') or {}).get('names', [])
        if params['constraints'][n].get('role') == 'passive' and params['constraints'][n].get('type') == 'loop_closure'
    ]
    sdf_joints = {j.get('name'): j for g in urdf.findall('gazebo') for j in g.findall('joint')}
    assert set(sdf_joints) == set(closures), 'one SDF joint per loop closure'
    for name, joint in sdf_joints.items():
        assert joint.get('type') == 'revolute'
        assert joint.find('parent').text in links and joint.find('child').text in links - {'world'}


@pytest.mark.parametrize('robot', ALL_ROBOTS)
def test_pinocchio_still_loads_the_urdf_with_the_configured_joints(robot):
    pin = pytest.importorskip('pinocchio')
    params = _robot_params(robot)
    model = pin.buildModelFromUrdf(str(resolve_data_file(params['robot']['urdf'])))
    assert [model.names[i] for i in range(1, model.njoints)] == params['robot']['joints']
