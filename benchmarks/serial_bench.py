"""Serial bus throughput and latency over a pty with the device emulators, plus the fault table.

    python benchmarks/serial_bench.py [--seconds 1.0] [--no-faults]

For each protocol, baud (115200, 1 000 000) and motor count (2, 4, 6): one full control
cycle per transaction (all torques out, all feedback in), as fast as the bus answers, for
--seconds. The emulator runs in a forked process (as a real device is another processor).
A pty moves bytes at memory speed whatever baud is set, so the emulator imposes the UART
line rate itself: 10 bits per byte (8N1) for every byte received and sent. Figures are
cycles per second and round-trip latency p50/p99 per cycle in ms.

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

from uk_controller.hardware.bus import make_bus
from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.emulator import IndependentJointsPlant, make_emulator
from uk_controller.hardware.faults import FAULTS, run_fault_scenario

PROTOCOLS = ('uk_binary', 'dynamixel', 'odrive')


def throughput(protocol, baud, p, seconds):
    hw = HardwareConfig.default([f'm{i}' for i in range(p)], np.full(p, 1.0), protocol=protocol, watchdog=1.0)
    plant = IndependentJointsPlant(np.full(p, 0.05), 0.5)
    emu = make_emulator(protocol, plant, hw, dt=0.001, baud=baud)
    emu.start(process=True)
    bus = make_bus(hw, port=emu.port, baud=baud, protocol=protocol, timeout=0.2)
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--seconds', type=float, default=1.0)
    ap.add_argument('--no-faults', action='store_true')
    args = ap.parse_args(argv)
    sys.setswitchinterval(2e-4)
    print('Serial throughput (pty + emulator with line-rate emulation, one cycle = all torques + all feedback)')
    print(f'{"protocol":<10} {"baud":>8} {"motors":>6} {"cycles/s":>9} {"rtt p50 ms":>11} {"rtt p99 ms":>11} {"errors":>6}')
    for protocol in PROTOCOLS:
        for baud in (115200, 1000000):
            for p in (2, 4, 6):
                fps, p50, p99, err = throughput(protocol, baud, p, args.seconds)
                print(f'{protocol:<10} {baud:>8} {p:>6} {fps:>9.0f} {p50:>11.2f} {p99:>11.2f} {err:>6}')
                sys.stdout.flush()
    if args.no_faults:
        return 0
    print()
    print('Fault table (watchdog 100 ms, period 4 ms, efforts 3x the limit; '
          'counted = host counters during fault + recovery; times in control time, host and device '
          'on one stepped clock)')
    print(f'{"protocol":<10} {"fault":<11} {"counted":<44} {"max|u|/lim":>10} {"torque-free":>11} '
          f'{"t_host_off ms":>13} {"t_safe ms":>9} {"recovered":>9} {"t_rec ms":>8}')
    for protocol in PROTOCOLS:
        for fault in FAULTS:
            r = run_fault_scenario(protocol, fault)
            c = {k: v for k, v in r['counted'].items() if v and k != 'bus_errors'}
            counted = ', '.join(f'{k}={v}' for k, v in c.items()) or '-'
            ts = '-' if math.isnan(r['time_to_safe']) else f'{r["time_to_safe"] * 1e3:.0f}'
            tr = '-' if math.isnan(r['time_to_recover']) else f'{r["time_to_recover"] * 1e3:.0f}'
            th = '-' if math.isnan(r['time_to_host_off']) else f'{r["time_to_host_off"] * 1e3:.0f}'
            print(f'{protocol:<10} {fault:<11} {counted:<44} {r["max_effort_ratio"]:>10.3f} '
                  f'{str(r["device_torque_off_during"]):>11} {th:>13} {ts:>9} {str(r["recovered"]):>9} {tr:>8}')
            sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
