"""plot.launch.py and the PlotJuggler layouts follow each robot's task/closure rows.

The shipped config/plotjuggler/<robot>.xml equal what uk_controller.ros.plot_layout
generates from the robot now (regenerate with
`python -m uk_controller.ros.plot_layout --write config/plotjuggler ROBOT...`);
the row counts are checked here against the robot YAML's constraint axes
(counted independently of the loader) and, over DDS, against the messages the
node really publishes (test_rcl_params.py).
"""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from launch_stub import launch_nodes

from uk_controller.ros.plot_layout import LOOP_TIMING_FIELDS, PlotRows, plotjuggler_layout

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = sorted(p.stem for p in (ROOT / 'config').glob('*.yaml') if not p.stem.startswith('controllers'))


def yaml_rows(robot):
    """(task rows, closure rows, actuators) counted from the YAML: axes per frame constraint, 1 per
    joint_linear row, 6 for a welded closure (docs/config.md)."""
    params = yaml.safe_load((ROOT / 'config' / f'{robot}.yaml').read_text())['/**']['ros__parameters']
    cons = params['constraints']
    counts = {'servo': 0, 'passive': 0}
    for name in cons['names']:
        c = cons[name]
        if c.get('mode') == 'weld':
            rows = 6
        elif 'axes' in c:
            rows = len(c['axes'])
        elif c['type'] == 'joint_linear':
            rows = 1
        else:
            rows = len(c.get('rows') or c.get('coefficients') or [0]) or 1
        counts[c['role']] += rows
    return counts['servo'], counts['passive'], len(params['actuators']['names'])


@pytest.mark.parametrize('robot', ROBOTS)
def test_shipped_layout_is_the_generated_one_for_the_robot_rows(robot):
    rows = PlotRows.load(robot)
    params = yaml.safe_load((ROOT / 'config' / f'{robot}.yaml').read_text())['/**']['ros__parameters']
    if 'urdf' in params['robot']:  # *_mjcf setups take their closures from the MJCF file
        assert (rows.task, rows.closure, rows.efforts) == yaml_rows(robot)
    shipped = (ROOT / 'config' / 'plotjuggler' / f'{robot}.xml').read_text()
    assert shipped == plotjuggler_layout(rows), 'regenerate: python -m uk_controller.ros.plot_layout --write ...'
    root = ET.fromstring(shipped.split('\n', 2)[2])
    titles = [a.get('name') for a in root.iter('DockArea')]
    assert titles[0].startswith('task error') and titles[-1].startswith('loop timing')
    assert any(t.startswith('closure residual') for t in titles) == (rows.closure > 0)
    timing = [c.get('name') for c in list(root.iter('DockArea'))[-1].iter('curve')]
    assert timing == [f'/uk_controller_node/loop_timing/data[{i}]' for i in range(len(LOOP_TIMING_FIELDS))]


@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'dual_arm'])
def test_plot_launch_rows_come_from_the_robot_and_wait_for_the_topics(robot):
    task, closure, _ = yaml_rows(robot)
    nodes = launch_nodes(ROOT / 'launch' / 'plot.launch.py', robot=robot)
    assert [n['executable'] for n in nodes] == ['uk_wait_for_topics', 'rqt_plot']  # rqt_plot after the wait
    fields = nodes[1]['arguments']
    assert fields == [f'/uk_controller_node/task_error/data[{i}]' for i in range(task)] + [
        f'/uk_controller_node/constraint_residual/data[{i}]' for i in range(closure)
    ]
    assert '/uk_controller_node/task_error' in nodes[0]['arguments']
    pj = launch_nodes(ROOT / 'launch' / 'plot.launch.py', robot=robot, tool='plotjuggler')
    assert pj[1]['executable'] == 'plotjuggler'
    assert pj[1]['arguments'] == ['--layout', str(ROOT / 'config' / 'plotjuggler' / f'{robot}.xml')]
