"""Table ``step_ratio``: the control step beside Pinocchio on the same model and state.

In one run on the same model and state, ControllerCore.step (the packed compiled step and the Python around
it) against ``pinocchio.aba`` (open trees; target <= 3x) and ``pinocchio.constraintDynamics`` (five-bar
closures; target <= 1.0x), with the parts: the packed kernel call alone, and the previous form
(Pinocchio's pass from Python + the 12-argument fused_step).

Beside the shipped robots, robots nobody on this project described (the ``example-robot-data`` wheel,
:mod:`uk_controller.robots.example_robot_data`) with the setup files a user would write: the UR5 with a pose
task (tool on a 10 cm circle, attitude held: 3 position + 3 so3 rows) and with the position rows alone, and
the Panda (7 arm joints + 2 fingers) with its TCP on a 5 cm circle. A row is one entry of
:data:`REAL_ROBOTS`: (label, setup-file builder, Pinocchio reference, target). Where the task leaves the
arm free (the UR5 and the Panda with position rows) the posture term of the null space runs, as it does by
default (``posture.enabled``, DESIGN.md "Redundancy").
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from .common import moving_state, pin_closures, sample, table, verdict

TARGETS = {
    'scara': ('pin.aba', 3.0),
    'five_bar': ('pin.constraintDynamics', 1.0),
    'five_bar_redundant': ('pin.constraintDynamics', 1.5),
    'dual_arm': ('pin.aba', 3.0),
}


def _real_robots():
    """(label, setup text or None when the wheel is missing, Pinocchio reference, target) per real robot."""
    from uk_controller.robots import example_robot_data as erd

    return [
        ('ur5 pose (3 pos + 3 so3)', erd.ur5_pose_yaml(), 'pin.aba', 3.0),
        (
            'ur5 position + posture (3 pos, 3 free)',
            erd.circle_task_yaml(erd.UR5, erd.UR5_HOME, erd.UR5_TOOL, name='ur5_position'),
            'pin.aba',
            3.0,
        ),
        ('panda position + posture (3 pos, 5 free)', erd.panda_position_yaml(), 'pin.aba', 3.0),
    ]


#: the real robots' rows (a function: the setup texts need the wheel, looked up when the table runs)
REAL_ROBOTS = _real_robots


def _cases(args, folder):
    """(label, ControllerCore, reference, target) for the shipped robots asked for and the real robots."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.robots import load_robot

    for name in [r for r in args.robots if r in TARGETS]:
        yield (name, ControllerCore.from_config(name), *TARGETS[name])
    for k, (label, text, ref, target) in enumerate(REAL_ROBOTS()):
        if text is None:
            print(f'({label}: example-robot-data is not installed; pip install example-robot-data)')
            continue
        path = Path(folder) / f'real_{k}.yaml'
        path.write_text(text)
        yield label, ControllerCore(load_robot(path)), ref, target


def run(args):
    import pinocchio as pin

    count = 2000 if args.quick else 20000
    rows, parts = [], []
    with tempfile.TemporaryDirectory(prefix='uk_bench_') as folder:
        for name, ctrl, ref, target in _cases(args, folder):
            model, setup = ctrl.model, ctrl.setup
            pm = model.model
            pdata = pm.createData()
            q, qd = moving_state(setup)
            tau = np.zeros(model.n)
            if ref == 'pin.aba':

                def reference():
                    pin.aba(pm, pdata, q, qd, tau)
            else:
                cms = pin_closures(setup)
                if cms is None:
                    continue
                cds = [cm.createData() for cm in cms]
                pin.initConstraintDynamics(pm, pdata, cms, cds)
                prox = pin.ProximalSettings(1e-12, 1e-12, 20)

                def reference():
                    pin.constraintDynamics(pm, pdata, q, qd, tau, cms, cds, prox)

            clock = [0.0]

            def step():
                clock[0] += 1e-3
                ctrl.step(q, qd, clock[0])

            def step_view():
                clock[0] += 1e-3
                ctrl.step_view(q, qd, clock[0])

            backend = ctrl.backend
            fz, packed = (backend.program, backend.packed) if backend.name == 'compiled' else (None, None)
            # interleave the samples (ref, step, view, ref, ...) so that a load change hits all alike
            t_ref, t_step, t_view = [], [], []
            for _ in range(4):
                t_ref.append(sample(reference, count // 4))
                t_step.append(sample(step, count // 4))
                t_view.append(sample(step_view, count // 4))
            t_ref, t_step, t_view = np.concatenate(t_ref), np.concatenate(t_step), np.concatenate(t_view)
            ratio, ratio_view = np.median(t_step) / np.median(t_ref), np.median(t_view) / np.median(t_ref)
            shape = f'{model.n}/{setup.passive.m}/{setup.servo.m}'
            rows.append(
                (
                    name,
                    shape,
                    backend.name,
                    ref,
                    f'{np.median(t_ref) * 1e6:.2f}',
                    f'{np.median(t_step) * 1e6:.2f}',
                    f'{ratio:.2f}x',
                    verdict(ratio <= target),
                    f'{np.median(t_view) * 1e6:.2f}',
                    f'{np.percentile(t_view, 99) * 1e6:.2f}',
                    f'{ratio_view:.2f}x',
                    verdict(ratio_view <= target),
                    f'{target:g}x',
                )
            )
            if packed is not None:
                call, I, F, sat = backend.call  # what ControllerCore.step calls: the compiled entry
                t_packed = sample(lambda: call(q, qd, 0.5, I, F, sat), count // 2)
                old = fz.make_runner()  # Pinocchio's pass + the 12-argument fused_step
                t_old = sample(lambda: old(q, qd, 0.5), count // 2)
                t_cat = sample(
                    lambda: (pin.computeAllTerms(pm, pdata, q, qd), pin.updateFramePlacements(pm, pdata)), count // 2
                )
                t_kernel = sample(
                    lambda: fz.kernel(
                        fz.M_lower, fz.h, fz.J, fz.trans, fz.rots, q, qd, 0.5, fz.ip, fz.fp, fz.ws, fz.saturated
                    ),
                    count // 2,
                )
                parts.append(
                    (
                        name,
                        f'{np.median(t_packed) * 1e6:.2f}',
                        f'{np.median(t_packed) / np.median(t_ref):.2f}x',
                        f'{(np.median(t_step) - np.median(t_packed)) * 1e6:.2f}',
                        f'{(np.median(t_view) - np.median(t_packed)) * 1e6:.2f}',
                        f'{np.median(t_old) * 1e6:.2f}',
                        f'{np.median(t_cat) * 1e6:.2f}',
                        f'{np.median(t_kernel) * 1e6:.2f}',
                    )
                )
    table(
        'Control step beside Pinocchio on the same model and state (one run, interleaved samples) [us, medians]',
        (
            'robot',
            'n/mp/ms',
            'backend',
            'Pinocchio',
            'Pinocchio us',
            'step',
            'ratio',
            'met',
            'step_view',
            'step_view p99',
            'ratio',
            'met',
            'target',
        ),
        rows,
        note='step: ControllerCore.step, efforts, residuals, rank, condition and a StepResult that owns its five '
        'arrays, from (q, qd, t); step_view: ControllerCore.step_view, the same solve and checks, its result '
        'read in place (valid until the next step, what the serial runner calls). Pinocchio: forward '
        'dynamics only (aba on the tree; constraintDynamics with CONTACT_3D closures, corrector off). '
        'ur5/panda: example-robot-data URDFs, unedited, with the setup files of '
        'uk_controller.robots.example_robot_data.',
    )
    table(
        'Where the step goes [us, medians]',
        (
            'robot',
            'packed kernel call',
            'call / Pinocchio',
            'Python around it (step - call)',
            '(step_view - call)',
            'previous: Pinocchio pass + fused_step',
            '  of which computeAllTerms + updateFramePlacements',
            '  of which fused_step (12 args)',
        ),
        parts,
        note='packed kernel call: uk_controller.kernels.packed (own RNEA/CRBA + frames + rows + servo solve, 6 args), '
        'its compiled entry as ControllerCore.step calls it (backend.call).',
    )
