"""Every robot gazebo.launch.py offers survives libsdformat's URDF -> SDF conversion whole.

gz sim spawns ``robot_description`` through ``ros_gz_sim create``, which hands the URDF to
libsdformat's URDF parser. That parser -- not a rule we wrote about it -- is the judge here
(test/sdformat_converter.py compiles a small program against libsdformat-dev): the description
exactly as the launch file builds it (``paths.gazebo_robot_description``) converts without an
error into a model with every link that has mass, every movable joint of the URDF (same type,
parent and child), the base fixed to the world, and the gz_ros2_control plugin pointing at the
controller file; gz_ros2_control then matches the URDF's <ros2_control> joints by name against
that model, so each of them must be a movable joint there, with an effort command interface.

Massless links hung on a fixed joint (the SCARA's ``tool``) are lumped away by the converter;
they carry nothing Gazebo simulates, and the test checks that nothing with mass goes with them.
"""

import ast
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from sdformat_converter import convert

ROOT = Path(__file__).resolve().parents[1]
GAZEBO = ROOT / 'launch' / 'gazebo.launch.py'
CLOSED = {'five_bar', 'five_bar_redundant', 'dual_arm'}
MOVABLE = {'revolute', 'continuous', 'prismatic'}


def launch_constant(name):
    tree = ast.parse(GAZEBO.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(name)


def launch_description(robot, tmp_path):
    """The URDF text gazebo.launch.py gives robot_state_publisher (and so Gazebo), written to a file."""
    from uk_controller.paths import gazebo_robot_description

    _, text = gazebo_robot_description(robot)
    path = tmp_path / f'{robot}.urdf'
    path.write_text(text)
    return path, ET.fromstring(text)


def urdf_facts(urdf):
    """(masses of links, joints name -> (type, parent, child)) as the URDF states them."""
    masses = {}
    for link in urdf.findall('link'):
        mass = link.find('inertial/mass')
        masses[link.get('name')] = float(mass.get('value')) if mass is not None else 0.0
    joints = {
        j.get('name'): (j.get('type'), j.find('parent').get('link'), j.find('child').get('link'))
        for j in urdf.findall('joint')
    }
    return masses, joints


@pytest.mark.parametrize('robot', launch_constant('ROBOTS'))
@pytest.mark.slow
def test_libsdformat_converts_the_launch_description_whole(robot, tmp_path):
    path, urdf = launch_description(robot, tmp_path)
    report = convert(path, label=f'{robot} (gazebo.launch.py robot:={robot})')
    assert report.errors == [] and report.returncode == 0, report.text
    assert report.model == urdf.get('name')

    masses, joints = urdf_facts(urdf)
    massive = {name for name, mass in masses.items() if mass > 0}
    assert set(report.links) == massive, f'links with mass lost or invented: {report.text}'
    assert {n: report.links[n] for n in massive} == pytest.approx({n: masses[n] for n in massive})
    # what the converter lumps away is massless and carries no massive link below it
    children = {parent: [] for parent in masses}
    for _, parent, child in joints.values():
        children[parent].append(child)

    def subtree_mass(link):
        return masses[link] + sum(subtree_mass(c) for c in children[link])

    for name in set(masses) - set(report.links) - {'world'}:
        assert subtree_mass(name) == 0.0, f'{name} dropped with mass below it'

    movable = {n: spec for n, spec in joints.items() if spec[0] in MOVABLE}
    assert movable, 'a Gazebo robot with nothing to move'
    for name, (kind, parent, child) in movable.items():
        assert report.joints.get(name) == (kind, parent, child), f'{name}: {report.text}'
    anchors = [spec for spec in report.joints.values() if spec[1] == 'world']
    assert anchors and all(kind == 'fixed' for kind, _, _ in anchors), 'the base is fixed to the world'

    plugins = [p for p in report.plugins if p['filename'] == 'gz_ros2_control-system']
    assert len(plugins) == 1, report.text
    controllers = Path(plugins[0]['parameters'])
    assert controllers.is_file(), f'gz_ros2_control <parameters> {controllers} does not exist'
    spec = yaml.safe_load(controllers.read_text())[f'{robot}_effort_controller']['ros__parameters']

    # gz_ros2_control reads <ros2_control> from robot_description and finds each joint in the model
    block = urdf.find('ros2_control')
    assert block.find('hardware/plugin').text.strip() == 'gz_ros2_control/GazeboSimSystem'
    effort_joints = []
    for joint in block.findall('joint'):
        name = joint.get('name')
        assert report.joints.get(name, ('missing',))[0] in MOVABLE, f'{name} is not a movable joint in the SDF model'
        assert [s.get('name') for s in joint.findall('state_interface')] == ['position', 'velocity']
        if [c.get('name') for c in joint.findall('command_interface')] == ['effort']:
            effort_joints.append(name)
    assert set(effort_joints) == set(movable), 'every movable joint takes an effort command'
    assert spec['joints'] == effort_joints and spec['type'] == 'effort_controllers/JointGroupEffortController'


@pytest.mark.slow
def test_the_converter_fails_the_massless_base_link_that_spawned_empty_models(tmp_path):
    """A base_link without <inertial>: libsdformat keeps no link of it ("A model must have at least one
    link"), and the test above would fail on it."""
    path, urdf = launch_description('scara', tmp_path)
    base = next(link for link in urdf.findall('link') if link.get('name') == 'base_link')
    base.remove(base.find('inertial'))
    old = tmp_path / 'scara_massless_base.urdf'
    ET.ElementTree(urdf).write(old)
    report = convert(old, label='scara with a massless base_link (the old URDF)')
    assert report.returncode != 0 and any('at least one link' in e for e in report.errors)
    assert report.links == {}


def test_closed_chains_are_not_offered_and_the_launch_names_the_alternative():
    offered = set(launch_constant('ROBOTS'))
    refused = launch_constant('CLOSED_CHAINS')
    assert offered == {'scara', 'planar_3r'} and set(refused) == CLOSED
    assert all('sim.launch.py' in why and 'plant:=mujoco' in why for why in refused.values())
    limits = (ROOT / 'docs' / 'limits.md').read_text()  # the known limits a user reads
    assert 'gz-physics#25' in limits and 'plant:=mujoco' in limits
