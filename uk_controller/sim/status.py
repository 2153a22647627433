"""Per-step status of a closed-loop run and the words of an honest summary.

Every control step gets one :class:`uk_controller.control.status.StepClass`, the most serious that applies
(the table of statuses and reasons is :mod:`uk_controller.control.status`):

    safe_effort        the controller returned its safe effort (bad input or numerical failure)
    rank_lost          rank of the servo matrix C B_bar below min(task rows, actuators)
    servo_inconsistent Chen's servo equation has no exact solution: least-squares effort
                       (under-actuated task, seed 004 eq 35 with a residual)
    limited            the task gave way to joint position, speed or effort limits (bounded least
                       squares of the joint-limit stage)
    saturated          at least one effort clipped to its limit
    ok

:func:`task_verdict` turns the counts into a sentence when the task was not
tracked, with the number behind each reason (out of reach, under-actuated,
saturated).
"""

from __future__ import annotations

import math

import numpy as np

from ..control.status import STEP_CLASSES, Status, StepClass, step_class


def servo_residual(result):
    """The servo equation's residual of an inconsistent step, else 0 (what the summary reports)."""
    return result.residual if result.status in (Status.SERVO_INCONSISTENT, Status.LIMITED) else 0.0


def classify(ctrl, t, q, qd, ok, codes, residuals):
    """Fill `codes` (and `residuals`, the servo residual of inconsistent steps) for the steps a compiled loop
    ran, by evaluating the same controller at the logged state and time (ControllerCore.step is a pure
    function of (q, q', t) apart from the held effort, which is restored)."""
    held = ctrl.held_effort
    ms, p = ctrl.setup.servo.m, ctrl.p
    try:
        for k in range(t.size):
            if not ok[k]:
                codes[k] = StepClass.SAFE_EFFORT
                continue
            res = ctrl.step(q[k], qd[k], t[k])
            codes[k] = step_class(res, ms, p)
            residuals[k] = servo_residual(res)
    finally:
        ctrl.remember_effort(held)


def counts(codes):
    """Steps per class name, in code order."""
    return {name: int(np.count_nonzero(codes == i)) for i, name in enumerate(STEP_CLASSES)}


def task_verdict(summary, codes, residuals, *, ranks=None, ms=0, p=0):
    """A sentence saying whether the task was tracked and, if not, why, with the numbers."""
    tol = summary['settle_tol']
    final = summary['task_error_final']
    steps = max(int(codes.size), 1)
    if math.isfinite(summary['settling_time_s']) and final < tol:
        return 'task tracked: error settles below {:g} at {:.3f} s'.format(tol, summary['settling_time_s'])
    why = []
    n_inc = int(np.count_nonzero(codes == StepClass.SERVO_INCONSISTENT))
    n_rank = int(np.count_nonzero(codes == StepClass.RANK_LOST))
    n_sat = int(summary.get('saturated_steps', 0))
    n_safe = int(np.count_nonzero(codes == StepClass.SAFE_EFFORT))
    n_lim = int(np.count_nonzero(codes == StepClass.LIMITED))
    if n_inc:
        why.append(
            f'under-actuated: servo constraint inconsistent in {n_inc} of {steps} steps '
            f'(residual up to {float(np.max(residuals, initial=0.0)):.2e}; {ms} task rows, {p} actuators)'
        )
    if n_rank:
        why.append(
            f'servo rank lost in {n_rank} of {steps} steps (singular configuration; the target may be out of reach)'
        )
    if n_lim:
        why.append(f'the task gave way to joint or effort limits in {n_lim} of {steps} steps')
    if n_sat:
        why.append(f'efforts saturated in {n_sat} of {steps} steps ({100.0 * n_sat / steps:.0f}%)')
    if n_sat + n_lim > steps // 2 and math.isfinite(final) and final > 100 * tol:
        why.append(
            f'the task is likely out of reach: the error ends at {final:.3g} with the efforts or joints at their limits'
        )
    if n_safe:
        why.append(f'safe effort in {n_safe} steps')
    if not why:
        why.append('the error did not settle within the run (longer run or higher gains?)')
    final_text = f'{final:.3g}' if math.isfinite(final) else 'unknown (no solution at the last step)'
    return f'task NOT tracked: final error {final_text} (tolerance {tol:g}); ' + '; '.join(why)
