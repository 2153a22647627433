"""What libsdformat's URDF -> SDF conversion needs for gz sim to spawn our robots.

sdformat (parser_urdf.cc) drops a link without mass unless it is `world` or the
child of a fixed joint (then it is lumped into its parent), and with it every
link below it; a root `base_link` without mass leaves "a model must have at
least one link" and gz sim spawns nothing. The rule checked here: every link of
every URDF that gazebo.launch.py offers is `world`, has a positive mass, or hangs
from a fixed joint; the root is `world` (fixed to the ground, as the
gz_ros2_control demos do). Closed chains are not offered (their loop-closing SDF
joints do not close in gz-physics' DART engine, gazebosim/gz-physics#25); the
launch file names the alternative.
"""
import ast
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GAZEBO = ROOT / 'launch' / 'gazebo.launch.py'
CLOSED = {'five_bar', 'five_bar_redundant', 'dual_arm'}


def launch_constant(name):
    tree = ast.parse(GAZEBO.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(name)


def sdformat_rule_violations(urdf_path):
    """Links sdformat would drop, with the reason (empty: the model converts with all its links)."""
    root = ET.parse(urdf_path).getroot()
    links = {link.get('name'): link for link in root.findall('link')}
    parent_joint = {j.find('child').get('link'): j for j in root.findall('joint')}
    problems = []
    roots = [name for name in links if name not in parent_joint]
    if roots != ['world']:
        problems.append(f'root links {roots}: the root must be `world` with the base fixed to it')
    for name, link in links.items():
        if name == 'world':
            continue
        mass = link.find('inertial/mass')
        massive = mass is not None and float(mass.get('value')) > 0
        joint = parent_joint.get(name)
        if not massive and (joint is None or joint.get('type') != 'fixed'):
            problems.append(f'link {name} has no mass and is not fixed to its parent')
    return problems


def robot_urdf(robot):
    from uk_controller.paths import resolve_data_file
    path = ROOT / 'config' / f'{robot}.yaml'
    params = yaml.safe_load(path.read_text())['/**']['ros__parameters']
    return resolve_data_file(params['robot']['urdf'], path)


@pytest.mark.parametrize('robot', launch_constant('ROBOTS'))
def test_every_gazebo_robot_converts_with_all_its_links(robot):
    assert sdformat_rule_violations(robot_urdf(robot)) == []


def test_the_rule_catches_the_massless_base_link_of_the_old_urdfs(tmp_path):
    """The SCARA URDF without its world link: the failure issue 10 reported."""
    text = robot_urdf('scara').read_text()
    start = text.index('  <link name="world"/>')
    end = text.index('</joint>', start) + len('</joint>')
    old = tmp_path / 'scara.urdf'
    old.write_text(text[:start] + text[end:])
    problems = sdformat_rule_violations(old)
    assert any('base_link' in p for p in problems)


def test_closed_chains_are_not_offered_and_the_launch_names_the_alternative():
    offered = set(launch_constant('ROBOTS'))
    refused = launch_constant('CLOSED_CHAINS')
    assert offered == {'scara', 'planar_3r'} and set(refused) == CLOSED
    assert all('sim.launch.py' in why and 'plant:=mujoco' in why for why in refused.values())
    readme = (ROOT / 'README.md').read_text()
    assert 'gz-physics#25' in readme and 'plant:=mujoco' in readme
