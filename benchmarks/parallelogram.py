"""Seed 002's five-bar parallelogram against the paper's Tables 7-12: every pseudo-inverse method, with and without Baumgarte.

    .venv/bin/python benchmarks/parallelogram.py [--tol 1e-6 1e-8 1e-10] [--tf 20] [--rcond tol 1e-5]
                                                  [--integrator BDF-compiled|LSODA|BDF|...]
                                                  [--methods svd varga ...]

The model, the compiled Gear/BDF integrator and the tables are uk_controller.benchmarks
(parallelogram_model, bdf, parallelogram, parallelogram_paper); ``uk-controller bench --tables
parallelogram`` prints the short table of the same runs.
"""
import sys

from uk_controller.benchmarks.parallelogram_paper import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
