"""Named statuses of a control step and a plant period, and the ONE table of their reasons.

A control step (:meth:`uk_controller.control.controller.ControllerCore.step`) ends in one :class:`Status`;
``StepResult.status`` holds it and ``StepResult.reason`` is its text from :data:`TABLE`. The compiled
kernels write the first four codes (their integers are :mod:`uk_controller.kernels.codes`', so numba
sees plain ints) into ``info[INFO_STATUS]``; the plant's RK4 kernels return them. The others are decided
in Python by the controller. Every user of a status reads this module: the controller (reasons,
safe effort), the plant (raise or propagate NaN), the simulation summary (:class:`StepClass`, the
``status`` column of log.csv) and the ROS diagnostics (:func:`level`).

====================  ====  ===========  =========  =======================================================
status                code  safe effort  level      reason (``StepResult.reason``, ``/diagnostics`` text)
====================  ====  ===========  =========  =======================================================
OK                    0     no           ok         (empty)
NOT_POSITIVE_DEFINITE 1     yes          error      numerical failure: mass matrix not positive definite
NON_FINITE_EFFORT     2     yes          error      numerical failure: non-finite effort
NON_FINITE_STATE      3     yes          error      non-finite state
BAD_STATE_SHAPE       10    yes          error      state has shape {q}/{qd}, expected ({n},)
NUMERICAL_ERROR       11    yes          error      numerical failure: {error}
SAFE_REQUESTED        12    yes          error      {reason} (the caller's words: stale state, stopped, ...)
NOT_CONTROLLABLE      13    no           warn       servo constraint not controllable (rank C B_bar = 0)
SERVO_INCONSISTENT    14    no           warn       servo constraint inconsistent: least-squares effort
                                                    (residual {residual:.2e})
LIMITED               15    no           warn       task gave way to joint or effort limits (residual
                                                    {residual:.2e})
====================  ====  ===========  =========  =======================================================

"safe effort: yes" means ``StepResult.ok`` is False and the configured safe effort (zero or hold) was
returned; "no" means the efforts are a solution (NOT_CONTROLLABLE: u = 0 because C B_bar has rank 0;
SERVO_INCONSISTENT: the least-squares u of Chen's servo equation, seed 004 eq 35, under-actuated task;
LIMITED: the bounded least squares of the joint-limit stage, core/joint_limits.py, the task not met).
"""

from __future__ import annotations

from enum import IntEnum

from ..kernels.codes import NOT_FINITE, NOT_FINITE_STATE, NOT_PD, OK


class Status(IntEnum):
    """What one control step (or plant period) ended in; see the module table."""

    OK = OK
    NOT_POSITIVE_DEFINITE = NOT_PD
    NON_FINITE_EFFORT = NOT_FINITE
    NON_FINITE_STATE = NOT_FINITE_STATE
    # decided in Python (never written by a kernel); numbered from 10 so the kernels' codes can grow
    BAD_STATE_SHAPE = 10
    NUMERICAL_ERROR = 11
    SAFE_REQUESTED = 12
    NOT_CONTROLLABLE = 13
    SERVO_INCONSISTENT = 14
    LIMITED = 15


#: status -> (safe effort returned, diagnostics level, reason template); THE table of the module docstring
TABLE = {
    Status.OK: (False, 'ok', ''),
    Status.NOT_POSITIVE_DEFINITE: (True, 'error', 'numerical failure: mass matrix not positive definite'),
    Status.NON_FINITE_EFFORT: (True, 'error', 'numerical failure: non-finite effort'),
    Status.NON_FINITE_STATE: (True, 'error', 'non-finite state'),
    Status.BAD_STATE_SHAPE: (True, 'error', 'state has shape {q}/{qd}, expected ({n},)'),
    Status.NUMERICAL_ERROR: (True, 'error', 'numerical failure: {error}'),
    Status.SAFE_REQUESTED: (True, 'error', '{reason}'),
    Status.NOT_CONTROLLABLE: (False, 'warn', 'servo constraint not controllable (rank C B_bar = 0)'),
    Status.SERVO_INCONSISTENT: (
        False,
        'warn',
        'servo constraint inconsistent: least-squares effort (residual {residual:.2e})',
    ),
    Status.LIMITED: (False, 'warn', 'task gave way to joint or effort limits (residual {residual:.2e})'),
}
assert set(TABLE) == set(Status), 'every status needs its row'

#: statuses whose step returns the safe effort instead of a solution (StepResult.ok False)
SAFE = frozenset(s for s, row in TABLE.items() if row[0])
#: reason text of the statuses that need no details (the rest are formatted by :func:`reason`)
REASONS = {s: row[2] for s, row in TABLE.items()}


def reason(status, **details):
    """The reason text of `status` (its template filled with `details`, e.g. ``residual=1e-3``)."""
    text = REASONS[status]
    return text.format(**details) if details else text


def level(status):
    """Diagnostics level of `status`: 'ok', 'warn' or 'error' (the ROS node maps it to DiagnosticStatus)."""
    return TABLE[Status(status)][1]


class StepClass(IntEnum):
    """The summary class of one step of a closed-loop run, the most serious that applies (sim.status).

    Its lower-case name is what log.csv's ``status`` column and summary.json's ``steps_by_status``
    print; its value is the int8 code of ``SimulationResult.status``.
    """

    OK = 0  # a solution, no effort clipped
    SATURATED = 1  # at least one effort clipped to its limit
    SERVO_INCONSISTENT = 2  # Status.SERVO_INCONSISTENT: least-squares effort
    RANK_LOST = 3  # rank of C B_bar below min(task rows, actuators) (Status.NOT_CONTROLLABLE included)
    SAFE_EFFORT = 4  # a status of SAFE: the safe effort was returned
    LIMITED = 5  # Status.LIMITED: the task gave way to joint or effort limits


#: names of the step classes in code order ('ok', 'saturated', ...)
STEP_CLASSES = tuple(c.name.lower() for c in StepClass)


def step_class(result, task_rows, actuators):
    """The :class:`StepClass` of one :class:`~uk_controller.control.controller.StepResult`."""
    if not result.ok:
        return StepClass.SAFE_EFFORT
    if result.rank < min(task_rows, actuators):
        return StepClass.RANK_LOST
    if result.status == Status.SERVO_INCONSISTENT:
        return StepClass.SERVO_INCONSISTENT
    if result.status == Status.LIMITED:
        return StepClass.LIMITED
    if result.saturated.any():
        return StepClass.SATURATED
    return StepClass.OK
