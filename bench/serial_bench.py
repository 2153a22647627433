"""Serial bus throughput and latency over a pty with the device emulators, plus the fault table.

    python -m bench.serial_bench [--seconds 1.0] [--no-faults] [--no-loop]

For each protocol, baud (115200, 1 000 000) and motor count (2, 4, 6): one full control
cycle per transaction (all torques out, all feedback in), as fast as the bus answers, for
--seconds. The emulator runs in a forked process (as a real device is another processor).
A pty moves bytes at memory speed whatever baud is set, so the emulator imposes the UART
line rate itself: 10 bits per byte (8N1) for every byte received and sent. Figures are
cycles per second and round-trip latency p50/p99 per cycle in ms.

The loop table runs `uk-controller run`'s loop (hardware.serial_loop.run_loop, real clock,
deadline sleep) for SCARA on uk_binary at 115200 and 1 000 000 baud and at 100 / 250 / 500 Hz for
2 * --seconds, and prints its loop telemetry: achieved rate, period jitter p50/p99/max, compute
(bus round trip + control step) p50/p99 and missed deadlines, over the whole run.

The fault table drives a SafeBus at a 4 ms period with a 100 ms watchdog, efforts 3x above
the limits, through clean / fault / clean phases of 0.3 / 0.5 / 0.8 s of control time: host and device
share a stepped clock (see uk_controller.hardware.faults), so the times are exact multiples of the period.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from uk_controller.hardware import registry
from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.emulator import IndependentJointsPlant
from uk_controller.hardware.faults import FAULTS, run_fault_scenario
from uk_controller.hardware.registry import make_bus, make_emulator

PROTOCOLS = registry.names()


def throughput(protocol, baud, p, seconds):
    hw = HardwareConfig.default([f'm{i}' for i in range(p)], np.full(p, 1.0), protocol=protocol, watchdog=1.0)
    plant = IndependentJointsPlant(np.full(p, 0.05), 0.5)
    emu = make_emulator(protocol, plant, hw, dt=0.001, baud=baud)
    emu.start(process=True)
    bus = make_bus(hw.at_port(emu.port, baud=baud), timeout=0.2)
    try:
        bus.open()
        bus.enable(True)
        tau = np.full(p, 0.1)
        for _ in range(5):
            bus.transact(tau)
        bus.stats.rtt.clear()
        n, errors = 0, 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            try:
                bus.transact(tau)
                n += 1
            except Exception:  # noqa: BLE001
                errors += 1
        wall = time.perf_counter() - t0
        rtt = np.fromiter(bus.stats.rtt, float) * 1e3
        bus.enable(False)
        return n / wall, np.percentile(rtt, 50), np.percentile(rtt, 99), errors
    finally:
        bus.close()
        emu.close()


def loop_row(baud, rate, seconds):
    """run_loop at `rate` against the emulator in another process; whole-run LoopTiming window."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.hardware.joint_state_assembler import JointStateAssembler
    from uk_controller.hardware.safety import SafeBus
    from uk_controller.hardware.serial_loop import run_loop
    from uk_controller.robots import load_robot

    setup = load_robot('scara', {'ros.loop.window': 60.0, 'control.rate': float(rate)})  # one window: the whole run
    hw = HardwareConfig.from_setup(setup)
    core = ControllerCore(setup)
    plant = IndependentJointsPlant(np.full(len(setup.joint_names), 0.5), 1.0)
    plant.joint_names = list(setup.joint_names)
    emu = make_emulator('uk_binary', plant, hw, dt=1.0 / rate, baud=baud)
    emu.start(process=True)
    safe = SafeBus(hw, lambda: make_bus(hw.at_port(emu.port, baud=baud), timeout=0.2), watchdog=0.2)
    try:
        safe.connect(raise_errors=True)
        res = run_loop(core, safe, JointStateAssembler(setup, hw), duration=seconds, realtime=True)
    finally:
        safe.shutdown()
        emu.close()
    timing = res.timing
    return timing.window(timing.last_start_ns + timing.period_ns), timing.total_periods


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--seconds', type=float, default=1.0)
    ap.add_argument('--no-faults', action='store_true')
    ap.add_argument('--no-loop', action='store_true')
    args = ap.parse_args(argv)
    sys.setswitchinterval(2e-4)
    print('Serial throughput (pty + emulator with line-rate emulation, one cycle = all torques + all feedback)')
    print(
        f'{"protocol":<10} {"baud":>8} {"motors":>6} {"cycles/s":>9} '
        f'{"rtt p50 ms":>11} {"rtt p99 ms":>11} {"errors":>6}'
    )
    for protocol in PROTOCOLS:
        for baud in (115200, 1000000):
            for p in (2, 4, 6):
                fps, p50, p99, err = throughput(protocol, baud, p, args.seconds)
                print(f'{protocol:<10} {baud:>8} {p:>6} {fps:>9.0f} {p50:>11.2f} {p99:>11.2f} {err:>6}')
                sys.stdout.flush()
    if not args.no_loop:
        print()
        print(f"uk-controller run's loop (scara, uk_binary, {2 * args.seconds:g} s each; times in us)")
        print(
            f'{"baud":>8} {"rate Hz":>7} {"achieved":>8} {"jit p50":>7} {"jit p99":>7} {"jit max":>7} '
            f'{"cmp p50":>7} {"cmp p99":>7} {"missed":>6} {"periods":>7}'
        )
        for baud in (115200, 1000000):
            for rate in (100, 250, 500):
                w, n = loop_row(baud, rate, 2 * args.seconds)
                print(
                    f'{baud:>8} {rate:>7} {w[0]:>8.1f} {w[1]:>7.0f} {w[2]:>7.0f} {w[3]:>7.0f} {w[4]:>7.0f} '
                    f'{w[5]:>7.0f} {w[7]:>6.0f} {n:>7}'
                )
                sys.stdout.flush()
    if args.no_faults:
        return 0
    print()
    print(
        'Fault table (watchdog 100 ms, period 4 ms, efforts 3x the limit; '
        'counted = host counters during fault + recovery; times in control time, host and device '
        'on one stepped clock)'
    )
    print(
        f'{"protocol":<10} {"fault":<11} {"counted":<44} {"max|u|/lim":>10} {"torque-free":>11} '
        f'{"t_host_off ms":>13} {"t_safe ms":>9} {"recovered":>9} {"t_rec ms":>8}'
    )
    for protocol in PROTOCOLS:
        for fault in FAULTS:
            r = run_fault_scenario(protocol, fault)
            c = {k: v for k, v in r['counted'].items() if v and k != 'bus_errors'}
            counted = ', '.join(f'{k}={v}' for k, v in c.items()) or '-'
            ts = '-' if math.isnan(r['time_to_safe']) else f'{r["time_to_safe"] * 1e3:.0f}'
            tr = '-' if math.isnan(r['time_to_recover']) else f'{r["time_to_recover"] * 1e3:.0f}'
            th = '-' if math.isnan(r['time_to_host_off']) else f'{r["time_to_host_off"] * 1e3:.0f}'
            print(
                f'{protocol:<10} {fault:<11} {counted:<44} {r["max_effort_ratio"]:>10.3f} '
                f'{str(r["device_torque_off_during"]):>11} {th:>13} {ts:>9} {str(r["recovered"]):>9} {tr:>8}'
            )
            sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
