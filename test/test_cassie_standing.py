"""Cassie standing in its published SDF (config/examples/cassie_standing.yaml): what it can and cannot do.

Independent references: the statics recomputed here from Pinocchio (generalized gravity, the file's spring
torques, frame Jacobians of the closures and the held feet) and a linear program (scipy's HiGHS) for the
smallest motor efforts that hold a configuration; the feet, the pelvis and every loop closure recomputed
by Pinocchio from the logged joint positions.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from scipy.optimize import linprog

from uk_controller.files.description import read_sdf
from uk_controller.paths import share_dir
from uk_controller.robots.example_robot_data import description
from uk_controller.robots.setup import load_robot

CASSIE = description('cassie_description/robots/cassie_v2.sdf')
pytestmark = pytest.mark.skipif(CASSIE is None, reason='example-robot-data (test extra) is not installed')
EXAMPLE = share_dir() / 'config' / 'examples' / 'cassie_standing.yaml'
FEET = ('left-foot', 'right-foot')


class Statics:
    """Cassie on a free base with both feet held where they are at `q0`: constraint rows and static efforts."""

    def __init__(self, q0):
        self.model, self.closures, extras = read_sdf(CASSIE, base='free')
        self.data = self.model.createData()
        self.setup = load_robot(str(EXAMPLE))
        assert [self.model.names[j] for j in range(1, self.model.njoints)] == self.setup.joint_names
        self.stiffness = np.zeros(self.model.nv)
        for name, values in extras.joint_dynamics.items():
            self.stiffness[self.model.idx_vs[self.model.getJointId(name)]] = values.get('stiffness', 0.0)
        acts = self.setup.actuators.actuators
        self.S = np.zeros((len(acts), self.model.nv))
        for k, act in enumerate(acts):
            self.S[k, act.joint] = 1.0
        self.limit = np.array([a.effort_limit for a in acts])
        self.kin(q0)
        self.feet = {f: self.data.oMf[self.model.getFrameId(f)].copy() for f in FEET}
        self.pelvis = self.data.oMf[self.model.getFrameId('pelvis')].copy()

    def kin(self, q):
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        pin.computeJointJacobians(self.model, self.data, q)

    def jac(self, frame):
        return pin.getFrameJacobian(self.model, self.data, self.model.getFrameId(frame), pin.LOCAL_WORLD_ALIGNED)

    def rows(self):
        """(residual, Jacobian) of the four loop closures (3 rows each) and the two held feet (6 each)."""
        r, J = [], []
        for closure in self.closures.values():
            a, b = closure['frames']
            oMf = self.data.oMf
            r.append(oMf[self.model.getFrameId(a)].translation - oMf[self.model.getFrameId(b)].translation)
            J.append(self.jac(a)[:3] - self.jac(b)[:3])
        for foot, held in self.feet.items():
            now = self.data.oMf[self.model.getFrameId(foot)]
            r += [now.translation - held.translation, pin.log3(now.rotation @ held.rotation.T)]
            J.append(self.jac(foot))
        return np.concatenate(r), np.vstack(J)

    def effort_ratio(self, q):
        """min over motor efforts u and constraint forces of max_i |u_i| / limit_i with
        S^T u + A^T lambda = g(q) + K q (gravity and the file's springs, static)."""
        self.kin(q)
        h = pin.computeGeneralizedGravity(self.model, self.data, q) + self.stiffness * q
        _, A = self.rows()
        _, s, vt = np.linalg.svd(A, full_matrices=False)
        A = (s[:, None] * vt)[s > 1e-6 * s[0]]  # the four-bars' dependent third rows cut
        p, m, n = self.S.shape[0], A.shape[0], self.model.nv
        bound = np.block(
            [[np.eye(p), np.zeros((p, m)), -self.limit[:, None]], [-np.eye(p), np.zeros((p, m)), -self.limit[:, None]]]
        )
        res = linprog(
            np.r_[np.zeros(p + m), 1.0],
            bound,
            np.zeros(2 * p),
            np.hstack([self.S.T, A.T, np.zeros((n, 1))]),
            h,
            bounds=[(None, None)] * (p + m) + [(0, None)],
            method='highs',
        )
        assert res.success, res.message
        return res.x[-1]

    def pelvis_moved(self, q, dz):
        """q with the pelvis dz lower or higher, its attitude kept, the feet held, the loops closed
        (Gauss-Newton, minimum-norm steps)."""
        q = q.copy()
        for _ in range(50):
            self.kin(q)
            r, J = self.rows()
            now = self.data.oMf[self.model.getFrameId('pelvis')]
            rp = np.r_[
                now.translation[2] - self.pelvis.translation[2] - dz, pin.log3(now.rotation @ self.pelvis.rotation.T)
            ]
            r, J = np.r_[r, rp], np.vstack([J, self.jac('pelvis')[2:]])
            q -= np.linalg.pinv(J, rcond=1e-7) @ r
        assert np.abs(r[:12]).max() < 1e-7 and np.abs(r[12:]).max() < 1e-12  # loops closed to the start's 2e-8
        return q


def test_cassie_stands_balanced_but_cannot_hold_its_pelvis_lower_or_higher():
    setup = load_robot(str(EXAMPLE))
    statics = Statics(setup.q0)
    statics.kin(setup.q0)
    _, A = statics.rows()
    # with every motor locked the closures and feet still allow one motion: no motor effort acts on it
    s = np.linalg.svd(np.vstack([statics.S, A]), compute_uv=False)
    assert s[-1] < 1e-5 * s[0] < s[-2]
    # the start balances on it: the motors hold it with a few N*m (5.5 N*m at the hip pitches)
    assert statics.effort_ratio(setup.q0) < 0.05
    # the same feet and attitude with the pelvis 1 mm lower or higher: no efforts within the limits hold it
    for dz in (-1e-3, 1e-3):
        assert statics.effort_ratio(statics.pelvis_moved(setup.q0, dz)) > 100.0


@pytest.mark.slow
def test_cassie_standing_example_stands_with_feet_still_and_loops_closed():
    from uk_controller.sim.closed_loop import simulate

    setup = load_robot(str(EXAMPLE), {'simulation.duration': 2.0})
    statics = Statics(setup.q0)
    res = simulate(setup)
    s = res.summary()
    assert not s['failure'], s['verdict']
    assert s['task_error_max'] < 1e-6, s['verdict']
    model, data = statics.model, statics.data
    for q in res.q[::20]:
        pin.framesForwardKinematics(model, data, q)
        for foot, held in statics.feet.items():
            now = data.oMf[model.getFrameId(foot)]
            assert np.linalg.norm(now.translation - held.translation) < 1e-7
            assert np.linalg.norm(pin.log3(held.rotation.T @ now.rotation)) < 1e-7
        pelvis = data.oMf[model.getFrameId('pelvis')]
        assert abs(pelvis.translation[2] - statics.pelvis.translation[2]) < 1e-6
        assert np.linalg.norm(pin.log3(statics.pelvis.rotation.T @ pelvis.rotation)) < 1e-6
        for closure in statics.closures.values():
            a, b = (data.oMf[model.getFrameId(f)].translation for f in closure['frames'])
            assert np.linalg.norm(a - b) < 1e-7  # the start's own residual: 2e-8
    assert np.abs(res.effort).max() < 10.0  # 5.5 N*m statically
    assert np.all(np.abs(res.effort) <= statics.limit)
