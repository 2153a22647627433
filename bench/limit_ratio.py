"""Table ``limit_ratio``: what the joint-limit stage costs, on real arms far from their target.

For each arm of the ``example-robot-data`` wheel (URDF unedited) a setup a user would write: the tool held
at a target tens of centimetres and a large rotation away from the start (the target is the tool pose of
another configuration inside the limits, so it is reachable), so the run starts with efforts beyond their
limits and joints at their speed limits. The closed loop runs for :data:`RUN_SECONDS` on the UK plant with
the stage on (``limits.enabled``, the default); its logged states are then replayed, in their order, through
the compiled step (the packed kernel call ControllerCore.step makes) of two controllers of the same setup:

- ``on``: the joint-limit stage on; each state is *active* when the stage ran (an effort beyond its limit
  or an acceleration beyond its bound: ``info[INFO_LIMIT_ITERATIONS] > 0``), else *inactive*;
- ``plain``: ``limits.enabled: false`` (effort clipping only).

The ratios are medians of on / plain over the same states: active (target <= 1.5x) and inactive (target
<= 1.1x: the stage's check alone). The states are replayed in time order so that whatever the step carries
from one call to the next (a warm start) sees what it sees in a run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from .common import sample, table, verdict

#: seconds of closed loop whose states are replayed
RUN_SECONDS = 1.5
#: (label, URDF under robots/, tool frame, start, target configuration, attitude rows too)
ARMS = (
    (
        'ur5 pose',
        'ur_description/urdf/ur5_robot.urdf',
        'tool0',
        (0.3, -1.2, 1.4, -1.6, -1.3, 0.2),
        (-0.2, -1.7, 1.9, -0.9, -1.9, 1.4),
        True,
    ),
    (
        'panda pose',
        'panda_description/urdf/panda.urdf',
        'panda_hand_tcp',
        (0.2, -0.5, 0.1, -2.2, 0.1, 1.7, 0.6, 0.02, 0.02),
        (-0.4, -0.2, 0.4, -1.6, -0.5, 2.3, 1.9, 0.02, 0.02),
        True,
    ),
    (
        'panda position',
        'panda_description/urdf/panda.urdf',
        'panda_hand_tcp',
        (0.2, -0.5, 0.1, -2.2, 0.1, 1.7, 0.6, 0.02, 0.02),
        (-0.5, 0.1, 0.3, -1.5, -0.5, 2.3, 1.9, 0.02, 0.02),
        False,
    ),
)
TARGET_ACTIVE, TARGET_INACTIVE = 1.5, 1.1


def far_hold_yaml(relative, tool, start, target, attitude, *, limits_enabled=True):
    """Setup text: the arm at `start`, its `tool` held at its pose at configuration `target` (position, and
    with `attitude` the orientation in ``mode: so3``); None when the wheel is not installed."""
    from uk_controller.robots import example_robot_data as erd

    urdf = erd.description(relative)
    if urdf is None:
        return None
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.array(target, dtype=float))
    pose = data.oMf[model.getFrameId(tool)]
    joints = [model.names[j] for j in range(1, model.njoints)]
    rows = erd.hold_rows(tool, pose.translation, pin.log3(pose.rotation) if attitude else None)
    return erd.arm_setup_yaml(
        'limit_ratio',
        relative,
        joints,
        start,
        rows,
        simulation=f'duration: {RUN_SECONDS!r}',
        # the task law's own path from the far start (no joint-space approach first): where the stage works
        sections=f"    limits: {{enabled: {'true' if limits_enabled else 'false'}}}\n    approach: {{mode: 'off'}}\n",
    )


def _replay(call, states):
    """A function that steps `call` through `states` in order, one state per call (wrapping)."""
    index = [0]
    size = len(states)

    def step():
        q, qd, t = states[index[0] % size]
        index[0] += 1
        call(q, qd, t)

    return step


def measure(label, relative, tool, start, target, attitude, count):
    """(label, states active, states inactive, medians [us]: on active, plain active, on inactive, plain
    inactive) for one arm; None without the wheel."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.kernels.codes import INFO_LIMIT_ITERATIONS
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    texts = [far_hold_yaml(relative, tool, start, target, attitude, limits_enabled=on) for on in (True, False)]
    if texts[0] is None:
        return None
    with tempfile.TemporaryDirectory(prefix='uk_limit_ratio_') as folder:
        setups = []
        for k, text in enumerate(texts):
            path = Path(folder) / f'arm_{k}.yaml'
            path.write_text(text)
            setups.append(load_robot(path))
    res = simulate(setups[0])  # its file runs RUN_SECONDS (simulation.duration)
    states = [(np.ascontiguousarray(q), np.ascontiguousarray(qd), float(t)) for q, qd, t in zip(res.q, res.qd, res.t)]
    on, plain = ControllerCore(setups[0]), ControllerCore(setups[1])
    runners = []
    for ctrl in (on, plain):
        backend = ctrl.backend
        if backend.name != 'compiled' or backend.packed is None:
            raise RuntimeError('the compiled step is not available (numba)')
        call, I, F, sat = backend.call
        runners.append((lambda c, i, f, s: lambda q, qd, t: c(q, qd, t, i, f, s))(call, I, F, sat))
    info = on.backend.program.info
    active = []
    for q, qd, t in states:
        runners[0](q, qd, t)
        active.append(info[INFO_LIMIT_ITERATIONS] > 0)
    active = np.array(active)
    groups = [[s for s, a in zip(states, active) if a], [s for s, a in zip(states, active) if not a]]
    out = [label, int(active.sum()), int((~active).sum())]
    for group in groups:
        if not group:
            out += [float('nan'), float('nan')]
            continue
        t_on, t_plain = [], []
        for _ in range(4):  # interleaved: a change of load hits both alike
            t_on.append(sample(_replay(runners[0], group), count // 4))
            t_plain.append(sample(_replay(runners[1], group), count // 4))
        out += [float(np.median(np.concatenate(t_on)) * 1e6), float(np.median(np.concatenate(t_plain)) * 1e6)]
    return out


def run(args):
    count = 4000 if args.quick else 20000
    rows = []
    for label, relative, tool, start, target, attitude in ARMS:
        m = measure(label, relative, tool, start, target, attitude, count)
        if m is None:
            print(f'({label}: example-robot-data is not installed; pip install example-robot-data)')
            continue
        _, n_act, n_inact, on_a, pl_a, on_i, pl_i = m
        ra, ri = on_a / pl_a, on_i / pl_i
        rows.append(
            (
                label,
                f'{n_act}/{n_inact}',
                f'{pl_a:.2f}',
                f'{on_a:.2f}',
                f'{ra:.2f}x',
                verdict(ra <= TARGET_ACTIVE),
                f'{pl_i:.2f}',
                f'{on_i:.2f}',
                f'{ri:.2f}x',
                verdict(ri <= TARGET_INACTIVE),
            )
        )
    table(
        f'The joint-limit stage: packed step with the stage on / off, the same states ({RUN_SECONDS} s of a far '
        f'hold, replayed in order) [us, medians]',
        (
            'arm',
            'states active/inactive',
            'plain (active states)',
            'stage on',
            'ratio',
            f'<= {TARGET_ACTIVE}x',
            'plain (inactive states)',
            'stage on',
            'ratio',
            f'<= {TARGET_INACTIVE}x',
        ),
        rows,
        note='plain: limits.enabled false (effort clipping only). active: the bounded least squares ran in that '
        'state (an effort beyond its limit or a joint acceleration beyond its bound).',
    )


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true')
    run(parser.parse_args(argv))


if __name__ == '__main__':
    main()
