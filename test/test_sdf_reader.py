"""The SDF reader on Agility's Cassie (``example-robot-data``'s unedited ``cassie_v2.sdf``) and small models:
ball joints that close loops, universal joints, springs, a welded or free root, and what it refuses.

Independent references: the mass matrix as the sum over bodies of ``J_b^T I_b J_b`` (frame Jacobians, no CRBA),
the link masses summed from the XML, a KKT system for the closed-chain accelerations, and Pinocchio's own
free-flyer model of the same links.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.core import uk
from uk_controller.files.description import DescriptionError, read_sdf
from uk_controller.files.parameter_file import ConfigError
from uk_controller.robots.example_robot_data import description
from uk_controller.robots.setup import load_robot

CASSIE = description('cassie_description/robots/cassie_v2.sdf')
needs_cassie = pytest.mark.skipif(CASSIE is None, reason='example-robot-data (test extra) is not installed')


def body_sum_mass_matrix(model, q):
    """M = sum_b J_b^T I_b J_b over the joints' bodies (local frame Jacobians): no subtree bookkeeping."""
    data = model.createData()
    pin.computeJointJacobians(model, data, q)
    M = np.zeros((model.nv, model.nv))
    for j in range(1, model.njoints):
        J = pin.getJointJacobian(model, data, j, pin.ReferenceFrame.LOCAL)
        M += J.T @ model.inertias[j].matrix() @ J
    return M


def xml_link_masses(path):
    return {
        link.get('name'): float(link.findtext('inertial/mass', '0')) for link in ET.parse(path).getroot().iter('link')
    }


@needs_cassie
def test_cassie_loads_with_its_ball_joints_as_closures_and_a_valid_mass_matrix():
    model, closures, extras = read_sdf(CASSIE, 'fixed')
    assert model.nq == model.nv == 22
    assert sorted(closures) == sorted(
        ['left-pitch-rod-joint', 'right-pitch-rod-joint', 'left-plantar-foot-joint', 'right-plantar-foot-joint']
    )
    assert all(c['mode'] == 'position' and c['role'] == 'passive' for c in closures.values())
    data = model.createData()
    q = pin.neutral(model)
    pin.framesForwardKinematics(model, data, q)
    for name, closure in closures.items():  # the file's link poses are a closed configuration
        a, b = (data.oMf[model.getFrameId(f)].translation for f in closure['frames'])
        assert np.linalg.norm(a - b) < 1e-12, name
    rng = np.random.default_rng(3)
    for _ in range(3):  # CRBA (subtrees in consecutive indices) = sum of J^T I J
        q = rng.uniform(-0.5, 0.5, model.nq)
        M = pin.crba(model, model.createData(), q)
        M = np.triu(M) + np.triu(M, 1).T
        np.testing.assert_allclose(M, body_sum_mass_matrix(model, q), atol=1e-12)
        assert np.linalg.eigvalsh(M)[0] > 0.0
    masses = xml_link_masses(CASSIE)
    moving = sum(m for name, m in masses.items() if name != 'pelvis')
    assert sum(model.inertias[j].mass for j in range(1, model.njoints)) == pytest.approx(moving, rel=1e-12)
    # Cassie's leaf springs: <spring_stiffness> on the knee-shin and heel joints, <damping> elsewhere
    assert extras.joint_dynamics['left-knee-shin-joint'] == {'damping': 0.1, 'stiffness': 1500.0}
    assert extras.joint_dynamics['right-tarsus-spring-joint'] == {'stiffness': 1250.0}
    assert extras.joint_dynamics['left-roll-op'] == {'damping': 1.0}


@needs_cassie
def test_cassie_ball_closures_give_the_kkt_accelerations(tmp_path):
    """UK's closed-chain acceleration on Cassie's four ball-joint closures equals the KKT system's
    [M A^T; A 0] [q''; -lambda] = [Q; b] (least squares: the planar foot loops make A rank deficient)."""
    setup = load_robot_setup_for(CASSIE, tmp_path)
    model, n = setup.model, setup.model.n
    rng = np.random.default_rng(7)
    q = np.zeros(n)  # the file's closed configuration
    for _ in range(3):
        model.compute(q, np.zeros(n))
        A0 = setup.passive.evaluate(model, q, np.zeros(n), 0.0).A
        basis = np.linalg.svd(A0)[2][np.linalg.matrix_rank(A0, 1e-9) :]  # velocities the closures allow
        qd = basis.T @ rng.normal(scale=0.5, size=basis.shape[0])
        tau = rng.normal(scale=5.0, size=n)
        model.compute(q, qd)
        rows = setup.passive.evaluate(model, q, qd, 0.0)
        M, Q = model.M.copy(), tau - model.h
        A, b = rows.A.copy(), rows.b.copy()
        assert A.shape == (12, n)
        qdd = uk.constrained_acceleration(M, Q, A, b, rcond=1e-9)
        kkt = np.block([[M, A.T], [A, np.zeros((12, 12))]])
        reference = np.linalg.lstsq(kkt, np.concatenate([Q, b]), rcond=1e-12)[0][:n]
        np.testing.assert_allclose(qdd, reference, rtol=1e-7, atol=1e-7 * np.abs(reference).max())
        # where the rows are consistent (all but the toggle direction of the foot four-bars) they hold
        U, sv, _ = np.linalg.svd(A)
        strong = U[:, sv > 1e-6 * sv[0]]
        np.testing.assert_allclose(strong.T @ (A @ qdd), strong.T @ b, atol=1e-8 * max(1.0, np.abs(b).max()))


def load_robot_setup_for(sdf, folder):
    path = folder / 'cassie.yaml'
    path.write_text(
        '/**:\n  ros__parameters:\n    robot:\n      name: cassie\n'
        f'      sdf: {sdf}\n      base: fixed\n'
        '    actuators:\n      names: [left_knee]\n      left_knee: {joint: left-knee-op, '
        'effort_limit: 195.2}\n'
    )
    return load_robot(str(path))


@needs_cassie
def test_cassie_springs_reach_the_model(tmp_path):
    setup = load_robot_setup_for(CASSIE, tmp_path)
    jd = setup.model.joint_dynamics
    names = setup.joint_names
    assert jd.stiffness[names.index('left-knee-shin-joint')] == 1500.0
    assert jd.stiffness[names.index('left-tarsus-spring-joint')] == 1250.0
    assert jd.damping[names.index('right-roll-op')] == 1.0


@needs_cassie
def test_free_base_is_pinocchio_free_flyer_in_euler_rates():
    """At zero base angles the Z-Y-X Euler rates are the body angular velocity (roll', pitch', yaw') and the
    translation rates the body linear velocity, so M and the gravity vector equal those of Pinocchio's free
    flyer on the same links (configuration with the identity quaternion), permuted."""
    free, _, _ = read_sdf(CASSIE, 'free')
    fixed, _, _ = read_sdf(CASSIE, 'fixed')
    assert free.nv == fixed.nv + 6 and [free.names[j] for j in range(1, 7)] == [
        'base_x',
        'base_y',
        'base_z',
        'base_yaw',
        'base_pitch',
        'base_roll',
    ]
    masses = xml_link_masses(CASSIE)
    flyer = pin.Model()
    root = flyer.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3(np.eye(3), np.array([0.0, 0.0, 1.01])), 'root')
    flyer.addJointFrame(root, 0)
    pelvis = pin.Frame('flyer_pelvis', root, 0, pin.SE3.Identity(), pin.FrameType.BODY)
    flyer = pin.appendModel(flyer, fixed, flyer.addFrame(pelvis), pin.SE3(np.eye(3), np.array([0.0, 0.0, -1.01])))
    # (appendModel moves the fixed model's world body, the welded pelvis, onto the flyer's root)
    rng = np.random.default_rng(11)
    q_joints = rng.uniform(-0.3, 0.3, fixed.nq)
    q_free = np.concatenate([np.zeros(6), q_joints])
    q_flyer = np.concatenate([np.zeros(3), [0.0, 0.0, 0.0, 1.0], q_joints])
    # yaw' = w_z, pitch' = w_y, roll' = w_x at zero angles:
    perm = np.concatenate([[0, 1, 2, 5, 4, 3], np.arange(6, free.nv)])  # free coordinate k = flyer's perm[k]
    M_free = pin.crba(free, free.createData(), q_free)
    M_flyer = pin.crba(flyer, flyer.createData(), q_flyer)

    def sym(M):
        return np.triu(M) + np.triu(M, 1).T

    np.testing.assert_allclose(sym(M_free), sym(M_flyer)[np.ix_(perm, perm)], atol=1e-12)
    assert sym(M_free)[0, 0] == pytest.approx(sum(masses.values()), rel=1e-12)
    g_free = pin.computeGeneralizedGravity(free, free.createData(), q_free)
    g_flyer = pin.computeGeneralizedGravity(flyer, flyer.createData(), q_flyer)
    np.testing.assert_allclose(g_free, g_flyer[perm], atol=1e-10)
    assert g_free[2] == pytest.approx(9.81 * sum(masses.values()), rel=1e-9)


def _write(tmp_path, name, body):
    path = tmp_path / f'{name}.sdf'
    path.write_text(f'<sdf version="1.9"><model name="{name}">{body}</model></sdf>')
    return path


LINK = (
    '<link name="{n}"><pose>{p}</pose><inertial><mass>1</mass><inertia><ixx>0.01</ixx><iyy>0.01</iyy>'
    '<izz>0.01</izz></inertia></inertial></link>'
)


def test_universal_joint_is_two_revolutes_about_its_axes(tmp_path):
    body = (
        LINK.format(n='a', p='0 0 1 0 0 0')
        + LINK.format(n='b', p='0 0 0.5 0 0 0')
        + '<joint name="w" type="fixed"><parent>world</parent><child>a</child></joint>'
        '<joint name="u" type="universal"><parent>a</parent><child>b</child>'
        '<axis><xyz>1 0 0</xyz><limit><lower>-1</lower><upper>1</upper></limit></axis>'
        '<axis2><xyz>0 1 0</xyz><dynamics><damping>0.3</damping></dynamics></axis2></joint>'
    )
    model, closures, extras = read_sdf(_write(tmp_path, 'u', body))
    assert [model.names[j] for j in range(1, model.njoints)] == ['u_1', 'u_2'] and not closures
    assert extras.joint_dynamics == {'u_2': {'damping': 0.3}}
    assert list(model.lowerPositionLimit) == [-1.0, -np.inf]
    data = model.createData()
    a, c = 0.4, -0.7
    pin.framesForwardKinematics(model, data, np.array([a, c]))
    R = pin.rpy.rpyToMatrix(a, 0, 0) @ pin.rpy.rpyToMatrix(0, c, 0)  # about x, then about the new y
    np.testing.assert_allclose(data.oMf[model.getFrameId('b')].rotation, R, atol=1e-14)
    np.testing.assert_allclose(data.oMf[model.getFrameId('b')].translation, [0, 0, 0.5], atol=1e-14)


@pytest.mark.parametrize('axis', ['0 0 1', '0 1 0', '1 1 0', '0 0 -1'])
def test_continuous_joint_moves_like_the_revolute_joint_about_its_axis(tmp_path, axis):
    """A continuous joint (Pinocchio's (cos, sin) configuration) about any axis, here the middle joint of a
    chain reached through a posed link, gives the revolute joint's frames, mass matrix and bias forces at
    the same angle (the joint frame of the file kept: the named joint frame is compared too)."""

    def chain(kind):
        return (
            LINK.format(n='a', p='0 0 1 0 0 0')
            + LINK.format(n='b', p='0.3 0 1 0.2 0 0')
            + LINK.format(n='c', p='0.6 0.1 1 0 0 0')
            + '<joint name="ja" type="revolute"><parent>world</parent><child>a</child>'
            '<axis><xyz>0 1 0</xyz></axis></joint>'
            f'<joint name="jb" type="{kind}"><pose>0 0.05 0 0 0 0</pose><parent>a</parent><child>b</child>'
            f'<axis><xyz>{axis}</xyz></axis></joint>'
            '<joint name="jc" type="revolute"><parent>b</parent><child>c</child>'
            '<axis><xyz>1 0 0</xyz></axis></joint>'
        )

    revolute, _, _ = read_sdf(_write(tmp_path, 'revolute', chain('revolute')))
    continuous, _, _ = read_sdf(_write(tmp_path, 'continuous', chain('continuous')))
    assert continuous.nq == 4 and continuous.nv == 3
    q, v = np.array([0.3, -0.7, 0.2]), np.array([0.1, 0.5, -0.3])
    qc = np.array([0.3, np.cos(-0.7), np.sin(-0.7), 0.2])
    dr, dc = revolute.createData(), continuous.createData()
    np.testing.assert_allclose(np.triu(pin.crba(continuous, dc, qc)), np.triu(pin.crba(revolute, dr, q)), atol=1e-14)
    np.testing.assert_allclose(
        pin.rnea(continuous, dc, qc, v, np.zeros(3)), pin.rnea(revolute, dr, q, v, np.zeros(3)), atol=1e-13
    )
    pin.framesForwardKinematics(revolute, dr, q)
    pin.framesForwardKinematics(continuous, dc, qc)
    for frame in revolute.frames:
        np.testing.assert_allclose(
            dc.oMf[continuous.getFrameId(frame.name)].homogeneous,
            dr.oMf[revolute.getFrameId(frame.name)].homogeneous,
            atol=1e-14,
        )


def test_ball_joint_closing_a_loop_is_a_point_closure(tmp_path):
    body = (
        LINK.format(n='a', p='0 0 0 0 0 0')
        + LINK.format(n='b', p='0.5 0 0 0 0 0')
        + LINK.format(n='c', p='0.5 0.5 0 0 0 0')
        + '<joint name="ja" type="revolute"><parent>world</parent><child>a</child></joint>'
        '<joint name="jb" type="revolute"><pose>-0.5 0 0 0 0 0</pose><parent>world</parent><child>b</child>'
        '</joint><joint name="jc" type="revolute"><parent>b</parent><child>c</child></joint>'
        '<joint name="close" type="ball"><pose>0 0 0 0 0 0</pose><parent>a</parent><child>c</child></joint>'
    )
    model, closures, _ = read_sdf(_write(tmp_path, 'loop', body))
    assert closures == {
        'close': {'role': 'passive', 'type': 'loop_closure', 'frames': ['close/1', 'close/2'], 'mode': 'position'}
    }
    # the two closure frames are the same point of the world at the zero configuration
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.zeros(model.nq))
    p1, p2 = (data.oMf[model.getFrameId(f)].translation for f in closures['close']['frames'])
    np.testing.assert_allclose(p1, p2, atol=1e-15)
    np.testing.assert_allclose(p1, [0.5, 0.5, 0.0], atol=1e-15)


def test_a_ball_joint_is_taken_last_so_it_closes_the_loop(tmp_path):
    """In file order the ball joint reaches c first; the reader grows the tree with 1-DOF joints first."""
    body = (
        LINK.format(n='a', p='0 0 0 0 0 0')
        + LINK.format(n='c', p='0.5 0 0 0 0 0')
        + '<joint name="ja" type="revolute"><parent>world</parent><child>a</child></joint>'
        '<joint name="ball" type="ball"><parent>a</parent><child>c</child></joint>'
        '<joint name="jc" type="revolute"><parent>world</parent><child>c</child></joint>'
    )
    model, closures, _ = read_sdf(_write(tmp_path, 'order', body))
    assert list(closures) == ['ball'] and model.nv == 2


def test_a_joint_reached_from_its_child_carries_its_parent_about_the_negated_axis(tmp_path):
    """b is the child of a ball joint to the world and the parent of j2: the tree hangs b on a through j2
    (b turns by R(axis, -q) relative to a, as the file's j2 turns a by R(axis, q) relative to b) and the ball
    joint closes the loop."""
    body = (
        LINK.format(n='a', p='0 0 1 0 0 0')
        + LINK.format(n='b', p='0.5 0 1 0 0 0')
        + '<joint name="j1" type="revolute"><parent>world</parent><child>a</child><axis><xyz>0 0 1</xyz>'
        '</axis></joint><joint name="j2" type="revolute"><pose>0.2 0 0 0 0 0</pose><parent>b</parent>'
        '<child>a</child><axis><xyz>0 1 0</xyz><limit><lower>-1</lower><upper>2</upper></limit></axis></joint>'
        '<joint name="hold" type="ball"><parent>world</parent><child>b</child></joint>'
    )
    model, closures, _ = read_sdf(_write(tmp_path, 'rev', body))
    assert list(closures) == ['hold'] and [model.names[j] for j in (1, 2)] == ['j1', 'j2']
    assert list(model.lowerPositionLimit) == [-np.inf, -1.0]
    data = model.createData()
    q1, q2 = 0.3, 0.7
    pin.framesForwardKinematics(model, data, np.array([q1, q2]))
    a, b = data.oMf[model.getFrameId('a')], data.oMf[model.getFrameId('b')]
    Rz, Ry = pin.rpy.rpyToMatrix(0, 0, q1), pin.rpy.rpyToMatrix(0, -q2, 0)
    np.testing.assert_allclose(a.rotation, Rz, atol=1e-14)
    np.testing.assert_allclose(b.rotation, Rz @ Ry, atol=1e-14)
    joint_point = a.act(np.array([0.2, 0.0, 0.0]))  # j2's origin, on a
    np.testing.assert_allclose(b.act(np.array([-0.3, 0.0, 0.0])), joint_point, atol=1e-14)


@needs_cassie
def test_cassie_variant_with_its_rods_hung_on_ball_joints_loads():
    """cassie_wo_gearbox_spring.sdf hangs each achilles rod on its hip ball joint; the rod is reached from the
    heel instead and the ball joints close the loops, as in cassie_v2.sdf."""
    path = CASSIE.parent / 'cassie_wo_gearbox_spring.sdf'
    model, closures, _ = read_sdf(path)
    assert sorted(closures) == sorted(
        ['left-pitch-rod-joint', 'right-pitch-rod-joint', 'left-plantar-foot-joint', 'right-plantar-foot-joint']
    )
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    for closure in closures.values():
        p1, p2 = (data.oMf[model.getFrameId(f)].translation for f in closure['frames'])
        assert np.linalg.norm(p1 - p2) < 1e-12
    M = pin.crba(model, model.createData(), pin.neutral(model))
    np.testing.assert_allclose(
        np.triu(M) + np.triu(M, 1).T, body_sum_mass_matrix(model, pin.neutral(model)), atol=1e-12
    )


@pytest.mark.parametrize(
    'body, match',
    [
        (
            LINK.format(n='a', p='0 0 0 0 0 0')
            + '<joint name="g" type="gearbox"><parent>world</parent><child>a</child>'
            '</joint>',
            r'<joint name="g">: type \'gearbox\' not supported',
        ),
        (
            LINK.format(n='a', p='0 0 0 0 0 0')
            + LINK.format(n='b', p='1 0 0 0 0 0')
            + '<joint name="ja" type="revolute"><parent>world</parent><child>a</child></joint>'
            '<joint name="jb" type="revolute"><parent>world</parent><child>b</child></joint>'
            '<joint name="u" type="universal"><parent>a</parent><child>b</child></joint>',
            r'<joint name="u">: a universal joint closing a loop is not supported',
        ),
        (
            '<link name="a"><collision name="c"><pose frame="x">0 0 0 0 0 0</pose></collision></link>',
            r'<pose frame="x"> is not supported',
        ),
        (
            LINK.format(n='a', p='0 0 0 0 0 0')
            + '<joint name="j" type="revolute"><parent>world</parent><child>a</child>'
            '<axis><xyz>0 0 1</xyz><dynamics><spring_stiffness>-5</spring_stiffness></dynamics></axis></joint>',
            r'<joint name="j"> <dynamics>: stiffness must be finite and >= 0',
        ),
        (
            LINK.format(n='a', p='0 0 0 0 0 0')
            + '<joint name="j" type="revolute"><parent>world</parent><child>a</child>'
            '<axis><xyz>0 0 1</xyz><limit><lower>1</lower><upper>-1</upper></limit></axis></joint>',
            r'<joint name="j"> <limit>: lower 1.0 > upper -1.0',
        ),
        (
            LINK.format(n='a', p='0 0 0 0 0 0') + '<joint name="base_x" type="revolute"><parent>a</parent>'
            '<child>b</child></joint>' + LINK.format(n='b', p='0 0 0 0 0 0'),
            r"clash with the free base",
        ),
    ],
)
def test_unsupported_sdf_is_refused_naming_the_element(tmp_path, body, match):
    path = _write(tmp_path, 'bad', body)
    with pytest.raises(DescriptionError, match=match):
        read_sdf(path, 'free')


def test_free_base_is_refused_for_urdf(tmp_path):
    path = tmp_path / 'urdf_free.yaml'
    path.write_text(
        '/**:\n  ros__parameters:\n    robot:\n      urdf: package://uk_controller/urdf/scara.urdf\n      base: free\n'
    )
    with pytest.raises(ConfigError, match=r'robot\.base.*free is read for robot\.sdf'):
        load_robot(str(path))


@pytest.mark.slow
@needs_cassie
def test_cassie_hung_example_tracks_within_limits_with_its_loops_closed():
    """config/examples/cassie_hung.yaml on the embedded plant: the ankles on their circles, the feet at their
    angles, every loop closed to the file's own precision (its start residual), efforts and joints within
    their limits."""
    from uk_controller.paths import share_dir
    from uk_controller.sim.closed_loop import simulate

    setup = load_robot(str(share_dir() / 'config' / 'examples' / 'cassie_hung.yaml'), {'simulation.duration': 3.0})
    model = setup.model
    model.compute(setup.q0, setup.qd0)
    start = np.abs(setup.passive.evaluate(model, setup.q0, setup.qd0, 0.0).phi).max()
    assert start < 1e-7  # the nearly planar right foot four-bar: 2e-8
    res = simulate(setup)
    s = res.summary()
    assert not s['failure'], s['verdict']
    assert s['task_error_max'] < 1e-3, s['verdict']
    assert np.abs(res.closure_residual).max() < 2.0 * start
    limits = np.array([a.effort_limit for a in setup.actuators.actuators])
    assert np.all(np.abs(res.effort) <= limits + 1e-9)
    lower, upper = model.position_limits
    assert np.all(res.q >= lower - 1e-9) and np.all(res.q <= upper + 1e-9)
    assert np.abs(res.qd[-500:]).max() < 1.0  # the last half second: no joint whirls
