"""The loop-timing pieces used by the ROS nodes (re-exported; they live in :mod:`uk_controller.control.loop_timing`).

They are plain Python (no rclpy) and are shared with ``uk-controller run`` (uk_controller.hardware.run_command),
which must not import from ``ros/`` (layers point downward, DESIGN.md).
"""

from ..control.loop_timing import (  # noqa: F401 - re-exported
    CLOCK_MONOTONIC,
    LOOP_MODES,
    LOOP_THREAD_NAME,
    MCL_CURRENT,
    MCL_FUTURE,  # noqa: F401
    PR_SET_TIMERSLACK,
    TIMER_ABSTIME,
    TIMING_FIELDS,  # noqa: F401
    DeadlineSleeper,
    LoopTiming,
    OverrunPolicy,
    loop_cpus,  # noqa: F401
    name_thread,
    overrun_policy,
    realtime_setup,
)  # noqa: F401
