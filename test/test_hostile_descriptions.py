"""Hostile URDF descriptions: each is refused before Pinocchio's parser sees it, with exit 2 and a message
naming the file, the element and what to change. The expected refusals follow from the URDF rules (a tree
of links with one root, UTF-8 XML, finite numbers, ``lower <= upper``), not from the reader's output.

The fuzz applies structured mutations to the shipped planar 3R URDF and loads each mutant in a child
process, several per process, so that a native crash fails one test instead of the suite."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

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
    return subprocess.run([sys.executable, '-m', 'uk_controller.cli', 'simulate', 'planar_3r.yaml',
                           '--duration', '0.05'], cwd=folder, capture_output=True, text=True, timeout=300,
                          env={'PYTHONPATH': str(ROOT), 'OPENBLAS_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'})


ORIGINAL = URDF.read_text(encoding='utf-8')
CASES = {
    # a joint whose child is an ancestor of its parent: link1 <- link3 <- link2 <- link1
    'cycle': (ORIGINAL.replace('<parent link="base_link"/>\n    <child link="link1"/>',
                               '<parent link="link3"/>\n    <child link="link1"/>').encode(), ['cycle', 'shoulder']),
    'two parents': (ORIGINAL.replace('<child link="tool"/>', '<child link="link1"/>').encode(),
                    ['link1', 'one parent']),
    'latin-1': (ORIGINAL.replace('link3', 'link3\u00e9').encode('latin-1'), ['not UTF-8', '0xe9']),
    'nan inertial origin': (ORIGINAL.replace('<origin xyz="0.2 0 0"/>', '<origin xyz="nan 0 0"/>', 1).encode(),
                            ["link 'link1' <inertial> <origin>", 'finite']),
    'inverted limits': (ORIGINAL.replace('lower="-3.1" upper="3.1"', 'lower="3.1" upper="-3.1"', 1).encode(),
                        ["joint 'shoulder' <limit>", 'swap']),
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
NUMERIC = [('joint', 'origin', 'xyz'), ('joint', 'origin', 'rpy'), ('joint', 'axis', 'xyz'),
           ('joint', 'limit', 'lower'), ('joint', 'limit', 'upper'), ('joint', 'limit', 'effort'),
           ('link', 'inertial/origin', 'xyz'), ('link', 'inertial/mass', 'value'),
           ('link', 'inertial/inertia', 'ixx'), ('link', 'inertial/inertia', 'ixy')]
VALUES = ['nan', 'inf', '-inf', '1e308', '-1e308', '', 'x', '0 0 0', '1 2', '0', '-1', '3.1 0 0']
mutation = st.one_of(
    st.tuples(st.just('number'), st.sampled_from(NUMERIC), st.integers(0, 5), st.sampled_from(VALUES)),
    st.tuples(st.just('relink'), st.sampled_from(['parent', 'child']), st.integers(0, 5),
              st.sampled_from(['world', 'base_link', 'link1', 'link2', 'link3', 'tool', 'ghost'])),
    st.tuples(st.just('type'), st.just(''), st.integers(0, 5),
              st.sampled_from(['fixed', 'continuous', 'prismatic', 'floating', 'planar', 'bogus'])),
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
    proc = subprocess.run([sys.executable, '-c', CHILD, *paths], capture_output=True, text=True, timeout=300,
                          env={'PYTHONPATH': str(ROOT), 'OPENBLAS_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'})
    assert proc.returncode == 0, f'child died ({proc.returncode}) on {batch}: {proc.stderr[-2000:]}'
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('[')]
    assert len(results) == len(paths)
    for (path, outcome, *detail), mutations in zip(results, batch):
        assert outcome in ('ok', 'refused'), f'{mutations}: {detail}'


@pytest.mark.parametrize('name, safe', [('../evil/x', '_evil_x'), ('a/b', 'a_b'), ('..', 'robot'),
                                        ('planar_3r', 'planar_3r'), ('arm 1:é', 'arm_1_')])
def test_robot_name_is_one_path_component(name, safe):
    from uk_controller.cli import file_safe
    assert file_safe(name) == safe
    assert '/' not in file_safe(name) and not file_safe(name).startswith('.')
