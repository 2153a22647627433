"""Real arms from many starts: the measurement behind test_arm_starts.py and its table.

For an arm of the ``example-robot-data`` wheel (its URDF unedited) a seeded start is drawn inside the
joint limits and a target pose the tool reaches at another configuration inside the limits, at most
0.3 m away and with any attitude change up to a half turn (one case per arm exactly a half turn about the
tool axis). The setup file is the one a user would write (docs/config.md): a ``hold`` position task, or
position + so3 attitude, everything else the defaults. The run is closed loop on the embedded plant and
the metrics are what a person checks on a real robot: converged, speeds against the URDF limits, the
closest approach to a position limit, efforts within their limits, saturated steps, the joint speed
in the last second with the task at rest, sign flips of efforts at their limits (bang-bang) and the
control step's median time.

``python test/arm_starts.py [arm ...]`` prints the table.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: arm -> (description under robots/, tool frame, whether a pose task fits: 6 or more arm joints)
ARMS = {
    'ur5': ('ur_description/urdf/ur5_robot.urdf', 'tool0', True),
    'ur10': ('ur_description/urdf/ur10_robot.urdf', 'tool0', True),
    'panda': ('panda_description/urdf/panda.urdf', 'panda_hand_tcp', True),
    'xarm7': ('xarm_description/urdf/xarm7.urdf', 'link_eef', True),
    'z1': ('z1_description/urdf/z1.urdf', 'gripperStator', True),
    'so101': ('so_arm_description/urdf/so101.urdf', 'gripper_frame_link', False),
}
SEEDS = range(5)
MAX_DISTANCE = 0.3                 # m between the start and the target tool position
DURATION = 5.0                     # s simulated
TOLERANCE = 1e-3                   # task error counted as converged
REST_SPEED = 0.05                  # rad/s (m/s): the last second's joint speeds with the task at rest


@dataclass
class Run:
    arm: str
    seed: int
    task: str
    distance: float
    angle: float
    converged: bool
    settle: float
    final_error: float
    speed_ratio: float          # max over joints and time of |q'| / URDF velocity limit
    closest: float              # closest approach to a position limit, % of the range (< 0: past it)
    effort_ratio: float         # max |u| / effort limit
    saturated: float            # fraction of steps with an effort at its limit
    rest_speed: float           # max |q'| in the last second
    flips: int                  # steps where an effort at its limit jumps to the opposite limit
    finite: bool
    step_us: float

    def problems(self):
        """What a person would object to, as words (empty when the run is fine)."""
        out = []
        if not self.finite:
            out.append('not finite')
        if not self.converged:
            out.append(f'not converged (final error {self.final_error:.2e})')
        if self.speed_ratio > 1.0:
            out.append(f'speed {self.speed_ratio:.2f}x its limit')
        if self.closest < 0.0:
            out.append(f'past a position limit ({self.closest:.1f} %)')
        if self.effort_ratio > 1.0 + 1e-9:
            out.append(f'effort {self.effort_ratio:.2f}x its limit')
        if self.rest_speed > REST_SPEED:
            out.append(f'joints at {self.rest_speed:.3f} in the last second')
        if self.flips:
            out.append(f'{self.flips} bang-bang flips')
        return out


def _floats(v):
    return '[' + ', '.join(repr(float(x)) for x in v) + ']'


def _limits(model):
    lo, hi = np.array(model.lowerPositionLimit), np.array(model.upperPositionLimit)
    bounded = np.isfinite(lo) & np.isfinite(hi) & (hi > lo) & (hi - lo < 100.0)
    return np.where(bounded, lo, -np.pi), np.where(bounded, hi, np.pi)


def scenario(arm, seed, task):
    """(setup-file text, start q, distance m, attitude change rad) of one run."""
    import pinocchio as pin
    from uk_controller.robots import example_robot_data as erd
    relative, tool, _ = ARMS[arm]
    urdf = erd.description(relative)
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    rng = np.random.default_rng(1000 * seed + sum(map(ord, arm)) + (7 if task == 'pose' else 0))
    lo, hi = _limits(model)
    inner = 0.1 * (hi - lo)
    fid = model.getFrameId(tool, pin.BODY) if model.existFrame(tool, pin.BODY) else model.getFrameId(tool)

    def pose(q):
        pin.framesForwardKinematics(model, data, q)
        return data.oMf[fid].copy()

    q0 = rng.uniform(lo + inner, hi - inner)
    p0 = pose(q0)
    flip = task == 'pose' and seed == 0
    if flip:                        # exactly a half turn about the tool axis: the last arm joint turned by pi
        qt = q0.copy()
        j = model.joints[model.frames[fid].parentJoint].idx_q
        if hi[j] - lo[j] - 2.0 * inner[j] > 2.0 * np.pi:       # both ways fit: start mid-range
            q0[j] = qt[j] = 0.5 * (lo[j] + hi[j]) + rng.uniform(-0.2, 0.2)
            p0 = pose(q0)
        qt[j] = q0[j] - np.pi if q0[j] - np.pi > lo[j] + inner[j] else q0[j] + np.pi
        if not lo[j] <= qt[j] <= hi[j]:
            flip = False
    if not flip:
        for _ in range(2000):
            qt = np.clip(q0 + rng.normal(size=q0.size) * rng.uniform(0.2, 1.5), lo + inner, hi - inner)
            if np.linalg.norm(pose(qt).translation - p0.translation) <= MAX_DISTANCE:
                break
    pt = pose(qt)
    distance = float(np.linalg.norm(pt.translation - p0.translation))
    angle = float(np.linalg.norm(pin.log3(p0.rotation.T @ pt.rotation)))
    joints = [model.names[j] for j in range(1, model.njoints)]
    attitude = f"""      attitude:
        role: servo
        type: frame_orientation
        mode: so3
        frame: {tool}
        trajectory: {{type: hold, value: {_floats(pin.log3(pt.rotation))}}}
""" if task == 'pose' else ''
    text = f"""/**:
  ros__parameters:
    robot:
      name: {arm}_{task}_{seed}
      urdf: package://example-robot-data/robots/{relative}
      joints: [{', '.join(joints)}]
      initial_position: {_floats(q0)}
    constraints:
      names: [position{', attitude' if task == 'pose' else ''}]
      position:
        role: servo
        type: frame_position
        frame: {tool}
        axes: ['x', 'y', 'z']
        trajectory: {{type: hold, value: {_floats(pt.translation)}}}
{attitude}    stabilization: {{convention: critical, omega: 15.0}}
    simulation: {{duration: {DURATION!r}}}
"""
    return text, q0, distance, angle


def consistent_start(setup, q0):
    """q0 moved onto the description's couplings (a <mimic> joint is a passive row): Gauss-Newton steps
    ``q <- q - A^+ phi`` on the passive rows, so the start is a state the mechanism can be in."""
    q = np.array(q0, dtype=float)
    if setup.passive.m:
        qd = np.zeros_like(q)
        for _ in range(5):
            setup.model.compute(q, qd)
            rows = setup.passive.evaluate(setup.model, q, qd, 0.0)
            q -= np.linalg.pinv(rows.A) @ rows.phi
    return q


def run(arm, seed, task, folder=None):
    """One closed-loop run and its :class:`Run`."""
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate
    text, q0, distance, angle = scenario(arm, seed, task)
    folder = Path(folder or tempfile.mkdtemp())
    path = folder / f'{arm}_{task}_{seed}.yaml'
    path.write_text(text)
    setup = load_robot(path)
    q1 = consistent_start(setup, q0)
    if not np.array_equal(q1, q0):
        path.write_text(text.replace(f'initial_position: {_floats(q0)}', f'initial_position: {_floats(q1)}'))
        setup = load_robot(path)
    res = simulate(setup)
    q, qd, effort = np.asarray(res.q), np.asarray(res.qd), np.asarray(res.effort)
    model = setup.model
    vlim = model.velocity_limits
    lo, hi = model.position_limits
    span = hi - lo
    bounded = np.isfinite(span)
    closest = float(np.min(np.minimum(q - lo, hi - q)[:, bounded] / span[bounded]) * 100.0) if bounded.any() \
        else 100.0
    elim = setup.actuators.effort_limits
    at_limit = np.abs(effort) >= 0.999 * elim
    flips = int(np.sum(at_limit[1:] & at_limit[:-1] & (np.sign(effort[1:]) != np.sign(effort[:-1]))))
    err = np.linalg.norm(np.asarray(res.task_error), axis=1)
    steps_per_second = int(round(1.0 / (res.t[1] - res.t[0]))) if len(res.t) > 1 else 1
    settle = res.settling_time(TOLERANCE)
    finite = bool(np.isfinite(q).all() and np.isfinite(qd).all())
    summary = res.summary()
    return Run(arm, seed, task, distance, angle,
               converged=bool(finite and np.isfinite(settle) and err[-1] < TOLERANCE), settle=float(settle),
               final_error=float(err[-1]), speed_ratio=float(np.max(np.abs(qd) / vlim)), closest=closest,
               effort_ratio=float(np.max(np.abs(effort) / elim)), saturated=float(np.mean(at_limit.any(axis=1))),
               rest_speed=float(np.abs(qd[-steps_per_second:]).max()), flips=flips, finite=finite,
               step_us=float(summary.get('step_time_median_us', float('nan'))))


def table(runs):
    lines = ['| arm | task | seed | distance m | attitude deg | converged at s | max q\'/limit | closest to a '
             'limit % | saturated % | last-second speed | flips | step us |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|']
    for r in runs:
        lines.append(f'| {r.arm} | {r.task} | {r.seed} | {r.distance:.2f} | {np.degrees(r.angle):.1f} | '
                     f'{r.settle if r.converged else float("nan"):.2f} | {r.speed_ratio:.2f} | {r.closest:.1f} | '
                     f'{100 * r.saturated:.1f} | {r.rest_speed:.4f} | {r.flips} | {r.step_us:.1f} |')
    return '\n'.join(lines)


def main(argv):
    arms = argv or list(ARMS)
    runs = []
    for arm in arms:
        for task in ('position', 'pose') if ARMS[arm][2] else ('position',):
            for seed in SEEDS:
                r = run(arm, seed, task)
                runs.append(r)
                print(f'{arm} {task} {seed}: {", ".join(r.problems()) or "ok"}', file=sys.stderr)
    print(table(runs))
    bad = [r for r in runs if r.problems()]
    print(f'\n{len(runs) - len(bad)} of {len(runs)} runs without a problem')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
