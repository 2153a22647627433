"""Fault injection table: for each protocol and fault, the host counts it, never lets a
torque above the limit reach the device, never sends torque on feedback or effort older
than the watchdog, goes torque-free when communication is lost, and re-arms afterwards.

Efforts are commanded at 3x the limit throughout, so any limiter hole would show up in the
emulator's record of applied efforts.
"""

import pytest

from uk_controller.hardware.faults import FAULTS, run_fault_scenario

# which host counter must move for each fault (Dynamixel's SDK swallows duplicates silently)
EXPECT = {
    'corrupt_tx': ('crc_errors',),
    'corrupt_rx': ('timeouts',),
    'drop': ('timeouts',),
    'duplicate': ('seq_errors',),
    'partial': (),
    'truncate': ('timeouts', 'crc_errors', 'seq_errors'),
    'latency': ('timeouts',),
    'silent': ('timeouts',),
    'unplug': ('reconnects',),
}
LOST = ('latency', 'silent', 'unplug')  # no valid feedback for longer than the watchdog

# can_mit: MIT replies carry no sequence number; its bus trusts replies again only after complete
# exchanges in a row (protocols/can_mit/bus.py), which is what makes 'latency' a lost link there too
CASES = [(p, f) for p in ('uk_binary', 'odrive', 'can_mit') for f in FAULTS] + [
    ('dynamixel', f) for f in ('corrupt_tx', 'drop', 'latency', 'silent', 'unplug')
]


pytestmark = [pytest.mark.serial, pytest.mark.usefixtures('fast_gil_switch')]


@pytest.mark.parametrize('protocol, fault', CASES)
def test_fault(protocol, fault):
    # host and emulated device share a stepped clock (watchdogs count cycles), so the outcome
    # does not depend on how busy the machine is; only the bus timeout is wall-clock
    r = run_fault_scenario(protocol, fault, pre=0.3, during=0.45, post=1.0)
    assert r['armed_before'], r
    # never a torque above the limit at the device
    assert r['max_effort_ratio'] <= 1.0 + 1e-6
    # torque only ever sent on fresh feedback and a fresh command
    assert r['max_feedback_age_when_sent'] <= r['watchdog'] + 1e-9
    assert r['max_effort_age_when_sent'] <= r['watchdog'] + 1e-9
    # counted
    keys = EXPECT[fault]
    if protocol == 'dynamixel' and fault == 'duplicate':
        keys = ()
    if keys:
        assert sum(r['counted'][k] for k in keys) >= 1, r['counted']
    if fault == 'partial':
        assert r['device']['partial'] >= 1 and r['counted']['crc_errors'] == 0
    if fault == 'unplug':
        assert r['counted']['io_errors'] >= 1
    # lost communication => safe: tripped (or disconnected) and the device is torque-free
    if fault in LOST:
        # the host stops torque within the watchdog (+ the cycle that notices, + one to send)
        assert r['time_to_host_off'] <= r['watchdog'] + 2 * r['period'] + 1e-9, r
        # the device is torque-free within that bound too -- except the emulated slow device
        # ('latency'), which answers each request late and handles nothing meanwhile: it acts
        # on the host's torque-off only when it reaches it in its queue (with Dynamixel's two
        # requests per cycle, after the fault window)
        if fault != 'latency':
            assert r['device_torque_off_during'], r
            assert r['time_to_safe'] <= r['watchdog'] + 2 * r['period'] + 1e-9, r
        if fault != 'unplug':
            assert r['counted_during']['watchdog_trips'] >= 1
    # recovers when the fault ends
    assert r['recovered'], r
    assert max(abs(x) for x in r['final_effort']) == pytest.approx(r['limit'], rel=3e-3)
