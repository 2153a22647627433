"""Fault-injection scenarios: a host SafeBus against an emulated device.

``run_fault_scenario(protocol, fault)`` drives the loop in three phases --
clean, fault active, fault cleared -- while commanding efforts *above* the
limits, and reports what the host counted, whether a torque above the limit
ever reached the device, whether and when the device went torque-free, and
whether the loop re-armed afterwards. Used by the fault tests and by
bench/serial_bench.py (the fault table).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .calibration import HardwareConfig
from .emulator import IndependentJointsPlant, SteppedClock
from .registry import make_bus, make_emulator
from .safety import ARMED, SafeBus

FAULTS = {
    'corrupt_tx': {'corrupt_tx': 0.3},  # corrupted bytes device -> host
    'corrupt_rx': {'corrupt_rx': 0.3},  # corrupted bytes host -> device
    'drop': {'drop': 0.3},
    'duplicate': {'duplicate': 0.5},
    'partial': {'partial': 1.0},
    'truncate': {'truncate': 0.3},
    'latency': {'latency': 0.2},  # longer than the watchdog
    'silent': {'silent': True},
    'unplug': None,  # the port disappears, then comes back
}


def stepped_bus(hw, plant, dt, *, protocol='uk_binary', watchdog=0.05, timeout=0.05, **emulator_options):
    """A device emulator for `plant` and a SafeBus to it, both on one :class:`SteppedClock`.

    Host and device watchdogs then count cycles (the caller advances the clock by one
    period per bus cycle), so a busy machine can neither trip a watchdog nor hide a
    trip. Returns ``(clock, emulator, safe_bus)``; the emulator is started.
    """
    clock = SteppedClock()
    emu = make_emulator(protocol, plant, hw, dt=dt, clock=clock, **emulator_options).start()
    bus_hw = dataclasses.replace(hw, protocol=protocol).at_port(emu.port)
    safe = SafeBus(
        hw,
        lambda: make_bus(bus_hw, timeout=timeout),
        watchdog=watchdog,
        reconnect_interval=0.05,
        clock=clock,
    )
    return clock, emu, safe


def _device_torque_off(emu) -> bool:
    return (not emu.enabled) or not np.any(emu.tau_m)


def run_fault_scenario(
    protocol,
    fault,
    *,
    p=2,
    watchdog=0.1,
    limit=1.0,
    pre=0.3,
    during=0.5,
    post=0.8,
    period=0.004,
    baud=None,
    seed=3,
    connect_attempts=10,
):
    """Run one scenario; all durations are in control time (cycles x ``period``).

    Host and device share a :class:`~.emulator.SteppedClock` that advances by
    ``period`` per host cycle, so the watchdogs (host and device) count cycles:
    a fault lasting ``during`` is seen by both as exactly that long however
    slowly the machine runs the threads. What stays on the wall clock is the
    bus timeout (how long the host waits for an answer), i.e. only whether a
    given answer counts as missing; one spurious timeout on a busy machine is
    a single lost cycle, far from a watchdog trip. Times in the result are
    control time since the fault began (ended, for ``time_to_recover``):
    ``time_to_host_off`` until the host stopped sending torque, ``time_to_safe``
    until the device applied none.
    """
    hw = HardwareConfig.default(
        [f'm{i + 1}' for i in range(p)], np.full(p, limit), watchdog=watchdog, protocol=protocol
    )
    plant = IndependentJointsPlant(np.full(p, 0.05), 0.5)
    clock, emu, safe = stepped_bus(
        hw, plant, period, protocol=protocol, watchdog=watchdog, timeout=min(0.03, watchdog / 3), baud=baud, seed=seed
    )
    out = {'protocol': protocol, 'fault': fault}
    try:
        for attempt in range(connect_attempts):
            if safe.connect(raise_errors=attempt == connect_attempts - 1):
                break
        out['connect_attempts'] = attempt + 1
        demand = np.array([(3.0 if i % 2 == 0 else -3.0) * limit for i in range(p)])  # above limits

        def drive(seconds, watch=None):
            for _ in range(int(round(seconds / period))):
                safe.cycle(demand, clock())
                if watch is not None:
                    watch()
                clock.advance(period)

        drive(pre)
        out['armed_before'] = safe.state == ARMED
        before = dict(safe.diagnostics())
        emu_before = dict(emu.counters)
        t_fault = clock()
        safe_at, host_off_at = [], []

        def watch():
            if not safe_at and _device_torque_off(emu):
                safe_at.append(clock() - t_fault)
            if not host_off_at and safe.state != ARMED:
                host_off_at.append(clock() - t_fault)

        if fault == 'unplug':
            emu.unplug()
        else:
            for k, v in FAULTS[fault].items():
                setattr(emu.faults, k, v)
        drive(during, watch)
        out['device_torque_off_during'] = _device_torque_off(emu)
        out['time_to_safe'] = safe_at[0] if safe_at else float('nan')
        out['time_to_host_off'] = host_off_at[0] if host_off_at else float('nan')
        during_d = dict(safe.diagnostics())
        if fault == 'unplug':
            emu.replug()
        emu.faults.clear()
        t_clear = clock()
        rearm = []

        def watch_rearm():
            if not rearm and safe.state == ARMED and emu.enabled:
                rearm.append(clock() - t_clear)

        drive(post, watch_rearm)
        after = dict(safe.diagnostics())
        # recovery = the bus re-armed with the device enabled after the fault ended; the state at
        # the window's last instant alone would call a scheduling hiccup there a failure
        out['recovered'] = bool(rearm)
        out['armed_at_end'] = safe.state == ARMED and emu.enabled
        out['time_to_recover'] = rearm[0] if rearm else float('nan')
        out['counted'] = {
            k: after.get(k, 0) - before.get(k, 0)
            for k in ('crc_errors', 'timeouts', 'seq_errors', 'io_errors', 'watchdog_trips', 'reconnects', 'bus_errors')
        }
        out['counted_during'] = {k: during_d.get(k, 0) - before.get(k, 0) for k in out['counted']}
        out['device'] = {k: emu.counters[k] - emu_before.get(k, 0) for k in emu.counters}
        out['max_effort_ratio'] = float(np.max(emu.max_abs_effort / hw.u_max))
        log = list(safe.sent_log)
        out['max_feedback_age_when_sent'] = max((r[1] for r in log), default=0.0)
        out['max_effort_age_when_sent'] = max((r[2] for r in log), default=0.0)
        out['watchdog'] = watchdog
        out['period'] = period
        out['final_effort'] = emu.joint_effort().tolist()
        out['limit'] = limit
    finally:
        safe.shutdown()
        emu.close()
    return out
