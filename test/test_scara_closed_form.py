"""Pinocchio's M, C, G of urdf/scara.urdf against seed 000 eqs 34-36.

Frame conventions that make the two comparable (see the URDF header):

- Base frame S of the paper = URDF world; z up; gravity (0, 0, -g).
- At q = 0 the arm lies along +y with revolute axes z through (0,0,0),
  (0, l1, 0), (0, l1 + l2, 0) and the prismatic joint along +z (twists of
  eq 33); the tool is at (0, l1 + l2, l0 + q4) (eq 32).
- q1, q2, q3 are the revolute angles about +z, q4 the prismatic displacement,
  in the same order and sign as the paper, so no coordinate map is needed.
- Link centres of mass: r1, r2 from joints 1, 2 along the link; links 3 and 4
  on the joint-3 axis (implied by alpha..delta of eq 34).
- G = dV/dq with V = sum m_i g h_i (eq 31): only the prismatic joint lifts a
  mass, so G = (0, 0, 0, m4 g) (eq 36); the URDF uses g = 9.81.

The closed forms below are typed in from the paper, not derived from our code.
The largest deviations are printed (run pytest with -s) and asserted tiny.
"""

import numpy as np
import pytest

from uk_controller.robots import load_robot

# Seed 000, "Numerical simulations"
m1, m2, m3, m4 = 20.0, 15.0, 15.0, 0.5
l0, l1, l2 = 0.0, 0.2, 0.25
r1, r2 = 0.1, 0.125
Iz1, Iz2, Iz3, Iz4 = 0.27, 0.31, 0.02, 0.0001
g = 9.81

# Seed 000 eq 34 coefficients
ALPHA = Iz1 + r1**2 * m1 + l1**2 * m2 + l1**2 * m3 + l1**2 * m4
BETA = Iz2 + Iz3 + Iz4 + l2**2 * m3 + l2**2 * m4 + m2 * r2**2
GAMMA = l1 * l2 * m3 + l1 * l2 * m4 + l1 * m2 * r2
DELTA = Iz3 + Iz4


def paper_M(q):
    """Seed 000 eq 34."""
    c2 = np.cos(q[1])
    return np.array(
        [
            [ALPHA + BETA + 2 * GAMMA * c2, BETA + GAMMA * c2, DELTA, 0.0],
            [BETA + GAMMA * c2, BETA, DELTA, 0.0],
            [DELTA, DELTA, DELTA, 0.0],
            [0.0, 0.0, 0.0, m4],
        ]
    )


def paper_C(q, qd):
    """Seed 000 eq 35."""
    s2 = np.sin(q[1])
    return np.array(
        [
            [-GAMMA * s2 * qd[1], -GAMMA * s2 * (qd[0] + qd[1]), 0.0, 0.0],
            [GAMMA * s2 * qd[0], 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )


def paper_G():
    """Seed 000 eq 36."""
    return np.array([0.0, 0.0, 0.0, m4 * g])


def paper_tool(q):
    """Seed 000 eq 39: tool position and rotation."""
    s1, c1 = np.sin(q[0]), np.cos(q[0])
    s12, c12 = np.sin(q[0] + q[1]), np.cos(q[0] + q[1])
    s123, c123 = np.sin(q[:3].sum()), np.cos(q[:3].sum())
    p = np.array([-l1 * s1 - l2 * s12, l1 * c1 + l2 * c12, l0 + q[3]])
    R = np.array([[c123, -s123, 0.0], [s123, c123, 0.0], [0.0, 0.0, 1.0]])
    return p, R


@pytest.fixture(scope='module')
def scara():
    return load_robot('scara')


def random_states(count=200, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        q = np.concatenate([rng.uniform(-np.pi, np.pi, 3), rng.uniform(-0.1, 0.4, 1)])
        yield q, rng.normal(scale=2.0, size=4)


def test_mass_coriolis_gravity_match_seed000(scara):
    model = scara.model
    assert model.joint_names == ['joint1', 'joint2', 'joint3', 'joint4']
    dev = {'M': 0.0, 'C': 0.0, 'G': 0.0, 'h': 0.0}
    for q, qd in random_states():
        model.compute(q, qd)
        C = model.coriolis_matrix(q, qd)
        dev['M'] = max(dev['M'], np.abs(model.M - paper_M(q)).max())
        dev['C'] = max(dev['C'], np.abs(C - paper_C(q, qd)).max())
        dev['G'] = max(dev['G'], np.abs(model.g - paper_G()).max())
        dev['h'] = max(dev['h'], np.abs(model.h - paper_C(q, qd) @ qd - paper_G()).max())
    print(
        '\nseed 000 eqs 34-36, largest |Pinocchio - paper| over 200 random states:',
        ', '.join(f'{k} {v:.2e}' for k, v in dev.items()),
    )
    # entries are O(1) (M11 up to ~3.5 kg m^2, G4 = 4.9 N): machine precision
    assert dev['M'] < 1e-12
    assert dev['C'] < 1e-12
    assert dev['G'] < 1e-12
    assert dev['h'] < 1e-12


def test_tool_kinematics_match_seed000(scara):
    model = scara.model
    worst = 0.0
    for q, qd in random_states(50, seed=1):
        model.compute(q, qd)
        p, R = paper_tool(q)
        worst = max(
            worst, np.abs(model.frame_position('tool') - p).max(), np.abs(model.frame_rotation('tool') - R).max()
        )
    assert worst < 1e-13


def test_seed000_constraint_rows_match_eq49(scara):
    """Our generic rows (frame_position + joint_linear) against seed 000 eqs 48-49.

    The paper's rows 1, 2 are x, y of the tool; its A row 1 is printed as
    (-l1 c1 - l2 c12, -l2 c12, 0, 0) = d x / d q and row 2 as
    (-l1 s1 - l2 s12, -l2 s12, 0, 0) = d y / d q; b holds the centripetal terms
    with the trajectory acceleration (x'' = -0.05 (0.4 pi)^2 sin(0.4 pi t)).
    Eq 48 row 4 (q4 + l0 = 0.02 t) is our z row; eq 46 is the joint_linear row.
    """
    w = 0.4 * np.pi
    for q, qd in random_states(20, seed=2):
        t = float(np.random.default_rng(3).uniform(0, 10))
        scara.model.compute(q, qd)
        rows = scara.servo.evaluate(scara.model, q, qd, t)
        s1, c1 = np.sin(q[0]), np.cos(q[0])
        s12, c12 = np.sin(q[0] + q[1]), np.cos(q[0] + q[1])
        phi = np.array(
            [
                -l1 * s1 - l2 * s12 - 0.05 * np.sin(w * t),
                l1 * c1 + l2 * c12 - 0.35 - 0.05 * np.cos(w * t),
                q[3] + l0 - 0.02 * t,
                q[:3].sum(),
            ]
        )
        A = np.array(
            [[-l1 * c1 - l2 * c12, -l2 * c12, 0, 0], [-l1 * s1 - l2 * s12, -l2 * s12, 0, 0], [0, 0, 0, 1], [1, 1, 1, 0]]
        )
        b = np.array(
            [  # eq 49 as printed
                -(qd[0] ** 2) * l1 * s1 - (qd[0] + qd[1]) ** 2 * l2 * s12 - 0.05 * w**2 * np.sin(w * t),
                qd[0] ** 2 * l1 * c1 + (qd[0] + qd[1]) ** 2 * l2 * c12 - 0.05 * w**2 * np.cos(w * t),
                0.0,
                0.0,
            ]
        )
        np.testing.assert_allclose(rows.phi, phi, atol=1e-13)
        np.testing.assert_allclose(rows.A, A, atol=1e-13)
        np.testing.assert_allclose(rows.b, b, atol=1e-12)
