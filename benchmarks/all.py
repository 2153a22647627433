"""Every table of issue 7 in one run (the same as ``uk-controller bench``).

    .venv/bin/python benchmarks/all.py [--quick] [--tables ...] [--pyudk-python PATH] [--rt-priority N]
"""
import sys

from uk_controller.bench import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
