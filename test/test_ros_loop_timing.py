"""The control loop's telemetry and overrun policy: statistics against their definitions, and over real DDS.

Without ROS: :class:`LoopTiming` against percentiles computed here from the definitions (docs/ros.md
"Loop timing") on synthetic period start times; :class:`OverrunPolicy` on hand-written miss sequences;
the settings' error messages.

Over DDS (FastDDS, loopback, the node in its own process, thread mode): a probe feeds /joint_states
and counts what arrives. Nothing depends on scheduling: a deliberately slowed step (the node run by
test/slowed_controller_node.py: a sleep of 2.5 periods) misses at least 2 deadlines however busy the
machine is, and the telemetry is compared with the probe's own counts with tolerances that a loaded
machine keeps (counts over seconds, not instants).
"""

import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from parallel import domain_id

from uk_controller.files.parameter_file import ConfigError
from uk_controller.ros.loop_timing import TIMING_FIELDS, LoopTiming, OverrunPolicy, loop_cpus, overrun_policy
from uk_controller.settings import schema as S
from uk_controller.settings.resolve import resolve

DOMAIN_ID = domain_id(78)


# ----------------------------------------------------------------------------- without ROS


def test_loop_timing_window_matches_the_definitions():
    period = 1e-3
    rng = np.random.default_rng(3)
    n = 400
    starts = np.cumsum(np.full(n, 1_000_000) + rng.integers(-200_000, 200_000, n)).astype(np.int64) + 10**12
    compute = rng.integers(10_000, 300_000, n)
    age = rng.integers(0, 2_000_000, n)
    timing = LoopTiming(period, window=1.0)
    missed_total = 0
    for k in range(n):
        timing.record(int(starts[k]), int(compute[k]), int(age[k]), -1)
        if k % 50 == 7:
            timing.miss(2)
            missed_total += 2
    end = int(starts[-1] + 1_000_000)
    values = dict(zip(TIMING_FIELDS, timing.window(end)))
    jitter = np.abs(np.diff(starts) - 1_000_000)
    assert values['achieved_rate_hz'] == pytest.approx(n / ((end - starts[0]) * 1e-9), rel=1e-12)
    assert values['period_jitter_p50_us'] == pytest.approx(np.median(jitter) / 1e3, rel=1e-12)
    assert values['period_jitter_p99_us'] == pytest.approx(np.percentile(jitter, 99) / 1e3, rel=1e-12)
    assert values['period_jitter_max_us'] == pytest.approx(jitter.max() / 1e3, rel=1e-12)
    assert values['compute_p50_us'] == pytest.approx(np.median(compute) / 1e3, rel=1e-12)
    assert values['compute_p99_us'] == pytest.approx(np.percentile(compute, 99) / 1e3, rel=1e-12)
    assert values['state_age_p50_us'] == pytest.approx(np.median(age) / 1e3, rel=1e-12)
    assert values['missed_deadlines'] == missed_total
    # the next window starts empty; the totals go on
    timing.record(end + 1_000_000, 5_000, -1, -1)
    second = dict(zip(TIMING_FIELDS, timing.window(end + 2_000_000)))
    assert second['missed_deadlines'] == 0 and math.isnan(second['state_age_p50_us'])
    assert second['period_jitter_p50_us'] == pytest.approx(abs((end + 1_000_000 - starts[-1]) - 1_000_000) / 1e3)
    assert timing.total_periods == n + 1 and timing.total_missed == missed_total


def test_a_handed_off_window_is_the_window_and_recording_goes_on_meanwhile():
    """Thread mode closes windows with hand_off (loop thread) and summarizes them elsewhere: the same
    figures as window() on the same periods (a second LoopTiming fed identically is the reference), and
    periods recorded before the summary land in the next window, not in the one being read."""
    rng = np.random.default_rng(5)
    starts = np.cumsum(np.full(900, 1_000_000) + rng.integers(-300_000, 300_000, 900)).astype(np.int64) + 10**12
    compute, age, latency = (rng.integers(1_000, 400_000, 900) for _ in range(3))
    handed, reference = LoopTiming(1e-3, window=0.3), LoopTiming(1e-3, window=0.3)
    cuts = {299: None, 599: None}
    for k in range(900):
        for timing in (handed, reference):
            timing.record(int(starts[k]), int(compute[k]), int(age[k]), int(latency[k]))
            if k % 97 == 3:
                timing.miss(1)
        if k in cuts:
            end = int(starts[k] + 1_000_000)
            assert handed.hand_off(end)
            assert not handed.hand_off(end + 1)  # not summarized yet: the window goes on, nothing lost
            expected = reference.window(end)
            cuts[k] = (expected, reference.last_latency)
        if k in (349, 649):  # the summary comes 50 periods later
            values = handed.summarize_handed_off()
            expected, latency_q = cuts[k - 50]
            assert values == expected and handed.last_latency == latency_q
            assert handed.summarize_handed_off() is None
    end = int(starts[-1] + 1_000_000)
    assert handed.hand_off(end) and handed.summarize_handed_off() == reference.window(end)
    assert handed.total_periods == reference.total_periods == 900


def test_overrun_policy_warns_goes_safe_and_recovers():
    policy = OverrunPolicy(warn_after=2, safe_after=5, recover_after=3)
    states = []
    for missed in [0, 1, 0, 1, 1, 1, 2, 0, 0, 0, 1, 0]:
        policy.update(missed)
        states.append(policy.state)
    # consecutive misses: 0 1 0 1 2 3 5 | on time 1 2 3 -> ok | 1 (< warn_after) | 0
    assert states == ['ok', 'ok', 'ok', 'ok', 'warn', 'warn', 'safe', 'safe', 'safe', 'ok', 'ok', 'ok']
    assert policy.warnings == 1 and policy.safe_entries == 1 and policy.longest == 5
    # one late wake-up that lost many deadlines counts them all
    policy = OverrunPolicy(warn_after=0, safe_after=4, recover_after=1)
    assert policy.update(4) == 'safe' and policy.update(0) == 'ok'
    off = OverrunPolicy(warn_after=0, safe_after=0)
    assert all(off.update(10) is None for _ in range(5)) and off.state == 'ok'


@pytest.mark.parametrize(
    'ros, key',
    [
        ({'loop': {'mode': 'fast'}}, 'ros.loop.mode'),
        ({'loop': {'priority': 120}}, 'ros.loop.priority'),
        ({'loop': {'cpus': [-1]}}, 'ros.loop.cpus'),
        ({'loop': {'window': 0.0}}, 'ros.loop.window'),
        ({'loop': {'spin_us': 'x'}}, 'ros.loop.spin_us'),
        ({'loop': {'mlockall': 'yes'}}, 'ros.loop.mlockall'),
        ({'loop': {'rate': 3}}, 'ros.loop.rate'),
        ({'overrun': {'safe_after': -1}}, 'ros.overrun.safe_after'),
        ({'overrun': {'recover_after': 0}}, 'ros.overrun.recover_after'),
        ({'overrun': 5}, 'ros.overrun'),
    ],
)
def test_bad_loop_settings_name_the_key(ros, key):
    with pytest.raises(ConfigError) as info:
        resolve(params={'ros': ros})
    assert str(info.value).startswith(key + ':')


def test_loop_settings_defaults():
    ros = resolve().ros
    assert ros.loop.mode == 'thread' and ros.loop.priority == 0 and loop_cpus(ros.loop) == []
    policy = overrun_policy(ros.overrun)
    assert (policy.warn_after, policy.safe_after, policy.recover_after) == (
        S.default('ros.overrun.warn_after'),
        S.default('ros.overrun.safe_after'),
        S.default('ros.overrun.recover_after'),
    )
    assert loop_cpus(resolve(None, {'ros.loop.cpus': [0, 1.0]}).ros.loop) == [0, 1]


# ----------------------------------------------------------------------------- over DDS

rclpy = pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from ros_nodes import NodeProcess, Probe  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from uk_controller.robots import load_robot  # noqa: E402

EFFORTS = '/effort_controller/commands'
TIMING = '/uk_controller_node/loop_timing'


def _diag(msg):
    """(level, message, values, stamp in s): the stamp is the node's clock when it read its counters."""
    status = next(s for s in msg.status if s.name.startswith('uk_controller_node'))
    stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
    return ord(status.level), status.message, {kv.key: kv.value for kv in status.values}, stamp


class Feeder:
    """Publishes /joint_states (the robot slightly off its start, at rest) from a thread at `rate`."""

    def __init__(self, probe, setup, rate):
        self.pub = probe.node.create_publisher(JointState, '/joint_states', 10)
        self.names = list(setup.joint_names)
        self.q = [float(v) + 0.01 for v in setup.q0]
        self.clock = probe.node.get_clock()
        self.rate = rate
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        period, nxt = 1.0 / self.rate, time.monotonic()
        while not self.stop.is_set():
            msg = JointState(name=self.names, position=self.q, velocity=[0.0] * len(self.q))
            msg.header.stamp = self.clock.now().to_msg()
            self.pub.publish(msg)
            nxt = max(nxt + period, time.monotonic() - 0.1)
            time.sleep(max(0.0, nxt - time.monotonic()))

    def close(self):
        self.stop.set()
        self.thread.join(2.0)


@pytest.fixture
def dds(tmp_path, robots):
    probe = Probe(DOMAIN_ID)
    efforts = probe.record(Float64MultiArray, EFFORTS, convert=lambda m: list(m.data))
    timing = probe.record(Float64MultiArray, TIMING, convert=lambda m: (list(m.data), m.layout.dim[0].label))
    diags = probe.record(DiagnosticArray, '/diagnostics', convert=_diag)
    started = []

    def start(params, rate, slowed_steps=None):
        feeder = Feeder(probe, load_robot(robots(params['config'])), rate)
        if slowed_steps is None:
            node = NodeProcess('uk_controller.ros.controller_node', params, DOMAIN_ID, str(tmp_path))
        else:
            path = os.pathsep.join([str(Path(__file__).parent), os.environ.get('PYTHONPATH', '')])
            node = NodeProcess(
                'slowed_controller_node',
                params,
                DOMAIN_ID,
                str(tmp_path),
                env={'SLOWED_STEPS': slowed_steps, 'PYTHONPATH': path},
            )
        started.append((feeder, node))
        assert probe.wait_for(lambda: len(efforts) > 20, 60.0), node.output()
        return node

    yield probe, efforts, timing, diags, start
    for feeder, node in started:
        feeder.close()
        code = node.stop()
        assert code == 0, node.output()
    probe.close()


@pytest.mark.ros
@pytest.mark.slow
def test_slowed_step_trips_the_overrun_policy_and_recovers(dds):
    probe, efforts, timing, diags, start = dds
    rate = 100.0
    first, count = 60, 6
    params = {
        'config': 'scara',
        'control': {'rate': rate, 'state_timeout': 1.0, 'safe_effort': 'zero'},
        'ros': {
            'diagnostics_period': 0.2,
            'loop': {'mode': 'thread'},
            'overrun': {'warn_after': 2, 'safe_after': 4, 'recover_after': 5},
        },
    }
    # steps first..first+5 sleep 2.5 periods: each misses >= 2 deadlines, two in a row reach safe_after
    node = start(params, rate, slowed_steps=f'{first},{count},{2.5 / rate}')

    def final():
        d = [x for _, x in probe.snapshot('/diagnostics')]
        return d[-1][2] if d else {}

    # wait until the slowed steps are over and the loop has been on time for a while
    assert probe.wait_for(
        lambda: int(final().get('steps', 0)) > first + count + 50 and final().get('overrun_state') == 'ok', 60.0
    ), (final(), node.output())
    d = final()
    assert int(d['overrun_safe_entries']) >= 1 and int(d['overrun_warnings']) >= 1, d
    assert int(d['overrun_consecutive_max']) >= 4, d
    # every slowed step lost at least 2 deadlines
    assert int(d['loop_missed_deadlines']) >= 2 * count, d
    # one figure (missed_deadlines once stayed 0 in thread mode beside 1123 loop misses)
    assert d['missed_deadlines'] == d['loop_missed_deadlines'], d
    sent = [e for _, e in probe.snapshot(EFFORTS)]
    zero = [i for i, e in enumerate(sent) if not np.any(e)]
    # the probe saw the safe effort (zero) between computed (non-zero) efforts: controlling, safe, controlling
    assert zero, 'no safe effort was published'
    assert np.any(sent[0]) and np.any(sent[-1]) and zero[0] > 0
    assert all(np.isfinite(e).all() for e in sent)
    levels = [(lvl, msg) for _, (lvl, msg, _v, _s) in probe.snapshot('/diagnostics')]
    assert any(lvl == 2 and 'ros.overrun.safe_after' in msg for lvl, msg in levels), levels
    assert levels[-1] == (0, 'controlling'), levels[-1]
    assert 'overrun' in node.output()


@pytest.mark.ros
@pytest.mark.slow
def test_telemetry_matches_an_independent_probe(dds):
    probe, efforts, timing, diags, start = dds
    rate = 200.0
    params = {
        'config': 'five_bar',
        'control': {'rate': rate, 'state_timeout': 1.0},
        'ros': {'diagnostics_period': 0.5, 'loop': {'mode': 'thread', 'window': 0.5}},
    }
    node = start(params, rate)
    assert probe.wait_for(lambda: len(timing) >= 2, 30.0), node.output()
    probe.clear(TIMING)
    probe.clear(EFFORTS)
    probe.clear('/diagnostics')
    assert probe.wait_for(
        lambda: len(probe.snapshot(TIMING)) >= 7 and len(probe.snapshot('/diagnostics')) >= 6, 60.0
    ), node.output()
    windows = probe.snapshot(TIMING)
    got = probe.snapshot(EFFORTS)
    diag = [(t, v, stamp) for t, (_l, _m, v, stamp) in probe.snapshot('/diagnostics') if 'loop_periods' in v]
    label = windows[0][1][1]
    assert label.split(',') == list(TIMING_FIELDS)
    # (1) achieved rate vs the probe's receive rate of efforts, over the same windows
    t0, t1 = windows[0][0], windows[-1][0]
    received = sum(1 for t, _ in got if t0 < t <= t1)
    probe_rate = received / (t1 - t0)
    # windows 1..k cover (t0, t1]; each is ~0.5 s long: its periods = achieved_rate * its length
    claimed = np.mean([w[1][0][0] for w in windows[1:]])
    assert claimed == pytest.approx(probe_rate, rel=0.2), (claimed, probe_rate, [w[1][0] for w in windows])
    # (2) periods run + deadlines missed = periods elapsed between the two diagnostics (missed ones are not
    # hidden), on the clock the node stamped them with when it read the counters: how late each reached
    # the probe (a loaded machine delays deliveries by tens of ms) does not enter
    (ta, va, stamp_a), (tb, vb, stamp_b) = diag[0], diag[-1]
    run = int(vb['loop_periods']) - int(va['loop_periods'])
    missed = int(vb['loop_missed_deadlines']) - int(va['loop_missed_deadlines'])
    elapsed = (stamp_b - stamp_a) * rate
    assert run + missed == pytest.approx(elapsed, rel=0.1, abs=20), (run, missed, elapsed)
    # (3) one effort per period run: the probe's count of efforts between the two diagnostics
    between = sum(1 for t, _ in got if ta < t <= tb)
    assert between == pytest.approx(run, rel=0.1, abs=20), (between, run)
    # (4) the window statistics are ordered as quantiles must be, and sum up with the totals
    for values, _label in (w[1] for w in windows):
        assert values[1] <= values[2] <= values[3] and values[4] <= values[5] and values[7] >= 0
    # windows that reached the probe well before the last diagnostics were counted in its total
    assert sum(w[1][0][7] for w in windows if w[0] < tb - 0.2) <= int(vb['loop_missed_deadlines'])
