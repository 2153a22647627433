"""Console-script entry points that stay quiet under Ctrl-C from their first instruction on.

Python's default SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread happens
to be: in the second or more of start-up spent importing NumPy, Pinocchio and rclpy, inside
the ``except`` block that is already handling the first interrupt, in rclpy's teardown. A
terminal's Ctrl-C reaches the whole process group and ``ros2 launch`` sends its own SIGINT
right after, so two interrupts tens of milliseconds apart are the normal way a node ends, and
each could become a traceback and exit status -2 in launch's log.

Every entry point here installs, before it imports anything heavy, a handler that turns the
first SIGINT into one ``KeyboardInterrupt`` and ignores those that follow; the command's own
``main`` then installs its finer handling (``ros/node_runner.py``: a stop flag the spin loop
reads; ``uk-controller simulate``: the run ends and its partial log is kept). A SIGINT that the
process inherited as ignored (a background job of a non-interactive shell) stays ignored, as
Python itself does. ``test/test_double_interrupt.py`` sends two SIGINTs 0, 20 and 250 ms apart
at several points of start-up and checks the exit status and that no traceback is printed.
"""

from __future__ import annotations

import importlib
import signal

from .interrupts import STOP_SIGNALS, guard_interrupts, interrupt_requested, interrupt_signal

#: exit status of a command ended by Ctrl-C: nodes stop cleanly (0), the CLI reports it (130 = 128 + SIGINT)
NODE_INTERRUPTED = 0
CLI_INTERRUPTED = 130


def _report_interrupt(interrupted):
    """The exit status of a command a stop signal ended: the nodes' 0, the CLI's 128 + the signal's
    number (130 for Ctrl-C, 143 for SIGTERM), which it says on stderr."""
    if interrupted:
        import sys

        try:
            print('interrupted', file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass
        return 128 + int(interrupt_signal())
    return interrupted


#: exit status of a command that cannot start: a missing optional dependency (as a bad setting: 2)
MISSING_DEPENDENCY = 2


def _report_missing(module, name):
    """A node or command whose module imports a package that is not installed: one line naming the package
    and where it comes from (the ROS nodes: a sourced ROS 2 installation or the ``ros`` extra), exit 2."""
    import sys

    if module.startswith('uk_controller.ros.'):
        where = "source your ROS 2 installation (setup.bash), or outside ROS pip install 'uk-controller[ros]'"
    else:
        where = 'pip install it, or the extra of uk-controller that has it (README.md, Install)'
    import os

    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else module
    print(f'{script}: Python module {name!r} is not installed: {where}', file=sys.stderr)
    return MISSING_DEPENDENCY


def start(module, interrupted, announce=None):
    """Guard, then import `module` and return its ``main()``; `interrupted` if Ctrl-C came first.
    `announce()` runs first inside the guarded region (tests: "now running our code")."""
    guard_interrupts()
    try:
        if announce is not None:
            announce()
        if interrupt_requested():
            raise KeyboardInterrupt
        try:
            command = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if interrupt_requested() or (exc.name or 'uk_controller').partition('.')[0] == 'uk_controller':
                raise
            return _report_missing(module, exc.name)
        return command.main()
    except KeyboardInterrupt:
        return _report_interrupt(interrupted)
    except Exception:
        # After the first Ctrl-C an error is the interrupt in another form: a C extension whose
        # initialization it landed in reports "ImportError: initialization failed" (pybind11 raises
        # that from the KeyboardInterrupt; scipy.optimize's HiGHS wrapper while the sim node imports)
        if not interrupt_requested():
            raise
        return _report_interrupt(interrupted)
    finally:
        # The command is over; what is left is the interpreter's finalization, during which Python
        # puts a Python-level SIGINT handler back to SIG_DFL: a Ctrl-C landing there would kill the
        # process (status -2) after it had already said how it ended. An ignored SIGINT stays ignored.
        try:
            for stop_signal in STOP_SIGNALS:
                signal.signal(stop_signal, signal.SIG_IGN)
        except ValueError:
            pass


#: console script function -> (module whose main() it runs, exit status when Ctrl-C ends it)
ENTRY_POINTS = {
    'uk_controller': ('uk_controller.cli', CLI_INTERRUPTED),
    'controller_node': ('uk_controller.ros.controller_node', NODE_INTERRUPTED),
    'sim_node': ('uk_controller.ros.sim_node', NODE_INTERRUPTED),
    'serial_bridge_node': ('uk_controller.ros.serial_bridge_node', NODE_INTERRUPTED),
    'wait_for_topics': ('uk_controller.ros.wait_for_topics', NODE_INTERRUPTED),
}


def uk_controller():
    return start(*ENTRY_POINTS['uk_controller'])


def controller_node():
    return start(*ENTRY_POINTS['controller_node'])


def sim_node():
    return start(*ENTRY_POINTS['sim_node'])


def serial_bridge_node():
    return start(*ENTRY_POINTS['serial_bridge_node'])


def wait_for_topics():
    return start(*ENTRY_POINTS['wait_for_topics'])
