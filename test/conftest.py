"""Fixtures shared by all tests, and the check that every test carries the markers it needs.

Markers (registered in setup.cfg, ``--strict-markers``):

- ``ros``: starts rclpy (a Context, a node, DDS) in the test process or in a node subprocess;
- ``serial``: opens a pseudo-terminal with a device emulator;
- ``slow``: starts a process or has numba compile a robot's kernels (refused in any other test), or takes
  tens of seconds or more on a 2-core machine.

``./scripts/test.sh -m "not ros and not serial and not slow"`` is the quick core suite.
A test without ``ros`` that initialises rclpy, or without ``serial`` that opens a
pty, fails (see :func:`pytest_runtest_protocol`), so a ``-m "not ros"`` selection
never starts DDS. A test without ``slow`` that starts a process or has numba compile a robot's kernel (or
load one from the on-disk cache: that is a compile on a fresh clone) fails too, so ``-m "not slow"``
starts no interpreter and compiles no robot, whatever the state of the cache.

``scripts/test.sh`` runs the suite in pytest-xdist workers: each worker has its own block of ROS
domain ids and numba compiles each kernel once for all of them (test/parallel.py).
"""

import _posixsubprocess
import os
import signal
import subprocess
import sys

import pytest

# bench/ (the benchmarks, beside the package in the checkout; not installed) is importable as `bench`
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
from parallel import DEFAULT_DOMAIN, domain_id, serialize_numba_compiles, turn  # noqa: E402

try:  # property tests draw the same examples on every run, and never fail because the machine is busy
    from hypothesis import HealthCheck
    from hypothesis import settings as hypothesis_settings

    hypothesis_settings.register_profile(
        'suite',
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    hypothesis_settings.load_profile('suite')
except ImportError:  # hypothesis comes with the test extra
    pass

# Tests send SIGINT to the commands they start, as a terminal or ``ros2 launch`` does. A runner started as a
# background job of a non-interactive shell (CI scripts, ``cmd &``) inherits SIGINT ignored, its children
# would too, and the commands keep an inherited SIG_IGN (as Python does): the tests would then measure how
# pytest was started. A Python handler here resets to the default in every child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# This worker's domain for DDS traffic that names no id (rclpy.init() without domain_id, a node started
# without ros_env): never the one of another worker, nor 0, the default of a user's own ROS graph.
os.environ['ROS_DOMAIN_ID'] = str(domain_id(DEFAULT_DOMAIN))
# Before the workers start (this file is imported by xdist's controller too): drops the caches of edited
# kernels once, then makes each compile exclusive across the run's processes.
serialize_numba_compiles()

#: Set in the environment of a test that is not marked ``ros``: a node subprocess it starts
#: stops at rcl's start-up check (exit 102, the message names this value).
NOT_MARKED_ROS = 'uk_test_not_marked_ros'

try:  # loaded before any test changes RMW_IMPLEMENTATION (rcl checks it on load)
    import rclpy.context as _rclpy_context
except ImportError:  # no ROS extra: nothing to guard
    _rclpy_context = None


def _refuse(marker, what, seen=None):
    """A stand-in that raises naming the missing marker; `seen` (a list) also records the refusal, so a test
    whose code swallows the exception (a warm-up step that reports errors later) still fails."""

    def refuse(*args, **kwargs):
        message = f'this test {what} but is not marked @pytest.mark.{marker} (test/conftest.py)'
        if seen is not None:
            seen.append(message)
        raise RuntimeError(message)

    return refuse


#: what a test without ``slow`` did that only ``slow`` tests may do (messages of :func:`_refuse`)
_NOT_QUICK = pytest.StashKey[list]()
#: the ways a test starts a process: every subprocess.Popen (run, check_output, ...), multiprocessing's
#: spawn and forkserver (_posixsubprocess), fork, posix_spawn, system
_PROCESS_STARTS = (
    (subprocess.Popen, '_execute_child'),
    (_posixsubprocess, 'fork_exec'),
    *((os, name) for name in ('fork', 'forkpty', 'posix_spawn', 'posix_spawnp', 'system') if hasattr(os, name)),
)


def _keep_quick(mp, seen):
    """Refuse, for one test without ``slow``, starting a process and numba compiling a robot's kernel
    (every kernel but the light ones, :func:`_light_kernel`).

    ``Dispatcher.compile`` runs for each kernel signature the process does not hold yet, and compiles it,
    or loads it from the on-disk cache (which a fresh clone does not have): refusing it there makes the
    rule independent of the cache. In a ``-m "not slow"`` run no test compiles such a kernel, so a test
    that calls one is refused whichever test ran before it on its worker."""
    for owner, name in _PROCESS_STARTS:
        mp.setattr(owner, name, _refuse('slow', f'starts a process ({name})', seen))
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:  # no numba: the kernels are plain Python
        return
    allowed = Dispatcher.compile
    inside = []  # the light kernels being compiled: what they call compiles with them

    def compile(self, sig):
        function = getattr(self, 'py_func', None)
        module, name = getattr(function, '__module__', ''), getattr(function, '__qualname__', str(self))
        if inside or _light_kernel(module, name):
            inside.append(name)
            try:
                return allowed(self, sig)
            finally:
                inside.pop()
        _refuse('slow', f'has numba compile (or load from its cache) the kernel {module}.{name}', seen)()

    mp.setattr(Dispatcher, 'compile', compile)


#: kernels a test without ``slow`` may compile: one constraint row, a rotation, a trajectory sample, a small
#: dense factorization (each compiles in seconds); not the fused program of rows.py (``fused_*``)
_LIGHT_KERNELS = (
    'uk_controller.kernels.rows',
    'uk_controller.kernels.so3',
    'uk_controller.kernels.trajectory',
    'uk_controller.kernels.linalg',
)


def _light_kernel(module, name):
    """Whether kernel `name` of `module` is one of :data:`_LIGHT_KERNELS` or a test's own (defined in a test).

    Every other kernel is part of a robot's compiled step, plant or loop (the servo solve, joint limits,
    dynamics, the packed step, the compiled closed loop) or a compiled benchmark: compiling one takes
    tens of seconds to minutes on a fresh clone."""
    if module.startswith('test_'):
        return True
    return module in _LIGHT_KERNELS and not name.startswith('fused_')


def pytest_collection_modifyitems(config, items):
    """The quick tests first, then the ``slow`` ones, the ``serial`` tests last, each part in collection order.

    pytest-xdist's worksteal hands each worker a contiguous part of the collection, and a worker whose
    part is done takes the end of another's. So the first worker starts with the quick tests, which
    compile and start nothing, while the second starts with ``slow`` tests and compiles the kernels they
    share: the first worker no longer waits a minute on the second's compile of the same kernel. The
    ``serial`` tests run one after the other at the end of a worker's part (or two runs of them, if the
    other worker takes some), when every robot's kernels are compiled; the turn passes from one to the
    next (:func:`parallel.turn`), and the other workers wait for a whole run of them once instead of
    before and after each."""

    def part(item):
        if item.get_closest_marker('serial') is not None:
            return 2
        return 1 if item.get_closest_marker('slow') is not None else 0

    items.sort(key=part)  # stable: collection order within each part


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Run a test without ``ros`` with rclpy's Context.init refused (in this process) and an RMW
    implementation that does not exist (in its subprocesses), a test without ``serial`` with
    ``os.openpty`` refused.

    A ``serial`` test runs while no other xdist worker runs a test (:func:`parallel.turn`): its host and
    device emulator exchange bytes on wall-clock timeouts of tens of milliseconds, which a second worker
    compiling or simulating on the other core made them miss on a loaded 2-core machine. Consecutive
    ``serial`` tests keep the turn from one to the next (:func:`pytest_collection_modifyitems`).

    A test without ``slow`` may neither start a process nor compile a kernel (:func:`_keep_quick`)."""
    alone = item.get_closest_marker('serial') is not None
    keep = alone and nextitem is not None and nextitem.get_closest_marker('serial') is not None
    with turn(item.config, alone, keep), pytest.MonkeyPatch.context() as mp:
        if item.get_closest_marker('slow') is None:
            _keep_quick(mp, item.stash.setdefault(_NOT_QUICK, []))
        if item.get_closest_marker('ros') is None:
            mp.setenv('RMW_IMPLEMENTATION', NOT_MARKED_ROS)
            if _rclpy_context is not None:
                mp.setattr(_rclpy_context.Context, 'init', _refuse('ros', 'initialises rclpy'))
        if item.get_closest_marker('serial') is None:
            mp.setattr(os, 'openpty', _refuse('serial', 'opens a pseudo-terminal'))
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test without ``slow`` that did what only ``slow`` tests may do fails, even where its code caught the
    refusal (:func:`_keep_quick`)."""
    report = yield
    seen = item.stash.get(_NOT_QUICK, None)
    if seen:
        if report.passed:
            report.outcome = 'failed'
            report.longrepr = '\n'.join(dict.fromkeys(seen))
        seen.clear()  # reported once, in the phase that did it
    return report


@pytest.fixture(scope='session')
def robots():
    """``robots(name)``: compile (or load from the numba cache) the kernels robot `name` runs --
    its controller, its embedded plant and the compiled closed loop -- once per session; returns
    `name`. `name` is a shipped robot or a setup file's path, as for ``load_robot``.

    The kernels compile on first use (15-60 s per robot on a fresh machine) and are cached next to
    the sources. A test that starts a node subprocess or a device emulator on a clock asks for its
    robot here first, so the peer loads the cached kernels instead of compiling while the test
    waits; a test that only computes in this process needs no fixture (it compiles what it uses).
    """
    done = set()

    def compile_robot(name):
        key = str(name)
        if key not in done:
            import numpy as np

            from uk_controller.control.controller import ControllerCore
            from uk_controller.robots import load_robot
            from uk_controller.sim.closed_loop import simulate
            from uk_controller.sim.uk_plant import UKPlant

            setup = load_robot(name)
            ControllerCore(setup)  # construction runs one warm-up step
            UKPlant.from_setup(setup).step(np.zeros(setup.actuators.p), 1e-3)
            simulate(
                load_robot(name, {'simulation.duration': 0.003})
            )  # the compiled closed loop (sim/compiled_loop.py)
            done.add(key)
        return name

    return compile_robot


@pytest.fixture
def robot(request, robots):
    """The robot of ``@pytest.mark.parametrize('robot', [...], indirect=True)``, its kernels compiled
    (:func:`robots`); the value is the name given (None: no robot, nothing compiled).

    Function-scoped on purpose: a session-scoped parametrized fixture would make pytest regroup the
    tests of all modules by robot, tearing down and rebuilding module fixtures (DDS probes, nodes)."""
    name = getattr(request, 'param', None)
    return None if name is None else robots(name)


@pytest.fixture
def fast_gil_switch():
    """A short GIL switch interval while a test runs.

    The Dynamixel SDK polls the port in a Python loop; with the default 5 ms
    interval an in-process device emulator thread answers late.
    """
    old = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)
    yield
    sys.setswitchinterval(old)


def pytest_terminal_summary(terminalreporter):
    """What libsdformat made of each Gazebo robot (test/test_gazebo_conversion.py), in the run's output."""
    converter = sys.modules.get('sdformat_converter')
    if converter is None or not converter.REPORTS:
        return
    terminalreporter.section('libsdformat URDF -> SDF conversion (what gz sim spawns)')
    for label, text in converter.REPORTS:
        terminalreporter.write_line(f'== {label}')
        for line in text.rstrip().splitlines():
            terminalreporter.write_line(f'   {line}')
