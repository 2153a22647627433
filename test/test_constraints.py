"""Constraint terms against finite differences along random trajectories.

For every term: along q(t) = q0 + v0 t + a0 t^2 / 2 (a0 random, so q'' = a0)

    phi'  (finite differences of phi)    == phidot
    phi'' (finite differences of phidot) == A q'' - b

i.e. ``A q'' = b`` holds exactly when phi'' = 0, which is what the UK
equation imposes. The robot is a deliberately irregular two-branch tree
(unaligned axes, rotated frames) so that nothing planar hides errors.
"""

import zlib

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.constraints import (
    ConstraintStack,
    FrameOrientation,
    build_stacks,
    build_term,
    jl,
    jl_dot,
    jr_inv,
    jr_inv_dot,
)
from uk_controller.constraints.trajectories import trajectory as build_trajectory
from uk_controller.files.parameter_file import ConfigError
from uk_controller.model.robot_model import RobotModel
from uk_controller.settings.sections import constraint_item, trajectory_item


def trajectory(spec, file=None):
    """The trajectory of the map `spec`, made a typed item as a setup file's is."""
    return build_trajectory(trajectory_item(spec, file=file))


TREE = """<robot name="tree">
 <link name="base"/>
 <link name="a1"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="a2"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="a3"><inertial><origin xyz="0.05 0 0"/><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="tip_a"/>
 <link name="b1"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="b2"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="tip_b"/>
 <joint name="ja1" type="revolute"><parent link="base"/><child link="a1"/><axis xyz="0 0 1"/><limit effort="5" lower="-4" upper="4" velocity="9"/></joint>
 <joint name="ja2" type="revolute"><parent link="a1"/><child link="a2"/><origin xyz="0.3 0 0" rpy="0.4 0 0.1"/><axis xyz="0 1 0"/><limit effort="5" lower="-4" upper="4" velocity="9"/></joint>
 <joint name="ja3" type="prismatic"><parent link="a2"/><child link="a3"/><origin xyz="0.25 0 0"/><axis xyz="0.6 0.8 0"/><limit effort="5" lower="-4" upper="4" velocity="9"/></joint>
 <joint name="jat" type="fixed"><parent link="a3"/><child link="tip_a"/><origin xyz="0.1 0.05 0" rpy="0.3 -0.2 0.7"/></joint>
 <joint name="jb1" type="revolute"><parent link="base"/><child link="b1"/><origin xyz="0.5 0 0"/><axis xyz="0.2 0.1 1"/><limit effort="5" lower="-4" upper="4" velocity="9"/></joint>
 <joint name="jb2" type="revolute"><parent link="b1"/><child link="b2"/><origin xyz="0.3 0 0" rpy="0 0.3 0"/><axis xyz="1 0 0"/><limit effort="5" lower="-4" upper="4" velocity="9"/></joint>
 <joint name="jbt" type="fixed"><parent link="b2"/><child link="tip_b"/><origin xyz="0.2 0 0.1" rpy="0.5 0.1 -0.4"/></joint>
</robot>
"""


@pytest.fixture(scope='module')
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp('urdf') / 'tree.urdf'
    path.write_text(TREE)
    # a q order unlike Pinocchio's depth-first order
    return RobotModel.from_urdf(path, joint_names=['jb2', 'ja1', 'ja3', 'jb1', 'ja2'])


USER_MODULE = '''
import numpy as np

def sphere(model, q, qd, t, params):
    """|p_tip - c|^2 - r^2 = 0 written by a user with model quantities."""
    c = np.asarray(params['centre'])
    d = model.frame_position('tip_a') - c
    J = model.frame_jacobian('tip_a')[:3]
    v = J @ qd
    phi = np.array([d @ d - params['radius'] ** 2])
    A = 2.0 * d[None, :] @ J
    b = np.array([-2.0 * (v @ v) - 2.0 * d @ model.frame_drift('tip_a')[:3]])
    return phi, A @ qd, A, b
'''

TERMS = {
    'position_xyz': {
        'type': 'frame_position',
        'frame': 'tip_a',
        'axes': ['x', 'y', 'z'],
        'trajectory': {'type': 'helix', 'radius': 0.05, 'omega': 1.3, 'centre': [0.1, 0.3, 0.0], 'rate': 0.02},
    },
    'position_zx': {
        'type': 'frame_position',
        'frame': 'b2',
        'axes': ['z', 'x'],
        'trajectory': {'type': 'circle', 'centre': [0.2, 0.1], 'radius': 0.1, 'omega': 0.8},
    },
    'planar_z': {
        'type': 'frame_orientation',
        'frame': 'tip_a',
        'mode': 'planar',
        'axis': [0.0, 0.0, 1.0],
        'trajectory': {'type': 'line', 'centre': [0.3], 'amplitude': 0.2, 'omega': 1.1},
    },
    'planar_skew': {
        'type': 'frame_orientation',
        'frame': 'tip_b',
        'mode': 'planar',
        'axis': [0.3, 0.5, 0.8],
        'reference': [0.0, 1.0, 0.0],
        'zero_direction': [1.0, 0.0, 0.0],
        'trajectory': {'type': 'hold', 'value': [0.1]},
    },
    'so3_hold': {
        'type': 'frame_orientation',
        'frame': 'tip_a',
        'mode': 'so3',
        'trajectory': {'type': 'hold', 'value': [0.2, -0.1, 0.4]},
    },
    'so3_moving': {
        'type': 'frame_orientation',
        'frame': 'tip_b',
        'mode': 'so3',
        'trajectory': {
            'type': 'circle',
            'centre': [0.3, 0.2, -0.1],
            'radius': 0.5,
            'omega': 0.9,
            'u': [1.0, 0.0, 0.0],
            'v': [0.0, 0.6, 0.8],
        },
    },
    'joint_linear': {
        'type': 'joint_linear',
        'coefficients': [1.0, -2.0, 0.5, 0.0, 3.0],
        'trajectory': {'type': 'polynomial', 'times': [0.0, 2.0], 'waypoints': [0.0, 1.0]},
    },
    'joint_linear_named': {
        'type': 'joint_linear',
        'joints': ['ja1', 'ja2', 'jb1'],
        'coefficients': [1.0, 1.0, 1.0],
        'value': 0.25,
    },
    'closure_xy': {'type': 'loop_closure', 'frames': ['tip_a', 'tip_b'], 'axes': ['x', 'y']},
    'closure_angle': {
        'type': 'loop_closure',
        'frames': ['tip_a', 'b2'],
        'axes': ['x', 'z'],
        'angle_axis': [0.0, 1.0, 0.0],
    },
    'weld': {'type': 'loop_closure', 'frames': ['tip_a', 'tip_b'], 'mode': 'weld'},
    'user': {
        'type': 'callable',
        'function': 'user_constraint.py:sphere',
        'params': {'centre': [0.2, 0.0, 0.1], 'radius': 0.3},
    },
}


@pytest.fixture(scope='module')
def user_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp('user')
    (folder / 'user_constraint.py').write_text(USER_MODULE)
    return folder


def _wrap(x):
    return (x + np.pi) % (2 * np.pi) - np.pi


def _rows(term, model, q, qd, t):
    model.compute(q, qd)
    return term.evaluate(model, q, qd, t)


@pytest.mark.parametrize('name', sorted(TERMS))
def test_rows_against_finite_differences(name, model, user_dir):
    term = build_term(name, constraint_item(name, TERMS[name], 'test.yaml'), model, user_dir)
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # same states every run
    h = 1e-6
    angle_rows = np.zeros(term.m, dtype=bool)
    if name.startswith('planar') or name == 'closure_angle':
        angle_rows[-1] = True
    for _ in range(6):
        q0 = rng.uniform(-1.5, 1.5, model.n)
        v0 = rng.normal(size=model.n)
        a0 = rng.normal(size=model.n)
        t0 = rng.uniform(0.1, 3.0)

        def state(dt):
            return q0 + v0 * dt + 0.5 * a0 * dt * dt, v0 + a0 * dt, t0 + dt

        rows = _rows(term, model, *state(0.0))
        phidot, A, b = rows.phidot.copy(), rows.A.copy(), rows.b.copy()
        plus = _rows(term, model, *state(h))
        phi_p, phidot_p = plus.phi.copy(), plus.phidot.copy()
        minus = _rows(term, model, *state(-h))
        dphi = phi_p - minus.phi
        dphi[angle_rows] = _wrap(dphi[angle_rows])
        scale = 1.0 + np.abs(phidot).max()
        np.testing.assert_allclose(phidot, dphi / (2 * h), atol=2e-7 * scale, err_msg='phidot')
        phidd = (phidot_p - minus.phidot) / (2 * h)
        np.testing.assert_allclose(A @ a0 - b, phidd, atol=2e-6 * (1.0 + np.abs(phidd).max()), err_msg='A q\'\' - b')
        # phidot is linear in q' with A as the velocity map (minus the desired velocity)
        rows2 = _rows(term, model, q0, 2.0 * v0, t0)
        np.testing.assert_allclose(rows2.phidot - phidot, A @ v0, atol=1e-10 * scale)


def test_planar_angle_is_joint_sum_for_planar_chain(tmp_path):
    """For rotations about z only, the planar angle is the sum of the joint angles and A = (1, 1, 1)."""
    urdf = """<robot name="p"><link name="base"/>
     <link name="l1"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
     <link name="l2"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
     <link name="l3"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
     <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/><limit effort="1" lower="-9" upper="9" velocity="1"/></joint>
     <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/><limit effort="1" lower="-9" upper="9" velocity="1"/></joint>
     <joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/><limit effort="1" lower="-9" upper="9" velocity="1"/></joint>
    </robot>"""
    path = tmp_path / 'p.urdf'
    path.write_text(urdf)
    m = RobotModel.from_urdf(path)
    term = FrameOrientation('angle', 'l3', trajectory({'type': 'hold', 'value': [0.0]}))
    rng = np.random.default_rng(5)
    for _ in range(10):
        q, qd = rng.uniform(-1, 1, 3), rng.normal(size=3)
        rows = _rows(term, m, q, qd, 0.0)
        assert rows.phi[0] == pytest.approx(_wrap(q.sum()), abs=1e-12)
        np.testing.assert_allclose(rows.A[0], [1.0, 1.0, 1.0], atol=1e-12)
        assert rows.b[0] == pytest.approx(0.0, abs=1e-12)


def test_so3_helpers_against_pinocchio_and_fd():
    rng = np.random.default_rng(7)
    h = 1e-6
    for scale in (1e-4, 0.05, 0.5, 2.0):
        for _ in range(5):
            r = rng.normal(size=3)
            r *= scale / np.linalg.norm(r)
            rd = rng.normal(size=3)
            np.testing.assert_allclose(jr_inv(r), pin.Jlog3(pin.exp3(r)), atol=1e-10)
            np.testing.assert_allclose(jl(r), pin.Jexp3(-r), atol=1e-12)  # Jl(r) = Jr(-r)
            np.testing.assert_allclose(
                jr_inv_dot(r, rd), (jr_inv(r + h * rd) - jr_inv(r - h * rd)) / (2 * h), atol=1e-7
            )
            np.testing.assert_allclose(jl_dot(r, rd), (jl(r + h * rd) - jl(r - h * rd)) / (2 * h), atol=1e-7)


def test_stack_is_the_concatenation_of_its_terms(model, user_dir):
    names = ['closure_xy', 'position_xyz', 'so3_moving', 'user', 'joint_linear']
    terms = [build_term(n, constraint_item(n, TERMS[n]), model, user_dir) for n in names]
    stack = ConstraintStack(terms, model.n)
    assert stack.names == names
    assert stack.m == 2 + 3 + 3 + 1 + 1
    assert stack.slices['so3_moving'] == slice(5, 8)
    rng = np.random.default_rng(11)
    q, qd, t = rng.uniform(-1, 1, model.n), rng.normal(size=model.n), 0.7
    model.compute(q, qd)
    rows = stack.evaluate(model, q, qd, t)
    assert rows is stack.rows  # preallocated, filled in place
    for term in terms:
        s = stack.slices[term.name]
        single = term.evaluate(model, q, qd, t)
        for field in ('phi', 'phidot', 'A', 'b', 'order'):
            np.testing.assert_array_equal(getattr(rows, field)[s], getattr(single, field))
    out = stack.empty_rows()
    stack.evaluate(model, q, qd, t, out=out)
    np.testing.assert_array_equal(out.A, rows.A)
    np.testing.assert_array_equal(out.b, rows.b)


def test_roles_split_passive_and_servo(model, user_dir):
    cfg = {
        'names': ['closure_xy', 'position_zx', 'joint_linear_named'],
        'closure_xy': TERMS['closure_xy'],
        'position_zx': TERMS['position_zx'],
        'joint_linear_named': {**TERMS['joint_linear_named'], 'role': 'passive'},
    }
    items = {name: constraint_item(name, cfg[name], 'x.yaml') for name in cfg['names']}
    passive, servo = build_stacks(cfg['names'], items, model, user_dir, file='x.yaml')
    assert passive.names == ['closure_xy', 'joint_linear_named']
    assert servo.names == ['position_zx']


def test_a_map_is_refused_by_the_builders_naming_the_item_maker(model):
    with pytest.raises(TypeError, match='constraint_item'):
        build_term('j', TERMS['joint_linear_named'], model)
    with pytest.raises(TypeError, match='trajectory_item'):
        build_trajectory({'type': 'hold', 'value': [0.0]})


def test_joint_linear_named_maps_to_q_order(model):
    term = build_term('j', constraint_item('j', TERMS['joint_linear_named']), model)
    expected = np.zeros(model.n)
    for j in ('ja1', 'ja2', 'jb1'):
        expected[model.joint_names.index(j)] = 1.0
    q = np.arange(model.n, dtype=float)
    rows = _rows(term, model, q, np.zeros(model.n), 0.0)
    np.testing.assert_array_equal(rows.A[0], expected)
    assert rows.phi[0] == pytest.approx(expected @ q - 0.25)


@pytest.mark.parametrize(
    'cfg, key, match',
    [
        (
            {'type': 'frame_position', 'frame': 'nowhere', 'trajectory': {'type': 'hold', 'value': [0.0, 0.0, 0.0]}},
            'constraints.c.frame',
            'unknown frame',
        ),
        (
            {
                'type': 'frame_position',
                'frame': 'tip_a',
                'axes': ['x', 'y'],
                'trajectory': {'type': 'hold', 'value': [0.0, 0.0, 0.0]},
            },
            'constraints.c',
            '3 components',
        ),
        (
            {
                'type': 'frame_position',
                'frame': 'tip_a',
                'axes': ['x', 'w'],
                'trajectory': {'type': 'hold', 'value': [0.0, 0.0]},
            },
            'constraints.c.axes',
            "'w'",
        ),
        ({'type': 'joint_linear', 'coefficients': [1.0, 1.0]}, 'constraints.c.coefficients', '5 entries'),
        ({'type': 'loop_closure', 'frames': ['tip_a']}, 'constraints.c.frames', '2 entries'),
        ({'type': 'callable', 'function': 'no_such_module_xyz:f'}, 'constraints.c.function', 'cannot import'),
        ({'type': 'teleport'}, 'constraints.c.type', 'not one of'),
        (
            {
                'type': 'frame_orientation',
                'frame': 'tip_a',
                'role': 'boss',
                'trajectory': {'type': 'hold', 'value': [0.0]},
            },
            'constraints.c.role',
            'not one of',
        ),
        (
            {'type': 'frame_position', 'frame': 'tip_a', 'trajectory': {'type': 'helix', 'omega': 1.0}},
            'constraints.c.trajectory.radius',
            'missing',
        ),
    ],
)
def test_bad_constraint_config_names_file_and_key(model, cfg, key, match):
    with pytest.raises(ConfigError, match=match) as err:
        build_term('c', constraint_item('c', cfg, 'robot.yaml'), model)
    assert err.value.key == key
    assert err.value.file == 'robot.yaml'
