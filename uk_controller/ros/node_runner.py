"""Process entry points shared by the nodes: start, spin, clean shutdown, config errors as exit code 2."""

from __future__ import annotations

import faulthandler
import signal
import sys

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.signals import SignalHandlerOptions

from ..interrupts import (
    STOP_SIGNALS,
    interrupt_requested,
    quiet_about_recorded_interrupts,
    raise_in_own_code,
    record_interrupt,
)


def params_file_hint(args):
    """For each ``--params-file`` in `args` that has a bare y/n (booleans to rcl): what to quote."""
    from ..files.rcl_yaml import explain, rcl_disagreements

    hints = []
    for flag, path in zip(args, list(args)[1:]):
        if flag == '--params-file':
            try:
                with open(path, encoding='utf-8') as handle:
                    found = rcl_disagreements(handle.read())
            except OSError:
                continue
            if found:
                hints.append(f'\n{path}: {explain(found)}')
    return ''.join(hints)


def _shut_down(executor):
    """Shut `executor` down while the context still holds its guard conditions. Left to the garbage
    collector after ``rclpy.shutdown``, its ``__del__`` destroys a guard condition whose destruction the
    context already requested and prints "Exception ignored ... InvalidHandle" with a traceback, on some
    stops and not others. Its callbacks get a second to end (a worker thread of the multi-threaded
    executor); a context that something else shut down first is part of the stop."""
    try:
        executor.shutdown(timeout_sec=1.0)
    except Exception:  # the stop is under way whatever rcl says
        pass


def make_executor(kind):
    """'single_threaded' (rclpy's default; our callbacks never run concurrently) or 'multi_threaded'.

    With 'multi_threaded' the callbacks still share the node's default mutually
    exclusive callback group, so the control state needs no locks.
    """
    if kind == 'multi_threaded':
        from rclpy.executors import MultiThreadedExecutor

        return MultiThreadedExecutor(num_threads=2)
    from rclpy.executors import SingleThreadedExecutor

    return SingleThreadedExecutor()


_STATE = {'building': False, 'stop': False}


def _stopping(signum=None, frame=None):
    """First SIGINT or SIGTERM (or the end of the spin): the process is stopping, later ones are ignored.

    ``ros2 launch`` on Ctrl-C: the terminal sends SIGINT to the process group, then launch sends its
    own SIGINT, and SIGTERM after a timeout. Python's default handler would raise KeyboardInterrupt at
    the second one wherever the teardown happens to be (destroy_node, rclpy.shutdown): a traceback and
    exit code -2 in launch's log instead of a clean 0. The handler runs in the main thread, so the stop
    never races the teardown (rclpy's own handlers, which shut the context down from another thread,
    are not installed: :func:`run`).
    """
    try:
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, signal.SIG_IGN)
    except (ValueError, OSError):  # not the main thread (nodes run in-process by tests)
        return
    if signum in STOP_SIGNALS:
        _STATE['stop'] = True
        record_interrupt(signum)  # where Python drops an exception (a __del__) the unraisable hook keeps quiet
        if _STATE['building']:
            # While the node is being built (that can take a while) only an exception stops us, raised
            # in our own code (never inside the JIT compiler or rclpy). Anywhere else the spin loop sees
            # the flag within 0.1 s.
            raise_in_own_code(frame)


def _stop_under_way():
    """A stop signal (our flag, or the guard's record) or a context shut down under us."""
    return _STATE['stop'] or interrupt_requested() or not rclpy.ok()


def _install_stop_handler():
    """Our SIGINT and SIGTERM handler, in place of rclpy's (see :func:`_stopping`)."""
    try:
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, _stopping)
        quiet_about_recorded_interrupts()
    except (ValueError, OSError):
        pass


def run(factory, name, args=None, on_stop=None):
    """Build the node with `factory()`, spin it until SIGINT/SIGTERM, tear down cleanly.

    SIGINT and SIGTERM set a flag that the spin loop reads at least every 0.1 s (a wait that no timer
    would end, e.g. on a stopped /clock, ends too). rclpy is initialized without its own signal
    handlers: theirs shut the context down from another thread, racing whatever the main thread was
    doing (building the node, a take, the teardown). Returns the exit code: 0 on a normal stop, 2 when
    the configuration is invalid (the message names the key) or the node refused its set-up once
    running (its ``refused`` attribute, e.g. serial_bridge_node at its first connect). A node whose job
    is done sets its ``finished`` attribute: the spin ends and the exit code is 0 (uk_wait_for_topics).
    A second SIGINT (launch sends one after the terminal's) is ignored: the teardown finishes and the
    exit code stays 0. A node with a ``start_loop()`` method has it called once it is built (its own
    threads start only then). `on_stop(node)` runs first in the teardown (e.g. torque off).
    """
    _install_stop_handler()
    if _STATE['stop'] or interrupt_requested():  # a Ctrl-C during the imports, whatever swallowed it
        return 0
    node = executor = None
    try:
        try:
            rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        except Exception as exc:  # rcl rejected the arguments, e.g. a parameter file it cannot parse
            print(f'{name}: {exc}{params_file_hint(sys.argv if args is None else args)}', file=sys.stderr, flush=True)
            return 2
        faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` dumps every thread's stack
        try:
            _STATE['building'] = True
            node = factory()
            _STATE['building'] = False
            if _stop_under_way():
                return 0
        except Exception as exc:
            if _stop_under_way():
                # a stop signal while building: whatever failed after it (a KeyboardInterrupt that a
                # callback swallowed) is part of the stop, not an error
                return 0
            if not isinstance(exc, (ValueError, KeyError, TypeError, OSError)):
                raise
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            what = getattr(exc, 'what', 'invalid configuration')  # e.g. serial_bridge_node.SetupRefused
            rclpy.logging.get_logger(name).fatal(f'{what}: {message}')
            print(f'{name}: {what}: {message}', file=sys.stderr, flush=True)
            return 2
        start_loop = getattr(node, 'start_loop', None)
        if start_loop is not None:
            start_loop()
        settings = getattr(node, 'settings', None)  # the node's resolved settings (node_setup)
        executor = make_executor(settings.ros.executor if settings is not None else None)
        executor.add_node(node)
        try:
            while (
                not _STATE['stop']
                and rclpy.ok()
                and getattr(node, 'refused', None) is None
                and not getattr(node, 'finished', False)
            ):
                executor.spin_once(timeout_sec=0.1)
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        refused = getattr(node, 'refused', None)  # a node that found its set-up impossible once running
        if refused is not None:
            print(f'{name}: set-up refused: {refused}', file=sys.stderr, flush=True)
            return 2
        return 0
    except KeyboardInterrupt:
        return 0
    except Exception:
        # an rcl call that fails once the stop is under way (a context some other part of the
        # process shut down) is part of the stop
        if _stop_under_way():
            return 0
        raise
    finally:
        _STATE['building'] = False
        _stopping()
        if node is not None and on_stop is not None:
            on_stop(node)
        if executor is not None:
            _shut_down(executor)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
