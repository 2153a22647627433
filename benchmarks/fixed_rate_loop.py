"""Fixed-rate 1 kHz loop without ROS (sleep + spin scheduler): period jitter and missed deadlines.

    .venv/bin/python benchmarks/fixed_rate_loop.py [--quick] [--robots ...]   (options: uk-controller bench --help)

The same table as ``uk-controller bench --tables loop`` (uk_controller/benchmarks/loop.py).
"""
import sys

from uk_controller.bench import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:], tables=['loop']))
