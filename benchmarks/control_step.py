"""ControllerCore.step per robot: median/p99, the general path, and where the time goes.

    .venv/bin/python benchmarks/control_step.py [--quick] [--robots ...]   (options: uk-controller bench --help)

The same table as ``uk-controller bench --tables step`` (uk_controller/benchmarks/step.py).
"""
import sys

from uk_controller.bench import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:], tables=['step']))
