"""Process entry points shared by the nodes: start, spin, clean shutdown, config errors as exit code 2."""
from __future__ import annotations

import faulthandler
import signal
import sys
import time

import rclpy
from rclpy.executors import ExternalShutdownException


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


def run(factory, name, args=None):
    """Build the node with `factory()`, spin it until SIGINT/SIGTERM, tear down cleanly.

    rclpy's signal handlers shut the context down (they also wake a wait that no
    timer would end, e.g. a stopped /clock); an error raised by a callback that
    was running at that moment is part of the shutdown, not a failure. Returns
    the exit code: 0 on a normal stop, 2 when the configuration is invalid
    (the message names the key).
    """
    rclpy.init(args=args)
    faulthandler.register(signal.SIGUSR1)      # `kill -USR1 <pid>` dumps every thread's stack
    node = None
    try:
        try:
            node = factory()
        except (ValueError, KeyError, TypeError, OSError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            rclpy.logging.get_logger(name).fatal(f'invalid configuration: {message}')
            print(f'{name}: invalid configuration: {message}', file=sys.stderr, flush=True)
            return 2
        executor = make_executor(node.ros['executor'])
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        except Exception:
            # rclpy's signal handler tears entities down from another thread; a take that
            # races with it fails (e.g. pybind11 'Unable to convert call argument') while
            # the context is still shutting down. Give the shutdown a moment to finish
            # before calling the error a failure.
            time.sleep(0.2)
            if rclpy.ok():
                raise
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
