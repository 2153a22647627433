"""Five-bar closures: our forward constrained dynamics vs pinocchio.constraintDynamics (C++).

    .venv/bin/python benchmarks/constraint_dynamics.py [--quick] [--robots ...]   (options: uk-controller bench --help)

The same table as ``uk-controller bench --tables pinocchio`` (uk_controller/benchmarks/constraint_dynamics.py).
"""
import sys

from uk_controller.bench import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:], tables=['pinocchio']))
