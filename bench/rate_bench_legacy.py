"""uk_controller_node over real DDS (FastDDS, loopback): control rate, latency, CPU, memory.

    python -m bench.ros_rate [--robots scara five_bar dual_arm] [--rates 250 500 1000] [--seconds 3]
        the loop-thread table (bench.rate_bench): the node's loop thread with and without
        SCHED_FIFO, quiet and loaded, and the rclpy timer as baseline; the feeder in another process
    python -m bench.ros_rate --legacy [--executors ...]
        the earlier table below (timer mode per executor, state-triggered ping-pong latency)

Run it in a private network namespace when others use DDS here (see README, "Benchmarks").

--legacy:

For each robot, rate and executor (rclpy's SingleThreadedExecutor and MultiThreadedExecutor):

- timer mode (the normal node): a probe publishes /joint_states at the rate; we count the effort
  commands that arrive (achieved control rate, p99 gap between commands), read missed deadlines
  and compute time from /diagnostics and the node's resident memory from /proc;
- state-triggered mode: ping-pong, one state -> one effort command; the time from publishing the
  state to receiving the command is the receive-to-publish latency including both DDS hops
  (p50, p99).

Prints a table; nothing is asserted (speed depends on the machine).
"""

import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np

DOMAIN_ID = 80
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from ros_nodes import NodeProcess, Probe  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from uk_controller.robots import load_robot  # noqa: E402


def rss_mb(pid):
    with open(f'/proc/{pid}/status') as handle:
        for line in handle:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    return float('nan')


def state_msg(probe, names, q):
    msg = JointState(name=names, position=q, velocity=[0.0] * len(q))
    msg.header.stamp = probe.node.get_clock().now().to_msg()
    return msg


def timer_run(probe, setup, robot, rate, executor, seconds, tmp):
    names, q = list(setup.joint_names), [float(v) for v in setup.q0]
    pub = probe.node.create_publisher(JointState, '/joint_states', 10)
    efforts = probe.record(Float64MultiArray, '/effort_controller/commands', convert=lambda m: None)
    probe.record(
        DiagnosticArray,
        '/diagnostics',  # read below through probe.snapshot
        convert=lambda m: {kv.key: kv.value for s in m.status if s.name.startswith('uk_controller') for kv in s.values},
    )
    probe.clear('/effort_controller/commands')
    probe.clear('/diagnostics')
    node = NodeProcess(
        'uk_controller.ros.controller_node',
        {
            'config': robot,
            'control': {'rate': float(rate), 'state_timeout': 0.5},
            'ros': {'executor': executor, 'diagnostics_period': 0.5, 'loop': {'mode': 'timer'}},
        },
        DOMAIN_ID,
        tmp,
    )
    stop = threading.Event()

    def feed():
        period = 1.0 / rate
        nxt = time.monotonic()
        while not stop.is_set():
            pub.publish(state_msg(probe, names, q))
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    probe.wait_for(lambda: len(efforts) > 50, 30.0)
    time.sleep(0.5)
    probe.clear('/effort_controller/commands')
    probe.clear('/diagnostics')
    t0 = time.monotonic()
    time.sleep(seconds)
    arrivals = np.array([t for t, _ in probe.snapshot('/effort_controller/commands')])
    diag = [d for _, d in probe.snapshot('/diagnostics') if d]
    memory = rss_mb(node.proc.pid)
    stop.set()
    feeder.join()
    node.stop()
    probe.node.destroy_publisher(pub)
    gaps = np.diff(arrivals) if arrivals.size > 1 else np.array([np.nan])
    first, last = (diag[0], diag[-1]) if diag else ({}, {})
    missed = int(last.get('missed_deadlines', 0)) - int(first.get('missed_deadlines', 0)) if diag else -1
    steps = int(last.get('steps', 0)) - int(first.get('steps', 0)) if diag else 0
    compute = (
        np.mean([float(d['compute_time_mean_ms']) for d in diag if 'compute_time_mean_ms' in d]) if diag else np.nan
    )
    return {
        'achieved_hz': arrivals.size / (time.monotonic() - t0 if arrivals.size == 0 else seconds),
        'gap_p99_ms': float(np.percentile(gaps, 99) * 1e3),
        'missed': missed,
        'steps': steps,
        'compute_ms': compute,
        'rss_mb': memory,
    }


def latency_run(probe, setup, robot, rate, executor, samples, tmp):
    names, q = list(setup.joint_names), [float(v) for v in setup.q0]
    pub = probe.node.create_publisher(JointState, '/joint_states', 10)
    got = threading.Event()
    arrivals = []

    def on_effort(msg):
        arrivals.append(time.perf_counter())
        got.set()

    sub = probe.node.create_subscription(Float64MultiArray, '/effort_controller/commands', on_effort, 10)
    node = NodeProcess(
        'uk_controller.ros.controller_node',
        {
            'config': robot,
            'control': {'rate': float(rate), 'state_timeout': 5.0},
            'ros': {'executor': executor, 'trigger': 'state'},
        },
        DOMAIN_ID,
        tmp,
    )
    deadline = time.monotonic() + 30.0
    while not got.is_set() and time.monotonic() < deadline:  # until discovery is complete
        pub.publish(state_msg(probe, names, q))
        got.wait(0.2)
    latencies = []
    period = 1.0 / rate
    for _ in range(samples):
        got.clear()
        sent = time.perf_counter()
        pub.publish(state_msg(probe, names, q))
        if got.wait(1.0):
            latencies.append(arrivals[-1] - sent)
        time.sleep(max(0.0, period - (time.perf_counter() - sent)))
    node.stop()
    probe.node.destroy_subscription(sub)
    probe.node.destroy_publisher(pub)
    lat = np.array(latencies) * 1e3
    return {
        'lat_p50_ms': float(np.percentile(lat, 50)),
        'lat_p99_ms': float(np.percentile(lat, 99)),
        'lost': samples - len(latencies),
    }


def main():
    """The --legacy table (``python -m bench.ros_rate --legacy``); reads sys.argv."""
    sys.argv.remove('--legacy')
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--robots', nargs='+', default=['scara', 'five_bar'])
    parser.add_argument('--rates', nargs='+', type=float, default=[500.0, 1000.0])
    parser.add_argument('--executors', nargs='+', default=['single_threaded', 'multi_threaded'])
    parser.add_argument('--seconds', type=float, default=3.0)
    parser.add_argument('--samples', type=int, default=500)
    args = parser.parse_args()
    probe = Probe(DOMAIN_ID, name='uk_rate_probe')
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for robot in args.robots:
                setup = load_robot(robot)
                for rate in args.rates:
                    for executor in args.executors:
                        t = timer_run(probe, setup, robot, rate, executor, args.seconds, tmp)
                        lat = latency_run(probe, setup, robot, rate, executor, args.samples, tmp)
                        rows.append((robot, rate, executor, t, lat))
                        print(f'  {robot} {rate:g} Hz {executor}: {t} {lat}', file=sys.stderr, flush=True)
        finally:
            probe.close()
    head = (
        f'{"robot":<10} {"rate Hz":>7} {"executor":<15} {"achieved Hz":>11} {"gap p99 ms":>10} '
        f'{"missed":>7} {"step ms":>7} {"lat p50 ms":>10} {"lat p99 ms":>10} {"RSS MB":>7}'
    )
    print(head)
    print('-' * len(head))
    for robot, rate, executor, t, lat in rows:
        print(
            f'{robot:<10} {rate:>7g} {executor:<15} {t["achieved_hz"]:>11.1f} {t["gap_p99_ms"]:>10.2f} '
            f'{t["missed"]:>7d} {t["compute_ms"]:>7.3f} {lat["lat_p50_ms"]:>10.3f} {lat["lat_p99_ms"]:>10.3f} '
            f'{t["rss_mb"]:>7.1f}'
        )
    print(
        '\nmissed: control periods skipped or overrun while measuring (from /diagnostics); '
        'latency: state published -> effort received, both DDS hops included (state-triggered node).'
    )
