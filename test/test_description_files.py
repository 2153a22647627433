"""Robot descriptions a user already has: MJCF with its loop closures, xacro, and paths
relative to the setup file. References are independent: the shipped URDF + YAML setups, Pinocchio's
own MJCF constraint parser, the xacro package's expansion compared with the hand-written URDF."""

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml
from variants import variant

from uk_controller.files import description, rcl_yaml
from uk_controller.files.parameter_file import ConfigError
from uk_controller.paths import resolve_config, share_dir
from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import simulate

ROOT = Path(__file__).resolve().parent.parent
PAIRS = [('five_bar', 'five_bar_mjcf'), ('five_bar_redundant', 'five_bar_redundant_mjcf')]


def write_setup(path, params):
    path.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}, sort_keys=False))
    return path


def shipped_params(name):
    return yaml.safe_load(resolve_config(name).read_text())['/**']['ros__parameters']


@pytest.mark.parametrize('urdf_name, mjcf_name', PAIRS)
def test_mjcf_gives_the_same_model_and_closures(urdf_name, mjcf_name):
    a, b = load_robot(urdf_name), load_robot(mjcf_name)
    assert a.model.joint_names == b.model.joint_names
    assert a.passive.names == b.passive.names and a.servo.names == b.servo.names
    np.testing.assert_array_equal(a.actuators.effort_limits, b.actuators.effort_limits)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, qd = a.q0 + 0.3 * rng.normal(size=a.n), rng.normal(size=a.n)
        rows_a = [(r.phi.copy(), r.phidot.copy(), r.A.copy(), r.b.copy()) for r in a.evaluate(q, qd, 0.4)[:2]]
        ma, ha = a.model.M.copy(), a.model.h.copy()
        rows_b = [(r.phi.copy(), r.phidot.copy(), r.A.copy(), r.b.copy()) for r in b.evaluate(q, qd, 0.4)[:2]]
        np.testing.assert_allclose(b.model.M, ma, atol=1e-14)
        np.testing.assert_allclose(b.model.h, ha, atol=1e-13)
        for xa, xb in zip(rows_a, rows_b):
            for ya, yb in zip(xa, xb):
                np.testing.assert_allclose(yb, ya, atol=1e-12)


@pytest.mark.parametrize('urdf_name, mjcf_name', PAIRS)
@pytest.mark.parametrize('plant, duration', [('uk', 0.5), ('mujoco', 0.15)])
@pytest.mark.slow
def test_mjcf_runs_like_urdf_on_both_plants(urdf_name, mjcf_name, plant, duration):
    run = {'simulation.plant': plant, 'simulation.duration': duration}
    ra = simulate(load_robot(urdf_name, run))
    rb = simulate(load_robot(mjcf_name, run))
    scale = np.abs(ra.effort).max()
    assert scale > 0
    np.testing.assert_allclose(rb.effort, ra.effort, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(rb.closure_residual, ra.closure_residual, rtol=0, atol=1e-9)
    assert np.abs(rb.closure_residual).max() < (1e-10 if plant == 'uk' else 1e-6)


def _body_connect_variant(tmp_path):
    """five_bar.xml with the closure written body1/body2/anchor (MuJoCo: anchor on body2 from qpos0)."""
    tree = ET.parse(ROOT / 'mjcf' / 'five_bar.xml')
    connect = tree.getroot().find('equality').find('connect')
    for key in ('site1', 'site2'):
        del connect.attrib[key]
    connect.attrib.update(body1='link_b1', body2='link_b2', anchor='0.244 0 0')
    return tree


def test_body_connect_matches_pinocchio_constraint_parser(tmp_path):
    tree = _body_connect_variant(tmp_path)
    ours = tmp_path / 'ours.xml'
    tree.write(ours)
    # Pinocchio's parser reads one top-level body only: give it the branches under one fixed body
    wb = tree.getroot().find('worldbody')
    bodies = wb.findall('body')
    base = ET.SubElement(wb, 'body', name='base')
    for body in bodies:
        wb.remove(body)
        base.append(body)
    theirs = tmp_path / 'theirs.xml'
    tree.write(theirs)
    ref_model, points = pin.buildModelAndConstraintsFromMJCF(str(theirs))[:2]
    assert len(points) == 1
    model, closures = description.load_mjcf(ours)
    assert list(closures) == ['closure_12'] and closures['closure_12']['mode'] == 'position'
    f1, f2 = (model.frames[model.getFrameId(f)] for f in closures['closure_12']['frames'])
    c = points[0]
    assert model.names[f1.parentJoint] == ref_model.names[c.joint1_id]
    assert model.names[f2.parentJoint] == ref_model.names[c.joint2_id]
    np.testing.assert_allclose(f1.placement.translation, c.joint1_placement.translation, atol=1e-14)
    np.testing.assert_allclose(f2.placement.translation, c.joint2_placement.translation, atol=1e-14)


def test_every_mjcf_body_must_reach_the_model(monkeypatch, tmp_path):
    """Without our wrapping, Pinocchio 4.1 drops the second top-level body of the five-bar: the check
    after parsing must turn that into an error naming the lost bodies."""
    model, _ = description.load_mjcf(ROOT / 'mjcf' / 'five_bar.xml')
    assert model.nv == 4
    original = description._prepared_mjcf

    def unwrapped(path):
        text, equalities = original(path)
        root = ET.fromstring(text)
        wb = root.find('worldbody')
        wrapper = wb.find('body')
        if wrapper is not None and wrapper.get('name') == 'uk_worldbody':
            wb.remove(wrapper)
            for body in list(wrapper):
                wb.append(body)
        return ET.tostring(root, encoding='unicode'), equalities

    monkeypatch.setattr(description, '_prepared_mjcf', unwrapped)
    try:
        text, _ = unwrapped(ROOT / 'mjcf' / 'five_bar.xml')
        (tmp_path / 'plain.xml').write_text(text)
        model = pin.buildModelFromMJCF(str(tmp_path / 'plain.xml'))
        dropped = not model.existFrame('link_b2', pin.FrameType.BODY)
    except Exception:  # a parser that cannot handle the file at all is an error too
        dropped = True
    if not dropped:
        pytest.skip('this Pinocchio keeps every top-level body; nothing to detect')
    with pytest.raises(description.DescriptionError, match='link_a2'):
        description.load_mjcf(ROOT / 'mjcf' / 'five_bar.xml')


def test_yaml_closures_merge_with_file_closures(tmp_path):
    shutil.copy(ROOT / 'mjcf' / 'five_bar.xml', tmp_path / 'five_bar.xml')
    params = shipped_params('five_bar_mjcf')
    params['robot']['mjcf'] = 'five_bar.xml'
    # the file closure unrefined: 3 rows (x, y, z); z is identically satisfied in the plane
    del params['constraints']['closure_12']
    setup = load_robot(write_setup(tmp_path / 'three_rows.yaml', params))
    assert setup.passive.names == ['closure_12'] and setup.passive.m == 3
    # a YAML closure is added to the file's
    params['constraints']['names'] = ['pin_b1', 'end_effector']
    params['constraints']['pin_b1'] = {
        'role': 'passive',
        'type': 'joint_linear',
        'joints': ['joint_b1'],
        'coefficients': [1.0],
        'value': -2.1752,
    }
    setup = load_robot(write_setup(tmp_path / 'added.yaml', params))
    assert setup.passive.names == ['closure_12', 'pin_b1']
    # the YAML may not redirect a file closure
    params['constraints']['closure_12'] = {'frames': ['branch1_tip', 'link_a2']}
    with pytest.raises(ConfigError, match='constraints.closure_12.frames'):
        load_robot(write_setup(tmp_path / 'bad.yaml', params))


def test_unsupported_equality_and_unknown_site_are_errors(tmp_path):
    text = (ROOT / 'mjcf' / 'five_bar.xml').read_text()
    (tmp_path / 'flex_eq.xml').write_text(text.replace('<equality>', '<equality>\n<flex flex="skin"/>'))
    with pytest.raises(description.DescriptionError, match="equality type 'flex' is not supported"):
        description.load_mjcf(tmp_path / 'flex_eq.xml')
    (tmp_path / 'bad_site.xml').write_text(text.replace('site2="branch2_tip"', 'site2="nowhere"'))
    with pytest.raises(description.DescriptionError, match='nowhere'):
        description.load_mjcf(tmp_path / 'bad_site.xml')


def test_weld_from_qpos0_closes_at_the_reference_pose(tmp_path):
    """A body weld without relpose keeps body2's pose in body1 at qpos0 (MuJoCo): at q = 0 the two
    frames coincide, away from it they do not."""
    text = (
        (ROOT / 'mjcf' / 'five_bar.xml')
        .read_text()
        .replace(
            '<connect name="closure_12" site1="branch1_tip" site2="branch2_tip"/>',
            '<weld name="glue" body1="link_b1" body2="link_b2"/>',
        )
    )
    (tmp_path / 'weld.xml').write_text(text)
    model, closures = description.load_mjcf(tmp_path / 'weld.xml')
    assert closures['glue']['mode'] == 'weld'
    data = model.createData()
    ids = [model.getFrameId(f) for f in closures['glue']['frames']]
    for q, closed in ((np.zeros(4), True), (np.array([0.3, 0.0, 0.0, 0.0]), False)):
        pin.framesForwardKinematics(model, data, q)
        gap = pin.log6(data.oMf[ids[0]].actInv(data.oMf[ids[1]])).vector
        assert (np.abs(gap).max() < 1e-12) == closed


# ----------------------------------------------------------------------------- xacro


@pytest.mark.slow
def test_xacro_robot_equals_its_urdf(tmp_path):
    """A .xacro that builds the shipped planar_3r from macro + args gives the same model and efforts."""
    urdf = ET.parse(share_dir() / 'urdf' / 'planar_3r.urdf').getroot()
    body = ''.join(ET.tostring(child, encoding='unicode') for child in urdf)
    # the gz_ros2_control path: xacro would resolve $(find uk_controller) through the ament index
    body = body.replace('$(find uk_controller)', str(share_dir()))
    # a macro with a parameter the args set: the arm's link masses are scaled by `scale` (1 here)
    macro = (
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro">'
        '<xacro:macro name="arm" params="scale">' + body + '</xacro:macro>'
        '<xacro:arm scale="$(arg scale)"/></robot>'
    )
    (tmp_path / 'urdf').mkdir()
    (tmp_path / 'urdf' / 'arm.xacro').write_text(
        '<?xml version="1.0"?>\n<robot name="planar_3r" xmlns:xacro="http://www.ros.org/wiki/xacro">'
        '<xacro:arg name="scale" default="2"/>' + macro[macro.index('<xacro:macro') :]
    )
    params = shipped_params('planar_3r')
    params['robot']['urdf'] = 'urdf/arm.xacro'
    params['robot']['xacro_args'] = {'scale': 1}
    ref = load_robot('planar_3r')
    mine = load_robot(write_setup(tmp_path / 'arm.yaml', params))
    assert mine.model.source_kind == 'xacro'
    mine.model.compute(ref.q0, ref.qd0)
    M, h = mine.model.M.copy(), mine.model.h.copy()
    ref.model.compute(ref.q0, ref.qd0)
    np.testing.assert_array_equal(M, ref.model.M)
    np.testing.assert_array_equal(h, ref.model.h)
    a = simulate(variant(ref, {'simulation.duration': 0.3}))
    b = simulate(variant(mine, {'simulation.duration': 0.3}))
    np.testing.assert_allclose(b.effort, a.effort, rtol=0, atol=1e-12 * np.abs(a.effort).max())
    on_mujoco = {'simulation.plant': 'mujoco', 'simulation.duration': 0.05}
    c = simulate(variant(mine, on_mujoco))
    d = simulate(variant(ref, on_mujoco))
    np.testing.assert_allclose(c.effort, d.effort, rtol=0, atol=1e-12 * np.abs(d.effort).max())


def test_xacro_errors_name_the_key(tmp_path):
    (tmp_path / 'broken.xacro').write_text(
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><xacro:undefined_macro/></robot>'
    )
    params = shipped_params('planar_3r')
    params['robot']['urdf'] = 'broken.xacro'
    with pytest.raises(ConfigError, match=r'robot\.urdf.*xacro could not expand'):
        load_robot(write_setup(tmp_path / 'a.yaml', params))
    params['robot']['urdf'] = 'package://uk_controller/urdf/planar_3r.urdf'
    params['robot']['xacro_args'] = {'x': 1}
    with pytest.raises(ConfigError, match=r'robot\.xacro_args.*not a \.xacro'):
        load_robot(write_setup(tmp_path / 'b.yaml', params))


# ----------------------------------------------------------------------------- paths


def test_relative_paths_are_relative_to_the_setup_file(tmp_path):
    """A user's own urdf/planar_3r.urdf next to the YAML is loaded, never the shipped file of that name;
    a missing one is an error listing where it looked and how to name the shipped file."""
    shipped = (share_dir() / 'urdf' / 'planar_3r.urdf').read_text()
    (tmp_path / 'urdf').mkdir()
    (tmp_path / 'urdf' / 'planar_3r.urdf').write_text(shipped.replace('name="planar_3r"', 'name="mine"'))
    params = shipped_params('planar_3r')
    params['robot']['urdf'] = 'urdf/planar_3r.urdf'
    setup = load_robot(write_setup(tmp_path / 'mine.yaml', params))
    assert setup.model.source == (tmp_path / 'urdf' / 'planar_3r.urdf').resolve()
    assert setup.model.model.name == 'mine'
    (tmp_path / 'urdf' / 'planar_3r.urdf').unlink()
    with pytest.raises(ConfigError) as err:
        load_robot(write_setup(tmp_path / 'mine.yaml', params))
    message = str(err.value)
    assert 'robot.urdf' in message and str(tmp_path / 'urdf' / 'planar_3r.urdf') in message
    assert 'package://uk_controller/urdf/planar_3r.urdf' in message
    params['robot']['urdf'] = 'package://uk_controller/urdf/planar_3r.urdf'
    assert load_robot(write_setup(tmp_path / 'mine.yaml', params)).model.model.name == 'planar_3r'


def test_one_description_key(tmp_path):
    params = shipped_params('five_bar_mjcf')
    params['robot']['urdf'] = 'package://uk_controller/urdf/five_bar.urdf'
    with pytest.raises(ConfigError, match='exactly one robot description'):
        load_robot(write_setup(tmp_path / 'two.yaml', params))
    del params['robot']['urdf'], params['robot']['mjcf']
    with pytest.raises(ConfigError, match='exactly one robot description'):
        load_robot(write_setup(tmp_path / 'none.yaml', params))


def test_sdf_errors_name_the_problem(tmp_path):
    cases = [
        ('<model name="m"><link name="a"/><link name="b"/></model>', r"links \['a', 'b'\] are each a root"),
        ('<model name="m"><link name="a"><pose relative_to="b">0 0 0 0 0 0</pose></link></model>', 'relative_to'),
        (
            '<model name="m"><link name="a"/><joint name="j" type="ball"><parent>world</parent>'
            '<child>a</child></joint></model>',
            "ball joint in the kinematic tree is not supported",
        ),
    ]
    for i, (body, match) in enumerate(cases):
        (tmp_path / f'm{i}.sdf').write_text(f'<sdf version="1.9">{body}</sdf>')
        with pytest.raises(description.DescriptionError, match=match):
            description.read_sdf(tmp_path / f'm{i}.sdf')


def test_robot_name_that_is_also_a_local_file_is_ambiguous(tmp_path, monkeypatch):
    from uk_controller.files.parameter_file import ConfigNotFoundError

    monkeypatch.chdir(tmp_path)
    assert resolve_config('scara') == (share_dir() / 'config' / 'scara.yaml').resolve()
    (tmp_path / 'scara').write_text('not a setup')
    with pytest.raises(ConfigNotFoundError, match='ambiguous'):
        resolve_config('scara')
    assert resolve_config('./scara') == (tmp_path / 'scara').resolve()
    with pytest.raises(ConfigNotFoundError, match='looked in'):
        resolve_config('no_such_robot')


def test_launch_robot_description_expands_xacro(tmp_path):
    """robot_state_publisher gets the expanded URDF of a xacro setup (paths.robot_description)."""
    from uk_controller.paths import robot_description

    (tmp_path / 'arm.urdf.xacro').write_text(
        '<?xml version="1.0"?><robot name="two" xmlns:xacro="http://www.ros.org/wiki/xacro">'
        '<xacro:arg name="len" default="0.5"/><link name="world"/>'
        '<joint name="j" type="continuous"><parent link="world"/><child link="l"/>'
        '<origin xyz="0 0 $(arg len)"/><axis xyz="0 0 1"/></joint>'
        '<link name="l"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'
        '</inertial></link></robot>'
    )
    path = write_setup(tmp_path / 'arm.yaml', {'robot': {'urdf': 'arm.urdf.xacro', 'xacro_args': {'len': 0.75}}})
    _, text = robot_description(str(path))
    origin = ET.fromstring(text).find('joint').find('origin')
    assert origin.get('xyz') == '0 0 0.75'
    setup = load_robot(path)
    assert setup.model.continuous_names == ['j'] and setup.model.source_kind == 'xacro'


def test_body_connect_to_the_world(tmp_path):
    """body2 omitted: MuJoCo connects to the world; the second frame hangs on the universe, at the
    anchor's world position at qpos0."""
    text = (
        (ROOT / 'mjcf' / 'five_bar.xml')
        .read_text()
        .replace(
            '<connect name="closure_12" site1="branch1_tip" site2="branch2_tip"/>',
            '<connect name="pin_tip" body1="link_b1" anchor="0.244 0 0"/>',
        )
    )
    (tmp_path / 'pinned.xml').write_text(text)
    model, closures = description.load_mjcf(tmp_path / 'pinned.xml')
    f1, f2 = (model.frames[model.getFrameId(f)] for f in closures['pin_tip']['frames'])
    assert f2.parentJoint == 0
    np.testing.assert_allclose(f2.placement.translation, [0.488, 0.25, 0.0], atol=1e-14)  # A1 + 2 L along x
    assert model.names[f1.parentJoint] == 'joint_b1'


# ----------------------------------------------------------------------------- SDF


def _five_bar_sdf(tmp_path):
    """The five-bar of urdf/five_bar.urdf as SDF, posed (its zero configuration) at five_bar.yaml's
    closed q0, with the loop joint closure_12 (revolute about z at branch 2's tip) that the URDF's
    <gazebo> block also writes. Link poses come from Pinocchio's forward kinematics of the URDF."""
    urdf_path = share_dir() / 'urdf' / 'five_bar.urdf'
    ref = pin.buildModelFromUrdf(str(urdf_path))
    q0 = np.array(shipped_params('five_bar')['robot']['initial_position'])
    data = ref.createData()
    pin.framesForwardKinematics(ref, data, q0)
    urdf = ET.parse(urdf_path).getroot()
    out = ['<?xml version="1.0"?>', '<sdf version="1.9">', '<model name="five_bar_sdf">']
    for link in urdf.findall('link'):
        name = link.get('name')
        if name == 'world':
            continue
        pose = data.oMf[ref.getFrameId(name, pin.FrameType.BODY)]
        xyz, rpy = pose.translation, pin.rpy.matrixToRpy(pose.rotation)
        out.append(f'<link name="{name}"><pose>{" ".join(f"{v:.17g}" for v in [*xyz, *rpy])}</pose>')
        inertial = link.find('inertial')
        if inertial is not None:
            i = inertial.find('inertia').attrib
            out.append(
                f'<inertial><pose>{inertial.find("origin").get("xyz")} 0 0 0</pose>'
                f'<mass>{inertial.find("mass").get("value")}</mass><inertia>'
                + ''.join(f'<{k}>{i[k]}</{k}>' for k in ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz'))
                + '</inertia></inertial>'
            )
        out.append('</link>')
    for joint in urdf.findall('joint'):
        kind = joint.get('type')
        out.append(
            f'<joint name="{joint.get("name")}" type="{kind}"><parent>{joint.find("parent").get("link")}'
            f'</parent><child>{joint.find("child").get("link")}</child>'
        )
        if kind != 'fixed':
            limit = joint.find('limit').attrib
            out.append(
                f'<axis><xyz>{joint.find("axis").get("xyz")}</xyz><limit><lower>{limit["lower"]}</lower>'
                f'<upper>{limit["upper"]}</upper><effort>{limit["effort"]}</effort></limit></axis>'
            )
        out.append('</joint>')
    out.append(
        '<joint name="closure_12" type="revolute"><pose>0.244 0 0 0 0 0</pose><parent>link_b1</parent>'
        '<child>link_b2</child><axis><xyz>0 0 1</xyz></axis></joint>'
    )
    out += ['</model>', '</sdf>']
    (tmp_path / 'five_bar.sdf').write_text('\n'.join(out))
    params = shipped_params('five_bar')
    del params['robot']['urdf']
    params['robot']['sdf'] = 'five_bar.sdf'
    params['robot']['initial_position'] = [0.0] * 4
    params['constraints']['names'] = ['end_effector']  # closure_12 comes from the file ...
    params['constraints']['closure_12'] = {'axes': ['x', 'y']}  # ... refined to the plane, as in the YAML
    return write_setup(tmp_path / 'five_bar_sdf.yaml', params), q0


@pytest.mark.slow
def test_sdf_five_bar_matches_urdf_and_yaml(tmp_path):
    if pin.WITH_SDFORMAT:
        pytest.skip('this Pinocchio reads SDF with SDFormat; our reader is the fallback')
    path, q0 = _five_bar_sdf(tmp_path)
    a, b = load_robot('five_bar'), load_robot(path)
    assert b.model.source_kind == 'sdf' and b.passive.names == ['closure_12'] and b.passive.m == 2
    rng = np.random.default_rng(2)
    for _ in range(3):
        q, qd = q0 + 0.2 * rng.normal(size=4), rng.normal(size=4)
        rows_a = [(r.phi.copy(), r.A.copy(), r.b.copy()) for r in a.evaluate(q, qd, 0.3)[:2]]
        Ma, ha = a.model.M.copy(), a.model.h.copy()
        rows_b = [(r.phi.copy(), r.A.copy(), r.b.copy()) for r in b.evaluate(q - q0, qd, 0.3)[:2]]  # SDF zero = q0
        np.testing.assert_allclose(b.model.M, Ma, atol=1e-14)
        np.testing.assert_allclose(b.model.h, ha, atol=1e-13)
        for xa, xb in zip(rows_a, rows_b):
            for ya, yb in zip(xa, xb):
                np.testing.assert_allclose(yb, ya, atol=1e-12)
    ra, rb = (simulate(variant(s, {'simulation.duration': 0.3})) for s in (a, b))
    np.testing.assert_allclose(rb.effort, ra.effort, rtol=0, atol=1e-9 * np.abs(ra.effort).max())
    np.testing.assert_allclose(rb.q + q0, ra.q, rtol=0, atol=1e-9)
