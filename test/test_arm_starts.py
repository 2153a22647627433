"""Real arms from any start, within their limits (example-robot-data wheel, URDFs unedited).

Every arm of :data:`arm_starts.ARMS` (UR5, UR10, Panda, xArm7, Z1, SO-101) from 5 seeded random starts
inside its joint limits, with a position task and a pose task on its tool frame held at a target up to
0.3 m and 180 deg away (reachable within the limits: see test/arm_starts.py), closed loop on the embedded
UK plant at 1 kHz for 8 s. Each run must: stay finite; converge (|task error| < 1e-3 from some time on,
to the end); keep every joint at or below its URDF velocity limit and inside its position limits;
keep efforts within their limits; come to rest (joint speeds < 0.05 rad/s over the last second: the
task holds still, so what moves is the null space); never flip the sign of an effort at its limit from
one step to the next (bang-bang). The setups are written without an ``approach`` section: the default
``approach.mode: auto`` reaches these far targets in joint space first (see test/arm_starts.py); without
it the task descent ends in a local minimum of the task error against joint limits or a singularity on
some of these runs (UR5 seed 3 pose, Panda seed 0 pose, SO-101 seed 0 pose and
seed 4 both tasks), though each target is reachable inside the limits. The figures are computed from the
logged states against the URDF's limits as Pinocchio reads them, independently of the controller's own
bookkeeping.

The setup files of test/data/arm_cases/ are the failures a new user meets: a pose flip of 180 deg
(Panda and xArm7 from their tool-down postures), an SO-101 circle from a far start, a Z1 pose change of 115 deg; each
must meet the same criteria
(the circle: tracked, at rest in its null space is not asked because the task moves; its joint speeds
stay below the limits and its posture error bounded). All are run as written, with the defaults.
"""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arm_starts  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not arm_starts.available(), reason='example-robot-data not installed'),
]

SEEDS = range(5)
DURATION = 8.0
#: arms whose seeds the suite cuts (none: the xArm7 and the Z1, whose light links have stiff friction, run
#: on the embedded plant's ROS2 at a few steps per period, sim/ros2.py, as cheap as the others)
SLOW_ARMS: dict = {}
#: runs that do not meet every criterion yet, and why (strict: a run that starts to pass must be moved out)
KNOWN: dict = {}


def _runs():
    for arm in sorted(arm_starts.ARMS):
        for seed in SLOW_ARMS.get(arm, SEEDS):
            for task in arm_starts.TASKS:
                reason = KNOWN.get((arm, seed, task))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                yield pytest.param(arm, seed, task, marks=marks, id=f'{arm}-{seed}-{task}')


REST_SPEED = 0.05  # rad/s (or m/s for a prismatic finger) over the last second
CASES = Path(__file__).resolve().parent / 'data' / 'arm_cases'


def _check(m, *, at_rest=True):
    assert m.finite, m.failure
    assert m.converged, f'not converged: final error {m.final_error:.3g}, {m}'
    assert m.speed_ratio <= 1.0, f'a joint at {m.speed_ratio:.2f} x its velocity limit'
    assert m.limit_margin_pct >= 0.0, f'past a position limit by {-m.limit_margin_pct:.1f} % of its range'
    assert m.effort_ratio <= 1.0 + 1e-9, f'effort at {m.effort_ratio:.3f} x its limit'
    if at_rest:
        assert m.last_s_speed < REST_SPEED, f'joints at {m.last_s_speed:.3g} rad/s in the last second'
    assert m.sign_flips == 0, f'{m.sign_flips} step-to-step sign flips of an effort at its limit'


def test_targets_are_reachable_and_within_reach():
    """The harness itself: starts inside the shrunk limits, target pose = the tool pose of a configuration
    inside the limits (Pinocchio forward kinematics), within 0.3 m and at most pi; an exact pi per arm
    where the tool has 6 degrees of freedom."""
    import pinocchio as pin

    for arm in arm_starts.ARMS:
        model = arm_starts.pin_model(arm)
        lo, hi = arm_starts.sampling_box(model)
        for seed in SEEDS:
            for task in arm_starts.TASKS:
                c = arm_starts.draw_case(arm, seed, task)
                assert (c.q0 >= lo).all() and (c.q0 <= hi).all()
                assert (c.q_target >= lo - 1e-12).all() and (c.q_target <= hi + 1e-12).all()
                p, R = arm_starts.tool_pose(model, c.q_target, arm_starts.ARMS[arm][1])
                assert np.linalg.norm(p - c.p_target) < 1e-6
                assert np.linalg.norm(pin.log3(c.R_target.T @ R)) < 1e-6
                assert c.distance <= arm_starts.MAX_DISTANCE
                if task == 'pose' and seed == arm_starts.PI_SEED and arm != 'so101':
                    _, R0 = arm_starts.tool_pose(model, c.q0, arm_starts.ARMS[arm][1])
                    assert abs(np.trace(R0.T @ c.R_target) + 1.0) < 1e-9  # a rotation by pi


@pytest.mark.parametrize('arm, seed, task', list(_runs()))
def test_arm_from_random_start(arm, seed, task):
    _check(arm_starts.run_case(arm, seed, task, duration=DURATION))


def _case(name, duration, overrides=None):
    path = CASES / f'{name}.yaml'
    res, ctrl, model = arm_starts.run_yaml(path, duration, overrides)
    case = arm_starts.Case(
        name.rsplit('_', 2)[0], -1, 'case', res.q[0] if res.q.size else None, None, None, math.nan, math.nan, None
    )
    return arm_starts.metrics_of(case, res, ctrl, model), res


def test_panda_pose_flip():
    """Tool-down home, attitude target the identity: an so3 error of exactly pi at the start. The default
    (approach.mode auto) reaches it in joint space first: the pi is far outside the linear range."""
    m, res = _case('panda_pose_flip', DURATION)
    assert res.settings['approach'].startswith('planned'), res.settings['approach']
    _check(m)


def test_xarm7_pose_flip():
    """The same flip on the xArm7 from its tool-down zero posture (singular for the task law: without the
    approach the efforts of joints 2-3 flip between their limits leaving it)."""
    m, res = _case('xarm7_pose_flip', DURATION)
    assert res.settings['approach'].startswith('planned'), res.settings['approach']
    _check(m)


def test_z1_pose_115deg():
    m, _ = _case('z1_pose_115deg', DURATION)
    _check(m)


def test_so101_circle_far_start():
    """A moving task: tracked from a far start, joints within their limits, the posture error bounded
    and the null-space speed bounded by what a 5 cm, 1 rad/s circle needs."""
    m, res = _case('so101_circle_far_start', 6.0)
    _check(m, at_rest=False)
    assert m.t_converge < 3.0
    assert m.last_s_speed < 2.0
    assert np.nanmax(res.posture_error) < 1.5
