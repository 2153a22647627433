"""uk_controller_node's period loop over real DDS: achieved rate, missed deadlines, latency, CPU.

For each robot, rate and configuration the node runs in its own process, fed by a JointState publisher in
ANOTHER process at the same rate (``python -m bench.rate_bench --feed ...``); a probe in this
process counts the effort commands that arrive and reads the node's telemetry (~/loop_timing,
/diagnostics). Configurations (CONFIGS): the loop thread on wall-clock deadlines (``deadline``,
ros.trigger timer) and phase-locked to the joint states (``state``, ros.trigger state), each with the
raw CDR transport and with rclpy's messages (ros.transport), without and with SCHED_FIFO
(ros.loop.priority), quiet and with two busy processes; rclpy's timer (the old loop) as the baseline.

Columns: achieved = effort commands received by the probe per second; node = periods the node ran per
second (its own count); missed = deadlines the node missed (its count; periods run + missed = periods
elapsed, checked by test_ros_loop_timing.py against a probe) and their share; latency = state in -> efforts out
in the node (DDS reception time of the newest state used -> the period's work done), median of the
windows' p50 and the largest window p99; CPU = the node process's user+system time / wall time (100 % = one core).

Nothing is asserted: speed depends on the machine and on its load (printed with the table). Run it
inside a private network namespace when others run DDS on the same domain.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

DOMAIN_ID = 80
#: (loop, SCHED_FIFO priority, loaded, transport); loop 'deadline': the loop thread on wall-clock deadlines
#: (ros.trigger timer), 'state': the loop thread phase-locked to the joint states (ros.trigger state),
#: 'timer': rclpy's timer (ros.loop.mode timer, the old loop; always the message path for the states)
CONFIGS = tuple(
    (loop, priority, loaded, transport)
    for loaded in (False, True)
    for priority in (0, 50)
    for loop in ('deadline', 'state')
    for transport in ('messages', 'raw')
) + (('timer', 0, False, 'messages'),)
LOOPS = {'deadline': ('thread', 'timer'), 'state': ('thread', 'state'), 'timer': ('timer', 'timer')}


def cpu_seconds(pid):
    with open(f'/proc/{pid}/stat') as handle:
        fields = handle.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def loop_thread_seconds(pid):
    """CPU seconds of the node's loop thread (named LOOP_THREAD_NAME); NaN in timer mode (no such thread)."""
    from uk_controller.control.loop_timing import LOOP_THREAD_NAME

    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{tid}/stat') as handle:
                text = handle.read()
        except FileNotFoundError:
            continue
        if text[text.index('(') + 1 : text.rindex(')')] == LOOP_THREAD_NAME:
            fields = text.rsplit(')', 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    return float('nan')


def feed(robot, rate, domain_id):
    """The JointState publisher process: the robot's start pose, stamped, at `rate` until killed."""
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState

    from uk_controller.robots import load_robot

    setup = load_robot(robot)
    rclpy.init(domain_id=domain_id)
    node = rclpy.create_node('uk_rate_feeder')
    pub = node.create_publisher(JointState, '/joint_states', qos_profile_sensor_data)
    msg = JointState(
        name=list(setup.joint_names), position=[float(v) + 0.01 for v in setup.q0], velocity=[0.0] * setup.q0.size
    )
    period = 1.0 / rate
    nxt = time.monotonic()
    try:
        while rclpy.ok():
            now = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
            pub.publish(msg)
            nxt = max(nxt + period, time.monotonic() - 10 * period)
            time.sleep(max(0.0, nxt - time.monotonic()))
    except Exception:  # noqa: BLE001 - SIGINT: rclpy's handler invalidates the context under us
        if rclpy.ok():
            raise
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def busy_processes(count):
    return [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(count)]


def one_run(probe, robot, rate, loop, priority, loaded, transport, seconds, tmp):
    from diagnostic_msgs.msg import DiagnosticArray
    from ros_nodes import NodeProcess, ros_env
    from std_msgs.msg import Float64MultiArray

    efforts = probe.record(Float64MultiArray, '/effort_controller/commands', convert=lambda m: None)
    probe.record(
        DiagnosticArray,
        '/diagnostics',  # read below through probe.snapshot
        convert=lambda m: {kv.key: kv.value for s in m.status if s.name.startswith('uk_controller') for kv in s.values},
    )
    for topic in ('/effort_controller/commands', '/diagnostics'):
        probe.clear(topic)
    load = busy_processes(2) if loaded else []
    feeder = subprocess.Popen(
        [sys.executable, '-m', 'bench.rate_bench', '--feed', robot, '--feed-rate', str(rate)], env=ros_env(DOMAIN_ID)
    )
    mode, trigger = LOOPS[loop]
    node = NodeProcess(
        'uk_controller.ros.controller_node',
        {
            'config': robot,
            'control': {'rate': float(rate), 'state_timeout': 0.5},
            'ros': {
                'diagnostics_period': 0.5,
                'trigger': trigger,
                'transport': transport,
                'loop': {'mode': mode, 'priority': priority, 'window': 0.5},
            },
        },
        DOMAIN_ID,
        tmp,
    )
    try:
        if not probe.wait_for(lambda: len(efforts) > 100, 60.0):
            return None, node.output()[-1500:]
        time.sleep(0.5)
        probe.clear('/effort_controller/commands')
        probe.clear('/diagnostics')
        t0, c0, l0 = time.monotonic(), cpu_seconds(node.proc.pid), loop_thread_seconds(node.proc.pid)
        time.sleep(seconds)
        t1, c1, l1 = time.monotonic(), cpu_seconds(node.proc.pid), loop_thread_seconds(node.proc.pid)
        got = len(probe.snapshot('/effort_controller/commands'))
        diag = [d for _, d in probe.snapshot('/diagnostics') if 'loop_periods' in d]
        load_avg = os.getloadavg()[0]
    finally:
        for proc in load:
            proc.kill()
        feeder.send_signal(2)
        node.stop()
        try:
            feeder.wait(5)
        except subprocess.TimeoutExpired:
            feeder.kill()
        for proc in load:
            proc.wait()
    out = {
        'achieved': got / (t1 - t0),
        'cpu': 100.0 * (c1 - c0) / (t1 - t0),
        'load': load_avg,
        'loop_cpu': 100.0 * (l1 - l0) / (t1 - t0),
        'setup': diag[-1].get('loop_setup', '') if diag else '',
    }
    if len(diag) >= 2:
        a, b = diag[0], diag[-1]
        periods = int(b['loop_periods']) - int(a['loop_periods'])
        missed = int(b['loop_missed_deadlines']) - int(a['loop_missed_deadlines'])
        out.update(periods=periods, missed=missed, missed_pct=100.0 * missed / max(1, periods + missed))

        def values(key):
            v = [float(d[key]) for d in diag if d.get(key, 'n/a') not in ('n/a', 'nan')]
            return np.array(v) if v else np.array([np.nan])

        out['node_rate'] = float(np.median(values('loop_achieved_rate_hz')))
        out['lat_p50'] = float(np.median(values('latency_p50_us')))
        out['lat_p99'] = float(np.max(values('latency_p99_us')))
        out['compute_p50'] = float(np.median(values('loop_compute_p50_us')))
    return out, ''


def run_table(robots, rates, seconds, configs=CONFIGS, stream=sys.stdout):
    from ros_nodes import Probe

    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    probe = Probe(DOMAIN_ID, name='uk_rate_probe')
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for robot in robots:
                for rate in rates:
                    for loop, priority, loaded, transport in configs:
                        res, why = one_run(probe, robot, rate, loop, priority, loaded, transport, seconds, tmp)
                        rows.append((robot, rate, loop, priority, loaded, transport, res, why))
                        print(
                            f'  {robot} {rate:g} Hz {loop} prio {priority} {"loaded" if loaded else "quiet"} '
                            f'{transport}: '
                            f'{res or why}',
                            file=sys.stderr,
                            flush=True,
                        )
    finally:
        probe.close()
    head = (
        f'{"robot":<10} {"Hz":>5} {"loop":<8} {"path":<8} {"sched":<10} {"machine":<7} {"achieved":>8} {"node":>7} '
        f'{"missed":>7} {"missed%":>7} {"lat p50 us":>10} {"lat p99 us":>10} {"step p50 us":>11} '
        f'{"CPU %":>6} {"loop %":>6} {"load1":>5}'
    )
    print(head, file=stream)
    print('-' * len(head), file=stream)
    for robot, rate, mode, priority, loaded, transport, r, why in rows:
        sched = f'FIFO {priority}' if priority else 'OTHER'
        if r is not None and priority and 'SCHED_FIFO' not in r.get('setup', 'SCHED_FIFO'):
            sched = 'OTHER*'  # FIFO refused (the node logged why)
        if r is None:
            print(
                f'{robot:<10} {rate:>5g} {mode:<8} {transport:<8} {sched:<10} {"loaded" if loaded else "quiet":<7} '
                f'did not run: {why.splitlines()[-1] if why else "?"}',
                file=stream,
            )
            continue
        print(
            f'{robot:<10} {rate:>5g} {mode:<8} {transport:<8} {sched:<10} {"loaded" if loaded else "quiet":<7} '
            f'{r["achieved"]:>8.1f} {r.get("node_rate", float("nan")):>7.1f} {r.get("missed", -1):>7d} '
            f'{r.get("missed_pct", float("nan")):>7.2f} {r.get("lat_p50", float("nan")):>10.0f} '
            f'{r.get("lat_p99", float("nan")):>10.0f} {r.get("compute_p50", float("nan")):>11.0f} '
            f'{r["cpu"]:>6.1f} {r["loop_cpu"]:>6.1f} {r["load"]:>5.2f}',
            file=stream,
        )
    print(
        '\nachieved: efforts received by a probe per s; node: periods run per s (its ~/loop_timing); missed: '
        'deadlines missed (node count), % of periods elapsed; lat: state received (DDS) -> efforts out '
        '(median of window p50s, largest window p99); step p50: the period\'s work (state merge, control step, '
        'the effort publish; the plotting topics only when subscribed: none here); CPU: node process, 100 % = one '
        'core (loop %: its loop thread alone; the rest is DDS, rclpy\'s executor and the other threads); load1: '
        '1-min load average at the end. '
        'loaded: two busy processes (while True: pass). loop deadline: the loop thread on wall-clock deadlines '
        '(ros.trigger timer); state: phase-locked to the joint states (ros.trigger state); timer: rclpy timer loop '
        '(ros.loop.mode timer). path: ros.transport (raw: our CDR; messages: rclpy message objects).',
        file=stream,
    )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--robots', nargs='+', default=['scara', 'five_bar', 'dual_arm'])
    parser.add_argument('--rates', nargs='+', type=float, default=[250.0, 500.0, 1000.0])
    parser.add_argument('--seconds', type=float, default=3.0)
    parser.add_argument(
        '--configs',
        nargs='+',
        default=None,
        help='subset of configurations as loop:priority:quiet|loaded:transport with loop deadline|state|timer '
        'and transport raw|messages, e.g. state:50:quiet:raw',
    )
    parser.add_argument('--feed', default=None, help=argparse.SUPPRESS)
    parser.add_argument('--feed-rate', type=float, default=500.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run the finally blocks (busy processes, nodes)
    if args.feed:
        feed(args.feed, args.feed_rate, int(os.environ.get('ROS_DOMAIN_ID', DOMAIN_ID)))
        return 0
    configs = CONFIGS
    if args.configs:
        configs = tuple(
            (
                c.split(':')[0],
                int(c.split(':')[1]),
                c.split(':')[2] == 'loaded',
                c.split(':')[3] if c.count(':') >= 3 else 'raw',
            )
            for c in args.configs
        )
    print(
        f'# uk_controller_node loop over DDS; load average at start {", ".join(f"{x:.2f}" for x in os.getloadavg())}, '
        f'{os.cpu_count()} CPUs'
    )
    run_table(args.robots, args.rates, args.seconds, configs)
    return 0


if __name__ == '__main__':
    sys.exit(main())
