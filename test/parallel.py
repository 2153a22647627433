"""What one pytest process may use of the machine when pytest-xdist runs the suite in parallel.

A plain run and xdist worker ``gw0`` are worker 0, ``gwK`` is worker K (xdist sets
``PYTEST_XDIST_WORKER`` before conftest.py and the test modules are imported).

- :func:`domain_id`: the ROS domain id a test module names, moved to this worker's block, so that two
  workers never discover each other's nodes;
- :func:`serialize_numba_compiles`: numba compiles each kernel in one process at a time, the others
  loading what it compiled instead of compiling it again;
- :func:`turn`: a test that must run alone (device emulators on wall-clock timeouts) waits until the
  other workers' tests end, and they start none while it runs; ``test/conftest.py`` puts these tests
  last, so a worker runs them one after the other and the others wait once.
"""

import contextlib
import fcntl
import os
import re
from pathlib import Path

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
        raise RuntimeError(
            f'xdist worker {index} has no ROS domain block left (ids go up to 232): '
            'run at most 5 workers (test/parallel.py)'
        )
    return shifted


def serialize_numba_compiles():
    """Make each numba compile of a kernel exclusive across processes: one file lock per kernel.

    numba's ``Dispatcher.compile`` looks in the on-disk cache before compiling and saves what it compiled
    before returning, all under numba's process-wide compiler lock; this holds a file lock of that kernel
    around the step as well. Two xdist workers (or two runs in one checkout) that need the same kernel then
    compile it once: the second waits, then loads the first one's machine code from the cache; kernels that
    only one of them needs compile side by side. A kernel's compile nests the compiles of the kernels it
    calls, so a process holds the locks of a chain of callers while it waits for a callee's: two processes
    could only wait on each other through a call cycle, which kernels do not have. The lock files lie in
    the cache folder of the kernels (``uk_controller/kernels/__pycache__/compile-locks``, or under
    ``NUMBA_CACHE_DIR``). Returns that folder, or None (no numba, or no writable cache folder).
    """
    try:
        from uk_controller.kernels import jit  # its import drops the caches of edited kernels
    except ImportError:
        return None
    if not jit.AVAILABLE:
        return None
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.dispatcher import Dispatcher

    cache = os.environ.get('NUMBA_CACHE_DIR') or Path(jit.__file__).resolve().parent / '__pycache__'
    folder = Path(cache) / 'compile-locks'
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    original = Dispatcher.compile
    if getattr(original, 'serialized_across_processes', False):
        return folder
    held = {}  # kernel -> [file descriptor, depth]; changed only under numba's lock

    def compile(self, sig):
        function = getattr(self, 'py_func', None)
        name = f'{getattr(function, "__module__", "")}.{getattr(function, "__qualname__", id(self))}'
        key = re.sub(r'[^\w.-]', '_', name)
        # numba's lock first, then the file: the order in which numba itself nests them (a compile
        # inside a compile), so no two threads of a process wait on each other.
        with global_compiler_lock:
            entry = held.get(key)
            if entry is None:
                fd = os.open(folder / f'{key}.lock', os.O_RDWR | os.O_CREAT, 0o666)
                fcntl.flock(fd, fcntl.LOCK_EX)
                entry = held[key] = [fd, 0]
            entry[1] += 1
            try:
                return original(self, sig)
            finally:
                entry[1] -= 1
                if entry[1] == 0:
                    del held[key]
                    os.close(entry[0])  # closing the file releases the lock

    compile.serialized_across_processes = True
    Dispatcher.compile = compile
    return folder


#: the locks a run of consecutive ``serial`` tests of this worker holds from one test to the next
_held: list = []


@contextlib.contextmanager
def turn(config, alone, keep=False):
    """Run a test with the other xdist workers' tests (`alone` False), or with none of them (`alone` True).

    A readers-writer lock on two files in the run's base temporary folder (shared by its workers): every
    test holds ``room`` shared; a test that runs alone holds it exclusively, and holds ``gate`` meanwhile,
    which each test passes on its way in, so the other workers start nothing new while it waits for the
    room to empty. A test that runs alone and is followed on its worker by another one (`keep`) hands both
    locks on to it: the other workers wait once for the whole run of them, and the worker does not wait
    for the others' current tests before each one. Without xdist (no worker basetemp) this does nothing.
    """
    basetemp = getattr(config.option, 'basetemp', None)
    if not os.environ.get('PYTEST_XDIST_WORKER') or not basetemp:
        yield
        return
    if _held and not alone:
        _release(_held.pop())
    if _held:
        locks = _held.pop()
    else:
        folder = Path(basetemp).parent
        gate = os.open(folder / 'uk_turn_gate.lock', os.O_RDWR | os.O_CREAT, 0o666)
        room = os.open(folder / 'uk_turn_room.lock', os.O_RDWR | os.O_CREAT, 0o666)
        locks = (gate, room)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        except BaseException:
            _release(locks)
            raise
    try:
        yield
    finally:
        if alone and keep:
            _held.append(locks)
        else:
            _release(locks)


def _release(locks):
    """Close the lock files (closing releases the locks)."""
    for fd in locks:
        os.close(fd)
