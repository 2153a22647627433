"""What one pytest process may use of the machine when pytest-xdist runs the suite in parallel.

A plain run and xdist worker ``gw0`` are worker 0, ``gwK`` is worker K (xdist sets
``PYTEST_XDIST_WORKER`` before conftest.py and the test modules are imported).

- :func:`domain_id`: the ROS domain id a test module names, moved to this worker's block, so that two
  workers never discover each other's nodes.
"""
import os

#: The ROS domain ids that test modules name (``DOMAIN_ID = domain_id(77)``).
BLOCK = range(60, 100)
#: The id of the worker's DDS traffic when a test names none (rclpy.init() without domain_id).
DEFAULT_DOMAIN = 60


def worker():
    """This process's worker index: 0 without xdist, K for worker gwK."""
    name = os.environ.get('PYTEST_XDIST_WORKER', '')
    return int(name[2:]) if name.startswith('gw') and name[2:].isdigit() else 0


def domain_id(base, index=None):
    """The ROS domain id of `base` (one of :data:`BLOCK`) for worker `index` (default: this process).

    Worker 0 keeps `base`; worker 1 takes the block below (20-59); workers 2 to 4 the blocks above
    (100-219), which lie past the ids that ROS 2 documents as safe on Linux (0-101: higher ids put
    DDS ports into the kernel's ephemeral port range), so ``scripts/test.sh`` runs at most 2 workers.
    """
    if base not in BLOCK:
        raise ValueError(f'ROS domain id {base} of a test is outside {BLOCK.start}-{BLOCK.stop - 1} (test/parallel.py)')
    index = worker() if index is None else index
    shifted = base if index == 0 else base - len(BLOCK) if index == 1 else base + len(BLOCK) * (index - 1)
    if not 0 <= shifted <= 232:
        raise RuntimeError(f'xdist worker {index} has no ROS domain block left (ids go up to 232): '
                           'run at most 5 workers (test/parallel.py)')
    return shifted
