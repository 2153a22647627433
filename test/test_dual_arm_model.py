"""Dual-arm closed chain (seed 004 sec. V-VI): Pinocchio's M, C, G of urdf/dual_arm.urdf against
the paper's closed forms (seed 004 appendix eqs A2-A4), the closure (eq 60-63), the servo task
(eqs 64-68), the actuator map (eq 70) and the initial configuration of config/dual_arm.yaml.

Coordinates. The paper uses absolute link angles theta_i (from the horizontal), the URDF relative
joint angles q_i. With theta = T q, T the lower-triangular matrix of ones (theta_i = q_1+...+q_i),
the kinetic energy (1/2) thetad^T M_abs(theta) thetad = (1/2) qd^T (T^T M_abs T) qd, and virtual
work tau_abs . dtheta = (T^T tau_abs) . dq. Because T is constant, thetadd = T qdd, so
    M_joint = T^T M_abs(T q) T,
    C_joint = T^T C_abs(T q, T qd) T      (C_joint qd = T^T C_abs thetad),
    G_joint = T^T G_abs(T q).
Plane: the paper's (x, y) is the world (x, z) plane of the URDF, joints turn about -y so that a
positive angle lifts the link, gravity (0, 0, -g).
"""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from uk_controller.control.controller import ControllerCore
from uk_controller.robots import load_robot

ROOT = Path(__file__).resolve().parents[1]
URDF = ROOT / "urdf" / "dual_arm.urdf"
CONFIG = ROOT / "config" / "dual_arm.yaml"

# seed 004 sec. VI: m_i = I_i = l_i = 1, g = 9.8; base distance L = 3
M_LINK = np.ones(5)
I_LINK = np.ones(5)
L_LINK = np.ones(5)
G_ACC = 9.8
L_BASE = 3.0
T = np.tril(np.ones((5, 5)))  # theta = T q


def _coefficients(m, l):
    """a_ij of seed 004 eqs A2/A3: M_ij = a_ij cos(theta_i - theta_j), C_ij = a_ij sin(theta_i - theta_j) thetad_j.

    The centre of mass of link j is at l_j / 2, so a_ij (i < j) = (m_j / 2 + sum_{k > j} m_k) l_i l_j.
    """
    n = len(m)
    a = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            k = max(i, j)
            if i == j:
                a[i, i] = (m[i] / 4 + m[i + 1 :].sum()) * l[i] ** 2
            else:
                a[i, j] = (m[k] / 2 + m[k + 1 :].sum()) * l[i] * l[j]
    return a


def paper_M(theta, m=M_LINK, inertia=I_LINK, l=L_LINK):
    """Seed 004 eq A2 (written out entry by entry there): M_ii = (m_i/4 + sum_{k>i} m_k) l_i^2 + I_i,
    M_ij = (m_j/2 + sum_{k>j} m_k) l_i l_j cos(theta_i - theta_j) for i < j."""
    a = _coefficients(m, l)
    M = a * np.cos(theta[:, None] - theta[None, :])
    return M + np.diag(inertia)


def paper_C(theta, thetad, m=M_LINK, l=L_LINK):
    """Seed 004 eq A3: C_ij = a_ij sin(theta_i - theta_j) thetad_j (i != j), C_ii = 0."""
    a = _coefficients(m, l)
    C = a * np.sin(theta[:, None] - theta[None, :]) * thetad[None, :]
    np.fill_diagonal(C, 0.0)
    return C


def paper_G(theta, m=M_LINK, l=L_LINK, g=G_ACC):
    """Seed 004 eq A4: G_i = (m_i/2 + sum_{k>i} m_k) g l_i cos(theta_i)."""
    coeff = np.array([m[i] / 2 + m[i + 1 :].sum() for i in range(len(m))])
    return coeff * g * l * np.cos(theta)


def a2_entries_as_printed(theta):
    """A handful of A2 entries typed exactly as printed, to guard _coefficients against a slip."""
    m1, m2, m3, m4, m5 = M_LINK
    l1, l2, l3, l4, l5 = L_LINK
    I1, I3, I5 = I_LINK[0], I_LINK[2], I_LINK[4]
    t1, t2, t3, t4, t5 = theta
    return {
        (0, 0): (m1 / 4 + m2 + m3 + m4 + m5) * l1**2 + I1,
        (0, 2): (m3 / 2 + m4 + m5) * l1 * l3 * np.cos(t1 - t3),
        (0, 4): m5 / 2 * l1 * l5 * np.cos(t1 - t5),
        (1, 3): (m4 / 2 + m5) * l2 * l4 * np.cos(t2 - t4),
        (2, 2): (m3 / 4 + m4 + m5) * l3**2 + I3,
        (3, 4): m5 / 2 * l4 * l5 * np.cos(t4 - t5),
        (4, 4): m5 / 4 * l5**2 + I5,
    }


@pytest.fixture(scope="module")
def config():
    with open(CONFIG) as f:
        return yaml.safe_load(f)["/**"]["ros__parameters"]


@pytest.fixture(scope="module")
def model(config):
    m = pin.buildModelFromUrdf(str(URDF))
    assert [m.names[i] for i in range(1, m.njoints)] == config["robot"]["joints"]
    m.gravity.linear = np.array(config["robot"]["gravity"], dtype=float)
    return m


def _states(n_states=40, seed=4):
    rng = np.random.default_rng(seed)
    for _ in range(n_states):
        yield rng.uniform(-np.pi, np.pi, 5), rng.uniform(-3.0, 3.0, 5)


def test_config_gravity_is_the_papers():
    with open(CONFIG) as f:
        g = yaml.safe_load(f)["/**"]["ros__parameters"]["robot"]["gravity"]
    np.testing.assert_allclose(g, [0.0, 0.0, -G_ACC])


def test_A2_entries_as_printed():
    theta = np.array([0.3, -1.1, 0.7, 2.0, -0.4])
    M = paper_M(theta)
    for (i, j), value in a2_entries_as_printed(theta).items():
        assert M[i, j] == pytest.approx(value, abs=1e-14)
        assert M[j, i] == pytest.approx(value, abs=1e-14)


def test_mass_matrix_matches_A2(model):
    data = model.createData()
    worst = 0.0
    for q, _ in _states():
        M = pin.crba(model, data, q).copy()
        M = np.triu(M) + np.triu(M, 1).T
        expected = T.T @ paper_M(T @ q) @ T
        np.testing.assert_allclose(M, expected, rtol=0, atol=1e-11)
        worst = max(worst, np.abs(M - expected).max())
    print(f"dual arm: max |M_pin - T^T M_A2 T| = {worst:.3e}")


def test_coriolis_vector_matches_A3(model):
    data = model.createData()
    worst = 0.0
    for q, qd in _states():
        cqd = pin.rnea(model, data, q, qd, np.zeros(5)) - pin.computeGeneralizedGravity(model, data, q)
        expected = T.T @ paper_C(T @ q, T @ qd) @ (T @ qd)
        np.testing.assert_allclose(cqd, expected, rtol=0, atol=1e-10)
        worst = max(worst, np.abs(cqd - expected).max())
    print(f"dual arm: max |C_pin qd - T^T C_A3 thetad| = {worst:.3e}")


def test_coriolis_matrix_matches_A3(model):
    """T is constant, so the Christoffel-form C of eq A3 (seed 004 eq 52) maps to T^T C_abs T.
    Pinocchio's Coriolis matrix is also of Christoffel form, so the matrices agree entrywise."""
    data = model.createData()
    worst = 0.0
    for q, qd in _states():
        C = pin.computeCoriolisMatrix(model, data, q, qd).copy()
        expected = T.T @ paper_C(T @ q, T @ qd) @ T
        np.testing.assert_allclose(C, expected, rtol=0, atol=1e-10)
        worst = max(worst, np.abs(C - expected).max())
    print(f"dual arm: max |C_pin - T^T C_A3 T| = {worst:.3e}")


def test_gravity_matches_A4(model):
    data = model.createData()
    worst = 0.0
    for q, _ in _states():
        G = pin.computeGeneralizedGravity(model, data, q)
        expected = T.T @ paper_G(T @ q)
        np.testing.assert_allclose(G, expected, rtol=0, atol=1e-10)
        worst = max(worst, np.abs(G - expected).max())
    print(f"dual arm: max |G_pin - T^T G_A4| = {worst:.3e}")


def _frame(model, data, name):
    return data.oMf[model.getFrameId(name)]


def _planar_jacobian(model, data, name):
    """Rows (x, z, angle about -y) of the LOCAL_WORLD_ALIGNED frame Jacobian: the paper's (x, y, theta)."""
    J = pin.getFrameJacobian(model, data, model.getFrameId(name), pin.LOCAL_WORLD_ALIGNED)
    return np.vstack([J[0], J[2], -J[4]])


def test_closure_and_task_jacobians_match_eqs_62_and_68(model):
    """Closure rows (eq 62) and object rows (eq 68) in absolute angles, mapped by T."""
    data = model.createData()
    l1, l2, l3, l4, l5 = L_LINK
    for q, _ in _states(10, seed=40):
        th = T @ q
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        A_hat = np.vstack([-L_LINK * np.sin(th), L_LINK * np.cos(th)])  # eq 62
        np.testing.assert_allclose(_planar_jacobian(model, data, "link5_tip")[:2], A_hat @ T, atol=1e-12)
        A = np.array(
            [
                [-l1 * np.sin(th[0]), -l2 * np.sin(th[1]), -l3 / 2 * np.sin(th[2]), 0, 0],
                [l1 * np.cos(th[0]), l2 * np.cos(th[1]), l3 / 2 * np.cos(th[2]), 0, 0],
                [0, 0, 1, 0, 0],
            ]
        )  # eq 68
        np.testing.assert_allclose(_planar_jacobian(model, data, "object"), A @ T, atol=1e-12)
        # eq 65: object centre
        p = _frame(model, data, "object").translation
        x3 = l1 * np.cos(th[0]) + l2 * np.cos(th[1]) + l3 / 2 * np.cos(th[2])
        y3 = l1 * np.sin(th[0]) + l2 * np.sin(th[1]) + l3 / 2 * np.sin(th[2])
        np.testing.assert_allclose([p[0], p[1], p[2]], [x3, 0.0, y3], atol=1e-12)


def test_actuator_map_matches_eq_70(model):
    """Seed 004 eq 70 gives B in absolute coordinates; in joint coordinates it is T^T B_abs.
    Ours: motors 1-5 on joints 1-5 (unit columns), motor 6 a torque between link5 and the world
    about -y (column = angular Jacobian of link5 about -y). Arm 2's joint motors 4 and 5 are
    oriented from the object towards arm 2's base, the paper's u4, u5 the other way round:
    u_paper = diag(1, 1, 1, -1, -1, 1) u_ours."""
    data = model.createData()
    B_abs = np.array(
        [[1, -1, 0, 0, 0, 0], [0, 1, -1, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, -1, 1, 0], [0, 0, 0, 0, -1, 1]],
        dtype=float,
    )
    q = np.array([0.4, -0.9, 1.3, 0.2, -2.2])
    pin.computeJointJacobians(model, data, q)
    J5 = pin.getFrameJacobian(model, data, model.getFrameId("link5"), pin.LOCAL_WORLD_ALIGNED)
    axis = np.array([0.0, -1.0, 0.0])
    B_ours = np.hstack([np.eye(5), (axis @ J5[3:])[:, None]])
    np.testing.assert_allclose(B_ours @ np.diag([1, 1, 1, -1, -1, 1.0]), T.T @ B_abs, atol=1e-12)


def test_initial_configuration_derivation(config):
    """Object horizontal (theta3 = 0) with its centre at (1.5, 0): it spans x in [1, 2] on y = 0.
    Arm 1 (l1 = l2 = 1) reaches (1, 0) from (0, 0): isosceles triangle with the elbow at
    (1/2, sqrt(3)/2) (elbow up, so that link 1 can rise to the vertical of seed 004 Figs. 4, 8):
    theta1 = pi/3, theta2 = -pi/3. Arm 2 mirrors it from (2, 0) to (3, 0): theta4 = pi/3,
    theta5 = -pi/3. Joint angles q = T^-1 theta = (pi/3, -2pi/3, pi/3, pi/3, -2pi/3); eq 64 at t = 0
    has zero object velocity, so qd0 = 0."""
    elbow = np.array([0.5, np.sqrt(3) / 2])
    theta = np.array(
        [
            np.arctan2(elbow[1], elbow[0]),
            np.arctan2(0 - elbow[1], 1 - elbow[0]),
            0.0,
            np.arctan2(elbow[1], 2.5 - 2.0),
            np.arctan2(0 - elbow[1], 3.0 - 2.5),
        ]
    )
    q0 = np.linalg.solve(T, theta)
    np.testing.assert_allclose(config["robot"]["initial_position"], q0, atol=1e-12)
    np.testing.assert_allclose(config["robot"]["initial_velocity"], np.zeros(5), atol=0)
    # eq 60 (closure) and eq 65 (object centre) in the paper's own terms
    assert np.sum(L_LINK * np.cos(theta)) == pytest.approx(L_BASE, abs=1e-12)
    assert np.sum(L_LINK * np.sin(theta)) == pytest.approx(0.0, abs=1e-12)
    assert L_LINK[0] * np.cos(theta[0]) + L_LINK[1] * np.cos(theta[1]) + L_LINK[2] / 2 == pytest.approx(1.5)


def test_initial_configuration_closes_in_pinocchio(model, config):
    data = model.createData()
    q0 = np.array(config["robot"]["initial_position"])
    pin.framesForwardKinematics(model, data, q0)
    tip = _frame(model, data, "link5_tip").translation
    base2 = _frame(model, data, "arm2_base").translation
    np.testing.assert_allclose(tip, base2, atol=1e-12)
    np.testing.assert_allclose(base2, [L_BASE, 0.0, 0.0], atol=0)
    obj = _frame(model, data, "object")
    np.testing.assert_allclose(obj.translation, [1.5, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(obj.rotation, np.eye(3), atol=1e-12)  # theta3 = 0
    # joint limits hold the initial state and the top of the motion of seed 004 (Figs. 4-8)
    q_top = np.linalg.solve(T, [np.pi / 2, 0.0, 0.0, 0.0, -np.pi / 2])
    for q in (q0, q_top):
        assert np.all(q >= model.lowerPositionLimit) and np.all(q <= model.upperPositionLimit)


def test_task_trajectory_is_eq64_and_starts_at_the_initial_object_pose(model, config):
    """The servo constraints' trajectory keys reproduce eq 64 (l = 1) and its value and velocity at
    t = 0 are the object's initial pose (1.5, 0, 0) and zero: no initial servo error."""
    cons = config["constraints"]
    l = 1.0
    for name, comps in (("object_position", [0, 1]), ("object_angle", [2])):
        tr = cons[name]["trajectory"]
        assert tr["type"] == "object_motion" and tr["components"] == comps
        off, amp, w = np.array(tr["offset"]), np.array(tr["amplitude"]), tr["omega"]
        for t in np.linspace(0.0, 2 * np.pi, 9):
            eq64 = np.array([1.5 * l, l / 2 * (1 - np.cos(t)), 0.0])
            np.testing.assert_allclose((off + amp * (1 - np.cos(w * t)))[comps], eq64[comps], atol=1e-15)
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.array(config["robot"]["initial_position"]))
    obj = _frame(model, data, "object")
    angle = np.arctan2(obj.rotation[2, 0], obj.rotation[0, 0])  # x axis of the object in the x-z plane
    np.testing.assert_allclose([obj.translation[0], obj.translation[2], angle], [1.5, 0.0, 0.0], atol=1e-12)
    assert cons["arm2_ground_hinge"]["frames"] == ["link5_tip", "arm2_base"]


def test_mujoco_reads_the_urdf_the_same_way(config):
    """MuJoCo (the second plant, sim/mujoco_plant.py) imports urdf/dual_arm.urdf on its own: its mass
    matrix and bias forces C qd + G agree with eqs A2-A4 too (joint axes -y, plane x-z, g = 9.8)."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(str(URDF))
    m.opt.gravity[:] = config["robot"]["gravity"]
    d = mujoco.MjData(m)
    adr = [m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, f"joint{i}")] for i in range(1, 6)]
    assert adr == list(range(5))
    M = np.zeros((5, 5))
    for q, qd in _states(10, seed=44):
        d.qpos[:] = q
        d.qvel[:] = qd
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, M)
        th, thd = T @ q, T @ qd
        np.testing.assert_allclose(M, T.T @ paper_M(th) @ T, atol=1e-9)
        np.testing.assert_allclose(d.qfrc_bias, T.T @ (paper_C(th, thd) @ thd + paper_G(th)), atol=1e-9)


# ------------------------------------------------------------------ through the generic loader


def eq62_closure_rows(theta, thetad):
    """Seed 004 eqs 60, 62, 63 in absolute angles: phi = tip of link 5 - (L, 0), A_hat, b_hat."""
    l = L_LINK
    phi = np.array([np.sum(l * np.cos(theta)) - L_BASE, np.sum(l * np.sin(theta))])
    A = np.vstack([-l * np.sin(theta), l * np.cos(theta)])
    b = np.array([np.sum(l * np.cos(theta) * thetad**2), np.sum(l * np.sin(theta) * thetad**2)])
    return phi, A, b


def eq68_servo_rows(theta, thetad, t):
    """Seed 004 eqs 64, 65, 67, 68 in absolute angles: object centre (x3, y3) and angle theta3."""
    l1, l2, l3 = L_LINK[:3]
    th, thd, l = theta, thetad, 1.0
    x3 = l1 * np.cos(th[0]) + l2 * np.cos(th[1]) + l3 / 2 * np.cos(th[2])
    y3 = l1 * np.sin(th[0]) + l2 * np.sin(th[1]) + l3 / 2 * np.sin(th[2])
    phi = np.array([x3 - 1.5 * l, y3 - l / 2 * (1 - np.cos(t)), np.arctan2(np.sin(th[2]), np.cos(th[2]))])
    A = np.array(
        [
            [-l1 * np.sin(th[0]), -l2 * np.sin(th[1]), -l3 / 2 * np.sin(th[2]), 0, 0],
            [l1 * np.cos(th[0]), l2 * np.cos(th[1]), l3 / 2 * np.cos(th[2]), 0, 0],
            [0, 0, 1, 0, 0],
        ]
    )
    b = np.array(
        [
            l1 * np.cos(th[0]) * thd[0] ** 2 + l2 * np.cos(th[1]) * thd[1] ** 2 + l3 / 2 * np.cos(th[2]) * thd[2] ** 2,
            l1 * np.sin(th[0]) * thd[0] ** 2
            + l2 * np.sin(th[1]) * thd[1] ** 2
            + l3 / 2 * np.sin(th[2]) * thd[2] ** 2
            + l / 2 * np.cos(t),
            0.0,
        ]
    )
    return phi, A, b


@pytest.fixture(scope="module")
def loaded():
    return load_robot("dual_arm")


def test_loader_initial_state_has_zero_residuals(loaded):
    setup = loaded
    assert list(setup.joint_names) == [f"joint{i}" for i in range(1, 6)]
    assert list(setup.actuators.names) == [f"motor{i}" for i in range(1, 7)]
    np.testing.assert_allclose(setup.actuators.effort_limits, 50.0)
    np.testing.assert_allclose(setup.model.gravity, [0.0, 0.0, -G_ACC])
    m = setup.model
    m.compute(setup.q0, setup.qd0)
    passive = setup.passive.evaluate(m, setup.q0, setup.qd0, 0.0)
    servo = setup.servo.evaluate(m, setup.q0, setup.qd0, 0.0)
    assert passive.phi.shape == (2,) and servo.phi.shape == (3,)
    np.testing.assert_allclose(passive.phi, 0.0, atol=1e-12)
    np.testing.assert_allclose(passive.phidot, 0.0, atol=1e-12)
    np.testing.assert_allclose(servo.phi, 0.0, atol=1e-12)
    np.testing.assert_allclose(servo.phidot, 0.0, atol=1e-12)


def test_loader_rows_and_actuators_match_eqs_60_to_70(loaded):
    """Closure rows = eqs 60/62/63, task rows = eqs 64-68, all mapped by theta = T q (A_joint =
    A_abs T, b unchanged since theta'' = T q''); actuator map = T^T B_eq70 with arm 2's joint
    motors reversed; M, h and G of the loaded model = eqs A2-A4."""
    setup = loaded
    m = setup.model
    rng = np.random.default_rng(64)
    flip = np.diag([1.0, 1.0, 1.0, -1.0, -1.0, 1.0])
    B_abs = np.array(
        [[1, -1, 0, 0, 0, 0], [0, 1, -1, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, -1, 1, 0], [0, 0, 0, 0, -1, 1]],
        dtype=float,
    )
    for _ in range(20):
        q = np.asarray(setup.q0) + rng.uniform(-0.5, 0.5, 5)
        qd = rng.uniform(-2.0, 2.0, 5)
        t = rng.uniform(0.0, 10.0)
        th, thd = T @ q, T @ qd
        m.compute(q, qd)
        np.testing.assert_allclose(m.M, T.T @ paper_M(th) @ T, atol=1e-11)
        np.testing.assert_allclose(m.h, T.T @ (paper_C(th, thd) @ thd + paper_G(th)), atol=1e-10)
        np.testing.assert_allclose(m.g, T.T @ paper_G(th), atol=1e-10)
        passive = setup.passive.evaluate(m, q, qd, t)
        servo = setup.servo.evaluate(m, q, qd, t)
        phi, A, b = eq62_closure_rows(th, thd)
        np.testing.assert_allclose(passive.phi, phi, atol=1e-13)
        np.testing.assert_allclose(passive.A, A @ T, atol=1e-13)
        np.testing.assert_allclose(passive.b, b, atol=1e-12)
        phi, A, b = eq68_servo_rows(th, thd, t)
        np.testing.assert_allclose(servo.phi, phi, atol=1e-13)
        np.testing.assert_allclose(servo.A, A @ T, atol=1e-13)
        np.testing.assert_allclose(servo.b, b, atol=1e-12)
        np.testing.assert_allclose(setup.actuators.matrix(m) @ flip, T.T @ B_abs, atol=1e-13)


@pytest.mark.slow
def test_controller_effort_realises_eq64_at_q0(loaded):
    """One ControllerCore step at (q0, 0, t = 0); with that effort the closed chain's acceleration,
    from an independent KKT solve with eqs A2, A4 and the closure rows of eq 62, meets the task rows
    of eq 68 (y3'' = l/2 at t = 0). At q0 every residual is zero, so Baumgarte terms vanish."""
    setup = loaded
    core = ControllerCore(setup)
    q0 = np.asarray(setup.q0, float)
    res = core.step(q0, np.zeros(5), 0.0)
    assert res.ok and not res.saturated.any()
    th = T @ q0
    B_abs = np.array(
        [[1, -1, 0, 0, 0, 0], [0, 1, -1, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, -1, 1, 0], [0, 0, 0, 0, -1, 1]],
        dtype=float,
    )
    u_paper = np.diag([1.0, 1.0, 1.0, -1.0, -1.0, 1.0]) @ res.effort
    # absolute-angle equations of motion (eq 56 with tau = B u, eq 69-70), closure eq 62
    M, G = paper_M(th), paper_G(th)
    _, Ap, bp = eq62_closure_rows(th, np.zeros(5))
    K = np.block([[M, -Ap.T], [Ap, np.zeros((2, 2))]])
    thdd = np.linalg.solve(K, np.concatenate([B_abs @ u_paper - G, bp]))[:5]
    _, As, bs = eq68_servo_rows(th, np.zeros(5), 0.0)
    np.testing.assert_allclose(As @ thdd, bs, atol=1e-10)
    assert bs[1] == pytest.approx(0.5)
