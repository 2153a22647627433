"""Hostile robot descriptions (URDF, MJCF, SDF): each is refused before Pinocchio's parser (or MuJoCo) sees
it, with exit 2 and a message naming the file, the element and what to change. The expected refusals follow
from the formats' rules (a tree of links or bodies with one root, UTF-8 XML, finite numbers,
``lower <= upper``, MJCF's <include>, unique names), not from the reader's output. URDF mimic joints: a
multiplier of 0 runs, a joint mimicking itself or a mimic cycle is refused.

The fuzz applies structured mutations to the shipped planar 3R URDF, the shipped five-bar MJCF files, a
four-bar SDF and (when example-robot-data is installed) Cassie's SDF, and loads each mutant in a child
process, several per process, so that a native crash fails one test instead of the suite."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
URDF = ROOT / 'urdf' / 'planar_3r.urdf'
YAML = ROOT / 'config' / 'planar_3r.yaml'


def _setup(tmp_path, urdf_bytes, name='case'):
    folder = tmp_path / name
    folder.mkdir()
    (folder / 'planar_3r.urdf').write_bytes(urdf_bytes)
    text = YAML.read_text().replace('package://uk_controller/urdf/planar_3r.urdf', 'planar_3r.urdf')
    (folder / 'planar_3r.yaml').write_text(text)
    return folder


def _simulate(folder):
    return subprocess.run(
        [sys.executable, '-m', 'uk_controller.cli', 'simulate', 'planar_3r.yaml', '--duration', '0.05'],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env={'PYTHONPATH': str(ROOT), 'OPENBLAS_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'},
    )


ORIGINAL = URDF.read_text(encoding='utf-8')
CASES = {
    # a joint whose child is an ancestor of its parent: link1 <- link3 <- link2 <- link1
    'cycle': (
        ORIGINAL.replace(
            '<parent link="base_link"/>\n    <child link="link1"/>', '<parent link="link3"/>\n    <child link="link1"/>'
        ).encode(),
        ['cycle', 'shoulder'],
    ),
    'two parents': (
        ORIGINAL.replace('<child link="tool"/>', '<child link="link1"/>').encode(),
        ['link1', 'one parent'],
    ),
    'latin-1': (ORIGINAL.replace('link3', 'link3\u00e9').encode('latin-1'), ['not UTF-8', '0xe9']),
    'nan inertial origin': (
        ORIGINAL.replace('<origin xyz="0.2 0 0"/>', '<origin xyz="nan 0 0"/>', 1).encode(),
        ["link 'link1' <inertial> <origin>", 'finite'],
    ),
    'inverted limits': (
        ORIGINAL.replace('lower="-3.1" upper="3.1"', 'lower="3.1" upper="-3.1"', 1).encode(),
        ["joint 'shoulder' <limit>", 'swap'],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize('case', sorted(CASES))
def test_hostile_urdf_exits_2_naming_file_and_element(tmp_path, case):
    urdf, words = CASES[case]
    assert urdf != URDF.read_bytes(), 'the mutation did not apply'
    proc = _simulate(_setup(tmp_path, urdf))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr
    assert 'planar_3r.urdf' in proc.stderr and 'robot.urdf' in proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


def test_shipped_urdfs_pass_the_check():
    from uk_controller.files.description import check_urdf_text, urdf_text

    files = sorted(ROOT.glob('urdf/**/*.urdf')) + sorted(ROOT.glob('urdf/**/*.xacro'))
    assert files
    for file in files:
        check_urdf_text(urdf_text(file), file)


# ----------------------------------------------------------------------------- fuzz
NUMERIC = [
    ('joint', 'origin', 'xyz'),
    ('joint', 'origin', 'rpy'),
    ('joint', 'axis', 'xyz'),
    ('joint', 'limit', 'lower'),
    ('joint', 'limit', 'upper'),
    ('joint', 'limit', 'effort'),
    ('link', 'inertial/origin', 'xyz'),
    ('link', 'inertial/mass', 'value'),
    ('link', 'inertial/inertia', 'ixx'),
    ('link', 'inertial/inertia', 'ixy'),
]
VALUES = ['nan', 'inf', '-inf', '1e308', '-1e308', '', 'x', '0 0 0', '1 2', '0', '-1', '3.1 0 0']
mutation = st.one_of(
    st.tuples(st.just('number'), st.sampled_from(NUMERIC), st.integers(0, 5), st.sampled_from(VALUES)),
    st.tuples(
        st.just('relink'),
        st.sampled_from(['parent', 'child']),
        st.integers(0, 5),
        st.sampled_from(['world', 'base_link', 'link1', 'link2', 'link3', 'tool', 'ghost']),
    ),
    st.tuples(
        st.just('type'),
        st.just(''),
        st.integers(0, 5),
        st.sampled_from(['fixed', 'continuous', 'prismatic', 'floating', 'planar', 'bogus']),
    ),
)

CHILD = r'''
import json, sys, traceback
from uk_controller.files.parameter_file import ConfigError
from uk_controller.robots import load_robot
for path in sys.argv[1:]:
    try:
        load_robot(path)
        print(json.dumps([path, 'ok']), flush=True)
    except ConfigError as exc:
        print(json.dumps([path, 'refused', str(exc)]), flush=True)
    except Exception:
        print(json.dumps([path, 'crash', traceback.format_exc()]), flush=True)
'''


def _mutate(text, mutations):
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    for kind, what, index, value in mutations:
        if kind == 'number':
            tag, sub, attr = what
            elements = [e.find(sub) for e in root.findall(tag)]
            elements = [e for e in elements if e is not None]
            if elements:
                elements[index % len(elements)].set(attr, value)
        elif kind == 'relink':
            joints = root.findall('joint')
            joints[index % len(joints)].find(what).set('link', value)
        else:
            joints = root.findall('joint')
            joints[index % len(joints)].set('type', value)
    return ET.tostring(root, encoding='unicode')


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.lists(mutation, min_size=1, max_size=3), min_size=4, max_size=4))
def test_fuzzed_urdf_loads_or_is_refused_without_a_crash(tmp_path_factory, batch):
    """Each mutant loads, or is refused with a ConfigError; no traceback, no native crash, no hang."""
    tmp = tmp_path_factory.mktemp('fuzz')
    paths = []
    for i, mutations in enumerate(batch):
        folder = _setup(tmp, _mutate(ORIGINAL, mutations).encode(), name=f'm{i}')
        paths.append(str(folder / 'planar_3r.yaml'))
    proc = subprocess.run(
        [sys.executable, '-c', CHILD, *paths],
        capture_output=True,
        text=True,
        timeout=300,
        env={'PYTHONPATH': str(ROOT), 'OPENBLAS_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'},
    )
    assert proc.returncode == 0, f'child died ({proc.returncode}) on {batch}: {proc.stderr[-2000:]}'
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('[')]
    assert len(results) == len(paths)
    for (path, outcome, *detail), mutations in zip(results, batch):
        assert outcome in ('ok', 'refused'), f'{mutations}: {detail}'


@pytest.mark.parametrize(
    'name, safe',
    [('../evil/x', '_evil_x'), ('a/b', 'a_b'), ('..', 'robot'), ('planar_3r', 'planar_3r'), ('arm 1:é', 'arm_1_')],
)
def test_robot_name_is_one_path_component(name, safe):
    from uk_controller.cli import file_safe

    assert file_safe(name) == safe
    assert '/' not in file_safe(name) and not file_safe(name).startswith('.')


# ============================================================================= MJCF and SDF
# The same rules for the two other formats: each hostile MJCF or SDF is refused before Pinocchio's parser
# (or MuJoCo) sees it, by a ConfigError (exit 2) naming the setup file, the description file, the element
# and what to change. Expected refusals follow from the formats (MuJoCo XML reference: <include>, bodies
# nested in <worldbody>, unique names; SDFormat: one tree of links, finite values), not from our messages.
MJCF = ROOT / 'mjcf' / 'five_bar.xml'
MJCF_REDUNDANT = ROOT / 'mjcf' / 'five_bar_redundant.xml'
MJCF_YAML = ROOT / 'config' / 'five_bar_mjcf.yaml'
MJCF_REDUNDANT_YAML = ROOT / 'config' / 'five_bar_redundant_mjcf.yaml'
ENV = {'PYTHONPATH': str(ROOT), 'OPENBLAS_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'}


def _mjcf_setup(folder, files, base='five_bar'):
    """`folder` with the MJCF `files` (name -> bytes; 'robot.xml' is the main file) and the shipped five-bar
    setup on robot.xml; returns the setup's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    yaml_file = MJCF_YAML if base == 'five_bar' else MJCF_REDUNDANT_YAML
    text = yaml_file.read_text().replace(f'package://uk_controller/mjcf/{base}.xml', 'robot.xml')
    (folder / 'setup.yaml').write_text(text)
    return folder / 'setup.yaml'


def _cli(setup, *extra, timeout=600):
    """``uk-controller simulate <setup>`` in a child process, as a user runs it."""
    return subprocess.run(
        [
            sys.executable,
            '-m',
            'uk_controller.cli',
            'simulate',
            str(setup),
            '--duration',
            '0.05',
            '--no-plots',
            '--out',
            str(Path(setup).parent / 'out'),
            *extra,
        ],
        cwd=Path(setup).parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


def _in_process_cli(setup):
    """``uk-controller simulate <setup>`` in this process: (exit code, stderr); a refusal costs no child."""
    from hostile import run_cli

    code, _, err = run_cli('simulate', setup, '--duration', '0.05', '--no-plots', '--out', Path(setup).parent / 'out')
    return code, err


FIVE_BAR = MJCF.read_text(encoding='utf-8')
_WORLDBODY = FIVE_BAR[FIVE_BAR.index('<worldbody>') : FIVE_BAR.index('</worldbody>') + len('</worldbody>')]
_CONNECT = '<connect name="closure_12" site1="branch1_tip" site2="branch2_tip"/>'


def _five_bar(*edits):
    text = FIVE_BAR
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text.encode()


_BRANCHES = _WORLDBODY[len('<worldbody>') : -len('</worldbody>')]
_JOINT_B1 = '<joint name="joint_b1" type="hinge" axis="0 0 1" range="-3 3"/>'
_NO_BODY = b'<mujoco><default/></mujoco>'
MJCF_CASES = {
    # the main file's <worldbody> is an <include> of a file without a body (an include with the wrong content)
    'include brings no body': (
        {
            'robot.xml': _five_bar((_WORLDBODY, '<worldbody><include file="parts.xml"/></worldbody>'), (_CONNECT, '')),
            'parts.xml': _NO_BODY,
        },
        ['robot.xml', 'parts.xml', 'no <body>'],
    ),
    # the same with the include at the top level (Pinocchio's "no body found in parsed tree" before)
    'include brings no body (top level)': (
        {'robot.xml': _five_bar((_WORLDBODY, '<include file="parts.xml"/>'), (_CONNECT, '')), 'parts.xml': _NO_BODY},
        ['robot.xml', 'parts.xml', 'no <worldbody>'],
    ),
    # the whole model in an include that is not there
    'include missing': (
        {'robot.xml': _five_bar((_WORLDBODY, '<worldbody><include file="branches.xml"/></worldbody>'))},
        ['robot.xml', '<include file="branches.xml">', 'no such file'],
    ),
    # an include of the main file: a cycle MuJoCo refuses ("already included")
    'include cycle': (
        {'robot.xml': _five_bar(('<worldbody>', '<worldbody><include file="robot.xml"/>'))},
        ['<include file="robot.xml">', 'already included'],
    ),
    'nan body pos': (
        {'robot.xml': _five_bar(('<body name="link_b1" pos="0.244 0 0">', '<body name="link_b1" pos="nan 0 0">'))},
        ['<body name="link_b1">', 'pos="nan 0 0"', 'finite'],
    ),
    'inf mass': ({'robot.xml': _five_bar(('mass="1.0771"', 'mass="inf"'))}, ['<inertial>', 'mass="inf"', 'finite']),
    'inverted range': (
        {'robot.xml': _five_bar(('range="-3 3"', 'range="3 -3"'))},
        ['<joint name="joint_b1">', 'range="3 -3"', 'swap'],
    ),
    'zero axis': (
        {'robot.xml': _five_bar((_JOINT_B1, _JOINT_B1.replace('axis="0 0 1"', 'axis="0 0 0"')))},
        ['<joint name="joint_b1">', 'axis="0 0 0"', 'direction'],
    ),
    'short pos': (
        {
            'robot.xml': _five_bar(
                ('<site name="branch1_tip" pos="0.244 0 0"/>', '<site name="branch1_tip" pos="0.244 0"/>')
            )
        },
        ['<site name="branch1_tip">', '3 finite numbers'],
    ),
    'nan polycoef': (
        {
            'robot.xml': _five_bar(
                (
                    _CONNECT,
                    _CONNECT + '<joint name="couple" joint1="joint_b1" joint2="joint_b2" polycoef="0 nan 0 0 0"/>',
                )
            )
        },
        ['<joint name="couple">', 'polycoef', 'finite'],
    ),
    'joint equality with itself': (
        {'robot.xml': _five_bar((_CONNECT, _CONNECT + '<joint name="couple" joint1="joint_b1" joint2="joint_b1"/>'))},
        ['<joint name="couple">', 'itself'],
    ),
    # two bodies with one name: which one a closure or a frame task means is unknowable
    'two bodies named link_b1': (
        {'robot.xml': _five_bar(('<body name="link_b2"', '<body name="link_b1"'))},
        ["a second <body> named 'link_b1'", 'rename'],
    ),
    'latin-1': (
        {'robot.xml': FIVE_BAR.replace('five_bar"', 'five_bar\u00e9"').encode('latin-1')},
        ['not UTF-8', '0xe9'],
    ),
    # MuJoCo's joint types are hinge, slide, ball and free (Pinocchio's message named no element)
    'bogus joint type': (
        {'robot.xml': _five_bar((_JOINT_B1, _JOINT_B1.replace('hinge', 'screw')))},
        ['<joint name="joint_b1">', 'type="screw"', 'hinge, slide, ball, free'],
    ),
    # MuJoCo keeps sites and bodies apart; Pinocchio makes both frames of one name
    'site named like a body': (
        {
            'robot.xml': _five_bar(
                ('<site name="branch1_tip"', '<site name="link_a2"'), ('site1="branch1_tip"', 'site1="link_a2"')
            )
        },
        ['<body name="link_a2">', "named 'link_a2' like a <site>", 'rename one'],
    ),
    # a negative damping reaches the joint dynamics: named with the file, and how to leave it out
    'negative damping': (
        {'robot.xml': _five_bar((_JOINT_B1, _JOINT_B1.replace('/>', ' damping="-1"/>')))},
        ["joint 'joint_b1'", 'damping must be >= 0', 'robot.joint_dynamics: none'],
    ),
    'body under a frame': (
        {'robot.xml': _five_bar((_WORLDBODY, '<worldbody><frame pos="0 0 0">' + _BRANCHES + '</frame></worldbody>'))},
        ['<frame>', 'not read'],
    ),
}


@pytest.mark.parametrize('case', sorted(MJCF_CASES))
def test_hostile_mjcf_exits_2_naming_file_and_element(tmp_path, case):
    files, words = MJCF_CASES[case]
    code, err = _in_process_cli(_mjcf_setup(tmp_path / 'case', files))
    assert code == 2, err
    assert 'robot.mjcf' in err and str(tmp_path / 'case' / 'robot.xml') in err, err
    for word in words:
        assert word in err, err


@pytest.mark.slow
def test_mjcf_include_without_a_body_exits_2_before_pinocchio(tmp_path):
    """The CLI as a user runs it: exit 2, the main file and the include named, not Pinocchio's "no body found"."""
    files, _ = MJCF_CASES['include brings no body']
    proc = _cli(_mjcf_setup(tmp_path, files))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr and 'no body found' not in proc.stderr
    assert str(tmp_path / 'robot.xml') in proc.stderr and 'parts.xml' in proc.stderr


def test_mjcf_split_over_includes_is_the_shipped_model(tmp_path):
    """The five-bar with its branches in two included files (one in a subfolder, found from the main file's
    folder as MuJoCo looks) is the same model as the shipped file, with the same closure and joint order."""
    from uk_controller.robots import load_robot

    branches = _BRANCHES.split('<!-- branch 2')
    files = {
        'robot.xml': _five_bar(
            (
                _WORLDBODY,
                '<worldbody><include file="parts/branch1.xml"/><include file="parts/branch2.xml"/></worldbody>',
            )
        ),
        'parts/branch1.xml': ('<mujoco>' + branches[0] + '</mujoco>').encode(),
        'parts/branch2.xml': ('<mujoco><!-- branch 2' + branches[1] + '</mujoco>').encode(),
    }
    (tmp_path / 'parts').mkdir()
    split, shipped = load_robot(_mjcf_setup(tmp_path, files)), load_robot(str(MJCF_YAML))
    assert split.joint_names == shipped.joint_names and split.passive.names == shipped.passive.names
    q = shipped.q0 + 0.1
    for setup in (split, shipped):
        setup.model.compute(q, np.zeros(setup.n))
    np.testing.assert_array_equal(split.model.M, shipped.model.M)
    np.testing.assert_array_equal(
        split.passive.evaluate(split.model, q, np.zeros(4), 0.0).phi,
        shipped.passive.evaluate(shipped.model, q, np.zeros(4), 0.0).phi,
    )


def test_class_main_without_a_default_loads(tmp_path):
    """``class="main"`` names MuJoCo's top-level default class, written or not; Pinocchio 4.1 stopped at
    "unordered_map::at" unless a <default class="main"> was written."""
    from uk_controller.robots import load_robot

    files = {
        'robot.xml': _five_bar(
            (_JOINT_B1, _JOINT_B1.replace('type=', 'class="main" type=')),
            ('<body name="link_a2"', '<body name="link_a2" childclass="main"'),
        )
    }
    setup, shipped = load_robot(_mjcf_setup(tmp_path, files)), load_robot(str(MJCF_YAML))
    assert setup.joint_names == shipped.joint_names
    setup.model.compute(setup.q0, setup.qd0)
    shipped.model.compute(shipped.q0, shipped.qd0)
    np.testing.assert_array_equal(setup.model.M, shipped.model.M)


def test_shipped_mjcfs_pass_the_check():
    from uk_controller.files.mjcf_check import checked_mjcf

    files = sorted(ROOT.glob('mjcf/**/*.xml'))
    assert files
    for file in files:
        checked_mjcf(file)


# ----------------------------------------------------------------------------- SDF
#: A four-bar in the x-y plane, posed at its zero configuration (every joint at 0 closes the loop): crank
#: A(0,0) -> B(0,0.1), coupler B -> C(0.3,0.12), rocker D(0.35,0) -> C; the revolute joint `loop` at C
#: closes it (a closure of the rocker's point C and the coupler's). Joint axes along z, gravity along -z.
_INERTIA = '<inertia><ixx>{}</ixx><iyy>{}</iyy><izz>{}</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia>'
_LIMIT = '<limit><lower>-3</lower><upper>3</upper><effort>20</effort><velocity>10</velocity></limit>'
FOUR_BAR_SDF = f'''<?xml version="1.0"?>
<sdf version="1.9">
  <model name="four_bar">
    <link name="crank"><pose>0 0 0 0 0 0</pose><inertial><pose>0 0.05 0 0 0 0</pose><mass>0.5</mass>
      {_INERTIA.format(0.001, 0.001, 0.001)}</inertial></link>
    <link name="coupler"><pose>0 0.1 0 0 0 0</pose><inertial><pose>0.15 0.01 0 0 0 0</pose><mass>0.8</mass>
      {_INERTIA.format(0.001, 0.006, 0.006)}</inertial></link>
    <link name="rocker"><pose>0.35 0 0 0 0 0</pose><inertial><pose>-0.025 0.06 0 0 0 0</pose><mass>0.4</mass>
      {_INERTIA.format(0.001, 0.001, 0.001)}</inertial></link>
    <joint name="crank_joint" type="revolute"><parent>world</parent><child>crank</child><pose>0 0 0 0 0 0</pose>
      <axis><xyz>0 0 1</xyz>{_LIMIT}<dynamics><damping>0.01</damping></dynamics></axis></joint>
    <joint name="coupler_joint" type="revolute"><parent>crank</parent><child>coupler</child><pose>0 0 0 0 0 0</pose>
      <axis><xyz>0 0 1</xyz>{_LIMIT}</axis></joint>
    <joint name="rocker_joint" type="revolute"><parent>world</parent><child>rocker</child><pose>0 0 0 0 0 0</pose>
      <axis><xyz>0 0 1</xyz>{_LIMIT}</axis></joint>
    <joint name="loop" type="revolute"><parent>coupler</parent><child>rocker</child><pose>-0.05 0.12 0 0 0 0</pose>
      <axis><xyz>0 0 1</xyz></axis></joint>
  </model>
</sdf>
'''
FOUR_BAR_YAML = '''/**:
  ros__parameters:
    robot:
      name: four_bar
      sdf: four_bar.sdf
      gravity: [0.0, 0.0, -9.81]
    actuators:
      names: [crank_motor]
      crank_motor: {joint: crank_joint}
    constraints:
      names: [crank_angle]
      loop: {axes: ['x', 'y']}
      crank_angle:
        role: servo
        type: joint_linear
        joints: [crank_joint]
        coefficients: [1.0]
        trajectory: {type: line, centre: [0.0], amplitude: 0.1, omega: 1.0}
    stabilization: {convention: critical, omega: 20.0}
    simulation: {duration: 1.0}
'''


def _sdf_setup(folder, sdf_bytes):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / 'four_bar.sdf').write_bytes(sdf_bytes)
    (folder / 'setup.yaml').write_text(FOUR_BAR_YAML)
    return folder / 'setup.yaml'


def _four_bar(*edits):
    text = FOUR_BAR_SDF
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text.encode()


_LOOP_AXIS = '<child>rocker</child><pose>-0.05 0.12 0 0 0 0</pose>\n      <axis><xyz>0 0 1</xyz>'
SDF_CASES = {
    'inf mass': (
        _four_bar(('<mass>0.8</mass>', '<mass>inf</mass>')),
        ['<link name="coupler"><inertial> <mass>', 'finite'],
    ),
    'nan inertia': (_four_bar(('<iyy>0.006</iyy>', '<iyy>nan</iyy>')), ['<link name="coupler">', '<iyy>', 'finite']),
    'inf damping': (
        _four_bar(('<damping>0.01</damping>', '<damping>inf</damping>')),
        ['<joint name="crank_joint"> <axis><dynamics> <damping>', 'finite'],
    ),
    'explicit inf limit': (
        _four_bar(('<upper>3</upper>', '<upper>inf</upper>')),
        ['<joint name="crank_joint"> <axis><limit> <upper>', 'leave the element out'],
    ),
    'inverted limits': (
        _four_bar(('<lower>-3</lower><upper>3</upper>', '<lower>3</lower><upper>-3</upper>')),
        ['<joint name="crank_joint"> <limit>', 'swap'],
    ),
    # the loop joint's axis is never used as an axis (a point closure), but a NaN in the file is still refused
    'nan loop axis': (
        _four_bar((_LOOP_AXIS, _LOOP_AXIS.replace('0 0 1', '0 nan 1'))),
        ['<joint name="loop"> <axis><xyz>', 'finite'],
    ),
    'nan link pose': (
        _four_bar(('<pose>0.35 0 0 0 0 0</pose>', '<pose>0.35 nan 0 0 0 0</pose>')),
        ['<link name="rocker"> <pose>', 'finite'],
    ),
    # rocker and coupler joined to each other only: a cycle no joint connects to the world
    'cycle off the root': (
        _four_bar(
            ('<parent>world</parent><child>rocker</child>', '<parent>coupler</parent><child>rocker</child>'),
            ('<parent>crank</parent><child>coupler</child>', '<parent>rocker</parent><child>coupler</child>'),
        ),
        ["['coupler', 'rocker']", 'not connected to the root', "'coupler_joint'"],
    ),
    'latin-1': (FOUR_BAR_SDF.replace('four_bar"', 'four_bar\u00e9"').encode('latin-1'), ['not UTF-8', '0xe9']),
    # finite, but no rigid body's: Pinocchio's Inertia refused it with a RuntimeError (a traceback)
    'huge negative inertia': (
        _four_bar(('<iyy>0.006</iyy>', '<iyy>-1e308</iyy>')),
        ['<link name="coupler"><inertial>', 'not a rigid body', 'positive definite'],
    ),
    'include': (
        _four_bar(('</model>', '<include><uri>model://gripper</uri></include></model>')),
        ['<include>', 'not supported'],
    ),
    'mimic': (
        _four_bar(
            (
                f'{_LIMIT}</axis></joint>\n    <joint name="rocker_joint"',
                '<mimic joint="crank_joint"><multiplier>1</multiplier></mimic></axis></joint>'
                '\n    <joint name="rocker_joint"',
            )
        ),
        ['<joint name="coupler_joint"> <axis><mimic>', 'joint_linear'],
    ),
}


def test_four_bar_sdf_loads_with_its_loop():
    import tempfile

    from uk_controller.robots import load_robot

    with tempfile.TemporaryDirectory() as tmp:
        setup = load_robot(_sdf_setup(Path(tmp), FOUR_BAR_SDF.encode()))
    assert setup.joint_names == ['crank_joint', 'coupler_joint', 'rocker_joint']
    assert setup.passive.names == ['loop'] and setup.passive.m == 2
    setup.model.compute(setup.q0, setup.qd0)
    assert np.abs(setup.passive.evaluate(setup.model, setup.q0, setup.qd0, 0.0).phi).max() < 1e-15


@pytest.mark.parametrize('case', sorted(SDF_CASES))
def test_hostile_sdf_exits_2_naming_file_and_element(tmp_path, case):
    sdf, words = SDF_CASES[case]
    code, err = _in_process_cli(_sdf_setup(tmp_path / 'case', sdf))
    assert code == 2, err
    assert 'robot.sdf' in err and str(tmp_path / 'case' / 'four_bar.sdf') in err, err
    for word in words:
        assert word in err, err


# ----------------------------------------------------------------------------- URDF mimic
MIMIC_URDF = (ROOT / 'test' / 'data' / 'mimic_gripper.urdf').read_text()
MIMIC_YAML = ROOT / 'test' / 'data' / 'mimic_gripper.yaml'
_MIMIC = '<mimic joint="left_finger_joint" multiplier="-1" offset="0"/>'


def _mimic_setup(folder, urdf):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / 'mimic_gripper.urdf').write_text(urdf)
    (folder / 'mimic_gripper.yaml').write_text(MIMIC_YAML.read_text())
    return folder / 'mimic_gripper.yaml'


@pytest.mark.slow
def test_mimic_multiplier_zero_runs_cleanly_in_a_child_with_a_time_limit(tmp_path, robots):
    """A mimic row q_right = 0 q_left + 0 holds the right finger at zero: a well-posed passive row, so the
    run finishes with exit 0 and its residual stays at round-off. The child runs with the kernels compiled
    (the `robots` fixture), so its time limit measures the run, not a first compilation."""
    setup = _mimic_setup(tmp_path, MIMIC_URDF.replace(_MIMIC, _MIMIC.replace('multiplier="-1"', 'multiplier="0"')))
    robots(setup)
    proc = _cli(setup, '--duration', '0.3', timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / 'out' / 'summary.json').read_text())
    assert summary['closure_residual_max'] < 1e-12, summary


@pytest.mark.parametrize(
    'mimic, words',
    [
        # the joint follows itself: its row q - m q = o is zero (m = 1, o = 0), a contradiction, or q held
        (
            '<mimic joint="right_finger_joint" multiplier="0" offset="0"/>',
            ['<joint name="right_finger_joint">', 'cannot mimic itself'],
        ),
        ('<mimic joint="right_finger_joint" multiplier="1" offset="0"/>', ['cannot mimic itself']),
    ],
)
def test_self_mimic_exits_2_naming_the_joint(tmp_path, mimic, words):
    code, err = _in_process_cli(_mimic_setup(tmp_path, MIMIC_URDF.replace(_MIMIC, mimic)))
    assert code == 2, err
    assert 'robot.urdf' in err and 'mimic_gripper.urdf' in err
    for word in words:
        assert word in err, err


def test_mimic_cycle_exits_2_naming_the_joints(tmp_path):
    """left mimics right and right mimics left: no joint of the pair is free to lead."""
    left_end = '<dynamics damping="0.01" friction="0.002"/>\n  </joint>\n  <joint name="right_finger_joint"'
    mimics_right = left_end.replace('\n  </joint>', '\n    <mimic joint="right_finger_joint"/>\n  </joint>')
    urdf = MIMIC_URDF.replace(left_end, mimics_right)
    assert urdf.count('<mimic joint') == 2
    code, err = _in_process_cli(_mimic_setup(tmp_path, urdf))
    assert code == 2, err
    assert "'left_finger_joint', 'right_finger_joint'" in err and 'cycle' in err, err


# ----------------------------------------------------------------------------- fuzz: MJCF and SDF
# Structured mutations of the shipped five-bar MJCF files (config/five_bar_mjcf.yaml and
# five_bar_redundant_mjcf.yaml) and of the four-bar SDF above; each batch of mutants is loaded in one child
# process (CHECKED_CHILD), so a native crash or a hang in a parser fails that batch, not the suite. A mutant
# must load, or be refused by a ConfigError that the CLI turns into exit 2 with the setup file named, and
# the description file too when the refusal is about it (key robot.mjcf / robot.sdf).
CHECKED_CHILD = r'''
import contextlib, io, json, sys, traceback
from uk_controller.cli import main
from uk_controller.files.parameter_file import ConfigError
from uk_controller.robots import load_robot
mujoco = sys.argv[1] == 'mujoco'
for path in sys.argv[2:]:
    try:
        setup = load_robot(path)
        if mujoco:                  # MuJoCo loads the file itself: a loaded MJCF must compile there too
            from uk_controller.sim.mujoco_plant import MujocoPlant
            MujocoPlant.from_setup(setup)
        print(json.dumps([path, 'ok']), flush=True)
        continue
    except ConfigError as exc:
        key, message = exc.key, str(exc)
    except Exception:
        print(json.dumps([path, 'crash', traceback.format_exc()]), flush=True)
        continue
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(['simulate', path, '--duration', '0.001', '--no-plots', '--out', path + '.out']
                        + (['--plant', 'mujoco'] if mujoco else []))
        except BaseException:
            code, err = 'raised', io.StringIO(traceback.format_exc())
    print(json.dumps([path, 'refused', key, message, code, err.getvalue()]), flush=True)
'''


def _run_checked_child(paths, descriptions, batch, plant='uk'):
    proc = subprocess.run(
        [sys.executable, '-c', CHECKED_CHILD, plant, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    assert proc.returncode == 0, f'child died ({proc.returncode}) on {batch}: {proc.stderr[-3000:]}'
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('[')]
    assert len(results) == len(paths), proc.stdout[-3000:]
    outcomes = []
    for (path, outcome, *detail), description, mutations in zip(results, descriptions, batch):
        assert outcome in ('ok', 'refused'), f'{mutations}: {detail}'
        if outcome == 'refused':
            key, message, code, stderr = detail
            assert code == 2 and 'Traceback' not in stderr, f'{mutations}: exit {code}: {stderr[-2000:]}'
            assert str(path) in message, f'{mutations}: {message}'
            if key in ('robot.mjcf', 'robot.sdf'):
                assert str(description) in message, f'{mutations}: the message names no file: {message}'
        outcomes.append(outcome)
    return outcomes


NUMBER_VALUES = [
    'nan',
    'inf',
    '-inf',
    '1e308',
    '-1e308',
    '',
    'x',
    '0 0 0',
    '0 0 0 0',
    '1 2',
    '0',
    '-1',
    '3.1 0 0',
    '1 -1',
    '-1 1',
    '1 0 0 0',
    '1e-300',
]

MJCF_NUMERIC = [
    ('body', 'pos'),
    ('body', 'quat'),
    ('body', 'euler'),
    ('joint', 'axis'),
    ('joint', 'range'),
    ('joint', 'pos'),
    ('joint', 'damping'),
    ('joint', 'ref'),
    ('joint', 'armature'),
    ('inertial', 'mass'),
    ('inertial', 'pos'),
    ('inertial', 'diaginertia'),
    ('inertial', 'fullinertia'),
    ('inertial', 'quat'),
    ('site', 'pos'),
    ('geom', 'size'),
    ('connect', 'anchor'),
    ('joint', 'actuatorfrcrange'),
]
MJCF_NAMES = [
    'link_a1',
    'link_b1',
    'link_a2',
    'link_b2',
    'branch1_tip',
    'branch2_tip',
    'joint_a1',
    'joint_b2',
    'world',
    'ghost',
]
mjcf_mutation = st.one_of(
    st.tuples(st.just('number'), st.sampled_from(MJCF_NUMERIC), st.integers(0, 7), st.sampled_from(NUMBER_VALUES)),
    st.tuples(
        st.just('type'),
        st.just('joint'),
        st.integers(0, 7),
        st.sampled_from(['hinge', 'slide', 'ball', 'free', 'bogus']),
    ),
    st.tuples(
        st.just('rename'), st.sampled_from(['body', 'joint', 'site']), st.integers(0, 7), st.sampled_from(MJCF_NAMES)
    ),
    st.tuples(
        st.just('move'), st.sampled_from(['body', 'joint', 'site', 'inertial']), st.integers(0, 7), st.integers(0, 7)
    ),
    st.tuples(
        st.just('delete'),
        st.sampled_from(['body', 'joint', 'inertial', 'site', 'connect']),
        st.integers(0, 7),
        st.just(''),
    ),
    st.tuples(
        st.just('equality'),
        st.sampled_from(['site1', 'site2', 'body1', 'polycoef', 'joint']),
        st.integers(0, 7),
        st.sampled_from(MJCF_NAMES + ['0 1 0 0 0', '0 nan', '0 0 1', '1 2 3 4 5 6']),
    ),
    st.tuples(
        st.just('class'), st.sampled_from(['joint', 'body']), st.integers(0, 7), st.sampled_from(['ghost', 'main'])
    ),
)
mjcf_include = st.sampled_from(['none', 'none', 'split', 'missing', 'self', 'empty', 'not mujoco', 'latin-1'])


def _mutate_mjcf(text, mutations):
    """`text` with `mutations` applied (each on the index-th matching element, modulo their count)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)

    def pick(tag, index):
        found = [e for e in root.iter(tag)]
        return found[index % len(found)] if found else None

    parents = lambda: {c: p for p in root.iter() for c in p}  # noqa: E731
    for kind, what, index, value in mutations:
        if kind == 'number':
            element = pick(what[0], index)
            if element is not None:
                element.set(what[1], value)
        elif kind == 'type':
            element = pick('joint', index)
            if element is not None:
                element.set('type', value)
        elif kind == 'rename':
            element = pick(what, index)
            if element is not None:
                element.set('name', value)
        elif kind == 'move':
            element = pick(what, index)
            holders = [root.find('worldbody')] + list(root.iter('body'))
            target = holders[value % len(holders)] if holders[0] is not None else None
            if element is not None and target is not None and target not in element.iter():
                parents()[element].remove(element)
                target.append(element)
        elif kind == 'delete':
            element = pick(what, index)
            if element is not None:
                parents()[element].remove(element)
        elif kind == 'equality':
            section = root.find('equality')
            if section is None:
                section = ET.SubElement(root, 'equality')
            if what == 'joint':
                other = value if value.startswith('joint') else 'joint_b2'
                ET.SubElement(
                    section,
                    'joint',
                    joint1='joint_b1',
                    joint2=other,
                    polycoef=value if value[0].isdigit() else '0 1 0 0 0',
                )
            elif what == 'polycoef':
                ET.SubElement(section, 'joint', joint1='joint_a1', joint2='joint_a2', polycoef=value)
            else:
                connects = section.findall('connect')
                if connects:
                    connects[index % len(connects)].set(what, value)
        else:
            element = pick(what, index)
            if element is not None:
                element.set('class' if what == 'joint' else 'childclass', value)
    return ET.tostring(root, encoding='unicode')


def _mjcf_files(text, include):
    """{file name: bytes} of the mutated main file `text`, its worldbody moved into an include as `include` says."""
    import xml.etree.ElementTree as ET

    if include == 'latin-1':
        return {'robot.xml': text.replace('<mujoco', '<!-- caf\u00e9 --><mujoco', 1).encode('latin-1')}
    if include == 'none':
        return {'robot.xml': text.encode()}
    root = ET.fromstring(text)
    wb = root.find('worldbody')
    if wb is None:
        return {'robot.xml': text.encode()}
    part = ET.Element('mujoco')
    for child in list(wb):
        wb.remove(child)
        part.append(child)
    name = {
        'split': 'part.xml',
        'missing': 'absent.xml',
        'self': 'robot.xml',
        'empty': 'part.xml',
        'not mujoco': 'part.xml',
    }[include]
    ET.SubElement(wb, 'include', file=name)
    files = {'robot.xml': ET.tostring(root, encoding='unicode').encode()}
    if include == 'split':
        files['part.xml'] = ET.tostring(part, encoding='unicode').encode()
    elif include == 'empty':
        files['part.xml'] = b'<mujoco/>'
    elif include == 'not mujoco':
        part.tag = 'robot'
        files['part.xml'] = ET.tostring(part, encoding='unicode').encode()
    return files


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=st.lists(
        st.tuples(
            st.sampled_from(['five_bar', 'five_bar_redundant']),
            st.lists(mjcf_mutation, min_size=1, max_size=3),
            mjcf_include,
        ),
        min_size=4,
        max_size=4,
    )
)
def test_fuzzed_mjcf_loads_or_is_refused_without_a_crash(tmp_path_factory, batch):
    """Each mutant of a shipped MJCF loads, or is refused with exit 2 naming the file; no traceback, no
    native crash, no hang (the child's time limit)."""
    tmp = tmp_path_factory.mktemp('fuzz_mjcf')
    paths, descriptions = [], []
    for i, (base, mutations, include) in enumerate(batch):
        source = (MJCF if base == 'five_bar' else MJCF_REDUNDANT).read_text(encoding='utf-8')
        files = _mjcf_files(_mutate_mjcf(source, mutations), include)
        paths.append(_mjcf_setup(tmp / f'm{i}', files, base))
        descriptions.append(tmp / f'm{i}' / 'robot.xml')
    _run_checked_child(paths, descriptions, batch, plant='mujoco')


SDF_NUMERIC = [
    ('link', 'pose'),
    ('link', 'inertial/pose'),
    ('link', 'inertial/mass'),
    ('link', 'inertial/inertia/ixx'),
    ('link', 'inertial/inertia/ixy'),
    ('joint', 'pose'),
    ('joint', 'axis/xyz'),
    ('joint', 'axis/limit/lower'),
    ('joint', 'axis/limit/upper'),
    ('joint', 'axis/limit/effort'),
    ('joint', 'axis/dynamics/damping'),
    ('joint', 'axis/dynamics/spring_stiffness'),
]
#: a link name for relink and rename: the index-th link of the file, the world, or no link of the file
sdf_link = st.one_of(st.integers(0, 40), st.sampled_from(['world', 'ghost']))
sdf_mutation = st.one_of(
    st.tuples(
        st.just('number'),
        st.sampled_from(SDF_NUMERIC),
        st.integers(0, 40),
        st.sampled_from(NUMBER_VALUES + ['0 0 0 0 0 0', '1 2 3 4 5 6 7', 'nan 0 0 0 0 0']),
    ),
    st.tuples(st.just('relink'), st.sampled_from(['parent', 'child']), st.integers(0, 40), sdf_link),
    st.tuples(
        st.just('type'),
        st.just(''),
        st.integers(0, 40),
        st.sampled_from(['revolute', 'continuous', 'prismatic', 'fixed', 'ball', 'universal', 'screw', 'bogus']),
    ),
    st.tuples(st.just('delete'), st.sampled_from(['link', 'joint']), st.integers(0, 40), st.just('')),
    st.tuples(st.just('rename'), st.sampled_from(['link', 'joint']), st.integers(0, 40), sdf_link),
    st.tuples(
        st.just('add'), st.sampled_from(['include', 'mimic', 'axis2', 'nested model']), st.integers(0, 40), st.just('')
    ),
)


def _mutate_sdf(text, mutations):
    """`text` (an SDF) with `mutations` applied (each on the index-th matching element, modulo their count)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    model = root.find('model')
    for kind, what, index, value in mutations:
        links = [link.get('name') for link in model.findall('link')]
        if isinstance(value, int):
            value = links[value % len(links)] if links else 'ghost'
        if kind == 'number':
            tag, sub = what
            elements = [e.find(sub) for e in model.findall(tag)]
            elements = [e for e in elements if e is not None]
            if elements:
                elements[index % len(elements)].text = value
            continue
        joints = model.findall('joint')
        if kind in ('relink', 'type', 'delete', 'rename'):
            elements = joints if kind in ('relink', 'type') else model.findall(what)
            if not elements:
                continue
            element = elements[index % len(elements)]
            if kind == 'relink' and element.find(what) is not None:
                element.find(what).text = value
            elif kind == 'type':
                element.set('type', value)
            elif kind == 'delete':
                model.remove(element)
            elif kind == 'rename':
                element.set('name', value)
        elif what == 'include':
            ET.SubElement(ET.SubElement(model, 'include'), 'uri').text = 'model://part'
        elif what == 'nested model':
            ET.SubElement(model, 'model', name='inner')
        elif joints and what == 'mimic' and joints[index % len(joints)].find('axis') is not None:
            ET.SubElement(joints[index % len(joints)].find('axis'), 'mimic', joint=joints[0].get('name'))
        elif joints and what == 'axis2':
            ET.SubElement(ET.SubElement(joints[index % len(joints)], 'axis2'), 'xyz').text = '1 0 0'
    return ET.tostring(root, encoding='unicode')


def _fuzz_sdf(tmp, batch, source, setup_text, name):
    """Each mutant of `source` (an SDF) as `name` beside `setup_text`, loaded in one checked child."""
    paths, descriptions = [], []
    for i, (mutations, latin1) in enumerate(batch):
        text = _mutate_sdf(source, mutations)
        data = text.replace('<sdf', '<!-- caf\u00e9 --><sdf', 1).encode('latin-1') if latin1 else text.encode()
        folder = tmp / f's{i}'
        folder.mkdir()
        (folder / name).write_bytes(data)
        (folder / 'setup.yaml').write_text(setup_text)
        paths.append(folder / 'setup.yaml')
        descriptions.append(folder / name)
    _run_checked_child(paths, descriptions, batch)


#: a batch: four mutants, one in eight written in Latin-1
sdf_batch = st.lists(
    st.tuples(st.lists(sdf_mutation, min_size=1, max_size=3), st.integers(0, 7).map(lambda k: k == 0)),
    min_size=4,
    max_size=4,
)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=sdf_batch)
def test_fuzzed_sdf_loads_or_is_refused_without_a_crash(tmp_path_factory, batch):
    """Each mutant of the four-bar SDF (a loop closed by a revolute joint) loads, or is refused with exit 2
    naming the file; no traceback, no native crash, no hang."""
    _fuzz_sdf(tmp_path_factory.mktemp('fuzz_sdf'), batch, FOUR_BAR_SDF, FOUR_BAR_YAML, 'four_bar.sdf')


def _cassie():
    from uk_controller.robots.example_robot_data import description

    return description('cassie_description/robots/cassie_v2.sdf')


@pytest.mark.slow
@pytest.mark.skipif(_cassie() is None, reason='example-robot-data (test extra) is not installed')
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=sdf_batch)
def test_fuzzed_cassie_sdf_loads_or_is_refused_without_a_crash(tmp_path_factory, batch):
    """The same for Agility's Cassie (example-robot-data's cassie_v2.sdf: 22 joints, ball joints closing four
    loops, leaf springs), on the setup of config/examples/cassie_hung.yaml."""
    setup = (
        (ROOT / 'config' / 'examples' / 'cassie_hung.yaml')
        .read_text()
        .replace('package://example-robot-data/robots/cassie_description/robots/cassie_v2.sdf', 'cassie_v2.sdf')
    )
    assert 'sdf: cassie_v2.sdf' in setup
    _fuzz_sdf(
        tmp_path_factory.mktemp('fuzz_cassie'), batch, _cassie().read_text(encoding='utf-8'), setup, 'cassie_v2.sdf'
    )
