"""load_robot for the shipped setups, actuator maps, and errors that name file and key."""

import copy
import math

import numpy as np
import pytest
import yaml

from uk_controller.files import rcl_yaml
from uk_controller.files.parameter_file import ConfigError, ConfigNotFoundError, load_config
from uk_controller.paths import available_configs, resolve_config, resolve_data_file, share_dir
from uk_controller.robots import load_robot, setup_from_settings
from uk_controller.settings import schema as S
from uk_controller.settings.resolve import resolve

DEFAULT_OMEGA = S.default('stabilization.omega')


@pytest.fixture(scope='module')
def scara():
    return load_robot('scara')


@pytest.fixture(scope='module')
def planar():
    return load_robot('planar_3r')


def test_share_dir_and_config_resolution():
    assert (share_dir() / 'config' / 'scara.yaml').is_file()
    assert resolve_config('scara') == (share_dir() / 'config' / 'scara.yaml').resolve()
    assert resolve_config(str(share_dir() / 'config' / 'scara.yaml')).name == 'scara.yaml'
    assert {'scara', 'planar_3r'} <= set(available_configs())
    with pytest.raises(ConfigNotFoundError, match='scara'):  # lists what exists
        resolve_config('no_such_robot')
    # a relative path is relative to the setup file's folder only, never the share dir by accident
    assert resolve_data_file('urdf/scara.urdf', share_dir() / 'config' / 'scara.yaml') is None
    assert (
        resolve_data_file('../urdf/scara.urdf', share_dir() / 'config' / 'scara.yaml')
        == (share_dir() / 'urdf' / 'scara.urdf').resolve()
    )
    assert (
        resolve_data_file('package://uk_controller/urdf/scara.urdf') == (share_dir() / 'urdf' / 'scara.urdf').resolve()
    )
    assert resolve_data_file('package://uk_controller/urdf/nothing.urdf') is None


def test_scara_setup(scara):
    assert scara.name == 'scara'
    assert scara.joint_names == ['joint1', 'joint2', 'joint3', 'joint4']
    # seed 000 initial state with the signs of q1, q3 restored (config/scara.yaml explains why)
    np.testing.assert_allclose(scara.q0, np.radians([-30.0, 55.0, -24.0, 0.0]), atol=1e-12)
    np.testing.assert_allclose(scara.qd0, [-0.157, 0.0001, 0.157, 0.0195])
    printed = load_robot('scara_printed_start')
    np.testing.assert_allclose(printed.q0, np.radians([30.0, 55.0, 24.0, 0.0]), atol=1e-12)


def test_scara_restored_start_matches_printed_velocities(scara):
    """Why the signs: only the restored q0 makes the printed q'(0) move the tool along the helix."""

    def velocity_residual(setup):
        model = setup.model
        model.compute(setup.q0, setup.qd0)
        return np.abs(setup.servo.evaluate(model, setup.q0, setup.qd0, 0.0).phidot).max()

    restored = velocity_residual(scara)
    printed = velocity_residual(load_robot('scara_printed_start'))
    assert restored < 0.01 < printed
    assert scara.passive.m == 0
    assert scara.servo.names == ['tool_path', 'tool_orientation'] and scara.servo.m == 4
    assert scara.actuators.names == ['motor1', 'motor2', 'motor3', 'motor4']
    np.testing.assert_array_equal(scara.actuators.effort_limits, scara.model.effort_limits)
    np.testing.assert_array_equal(scara.actuators.matrix(scara.model), np.eye(4))
    # critical damping w = 15: phi'' + 30 phi' + 225 phi = 0
    assert float(scara.stabilization.kd) == 30.0 and float(scara.stabilization.kp) == 225.0


def test_scara_start_is_incompatible_as_the_paper_says(scara):
    """Both starts violate eq 48; seed 000 says so ('initial conditions are incompatible')."""
    passive, servo, _ = scara.evaluate(scara.q0, scara.qd0, 0.0)
    assert 1e-3 < np.abs(servo.phi).max() < 0.05
    # restored start: q1 + q2 + q3 = -30 + 55 - 24 = 1 degree
    assert servo.phi[scara.servo.slices['tool_orientation']][0] == pytest.approx(math.radians(1.0))
    printed = load_robot('scara_printed_start')
    passive, servo, _ = printed.evaluate(printed.q0, printed.qd0, 0.0)
    assert np.abs(servo.phi).max() > 0.1
    # printed start: q1 + q2 + q3 = 109 degrees
    assert servo.phi[printed.servo.slices['tool_orientation']][0] == pytest.approx(math.radians(109.0))


def test_planar_3r_start_is_compatible_and_rows_match_planar_kinematics(planar):
    """Independent check: closed-form planar kinematics of the 3R arm in the x-z plane."""
    assert planar.joint_names == ['shoulder', 'elbow', 'wrist']
    rng = np.random.default_rng(2)
    for k in range(10):
        q = planar.q0 if k == 0 else rng.uniform(-2, 2, 3)
        qd = planar.qd0 if k == 0 else rng.normal(size=3)
        t = 0.0 if k == 0 else rng.uniform(0, 10)
        _, rows, B = planar.evaluate(q, qd, t)
        a1, a12, a123 = q[0], q[0] + q[1], q.sum()
        # positive angles about +y turn +x towards -z
        x = 0.4 * math.cos(a1) + 0.3 * math.cos(a12) + 0.2 * math.cos(a123)
        z = -(0.4 * math.sin(a1) + 0.3 * math.sin(a12) + 0.2 * math.sin(a123))
        phi = [x - 0.45 - 0.1 * math.cos(t), z - 0.25 - 0.1 * math.sin(t), (a123 + math.pi) % (2 * math.pi) - math.pi]
        np.testing.assert_allclose(rows.phi, phi, atol=1e-12)
        np.testing.assert_allclose(rows.A[2], [1.0, 1.0, 1.0], atol=1e-12)
        if k == 0:
            np.testing.assert_allclose(rows.phi, 0.0, atol=1e-12)
            np.testing.assert_allclose(rows.phidot, 0.0, atol=1e-12)
    np.testing.assert_array_equal(planar.actuators.effort_limits, [60.0, 30.0, 10.0])


# --------------------------------------------------------------------------- actuators


def _params(name):
    params, path = load_config(resolve_config(name))
    return copy.deepcopy(params), path


def test_between_actuators_equal_relative_angular_velocity(scara):
    """B^T q' = axis . (omega_A - omega_B): the power of a unit torque between two bodies."""
    params, path = _params('scara')
    params['actuators'] = {
        'names': ['m21', 'm1w', 'm31', 'tilted'],
        'm21': {'between': ['link2', 'link1'], 'axis': [0.0, 0.0, 1.0]},
        'm1w': {'between': ['link1', 'world'], 'axis': [0.0, 0.0, 2.0], 'effort_limit': 5.0},
        'm31': {'between': ['link3', 'link1'], 'axis': [0.0, 0.0, 1.0]},
        'tilted': {'between': ['tool', 'link1'], 'axis': [0.6, 0.0, 0.8]},
    }
    setup = setup_from_settings(resolve(path, params=params))
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, qd = rng.uniform(-2, 2, 4), rng.normal(size=4)
        setup.model.compute(q, qd)
        B = setup.actuators.matrix(setup.model)
        # joint-like cases have unit columns: q2', q1', q2' + q3'
        np.testing.assert_allclose(B[:, 0], [0, 1, 0, 0], atol=1e-12)
        np.testing.assert_allclose(B[:, 1], [1, 0, 0, 0], atol=1e-12)
        np.testing.assert_allclose(B[:, 2], [0, 1, 1, 0], atol=1e-12)
        w_tool = setup.model.frame_velocity('tool')[3:]
        w_link1 = setup.model.frame_velocity('link1')[3:]
        assert B[:, 3] @ qd == pytest.approx(np.array([0.6, 0.0, 0.8]) @ (w_tool - w_link1), abs=1e-12)
    np.testing.assert_array_equal(setup.actuators.effort_limits[:2], [np.inf, 5.0])
    assert not setup.actuators.constant


def test_defaults_when_sections_are_absent():
    params, path = _params('planar_3r')
    for key in ('actuators', 'stabilization', 'constraints'):
        del params[key]
    del params['robot']['joints']
    setup = setup_from_settings(resolve(path, params=params))
    assert setup.actuators.names == setup.joint_names == ['shoulder', 'elbow', 'wrist']
    np.testing.assert_array_equal(setup.actuators.effort_limits, [60.0, 30.0, 10.0])
    assert float(setup.stabilization.kp) == DEFAULT_OMEGA**2
    assert setup.passive.m == 0 and setup.servo.m == 0


def test_mass_scale_reaches_the_model(scara):
    heavy = load_robot('scara', mass_scale=1.3)
    q = np.array([0.1, 0.7, -0.3, 0.05])
    heavy.model.compute(q, np.zeros(4))
    scara.model.compute(q, np.zeros(4))
    np.testing.assert_allclose(heavy.model.M, 1.3 * scara.model.M, rtol=1e-12)


def test_load_config_node_sections(tmp_path):
    path = tmp_path / 'nodes.yaml'
    path.write_text(
        yaml.safe_dump(
            {
                '/**': {'ros__parameters': {'robot': {'name': 'a', 'urdf': 'x'}, 'control': {'rate': 100.0}}},
                'uk_controller_node': {'ros__parameters': {'control': {'rate': 500.0}}},
            }
        )
    )
    params, resolved = load_config(path)
    assert resolved == path.resolve() and params['control']['rate'] == 100.0
    params, _ = load_config(path, node='uk_controller_node')
    assert params['control']['rate'] == 500.0 and params['robot']['name'] == 'a'


# --------------------------------------------------------------------------- errors


def _write(tmp_path, params, name='robot.yaml'):
    path = tmp_path / name
    path.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}))  # quotes y as ROS needs
    return path


def _scara_params_with_absolute_urdf():
    params, _ = _params('scara')
    params['robot']['urdf'] = str(share_dir() / 'urdf' / 'scara.urdf')
    return params


def _edit(path_in_params, value):
    def apply(params):
        node = params
        keys = path_in_params.split('.')
        for k in keys[:-1]:
            node = node[k]
        if value is _DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value

    return apply


_DELETE = object()

BAD = [
    (_edit('robot.urdf', _DELETE), 'robot.urdf', 'missing'),
    (_edit('robot.urdf', 'urdf/nothing_here.urdf'), 'robot.urdf', 'not found'),
    (_edit('robot.joints', ['joint1', 'joint2', 'joint3', 'elbow']), 'robot.joints', 'elbow'),
    (_edit('robot.initial_position', [0.0, 0.0]), 'robot.initial_position', '4 entries'),
    (_edit('robot.gravity', [0.0, 'down', 0.0]), 'robot.gravity', 'numbers'),
    (_edit('actuators.motor2', {'joint': 'joint9'}), 'actuators.motor2.joint', 'joint9'),
    (_edit('actuators.motor3', {'joint': 'joint3', 'effort_limit': -1.0}), 'actuators.motor3.effort_limit', '> 0'),
    (
        _edit('actuators.motor4', {'between': ['link4', 'nowhere'], 'axis': [0.0, 0.0, 1.0]}),
        'actuators.motor4.between',
        'nowhere',
    ),
    (_edit('actuators.motor9', {'joint': 'joint1'}), 'actuators.motor9', 'not listed'),
    (_edit('constraints.tool_path.frame', 'flange'), 'constraints.tool_path.frame', 'flange'),
    (_edit('constraints.tool_path.trajectory.radius', _DELETE), 'constraints.tool_path.trajectory.radius', 'missing'),
    (_edit('constraints.names', ['tool_path', 'tool_orientation', 'ghost']), 'constraints.ghost', 'missing'),
    (_edit('stabilization.convention', 'magic'), 'stabilization.convention', 'magic'),
    (_edit('stabilization.omega', _DELETE), 'stabilization.omega', 'missing'),
]


@pytest.mark.parametrize('edit, key, match', BAD, ids=[b[1] + ':' + b[2] for b in BAD])
def test_bad_config_names_file_and_key(tmp_path, edit, key, match):
    params = _scara_params_with_absolute_urdf()
    edit(params)
    path = _write(tmp_path, params)
    with pytest.raises(ConfigError, match=match) as err:
        load_robot(path)
    assert err.value.file == str(path.resolve())
    assert err.value.key == key
    assert str(err.value).startswith(f'{path.resolve()}: {key}: ')


@pytest.mark.parametrize(
    'text, match',
    [
        ('robot: {name: x}\n', 'ros__parameters'),
        ('/**: {ros__parameters: {robot: [1, 2}\n', 'YAML'),
        ('- just\n- a list\n', 'top level'),
    ],
)
def test_malformed_files(tmp_path, text, match):
    path = tmp_path / 'bad.yaml'
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as err:
        load_config(path)
    assert err.value.file == str(path.resolve())


def test_urdf_relative_to_the_config_file(tmp_path):
    """A user's own robot: setup and URDF side by side, outside the package."""
    urdf = (share_dir() / 'urdf' / 'planar_3r.urdf').read_text()
    (tmp_path / 'urdf').mkdir()
    (tmp_path / 'urdf' / 'my_arm.urdf').write_text(urdf)
    (tmp_path / 'config').mkdir()
    params, _ = _params('planar_3r')
    params['robot']['urdf'] = '../urdf/my_arm.urdf'  # relative to the config file's folder
    path = _write(tmp_path / 'config', params, 'my_arm.yaml')
    setup = load_robot(path)
    assert setup.urdf_path == (tmp_path / 'urdf' / 'my_arm.urdf').resolve()
    params['robot']['urdf'] = 'my_arm.urdf'  # next to the config file
    (tmp_path / 'config' / 'my_arm.urdf').write_text(urdf)
    assert load_robot(_write(tmp_path / 'config', params, 'b.yaml')).urdf_path.parent == tmp_path / 'config'


def test_callable_constraint_from_config(tmp_path):
    (tmp_path / 'my_constraints.py').write_text(
        'import numpy as np\n'
        'def elbow_at(model, q, qd, t, params):\n'
        '    i = model.joint_index("elbow")\n'
        '    A = np.zeros((1, model.n)); A[0, i] = 1.0\n'
        '    return np.array([q[i] - params["angle"]]), A @ qd, A, np.zeros(1)\n'
    )
    params, _ = _params('planar_3r')
    params['robot']['urdf'] = str(share_dir() / 'urdf' / 'planar_3r.urdf')
    params['constraints'] = {
        'names': ['elbow'],
        'elbow': {'type': 'callable', 'function': 'my_constraints.py:elbow_at', 'params': {'angle': 0.5}},
    }
    setup = load_robot(_write(tmp_path, params))
    q = np.array([0.1, 0.9, -0.2])
    _, rows, _ = setup.evaluate(q, np.array([0.0, 2.0, 0.0]), 0.0)
    assert rows.m == 1
    assert rows.phi[0] == pytest.approx(0.4) and rows.phidot[0] == pytest.approx(2.0)
