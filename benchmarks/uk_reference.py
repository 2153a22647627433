"""UK constraint force and servo solve vs the square-root reference form, and vs pyudk (own venv).

    .venv/bin/python benchmarks/uk_reference.py [--quick] [--robots ...]   (options: uk-controller bench --help)

The same table as ``uk-controller bench --tables reference pyudk`` (uk_controller/benchmarks/reference.py, pyudk.py).
"""
import sys

from uk_controller.bench import main

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:], tables=['reference', 'pyudk']))
