"""RobotModel against independent computations.

- M against a fresh ``pinocchio.crba`` and against twice the kinetic energy
  (``qd^T M qd = 2 T`` from ``pinocchio.computeKineticEnergy``),
- ``M' - 2 C`` skew-symmetric with M' from central finite differences along q',
- G against ``pinocchio.computeGeneralizedGravity`` and against the gradient
  of the potential energy by finite differences,
- ``h = C q' + G`` and RNEA,
- frame Jacobians against finite differences of frame placements, and the
  drift ``J' q'`` against finite differences of ``J q'`` along q(t) = q + t q'.
"""

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.model.robot_model import ModelError, RobotModel

# A deliberately irregular serial robot: unaligned axes, rotated joint frames,
# products of inertia, a prismatic joint and a rotated fixed tool frame.
IRREGULAR = """<robot name="irregular">
 <link name="base"/>
 <link name="l1"><inertial><origin xyz="0.1 0.02 0.05" rpy="0.1 0 0.2"/><mass value="2"/>
   <inertia ixx="0.1" iyy="0.2" izz="0.25" ixy="0.01" ixz="0.002" iyz="-0.003"/></inertial></link>
 <link name="l2"><inertial><origin xyz="0.1 0.02 0"/><mass value="1.3"/>
   <inertia ixx="0.05" iyy="0.06" izz="0.07" ixy="0" ixz="0.004" iyz="0"/></inertial></link>
 <link name="l3"><inertial><origin xyz="0 0.01 0.1"/><mass value="0.5"/>
   <inertia ixx="0.01" iyy="0.012" izz="0.011" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="l4"><inertial><origin xyz="0.03 0 0"/><mass value="0.3"/>
   <inertia ixx="0.004" iyy="0.005" izz="0.003" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="tool"/>
 <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/>
   <axis xyz="0 0 1"/><limit effort="10" lower="-3" upper="3" velocity="5"/></joint>
 <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.3 0 0" rpy="0.3 0.2 0"/>
   <axis xyz="0 1 0"/><limit effort="7" lower="-3" upper="3" velocity="5"/></joint>
 <joint name="j3" type="prismatic"><parent link="l2"/><child link="l3"/><origin xyz="0.2 0 0"/>
   <axis xyz="1 0 0"/><limit effort="20" lower="-3" upper="3" velocity="5"/></joint>
 <joint name="j4" type="revolute"><parent link="l3"/><child link="l4"/><origin xyz="0 0 0.1" rpy="0 0.4 0"/>
   <axis xyz="0.6 0 0.8"/><limit effort="3" lower="-3" upper="3" velocity="5"/></joint>
 <joint name="jt" type="fixed"><parent link="l4"/><child link="tool"/><origin xyz="0.05 0.1 0" rpy="0 0.5 0.3"/></joint>
</robot>
"""

ORDER = ['j3', 'j1', 'j4', 'j2']  # a message order different from the URDF order


@pytest.fixture(params=['urdf_order', 'permuted'])
def model(request, tmp_path):
    path = tmp_path / 'irregular.urdf'
    path.write_text(IRREGULAR)
    names = None if request.param == 'urdf_order' else ORDER
    return RobotModel.from_urdf(path, joint_names=names)


def _pin_q(model, q):
    """Our q (model.joint_names order) -> Pinocchio's order, written independently of model.py."""
    out = np.zeros(model.n)
    for i, name in enumerate(model.joint_names):
        out[model.model.idx_vs[model.model.getJointId(name)]] = q[i]
    return out


def _perm(model):
    return [model.model.idx_vs[model.model.getJointId(n)] for n in model.joint_names]


def states(seed, count=5, n=4):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield rng.uniform(-2.0, 2.0, n), rng.normal(size=n)


def test_joint_order_and_index_maps(model):
    assert sorted(model.joint_names) == ['j1', 'j2', 'j3', 'j4']
    msg_names = ['extra', 'j2', 'j4', 'j1', 'j3']
    values = np.array([99.0, 2.0, 4.0, 1.0, 3.0])
    idx = model.indices_from(msg_names)
    q = values[idx]
    assert [float(v) for v in q] == [float(name[1]) for name in model.joint_names]
    back = model.indices_to(['j1', 'j2', 'j3', 'j4'])
    np.testing.assert_array_equal(q[back], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ModelError, match='j4'):
        model.indices_from(['j1', 'j2', 'j3'])


def test_mass_matrix_against_crba_and_kinetic_energy(model):
    data = model.model.createData()
    perm = _perm(model)
    for q, qd in states(1):
        model.compute(q, qd)
        Mp = pin.crba(model.model, data, _pin_q(model, q))
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        np.testing.assert_allclose(model.M, Mp[np.ix_(perm, perm)], atol=1e-12)
        np.testing.assert_allclose(model.M, model.M.T, atol=0)
        T = pin.computeKineticEnergy(model.model, data, _pin_q(model, q), _pin_q(model, qd))
        assert qd @ model.M @ qd == pytest.approx(2.0 * T, rel=1e-12)
        assert np.linalg.eigvalsh(model.M)[0] > 0.0


def test_coriolis_skew_symmetry(model):
    eps = 1e-6
    for q, qd in states(2):
        Mdot = (model.mass_matrix(q + eps * qd) - model.mass_matrix(q - eps * qd)) / (2 * eps)
        C = model.coriolis_matrix(q, qd)
        N = Mdot - 2.0 * C
        assert np.abs(N + N.T).max() < 1e-7 * max(1.0, np.abs(Mdot).max())
        # and C q' is the velocity part of h
        model.compute(q, qd)
        np.testing.assert_allclose(model.h, C @ qd + model.g, atol=1e-12)


def test_gravity_against_pinocchio_and_potential_gradient(model):
    data = model.model.createData()
    perm = _perm(model)
    eps = 1e-6
    for q, qd in states(3):
        model.compute(q, qd)
        gp = pin.computeGeneralizedGravity(model.model, data, _pin_q(model, q))
        np.testing.assert_allclose(model.g, gp[perm], atol=1e-12)
        grad = np.zeros(model.n)
        for i in range(model.n):
            e = np.zeros(model.n)
            e[i] = eps
            grad[i] = (model.energy(q + e, qd)[1] - model.energy(q - e, qd)[1]) / (2 * eps)
        np.testing.assert_allclose(model.g, grad, atol=1e-7)


def test_h_against_rnea(model):
    data = model.model.createData()
    perm = _perm(model)
    for q, qd in states(4):
        model.compute(q, qd)
        tau = pin.rnea(model.model, data, _pin_q(model, q), _pin_q(model, qd), np.zeros(model.n))
        np.testing.assert_allclose(model.h, tau[perm], atol=1e-12)
        qdd = np.random.default_rng(0).normal(size=model.n)
        np.testing.assert_allclose(model.inverse_dynamics(q, qd, qdd), model.M @ qdd + model.h, atol=1e-10)


@pytest.mark.parametrize('frame', ['tool', 'l2', 'j4'])
def test_frame_jacobian_against_finite_differences(model, frame):
    eps = 1e-6
    for q, qd in states(5, count=3):
        model.compute(q, qd)
        J = model.frame_jacobian(frame).copy()
        p0 = model.frame_position(frame)
        assert p0.shape == (3,)
        for i in range(model.n):
            e = np.zeros(model.n)
            e[i] = eps
            model.compute(q + e, qd)
            pp, Rp = model.frame_position(frame), model.frame_rotation(frame)
            model.compute(q - e, qd)
            pm, Rm = model.frame_position(frame), model.frame_rotation(frame)
            np.testing.assert_allclose(J[:3, i], (pp - pm) / (2 * eps), atol=1e-8)
            np.testing.assert_allclose(J[3:, i], pin.log3(Rp @ Rm.T) / (2 * eps), atol=1e-8)


@pytest.mark.parametrize('frame', ['tool', 'l3'])
def test_frame_drift_against_finite_differences(model, frame):
    eps = 1e-6
    for q, qd in states(6):
        model.compute(q + eps * qd, qd)
        vp = model.frame_jacobian(frame) @ qd
        model.compute(q - eps * qd, qd)
        vm = model.frame_jacobian(frame) @ qd
        model.compute(q, qd)
        np.testing.assert_allclose(model.frame_drift(frame), (vp - vm) / (2 * eps), atol=1e-7)
        np.testing.assert_allclose(model.frame_velocity(frame), model.frame_jacobian(frame) @ qd, atol=1e-12)


def test_frame_cache_refreshes_after_compute(model):
    q, qd = next(states(7))
    model.compute(q, qd)
    J1 = model.frame_jacobian('tool').copy()
    d1 = model.frame_drift('tool').copy()
    model.compute(q + 0.3, 2 * qd)
    assert np.abs(model.frame_jacobian('tool') - J1).max() > 1e-3
    assert np.abs(model.frame_drift('tool') - d1).max() > 1e-3


def test_effort_limits_follow_joint_order(model):
    urdf = {'j1': 10.0, 'j2': 7.0, 'j3': 20.0, 'j4': 3.0}
    np.testing.assert_array_equal(model.effort_limits, [urdf[n] for n in model.joint_names])


def test_mass_scale_and_gravity_override(tmp_path):
    path = tmp_path / 'irregular.urdf'
    path.write_text(IRREGULAR)
    ref = RobotModel.from_urdf(path)
    heavy = RobotModel.from_urdf(path, mass_scale=1.7, gravity=[0.0, 3.0, -4.0])
    moon = RobotModel.from_urdf(path, gravity=[0.0, 0.0, -1.62])
    q, qd = next(states(8))
    ref.compute(q, qd)
    heavy.compute(q, qd)
    moon.compute(q, qd)
    np.testing.assert_allclose(heavy.M, 1.7 * ref.M, rtol=1e-12)
    np.testing.assert_allclose(moon.g, ref.g * 1.62 / 9.81, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(heavy.gravity, [0.0, 3.0, -4.0])
    # G is linear in the gravity vector: combine two single-axis models
    gy = RobotModel.from_urdf(path, gravity=[0.0, 1.0, 0.0])
    gz = RobotModel.from_urdf(path, gravity=[0.0, 0.0, 1.0])
    gy.compute(q, qd)
    gz.compute(q, qd)
    np.testing.assert_allclose(heavy.g, 1.7 * (3.0 * gy.g - 4.0 * gz.g), atol=1e-12)
    with pytest.raises(ModelError, match='mass_scale'):
        RobotModel.from_urdf(path, mass_scale=0.0)


def test_continuous_joint_in_permuted_order_matches_revolute(tmp_path):
    """A 'continuous' joint (Pinocchio nq 2, nv 1) is one unwrapped angle of q, also when the joint
    order is permuted: M, h and Jacobians equal those of the same URDF with a revolute joint."""
    text = IRREGULAR.replace('<joint name="j4" type="revolute">', '<joint name="j4" type="continuous">')
    (tmp_path / 'continuous.urdf').write_text(text)
    (tmp_path / 'revolute.urdf').write_text(IRREGULAR)
    order = ['j4', 'j2', 'j1', 'j3']
    cont = RobotModel.from_urdf(tmp_path / 'continuous.urdf', joint_names=order)
    rev = RobotModel.from_urdf(tmp_path / 'revolute.urdf', joint_names=order)
    assert cont.model.nq == rev.model.nq + 1 and cont.n == rev.n and cont.continuous_names == ['j4']
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, qd = rng.normal(size=4) * 7.0, rng.normal(size=4)
        cont.compute(q, qd)
        rev.compute(q, qd)
        np.testing.assert_allclose(cont.M, rev.M, atol=1e-12)
        np.testing.assert_allclose(cont.h, rev.h, atol=1e-12)
        frame = cont.frame_names()[-1]
        np.testing.assert_allclose(cont.frame_jacobian(frame), rev.frame_jacobian(frame), atol=1e-12)


def test_bad_joint_names_and_frames(tmp_path):
    path = tmp_path / 'irregular.urdf'
    path.write_text(IRREGULAR)
    with pytest.raises(ModelError, match='nope'):
        RobotModel.from_urdf(path, joint_names=['j1', 'j2', 'j3', 'nope'])
    with pytest.raises(ModelError, match='exactly once'):
        RobotModel.from_urdf(path, joint_names=['j1', 'j2', 'j3'])
    m = RobotModel.from_urdf(path)
    with pytest.raises(ModelError, match='unknown frame'):
        m.frame_id('nowhere')
    with pytest.raises(ModelError, match='not found'):
        RobotModel.from_urdf(tmp_path / 'missing.urdf')


@pytest.mark.parametrize(
    'robot',
    ['scara', 'five_bar', 'dual_arm', 'planar_3r', 'config/examples/cassie_hung.yaml', 'irregular', 'continuous'],
)
@pytest.mark.slow
def test_pinocchio_pass_gives_the_bits_of_compute(robot, tmp_path):
    """The compiled programs' pass (crba + rnea at q'' = 0) fills M, h, J, the joint and frame placements and
    the joint velocities with exactly the bits of compute()'s computeAllTerms, which the shipped robots'
    efforts were computed from: compared with computeAllTerms run by Pinocchio itself on a second Data."""
    from uk_controller.paths import share_dir
    from uk_controller.robots import load_robot

    if robot == 'irregular':
        model = RobotModel.from_urdf_string(IRREGULAR)
    elif robot == 'continuous':
        model = RobotModel.from_urdf_string(IRREGULAR.replace('type="revolute"', 'type="continuous"', 1))
        assert model.continuous.size
    else:
        name = str(share_dir() / robot) if robot.endswith('.yaml') else robot
        try:
            model = load_robot(name).model
        except Exception as exc:  # the Cassie example needs the example-robot-data wheel
            pytest.skip(f'{robot}: {exc}')
    pm, ref = model.model, model.model.createData()
    run = model.pinocchio_pass()
    rng = np.random.default_rng(3)
    for _ in range(10):
        q, qd = rng.uniform(-1.5, 1.5, model.n), rng.standard_normal(model.n)
        run(q, qd)
        qp = model.to_pinocchio_q(q)
        pin.computeAllTerms(pm, ref, qp, qd)
        if model.joint_dynamics is not None:
            ref.nle[:] += model.joint_dynamics.force(q, qd)
        pin.updateFramePlacements(pm, ref)
        data = model.data
        np.testing.assert_array_equal(np.triu(data.M), np.triu(ref.M))
        np.testing.assert_array_equal(data.nle, ref.nle)
        np.testing.assert_array_equal(data.J, ref.J)
        for ours, theirs in [*zip(data.oMi, ref.oMi), *zip(data.oMf, ref.oMf)]:
            np.testing.assert_array_equal(ours.homogeneous, theirs.homogeneous)
        for ours, theirs in zip(data.v, ref.v):
            np.testing.assert_array_equal(ours.vector, theirs.vector)
