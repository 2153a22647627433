"""Memory of the control step: no new Pinocchio Data, Python allocations per step, RSS.

    .venv/bin/python benchmarks/memory.py [--quick] [--robots ...]   (options: uk-controller bench --help)

The same table as ``uk-controller bench --tables memory`` (uk_controller/benchmarks/memory.py).
"""
import sys

from uk_controller.bench import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:], tables=['memory']))
