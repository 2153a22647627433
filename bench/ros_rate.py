"""Table ``ros_rate``: uk_controller_node over DDS at 250/500/1000 Hz: the fixed-rate and the
phase-locked loop, raw CDR and rclpy messages, FIFO or not, quiet or loaded.

The measurement is bench.rate_bench (it needs rclpy, so it lives under ros/); run it inside
a private network namespace when others use DDS on this machine.
"""

from __future__ import annotations

import sys


def run(args):
    from . import rate_bench

    rates = [250.0, 500.0, 1000.0]
    robots = [r for r in ('scara', 'five_bar', 'dual_arm') if r in args.robots] or ['scara']
    print('\n## uk_controller_node over DDS: achieved rate, missed deadlines, latency, CPU (bench/ros_rate.py)')
    # a compact set for the whole-suite run; ``python -m bench.ros_rate`` runs all of CONFIGS
    configs = (
        ('deadline', 0, False, 'raw'),
        ('state', 0, False, 'raw'),
        ('deadline', 50, False, 'raw'),
        ('deadline', 50, False, 'messages'),
        ('state', 50, False, 'raw'),
        ('state', 50, False, 'messages'),
        ('state', 50, True, 'raw'),
        ('timer', 0, False, 'messages'),
    )
    rate_bench.run_table(robots, rates, 1.5 if args.quick else 3.0, configs)


def main(argv=None):
    """``python -m bench.ros_rate [options]``: the loop table alone, with its own
    options (bench.rate_bench.main); ``--legacy``: the earlier per-executor table
    (bench.rate_bench_legacy)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if '--legacy' in argv:
        from . import rate_bench_legacy

        sys.argv = [sys.argv[0]] + argv
        return rate_bench_legacy.main()
    from . import rate_bench

    return rate_bench.main(argv)


if __name__ == '__main__':
    sys.exit(main())
