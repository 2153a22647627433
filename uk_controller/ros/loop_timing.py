"""The loop-timing pieces used by the ROS nodes (re-exported; they live in :mod:`uk_controller.loop_timing`).

They are plain Python (no rclpy) and are shared with ``uk-controller run`` (uk_controller.hardware.run_command),
which must not import from ``ros/`` (layers point downward, DESIGN.md).
"""
from ..loop_timing import (CLOCK_MONOTONIC, LOOP_DEFAULTS, LOOP_MODES, MCL_CURRENT, MCL_FUTURE,  # noqa: F401
                           OVERRUN_DEFAULTS, PR_SET_TIMERSLACK, TIMER_ABSTIME, TIMING_FIELDS, DeadlineSleeper,
                           LoopTiming, OverrunPolicy, SettingsError, loop_settings, realtime_setup)
