"""Closed-loop simulation on the UK plant: real-time factor (configured RK4 substeps and 1).

    .venv/bin/python benchmarks/closed_loop.py [--quick] [--robots ...]   (options: uk-controller bench --help)

The same table as ``uk-controller bench --tables simulation`` (uk_controller/benchmarks/simulation.py).
"""
import sys

from uk_controller.bench import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:], tables=['simulation']))
