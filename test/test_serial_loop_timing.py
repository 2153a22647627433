"""Loop timing and the overrun policy of ``uk-controller run``'s loop.

ControllerCore -> SafeBus -> uk_binary over a pseudo-terminal -> emulated drivers (lockstep), all on a
stepped clock: each bus cycle takes exactly one period of that clock, so the achieved rate, the
missed deadlines and the policy's reaction are known in advance however busy the machine is. One
cycle is made to take 1 + EXTRA periods (the hook advances the clock EXTRA periods more): a loop on
the deadline grid d_{k+1} = d_k + T then misses exactly EXTRA deadlines, and the window holding it
ran EXTRA periods fewer than RATE * window.
"""

import numpy as np
import pytest

from uk_controller.control.controller import ControllerCore
from uk_controller.control.loop_timing import TIMING_FIELDS
from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.faults import stepped_bus
from uk_controller.hardware.joint_state_assembler import JointStateAssembler
from uk_controller.hardware.serial_loop import run_loop
from uk_controller.robots import load_robot
from uk_controller.sim.uk_plant import UKPlant

RATE = 200.0
WINDOW = 1.0
EXTRA = 5  # periods the slow cycle overruns by (watchdog 0.05 s = 10 periods: no trip)
SLOW_CYCLE = 300  # the slow cycle's number (1-based), in the second window
OVERRUN = {'warn_after': 2, 'safe_after': 4, 'recover_after': 3}

pytestmark = [pytest.mark.serial, pytest.mark.usefixtures('fast_gil_switch')]


def stepped_run(duration=2.5):
    setup = load_robot(
        'scara',
        {**{f'ros.overrun.{k}': v for k, v in OVERRUN.items()}, 'ros.loop.window': WINDOW, 'control.rate': RATE},
    )
    hw = HardwareConfig.from_setup(setup)
    plant = UKPlant.from_setup(load_robot('scara'))
    core = ControllerCore(setup)
    dt = core.dt
    clock, emu, safe = stepped_bus(hw, plant, dt)
    cycles = {'k': 0, 'slow_t': None}
    logged = []

    def after_cycle():
        cycles['k'] += 1
        clock.advance(dt)
        if cycles['k'] == SLOW_CYCLE:
            clock.advance(EXTRA * dt)

    try:
        safe.connect(raise_errors=True)
        res = run_loop(
            core,
            safe,
            JointStateAssembler(setup, hw),
            duration=duration,
            realtime=True,
            record=True,
            clock=clock,
            after_cycle=after_cycle,
            log=logged.append,
        )
        diag = safe.diagnostics()
    finally:
        safe.shutdown()
        emu.close()
    return res, diag, logged, core


@pytest.mark.slow
def test_stepped_loop_rate_missed_deadlines_and_safe_effort(robots):
    robots('scara')
    res, diag, logged, core = stepped_run()
    windows = np.array(res.windows)
    print('\nserial loop windows (' + ', '.join(TIMING_FIELDS) + '):\n', windows)
    assert diag['watchdog_trips'] == 0 and diag['reconnects'] == 0
    assert len(windows) == 2  # 2.5 s of trajectory: two full windows
    rate, missed = TIMING_FIELDS.index('achieved_rate_hz'), TIMING_FIELDS.index('missed_deadlines')
    # first window: one cycle per period of the stepped clock, nothing missed
    assert windows[0, rate] == pytest.approx(RATE, rel=1e-9)
    assert windows[0, missed] == 0
    # second window: the slow cycle lost EXTRA deadlines, so EXTRA periods fewer ran in the window
    assert windows[1, missed] == EXTRA
    assert windows[1, rate] == pytest.approx((RATE * WINDOW - EXTRA) / WINDOW, rel=1e-9)
    assert res.timing.total_missed == EXTRA == res.overruns
    # jitter: the period after the slow one started EXTRA periods late; all others on the grid
    jmax = windows[1, TIMING_FIELDS.index('period_jitter_max_us')]
    assert jmax == pytest.approx(EXTRA / RATE * 1e6, rel=1e-6)
    assert windows[0, TIMING_FIELDS.index('period_jitter_max_us')] == pytest.approx(0.0, abs=1e-3)
    # the policy: EXTRA >= safe_after consecutive misses -> safe effort for recover_after periods
    assert res.policy.safe_entries == 1 and res.policy.longest == EXTRA
    assert any('ros.overrun.safe_after' in m for m in logged)
    effort = np.array(res.effort)
    zero = np.flatnonzero(~np.any(effort, axis=1))
    print('zero-effort steps:', zero, 'of', len(effort))
    assert core.safe_effort == 'zero'
    assert len(zero) == OVERRUN['recover_after'] and np.all(np.diff(zero) == 1)
    t = np.array(res.t)
    # they follow the slow cycle (its trajectory time: SLOW_CYCLE periods from the start, give or take the
    # first cycles before feedback) and the steps around them control
    assert abs(t[zero[0]] - (SLOW_CYCLE + EXTRA) / RATE) < 5 / RATE
    assert np.any(effort[zero[0] - 1]) and np.any(effort[zero[-1] + 1])
