"""Table ``ros_rate`` (issue 13): uk_controller_node over DDS at 250/500/1000 Hz, FIFO or not, quiet or loaded.

The measurement is uk_controller.ros.rate_bench (it needs rclpy, so it lives under ros/); run it inside
a private network namespace when others use DDS on this machine.
"""
from __future__ import annotations


def run(args):
    from ..ros import rate_bench
    rates = [250.0, 500.0, 1000.0]
    robots = [r for r in ('scara', 'five_bar', 'dual_arm') if r in args.robots] or ['scara']
    print('\n## uk_controller_node over DDS: achieved rate, missed deadlines, latency, CPU (benchmarks/ros_rate.py)')
    rate_bench.run_table(robots, rates, 1.5 if args.quick else 3.0)
