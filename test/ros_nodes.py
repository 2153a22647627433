"""Helpers for tests and benchmarks that run our nodes over real DDS (loopback only).

- :func:`ros_env`: environment for node subprocesses (ROS_DOMAIN_ID,
  ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST).
- :class:`NodeProcess`: ``python -m uk_controller.ros.<node> --ros-args --params-file``
  as a subprocess with a clean SIGINT shutdown.
- :class:`Probe`: an rclpy node in its own Context, spun in a thread, that
  records topics and publishes test input.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from uk_controller.files import rcl_yaml


def ros_env(domain_id, **extra):
    env = dict(os.environ)
    env.update(ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST', PYTHONUNBUFFERED='1')
    env.pop('ROS_STATIC_PEERS', None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def params_file(params, directory):
    """Write nested `params` as a ROS parameter file for every node; returns its path."""
    fd, path = tempfile.mkstemp(prefix='params_', suffix='.yaml', dir=directory)
    with os.fdopen(fd, 'w') as handle:
        rcl_yaml.dump({'/**': {'ros__parameters': params}}, handle)  # a bare y would be a bool to rcl
    return path


class NodeProcess:
    """One of our nodes as a subprocess (`module` e.g. 'uk_controller.ros.sim_node')."""

    def __init__(self, module, params, domain_id, directory, executable=None, extra_args=(), env=None, arguments=()):
        """`params`: a dict (written as a parameter file for every node), or the path of a parameter
        file handed to the node as it is (e.g. a shipped config/<robot>.yaml), or None (no file).
        `arguments` go before ``--ros-args`` (a launch Node's ``arguments=``)."""
        self.log_path = os.path.join(directory, module.rsplit('.', 1)[-1] + f'_{id(self)}.log')
        self._log = open(self.log_path, 'w')
        args = [executable] if executable else [sys.executable, '-m', module]
        args += [*arguments, '--ros-args']
        if params is not None:
            path = params if isinstance(params, (str, os.PathLike)) else params_file(params, directory)
            args += ['--params-file', str(path)]
        args += [*extra_args]
        self.proc = subprocess.Popen(
            args, env=ros_env(domain_id, **(env or {})), stdout=self._log, stderr=subprocess.STDOUT
        )

    def stop(self, timeout=60.0):
        """SIGINT, wait; returns the exit code (kills after `timeout`)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGUSR1)  # stack dump into the log, then kill
                time.sleep(0.5)
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def wait_for_output(self, text, timeout=120.0):
        """True once `text` is in the node's output (False if it exits or `timeout` passes first).

        A generous timeout: a busy machine delays the start, not the result."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.output():
                return True
            if self.proc.poll() is not None:
                return text in self.output()
            time.sleep(0.05)
        return False

    def interrupt_twice(self, gap=0.0, timeout=30.0):
        """Ctrl-C on ``ros2 launch``: SIGINT (the terminal's, to the process group), then launch's own
        SIGINT `gap` s later. Returns the exit code (kills after `timeout`)."""
        self.proc.send_signal(signal.SIGINT)
        if gap:
            time.sleep(gap)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.stop(timeout)

    def output(self):
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path) as handle:
            return handle.read()


def reliable(depth=10000):
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


class Probe:
    """A test node in its own rclpy Context and thread."""

    def __init__(self, domain_id, name='uk_test_probe'):
        os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self.records = {}
        self.subscriptions = {}
        self._stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        while not self._stop and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # context shutting down
                if self._stop:
                    return
                raise

    def record(self, msg_type, topic, qos=None, convert=None):
        """Record (receive time, converted message) of `topic`; returns the live list (one subscription per topic)."""
        if topic in self.records:
            return self.records[topic]
        store = self.records.setdefault(topic, [])

        def callback(msg):
            item = (time.monotonic(), convert(msg) if convert else msg)
            with self.lock:
                store.append(item)

        self.subscriptions[topic] = self.node.create_subscription(msg_type, topic, callback, qos or reliable())
        return store

    def matched_publishers(self, topic):
        """Publishers matched by the probe's own subscription of `topic` (reader side: from then on its
        messages reach the probe), unlike :meth:`publishers`, which counts graph entries."""
        return self.subscriptions[topic].get_publisher_count()

    def snapshot(self, topic):
        with self.lock:
            return list(self.records.get(topic, []))

    def clear(self, topic):
        with self.lock:
            self.records.get(topic, []).clear()

    def wait_for(self, predicate, timeout, interval=0.02):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            time.sleep(interval)
        return predicate()

    def publishers(self, topic):
        return self.node.count_publishers(topic)

    def close(self):
        self._stop = True
        self.thread.join(5.0)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
