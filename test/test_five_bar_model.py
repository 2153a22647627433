"""Five-bar parallel robots of seed 003 (Han et al.): urdf/five_bar.urdf (branches 1, 2) and
urdf/five_bar_redundant.urdf (branches 1, 2, 3) against the paper's closed forms.

Each branch i is an RR chain with coordinates (q_ai, q_bi): q_ai is the absolute angle of link a at
the fixed base A_i, q_bi the elbow angle of link b relative to link a (seed 003 eqs 9, 14, 19 use
q_ai + q_bi as link b's absolute angle; Table 1's wording "to the horizontal" contradicts them, and
the paper's q0 only closes under the relative reading, which a test below shows). Seed 003 eq 14
gives each branch's mass matrix in (q_ai, q_bi, x_ai, y_ai), the base A_i free; with the base
fixed (x_ai, y_ai constant) the branch's M is its upper-left 2x2 block, and C likewise.
"""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from uk_controller.control.controller import ControllerCore
from uk_controller.paths import resolve_data_file
from uk_controller.robots import load_robot

ROOT = Path(__file__).resolve().parents[1]

# seed 003 Table 2: (L, D, m, I) of links a_i and b_i (D: centre of mass from the proximal joint)
TABLE2 = {
    1: {"a": (0.244, 0.1150, 1.2525, 0.0124), "b": (0.244, 0.1621, 1.0771, 0.0098)},
    2: {"a": (0.244, 0.0657, 1.3663, 0.0122), "b": (0.244, 0.1096, 0.4132, 0.0036)},
    3: {"a": (0.244, 0.0657, 1.3663, 0.0122), "b": (0.244, 0.1096, 0.4132, 0.0036)},
}
# seed 003 sec. 4.1 initial state q0 = [q_a1, q_b1, x_a1, y_a1, q_a2, ..., y_a3]
PAPER_Q0 = np.array([1.3015, -2.1752, 0, 0.25, 2.9105, -1.4593, 0.43, 0, 2.981, 1.8776, 0.4269, 0.5005])
PAPER_BASES = {i: PAPER_Q0[4 * (i - 1) + 2 : 4 * (i - 1) + 4] for i in (1, 2, 3)}
PAPER_ANGLES = {i: PAPER_Q0[4 * (i - 1) : 4 * (i - 1) + 2] for i in (1, 2, 3)}

SETUPS = {"five_bar": (1, 2), "five_bar_redundant": (1, 2, 3)}


def eq14_full(qa, qb, params):
    """Seed 003 eq 14: branch mass matrix M_i in (q_ai, q_bi, x_ai, y_ai), base free."""
    (L, ra, ma, Ia), (_, rb, mb, Ib) = params["a"], params["b"]
    M = np.empty((4, 4))
    M[0, 0] = Ia + Ib + ma * ra**2 + mb * (L**2 + rb**2 + 2 * L * rb * np.cos(qb))
    M[0, 1] = M[1, 0] = Ib + mb * (rb**2 + L * rb * np.cos(qb))
    M[0, 2] = M[2, 0] = -((ma * ra + mb * L) * np.sin(qa) + mb * rb * np.sin(qa + qb))
    M[0, 3] = M[3, 0] = (ma * ra + mb * L) * np.cos(qa) + mb * rb * np.cos(qa + qb)
    M[1, 1] = Ib + mb * rb**2
    M[1, 2] = M[2, 1] = -mb * rb * np.sin(qa + qb)
    M[1, 3] = M[3, 1] = mb * rb * np.cos(qa + qb)
    M[2, 2] = M[3, 3] = ma + mb
    M[2, 3] = M[3, 2] = 0.0
    return M


def eq14_C_full(qa, qb, qad, qbd, params):
    """Seed 003 eq 14: branch Coriolis/centrifugal matrix C_i (so that C_i qd_i enters eq 13)."""
    (L, ra, ma, _), (_, rb, mb, _) = params["a"], params["b"]
    C = np.zeros((4, 4))
    C[0, 0] = -mb * L * rb * qbd * np.sin(qb)
    C[0, 1] = -mb * L * rb * (qad + qbd) * np.sin(qb)
    C[1, 0] = mb * L * rb * qad * np.sin(qb)
    C[2, 0] = -qad * ((ma * ra + mb * L) * np.cos(qa) + mb * rb * np.cos(qa + qb))
    C[2, 1] = -mb * rb * (2 * qad + qbd) * np.cos(qa + qb)
    C[3, 0] = -qad * ((ma * ra + mb * L) * np.sin(qa) + mb * rb * np.sin(qa + qb))
    C[3, 1] = -mb * rb * (2 * qad + qbd) * np.sin(qa + qb)
    return C


def eq14_fixed_base(qa, qb, params):
    """Seed 003 eq 14 rewritten for a fixed base: x_ai, y_ai constant, so M_i -> M_i[:2, :2]:
    M11 = Ia + Ib + ma ra^2 + mb (L^2 + rb^2 + 2 L rb cos qb), M12 = Ib + mb (rb^2 + L rb cos qb),
    M22 = Ib + mb rb^2."""
    return eq14_full(qa, qb, params)[:2, :2]


def rr_tip(qa, qb, base, L=0.244):
    """E_i = A_i + L (cos qa, sin qa) + L (cos(qa+qb), sin(qa+qb)) (seed 003 eqs 18-19, L_a = L_b = L)."""
    return np.asarray(base) + L * np.array([np.cos(qa) + np.cos(qa + qb), np.sin(qa) + np.sin(qa + qb)])


def load_config(name):
    with open(ROOT / "config" / f"{name}.yaml") as f:
        return yaml.safe_load(f)["/**"]["ros__parameters"]


@pytest.fixture(scope="module", params=list(SETUPS))
def setup(request):
    name = request.param
    cfg = load_config(name)
    model = pin.buildModelFromUrdf(str(resolve_data_file(cfg["robot"]["urdf"])))
    model.gravity.linear = np.array(cfg["robot"]["gravity"], dtype=float)
    return name, SETUPS[name], cfg, model


def _idx(model, i):
    return model.getJointId(f"joint_a{i}") - 1, model.getJointId(f"joint_b{i}") - 1


def test_joint_order_and_urdf_parameters(setup):
    name, branches, cfg, model = setup
    expected = [f"joint_{k}{i}" for i in branches for k in "ab"]
    assert [model.names[j] for j in range(1, model.njoints)] == expected == cfg["robot"]["joints"]
    for i in branches:
        ja, jb = model.getJointId(f"joint_a{i}"), model.getJointId(f"joint_b{i}")
        # base A_i from the paper's q0 entries (x_ai, y_ai)
        np.testing.assert_allclose(model.jointPlacements[ja].translation, [*PAPER_BASES[i], 0.0], atol=0)
        np.testing.assert_allclose(model.jointPlacements[jb].translation, [TABLE2[i]["a"][0], 0, 0], atol=0)
        for j, key in ((ja, "a"), (jb, "b")):
            L, D, m, I = TABLE2[i][key]
            assert model.inertias[j].mass == m
            np.testing.assert_allclose(model.inertias[j].lever, [D, 0, 0], atol=0)
            assert model.inertias[j].inertia[2, 2] == pytest.approx(I, abs=1e-15)  # centroidal, about z
        tip = model.frames[model.getFrameId(f"branch{i}_tip")]
        np.testing.assert_allclose(tip.placement.translation, [TABLE2[i]["b"][0], 0, 0], atol=0)


def test_branch_mass_matrices_match_eq14(setup):
    name, branches, cfg, model = setup
    data = model.createData()
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(50):
        q = rng.uniform(-np.pi, np.pi, model.nq)
        M = pin.crba(model, data, q).copy()
        M = np.triu(M) + np.triu(M, 1).T
        expected = np.zeros_like(M)  # branches are independent tree chains: block diagonal
        for i in branches:
            ia, ib = _idx(model, i)
            expected[np.ix_([ia, ib], [ia, ib])] = eq14_fixed_base(q[ia], q[ib], TABLE2[i])
        np.testing.assert_allclose(M, expected, rtol=0, atol=1e-14)
        worst = max(worst, np.abs(M - expected).max())
    print(f"{name}: max |M_pin - M_eq14| = {worst:.3e}")


def test_branch_coriolis_matches_eq14(setup):
    name, branches, cfg, model = setup
    data = model.createData()
    rng = np.random.default_rng(5)
    worst_vec = worst_mat = 0.0
    for _ in range(50):
        q = rng.uniform(-np.pi, np.pi, model.nq)
        qd = rng.uniform(-5.0, 5.0, model.nq)
        h = pin.rnea(model, data, q, qd, np.zeros(model.nq))
        C = pin.computeCoriolisMatrix(model, data, q, qd).copy()
        expected = np.zeros_like(C)
        for i in branches:
            ia, ib = _idx(model, i)
            expected[np.ix_([ia, ib], [ia, ib])] = eq14_C_full(q[ia], q[ib], qd[ia], qd[ib], TABLE2[i])[:2, :2]
        np.testing.assert_allclose(h, expected @ qd, rtol=0, atol=1e-13)  # G = 0: horizontal plane
        np.testing.assert_allclose(C, expected, rtol=0, atol=1e-13)
        worst_vec = max(worst_vec, np.abs(h - expected @ qd).max())
        worst_mat = max(worst_mat, np.abs(C - expected).max())
    print(f"{name}: max |C_pin qd - C_eq14 qd| = {worst_vec:.3e}, max |C_pin - C_eq14| = {worst_mat:.3e}")


def test_gravity_does_no_work_in_the_horizontal_plane(setup):
    name, branches, cfg, model = setup
    assert np.linalg.norm(model.gravity.linear) > 9.0
    data = model.createData()
    q = np.random.default_rng(7).uniform(-np.pi, np.pi, model.nq)
    np.testing.assert_allclose(pin.computeGeneralizedGravity(model, data, q), 0.0, atol=1e-14)


def test_eq14_with_free_base_matches_pinocchio():
    """The whole of eq 14 (base free to translate: x_ai, y_ai as prismatic coordinates) against a
    Pinocchio model built from the branch's links as parsed from the URDF: checks the transcription
    of eq 14 (coupling terms M13, M14, M23, M24 and the C rows 3, 4) as well."""
    urdf = pin.buildModelFromUrdf(str(ROOT / "urdf" / "five_bar_redundant.urdf"))
    rng = np.random.default_rng(11)
    for i in (1, 2, 3):
        ja, jb = urdf.getJointId(f"joint_a{i}"), urdf.getJointId(f"joint_b{i}")
        m = pin.Model()
        m.gravity.linear = np.zeros(3)
        jx = m.addJoint(0, pin.JointModelPX(), pin.SE3.Identity(), "x_a")
        jy = m.addJoint(jx, pin.JointModelPY(), pin.SE3.Identity(), "y_a")
        j1 = m.addJoint(jy, pin.JointModelRZ(), pin.SE3.Identity(), "q_a")
        m.appendBodyToJoint(j1, urdf.inertias[ja], pin.SE3.Identity())
        j2 = m.addJoint(j1, pin.JointModelRZ(), urdf.jointPlacements[jb], "q_b")
        m.appendBodyToJoint(j2, urdf.inertias[jb], pin.SE3.Identity())
        d = m.createData()
        perm = [2, 3, 0, 1]  # pinocchio order (x, y, qa, qb) -> paper (qa, qb, x, y)
        for _ in range(20):
            qp = rng.uniform(-np.pi, np.pi, 4)  # paper order
            qdp = rng.uniform(-4.0, 4.0, 4)
            q = np.empty(4)
            qd = np.empty(4)
            q[perm] = qp
            qd[perm] = qdp
            M = pin.crba(m, d, q).copy()
            M = np.triu(M) + np.triu(M, 1).T
            h = pin.rnea(m, d, q, qd, np.zeros(4))
            np.testing.assert_allclose(M[np.ix_(perm, perm)], eq14_full(qp[0], qp[1], TABLE2[i]), atol=1e-14)
            np.testing.assert_allclose(h[perm], eq14_C_full(qp[0], qp[1], qdp[0], qdp[1], TABLE2[i]) @ qdp, atol=1e-13)


def test_paper_q0_closes_only_with_relative_elbow_angles():
    """Seed 003 q0 closes to ~4e-5 m (4-decimal rounding) if q_bi is relative, not if absolute."""
    tips_rel = [rr_tip(*PAPER_ANGLES[i], PAPER_BASES[i]) for i in (1, 2, 3)]
    spread_rel = max(np.linalg.norm(tips_rel[k] - tips_rel[0]) for k in (1, 2))
    assert 1e-6 < spread_rel < 1e-4
    tips_abs = [
        PAPER_BASES[i] + 0.244 * np.array([np.cos(qa) + np.cos(qb), np.sin(qa) + np.sin(qb)])
        for i in (1, 2, 3)
        for qa, qb in [PAPER_ANGLES[i]]
    ]
    spread_abs = max(np.linalg.norm(tips_abs[k] - tips_abs[0]) for k in (1, 2))
    assert spread_abs > 1e-2


def test_initial_configuration_closes(setup):
    """Config q0: branch 1 exactly the paper's; the others within 1e-4 rad of the paper's rounded
    values on the same elbow side; all tips coincide (Pinocchio) to 1e-12 m; zero velocity."""
    name, branches, cfg, model = setup
    data = model.createData()
    q0 = np.array(cfg["robot"]["initial_position"])
    np.testing.assert_array_equal(cfg["robot"]["initial_velocity"], np.zeros(model.nq))
    paper = np.concatenate([PAPER_ANGLES[i] for i in branches])
    np.testing.assert_array_equal(q0[:2], paper[:2])
    np.testing.assert_allclose(q0, paper, atol=1e-4, rtol=0)
    assert np.all(np.sign(q0[1::2]) == np.sign(paper[1::2]))
    pin.framesForwardKinematics(model, data, q0)
    tips = [data.oMf[model.getFrameId(f"branch{i}_tip")].translation.copy() for i in branches]
    for i, tip in zip(branches, tips):
        np.testing.assert_allclose(tip, tips[0], atol=1e-12)
        ia, ib = _idx(model, i)
        np.testing.assert_allclose(tip[:2], rr_tip(q0[ia], q0[ib], PAPER_BASES[i]), atol=1e-15)
        assert np.all(q0 >= model.lowerPositionLimit) and np.all(q0 <= model.upperPositionLimit)


def test_initial_configuration_is_not_singular(setup):
    """Closure rows (E1 - Ek, x and y) have full rank and leave exactly 2 DOF; adding the servo rows
    of E1 (x, y) determines the motion: the setup is a 2-DOF mechanism at q0, away from singularity."""
    name, branches, cfg, model = setup
    data = model.createData()
    q0 = np.array(cfg["robot"]["initial_position"])
    pin.computeJointJacobians(model, data, q0)
    pin.updateFramePlacements(model, data)
    J = {
        i: pin.getFrameJacobian(model, data, model.getFrameId(f"branch{i}_tip"), pin.LOCAL_WORLD_ALIGNED)[:2]
        for i in branches
    }
    A_closure = np.vstack([J[1] - J[i] for i in branches[1:]])
    s = np.linalg.svd(A_closure, compute_uv=False)
    assert len(s) == 2 * (len(branches) - 1) and s.min() > 1e-2 * s.max()
    A_all = np.vstack([A_closure, J[1]])
    assert np.linalg.matrix_rank(A_all, tol=1e-8) == A_closure.shape[0] + 2
    if len(branches) == 2:  # square: the classic five-bar is fully determined
        assert abs(np.linalg.det(A_all)) > 1e-6


def test_line_trajectory_starts_at_the_initial_end_effector(setup):
    """Seed 003 eq 26: x = xe + 0.01 cos t, y = ye; (xe, ye) from the initial position so that the
    desired point at t = 0 is E(q0)."""
    name, branches, cfg, model = setup
    data = model.createData()
    traj = cfg["constraints"]["end_effector"]["trajectory"]
    assert traj["type"] == "line"
    q0 = np.array(cfg["robot"]["initial_position"])
    pin.framesForwardKinematics(model, data, q0)
    E0 = data.oMf[model.getFrameId("branch1_tip")].translation[:2]
    p0 = np.array(traj["centre"]) + np.array(traj["direction"]) * traj["amplitude"] * np.cos(0.0)
    np.testing.assert_allclose(p0, E0, atol=1e-15)
    assert traj["amplitude"] == 0.01 and traj["omega"] == 1.0


def test_mujoco_reads_the_urdf_the_same_way(setup):
    """MuJoCo (the second plant, sim/mujoco_plant.py) imports the URDF on its own: its mass matrix and
    bias forces agree with eq 14 as well (and gravity does nothing in the horizontal plane)."""
    mujoco = pytest.importorskip("mujoco")
    name, branches, cfg, model = setup
    m = mujoco.MjModel.from_xml_path(str(resolve_data_file(cfg["robot"]["urdf"])))
    m.opt.gravity[:] = cfg["robot"]["gravity"]
    d = mujoco.MjData(m)
    n = 2 * len(branches)
    names = cfg["robot"]["joints"]
    assert [m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in names] == list(range(n))
    rng = np.random.default_rng(13)
    M = np.zeros((n, n))
    for _ in range(10):
        q, qd = rng.uniform(-np.pi, np.pi, n), rng.uniform(-5.0, 5.0, n)
        d.qpos[:] = q
        d.qvel[:] = qd
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, M)
        expected_M = np.zeros((n, n))
        expected_h = np.zeros(n)
        for k, i in enumerate(branches):
            s = slice(2 * k, 2 * k + 2)
            expected_M[s, s] = eq14_fixed_base(q[2 * k], q[2 * k + 1], TABLE2[i])
            expected_h[s] = eq14_C_full(q[2 * k], q[2 * k + 1], qd[2 * k], qd[2 * k + 1], TABLE2[i])[:2, :2] @ qd[s]
        np.testing.assert_allclose(M, expected_M, atol=1e-9)
        np.testing.assert_allclose(d.qfrc_bias, expected_h, atol=1e-9)


# ------------------------------------------------------------------ through the generic loader


def eq19_closure_rows(q, qd, branches, L=0.244):
    """Seed 003 eq 19 (A2, b2) restricted to the joint coordinates (the x_ai, y_ai columns are zero
    there), rows E1 - E_k (x, y) for k = 2 (, 3), columns in the order (q_a1, q_b1, q_a2, ...)."""
    n = 2 * len(branches)
    A = np.zeros((2 * (len(branches) - 1), n))
    b = np.zeros(A.shape[0])

    def block(qa, qb):
        return np.array(
            [
                [-L * np.sin(qa) - L * np.sin(qa + qb), -L * np.sin(qa + qb)],
                [L * np.cos(qa) + L * np.cos(qa + qb), L * np.cos(qa + qb)],
            ]
        )

    def quad(qa, qb, qad, qbd):
        return np.array(
            [
                L * qad**2 * np.cos(qa) + L * (qad + qbd) ** 2 * np.cos(qa + qb),
                L * qad**2 * np.sin(qa) + L * (qad + qbd) ** 2 * np.sin(qa + qb),
            ]
        )

    for r, k in enumerate(range(1, len(branches))):
        rows = slice(2 * r, 2 * r + 2)
        A[rows, 0:2] = block(q[0], q[1])  # A21
        A[rows, 2 * k : 2 * k + 2] = -block(q[2 * k], q[2 * k + 1])  # A22 / A23
        b[rows] = quad(q[0], q[1], qd[0], qd[1]) - quad(q[2 * k], q[2 * k + 1], qd[2 * k], qd[2 * k + 1])
    return A, b


def eq27_servo_rows(q, qd, t, n, L=0.244):
    """Seed 003 eq 27: A3 (branch-1 columns), b3 with the line of eq 26 (x'' = -0.01 cos t)."""
    qa, qb, qad, qbd = q[0], q[1], qd[0], qd[1]
    A = np.zeros((2, n))
    A[:, :2] = [
        [-L * np.sin(qa) - L * np.sin(qa + qb), -L * np.sin(qa + qb)],
        [L * np.cos(qa) + L * np.cos(qa + qb), L * np.cos(qa + qb)],
    ]
    b = np.array(
        [
            L * qad**2 * np.cos(qa) + L * (qad + qbd) ** 2 * np.cos(qa + qb) - 0.01 * np.cos(t),
            L * qad**2 * np.sin(qa) + L * (qad + qbd) ** 2 * np.sin(qa + qb),
        ]
    )
    return A, b


@pytest.fixture(scope="module", params=list(SETUPS))
def loaded(request):
    return request.param, SETUPS[request.param], load_robot(request.param)


def test_loader_initial_state_has_zero_residuals(loaded):
    name, branches, setup = loaded
    assert list(setup.joint_names) == [f"joint_{k}{i}" for i in branches for k in "ab"]
    assert list(setup.actuators.names) == [f"motor{i}" for i in branches]
    np.testing.assert_allclose(setup.actuators.effort_limits, 20.0)
    m = setup.model
    m.compute(setup.q0, setup.qd0)
    passive = setup.passive.evaluate(m, setup.q0, setup.qd0, 0.0)
    servo = setup.servo.evaluate(m, setup.q0, setup.qd0, 0.0)
    assert passive.phi.shape == (2 * (len(branches) - 1),)
    np.testing.assert_allclose(passive.phi, 0.0, atol=1e-12)
    np.testing.assert_allclose(passive.phidot, 0.0, atol=1e-12)
    np.testing.assert_allclose(servo.phi, 0.0, atol=1e-12)  # the line starts at E(q0)
    np.testing.assert_allclose(servo.phidot, 0.0, atol=1e-12)  # x' = -0.01 sin 0 = 0
    B = setup.actuators.matrix(m)
    expected_B = np.zeros((2 * len(branches), len(branches)))
    expected_B[0::2, :] = np.eye(len(branches))  # motors on the base joints a_i
    np.testing.assert_array_equal(B, expected_B)


def test_loader_rows_match_eqs_19_and_27(loaded):
    """The generic constraint terms reproduce seed 003's closure (eq 19) and task (eqs 26-27) rows."""
    name, branches, setup = loaded
    m = setup.model
    n = 2 * len(branches)
    rng = np.random.default_rng(17)
    traj = setup.constraints["end_effector"].trajectory
    for _ in range(20):
        q = np.asarray(setup.q0) + rng.uniform(-0.3, 0.3, n)
        qd = rng.uniform(-2.0, 2.0, n)
        t = rng.uniform(0.0, 10.0)
        m.compute(q, qd)
        passive = setup.passive.evaluate(m, q, qd, t)
        servo = setup.servo.evaluate(m, q, qd, t)
        A, b = eq19_closure_rows(q, qd, branches)
        np.testing.assert_allclose(passive.A, A, atol=1e-13)
        np.testing.assert_allclose(passive.b, b, atol=1e-12)
        tips = [rr_tip(q[2 * k], q[2 * k + 1], PAPER_BASES[i]) for k, i in enumerate(branches)]
        np.testing.assert_allclose(passive.phi, np.concatenate([tips[0] - tp for tp in tips[1:]]), atol=1e-14)
        A3, b3 = eq27_servo_rows(q, qd, t, n)
        np.testing.assert_allclose(servo.A, A3, atol=1e-13)
        np.testing.assert_allclose(servo.b, b3, atol=1e-12)
        p_d = np.array(traj.centre) + np.array([0.01 * np.cos(t), 0.0])
        np.testing.assert_allclose(servo.phi, tips[0] - p_d, atol=1e-14)


@pytest.mark.slow
def test_controller_effort_realises_the_line_at_q0(loaded):
    """One ControllerCore step at (q0, 0, t = 0); with that effort the closed chain's acceleration,
    from an independent KKT solve with the paper's M (eq 14) and closure rows (eq 19), meets the
    task rows of eq 27 (at q0 every residual is zero, so Baumgarte terms vanish)."""
    name, branches, setup = loaded
    core = ControllerCore(setup)
    q0, n = np.asarray(setup.q0, float), 2 * len(branches)
    res = core.step(q0, np.zeros(n), 0.0)
    assert res.ok and not res.saturated.any()
    M = np.zeros((n, n))
    for k, i in enumerate(branches):
        M[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = eq14_fixed_base(q0[2 * k], q0[2 * k + 1], TABLE2[i])
    tau = np.zeros(n)
    tau[0::2] = res.effort  # h = 0 at rest, no gravity
    Ap, bp = eq19_closure_rows(q0, np.zeros(n), branches)
    mp = Ap.shape[0]
    K = np.block([[M, -Ap.T], [Ap, np.zeros((mp, mp))]])
    qdd = np.linalg.solve(K, np.concatenate([tau, bp]))[:n]
    As, bs = eq27_servo_rows(q0, np.zeros(n), 0.0, n)
    np.testing.assert_allclose(As @ qdd, bs, atol=1e-10)
    assert np.abs(bs).max() > 1e-3  # the task does ask for motion
