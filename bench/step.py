"""Table ``step``: ControllerCore.step per robot (M, C, G, all rows, UK servo efforts, Baumgarte), and where the time
goes.

Beside it the general path (uk.servo_control: uk.servo_solve, LAPACK posv, syevd, gesdd) on the same state, with the
relative difference of the efforts, and the step's parts: Pinocchio's pass, the rows, the servo solve.
"""

from __future__ import annotations

import numpy as np

from .common import med_p99, moving_state, rel_diff, sample, table, verdict

#: the speed targets
STEP_TARGET_US = {'scara': 25.0, 'five_bar': 40.0, 'five_bar_redundant': 40.0, 'dual_arm': 40.0}


def run(args):
    from uk_controller.control.controller import ControllerCore

    count = 2000 if args.quick else 20000
    rows, parts = [], []
    for name in args.robots:
        ctrl = ControllerCore.from_config(name)
        setup, model = ctrl.setup, ctrl.model
        q, qd = moving_state(setup)
        clock = [0.0]

        def step():
            clock[0] += 1e-3
            ctrl.step(q, qd, clock[0])

        fast = sample(step, count)
        general = ControllerCore.from_config(name, backend='general')
        slow = sample(lambda: general.step(q, qd, 0.5), max(200, count // 10))
        same = rel_diff(ctrl.step(q, qd, 0.5).effort, general.step(q, qd, 0.5).effort)
        m, p99 = med_p99(fast)
        target = STEP_TARGET_US.get(name)
        rows.append(
            (
                name,
                f'{model.n}/{setup.passive.m}/{setup.servo.m}/{ctrl.p}',
                f'{m:.1f}',
                f'{p99:.1f}',
                f'{np.median(slow) * 1e6:.1f}',
                f'{np.median(slow) / np.median(fast):.1f}x',
                f'{same:.1e}',
                f'{target:g}' if target else '-',
                verdict(m <= target) if target else '-',
            )
        )
        # where the time goes
        fz = ctrl.backend.program if ctrl.backend.name == 'compiled' else None
        if fz is not None:
            import pinocchio as pin

            pm, data = model.model, model.data
            t_compute = np.median(
                sample(lambda: (pin.computeAllTerms(pm, data, q, qd), pin.updateFramePlacements(pm, data)), count // 2)
            )
            t_kernel = np.median(
                sample(
                    lambda: fz.kernel(
                        fz.M_lower, fz.h, fz.J, fz.trans, fz.rots, q, qd, 0.5, fz.ip, fz.fp, fz.ws, fz.saturated
                    ),
                    count // 2,
                )
            )
            rest = np.median(fast) - t_compute - t_kernel
            parts.append((name, 'fused', f'{t_compute * 1e6:.1f}', f'{t_kernel * 1e6:.1f}', '-', f'{rest * 1e6:.1f}'))
            continue
        t_compute = np.median(sample(lambda: model.compute(q, qd), count // 2))
        t_rows = (
            np.median(
                sample(
                    lambda: (
                        model.compute(q, qd),
                        setup.passive.evaluate(model, q, qd, 0.5),
                        setup.servo.evaluate(model, q, qd, 0.5),
                    ),
                    count // 2,
                )
            )
            - t_compute
        )
        model.compute(q, qd)
        P, S = setup.passive.evaluate(model, q, qd, 0.5), setup.servo.evaluate(model, q, qd, 0.5)
        ref = ctrl.backend  # ReferenceBackend: ConstraintStack rows + uk.ServoSolver
        B = ref.B if ref.B is not None else setup.actuators.matrix(model).copy()
        sol, zero_n = ref.solver, np.zeros(model.n)
        t_solve = np.median(
            sample(
                lambda: sol.solve_rows(
                    model.M_lower,
                    zero_n,
                    model.h,
                    B,
                    S.A,
                    S.b,
                    S.phi,
                    S.phidot,
                    P.A,
                    P.b,
                    P.phi,
                    P.phidot,
                    ref.gains,
                    ctrl.effort_limits,
                ),
                count // 2,
            )
        )
        rest = np.median(fast) - t_compute - t_rows - t_solve
        parts.append(
            (
                name,
                'rows + ServoSolver',
                f'{t_compute * 1e6:.1f}',
                f'{t_rows * 1e6:.1f}',
                f'{t_solve * 1e6:.1f}',
                f'{rest * 1e6:.1f}',
            )
        )
    table(
        'Control step: ControllerCore.step (M, C, G, rows, UK servo efforts, Baumgarte) [us]',
        ('robot', 'n/mp/ms/p', 'median', 'p99', 'general path', 'speed-up', 'rel diff', 'target', 'met'),
        rows,
        note='general path: the same step through uk.servo_control (uk.servo_solve: LAPACK posv, syevd, gesdd).',
    )
    table(
        'Control step breakdown (medians) [us]',
        (
            'robot',
            'path',
            'Pinocchio pass',
            'rows (fused: rows + solve kernel)',
            'servo solve',
            'step overhead + result',
        ),
        parts,
        note='fused: one compiled call (constraints.CompiledRows) for frame kinematics, trajectories, rows, '
        'Baumgarte and the servo solve.',
    )
