"""The period loop of ``uk_controller_node``: its own thread (``ros.loop.mode: thread``) or rclpy's timer.

Thread mode (wall clock), ``ros.trigger: timer``: a thread outside rclpy's executor sleeps to absolute
deadlines ``d_{k+1} = d_k + T`` (loop_timing.DeadlineSleeper), takes the joint states that arrived
since the previous period from a subscription no executor waits on, runs the node's control step and
publishes from the same thread.

Thread mode, ``ros.trigger: state`` (phase-locked): the thread waits on that subscription (an rcl wait
set) and steps as soon as a newer complete state is merged, trajectory time = the state's stamp; with
no newer state ``ros.loop.fallback_periods`` periods after the last step it steps on the wall clock
(held state, then every period), so the stale-state timeout and the safe effort work as in the
fixed-rate loop. A missed period is the loop's own lateness: efforts out more than a period after
the state arrived, or a fall-back step ending more than a period after its deadline.

``ros.transport: raw``: the states are taken as CDR bytes and decoded by :mod:`.cdr` straight into
the merger (names matched once per name list); ``messages``: rclpy message objects (the reference).

Services and parameter changes run in the executor thread and take :attr:`ControlLoop.lock`, which the
loop holds only around its own step, so they never see a half-done period. SCHED_FIFO, CPU affinity
and mlockall are applied to the loop thread when asked (``ros.loop.priority``, ``ros.loop.cpus``,
``ros.loop.mlockall``) and the outcome is logged.

Timer mode (``use_sim_time`` or ``ros.loop.mode: timer``): rclpy's timer calls the node's ``on_timer``
(and under ``ros.trigger: state`` the subscription callback steps); the same statistics and overrun
policy are applied around it.

Both modes publish the window statistics on ``~/loop_timing`` (std_msgs/Float64MultiArray, order
loop_timing.TIMING_FIELDS) and hand them to ``/diagnostics``. In thread mode the loop thread only records
each period and hands a closed window over (LoopTiming.hand_off, a swap of preallocated arrays); the
quantiles, the ~/loop_timing message and the plotting topics' subscriber check run in the executor
thread (:meth:`ControlLoop.telemetry`), off the control thread.
"""

from __future__ import annotations

import collections
import functools
import gc
import math
import sys
import threading
import time

from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from . import rclpy_access
from .cdr import CdrError, JointStateDecoder
from .loop_timing import (
    LOOP_THREAD_NAME,
    TIMING_FIELDS,
    DeadlineSleeper,
    LoopTiming,
    loop_cpus,
    name_thread,
    overrun_policy,
    realtime_setup,
)

#: Python's GIL switch interval in thread mode: a loop thread that wakes while the executor thread runs
#: Python waits at most this long for the GIL (CPython's default is 5 ms, five periods at 1 kHz).
SWITCH_INTERVAL = 100e-6
#: how often the executor thread asks whether the plotting topics have subscribers and publishes a window
#: the loop handed off (ControlLoop.telemetry) [ns]
PLOT_CHECK_NS = 50_000_000
#: longest single wait of the phase-locked loop [ns] (it then re-checks stop() and waits on)
WAIT_SLICE_NS = 50_000_000
#: periods after which the loop thread freezes the garbage collector's view of start-up objects
FREEZE_AFTER = 200


def declare_loop_parameters(node, settings):
    """Declare ros.loop.* / ros.overrun.* that the YAML left out (listed by ``ros2 param dump``)."""
    for prefix, section in (('ros.loop', settings.ros.loop), ('ros.overrun', settings.ros.overrun)):
        for key, value in section.as_dict().items():
            value = loop_cpus(section) if key == 'cpus' else value
            name = f'{prefix}.{key}'
            if not node.has_parameter(name):
                if isinstance(value, list) and not value:
                    continue  # rclpy cannot declare an empty list without a type
                node.declare_parameter(name, value)


class ControlLoop:
    """Runs the node's period (see the module docstring); `node` is a ControllerNode."""

    def __init__(self, node):
        self.node = node
        self.loop, self.overrun = node.settings.ros.loop, node.settings.ros.overrun  # typed sections
        declare_loop_parameters(node, node.settings)
        self.log = node.get_logger()
        sim_time = bool(node.get_parameter('use_sim_time').value) if node.has_parameter('use_sim_time') else False
        self.sim_time = sim_time
        mode = self.loop.mode
        self.why_timer = ''
        if mode == 'thread' and sim_time:
            mode, self.why_timer = 'timer', 'use_sim_time (steps follow /clock)'
        # the loop thread takes the states itself (rclpy_access); the executor's callback without it
        take_state = mode == 'thread' and rclpy_access.can_take_and_wait()
        if mode == 'thread' and node.settings.ros.trigger == 'state' and not take_state:
            mode, self.why_timer = 'timer', 'ros.trigger: state without a subscription the loop can wait on'
        self.mode = mode
        self.threaded = mode == 'thread'
        self.take_state = take_state and self.threaded
        # ros.trigger: state on the wall clock: the loop thread waits for each new state (phase-locked)
        self.phase_locked = self.threaded and node.settings.ros.trigger == 'state'
        # ros.transport: raw -- the loop thread decodes JointState's CDR itself (cdr.py)
        self.raw_state = self.take_state and node.settings.ros.transport == 'raw'
        self.decoder = None
        self._last_warn_log = 0
        self.plots = True  # publish the plotting topics (re-checked every PLOT_CHECK_NS: telemetry)
        self.lock = threading.Lock()
        self.queue = collections.deque(maxlen=256)
        self.timing = LoopTiming(node.period, self.loop.window)
        self.policy = overrun_policy(self.overrun)
        self.warning = ''  # WARN text for /diagnostics while the policy warns
        self.safe_reason = ''  # non-empty while the policy holds the safe effort
        self.notes = []
        self._stop = threading.Event()
        self._thread = None
        self.thread_error = ''
        self.timing_pub = node.create_publisher(Float64MultiArray, '~/loop_timing', 10)
        self.timing_msg = Float64MultiArray()
        self.timing_msg.layout.dim = [
            MultiArrayDimension(label=','.join(TIMING_FIELDS), size=len(TIMING_FIELDS), stride=len(TIMING_FIELDS))
        ]
        self.telemetry_timer = node.create_timer(PLOT_CHECK_NS * 1e-9, self.telemetry) if self.threaded else None

    # ------------------------------------------------------------------ wiring into the node

    def state_callback(self):
        """The subscription callback: the node's own in timer mode, the queue's append in thread mode, None
        when the loop thread takes the states from its own subscription (no executor callback at all)."""
        if not self.threaded:
            return self.node.on_joint_state
        if self.take_state:
            return None
        queue = self.queue

        def offer(msg):
            queue.append((msg, time.time_ns()))

        return offer

    def guard(self, callback):
        """`callback` run under :attr:`lock` in thread mode (services, parameter changes)."""
        if not self.threaded:
            return callback
        lock = self.lock

        @functools.wraps(callback)
        def guarded(*args):
            with lock:
                return callback(*args)

        return guarded

    def timer_callback(self):
        """The timer's callback in timer mode: the node's on_timer with statistics and the policy.

        Period starts, gaps and windows are read on the node's clock (simulated time with use_sim_time:
        a plant at half real time is not a loop missing every other deadline); compute time on the
        monotonic clock. With the wall clock a step longer than a period is a miss too.
        """
        node, timing = self.node, self.timing
        clock = time.monotonic_ns
        ros_clock = node.get_clock()
        period_ns = timing.period_ns
        wall = not self.sim_time

        def on_timer():
            now = ros_clock.now().nanoseconds
            start = clock()
            last = timing.last_start_ns
            node.on_timer()
            compute = clock() - start
            missed = 0
            if last is not None:
                gap = now - last
                if gap > 1.5 * period_ns:
                    missed = int(round(gap / period_ns)) - 1
            if wall and compute > period_ns:
                missed += 1
            self._account(now, now + compute, missed)

        return on_timer

    def describe(self):
        if self.phase_locked:
            return (
                f'control loop: own thread, phase-locked to the joint states (fall-back '
                f'{self.loop.fallback_periods:g} periods after the last step), '
                f'transport {self.node.settings.ros.transport}; overrun: warn after '
                f'{self.overrun.warn_after}, safe effort after {self.overrun.safe_after} consecutive '
                f'missed periods'
            )
        if self.threaded:
            return (
                f'control loop: own thread, {self.sleeper_method}, spin {self.loop.spin_us:g} us, '
                f'transport {self.node.settings.ros.transport}; '
                f'overrun: warn after {self.overrun.warn_after}, safe effort after '
                f'{self.overrun.safe_after} consecutive missed deadlines'
            )
        return (
            f'control loop: rclpy timer ({self.why_timer or "ros.loop.mode: timer"}); overrun: warn after '
            f'{self.overrun.warn_after}, safe effort after {self.overrun.safe_after}'
        )

    @property
    def sleeper_method(self):
        return DeadlineSleeper().method

    def start(self):
        if self.threaded and self._thread is None:
            sys.setswitchinterval(SWITCH_INTERVAL)
            if self.take_state:
                # Built here, on the thread that builds the node (and that a SIGINT during start-up
                # stops), not in the loop thread: a Ctrl-C right after start-up had shut the
                # context down while the loop thread was still creating it (RCLError traceback).
                self._helper, self._take_sub = self._take_source()
            self._thread = threading.Thread(target=self._run, name='uk_control_loop', daemon=True)
            self._thread.start()

    def stop(self, timeout=2.0):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        helper = getattr(self, '_helper', None)
        if helper is not None and (self._thread is None or not self._thread.is_alive()):
            self._helper = None
            helper.destroy_node()

    # ------------------------------------------------------------------ the loop thread

    def _account(self, start, end, missed, age_ns=-1, latency_ns=-1):
        """Statistics, the overrun policy and (when a window closed) ~/loop_timing; start/end monotonic ns."""
        timing = self.timing
        timing.record(start, end - start, age_ns, latency_ns)
        if missed:
            timing.miss(missed)
        change = self.policy.update(missed)
        if change is not None:
            self._policy_changed(change)
        if timing.due(end):
            if self.threaded:
                timing.hand_off(end)  # statistics and ~/loop_timing in the executor thread (telemetry)
            else:
                self._publish_window(timing.window(end))

    def _publish_window(self, values):
        msg = self.timing_msg
        msg.data = [float(v) for v in values]
        self.timing_pub.publish(msg)

    def telemetry(self):
        """Thread mode, in the executor thread every PLOT_CHECK_NS (off the control thread): the
        statistics of the window the loop handed off, published on ~/loop_timing; whether the plotting
        topics (~/efforts, ~/task_error, ~/constraint_residual: a publish each per period) have
        subscribers (rqt_plot, PlotJuggler, ros2 bag): the loop publishes them only then. The timer mode
        (simulation) keeps one message per period from the start, as before."""
        node = self.node
        self.plots = any(
            pub.get_subscription_count() > 0 for pub in (node.efforts_pub, node.task_error_pub, node.residual_pub)
        )
        values = self.timing.summarize_handed_off()
        if values is not None:
            self._publish_window(values)

    def _policy_changed(self, state):
        policy = self.policy
        if state == 'warn':
            self.warning = (
                f'overrun: {policy.consecutive} consecutive missed deadlines '
                f'(ros.overrun.warn_after {policy.warn_after})'
            )
            now = time.monotonic_ns()
            if now - self._last_warn_log > 1_000_000_000:  # at most one line per second
                self._last_warn_log = now
                self.log.warn(f'{self.warning}; {policy.warnings} such runs so far')
        elif state == 'safe':
            self.warning = ''
            self.safe_reason = (
                f'overrun: {policy.consecutive} consecutive missed deadlines '
                f'(ros.overrun.safe_after {policy.safe_after}); safe effort until '
                f'{policy.recover_after} periods in a row are on time'
            )
        else:
            self.warning = ''
            self.safe_reason = ''

    def _take_source(self):
        """A subscription on a helper node that no executor spins: the loop thread takes from it."""
        import rclpy
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        helper = rclpy.create_node(
            self.node.get_name() + '_state_in', context=self.node.context, namespace=self.node.get_namespace()
        )
        sub = helper.create_subscription(
            JointState,
            self.node.settings.ros.joint_states_topic,
            lambda m: None,
            qos_profile_sensor_data,
            raw=self.raw_state,
        )
        return helper, sub

    def _run(self):
        try:
            return self._loop()
        except Exception:  # noqa: BLE001 - a shutdown racing the loop's set-up is not a failure
            if self._stop.is_set() or not self.node.context.ok():
                return None
            raise

    def _loop(self):
        node = self.node
        take = None
        raw = self.raw_state
        if self.take_state:
            take = rclpy_access.taker(self._take_sub, raw)
        name_thread(LOOP_THREAD_NAME)
        try:
            notes = realtime_setup(self.loop.priority, loop_cpus(self.loop), self.loop.mlockall)
        except Exception as exc:  # noqa: BLE001 - never let the set-up stop the loop
            notes = [f'real-time set-up failed: {exc}']
        phase = self.phase_locked
        wait_for_state = None
        if phase:
            wait_for_state = rclpy_access.subscription_waiter(node.context, self._take_sub)
            notes.append(
                f'phase-locked to the joint states (fall-back {self.loop.fallback_periods:g} periods '
                f'after the last step)'
            )
        notes.append(f'transport {"raw CDR" if raw else "messages"}')
        self.notes = notes
        sleeper = DeadlineSleeper(0 if phase else self.loop.spin_us * 1e3)
        node.get_logger().info(f'control loop thread: {"wait set" if phase else sleeper.method}; ' + '; '.join(notes))
        clock, wall = time.monotonic_ns, time.time_ns
        period_ns = self.timing.period_ns
        fallback_ns = int(round(self.loop.fallback_periods * period_ns))
        queue, lock, merger = self.queue, self.lock, node.merger
        on_state, accept, control = node.on_joint_state, node.accept_state, node.control
        match_names = merger.match
        decoder = JointStateDecoder() if raw else None
        self.decoder = decoder
        names_seen, names_match = None, None
        frozen = False
        deadline = clock() + period_ns
        try:
            while not self._stop.is_set():
                if phase:
                    wait = deadline - clock()
                    if wait > 0:
                        # releases the GIL; returns on a message or the deadline (at most WAIT_SLICE_NS,
                        # so that stop() is seen soon even with a far fall-back)
                        wait_for_state(min(wait, WAIT_SLICE_NS))  # nothing taken before the deadline: wait on
                else:
                    sleeper.sleep_until(deadline)
                start = clock()
                received = -1
                fresh = False  # a newer complete state arrived (the phase-locked step is due)
                with lock:
                    if take is not None:
                        while True:
                            got = take()
                            if got is None:
                                break
                            data, info = got
                            now = wall()
                            stamp = info.get('received_timestamp', 0) if isinstance(info, dict) else 0
                            if raw:
                                try:
                                    state = decoder.decode(data)
                                except CdrError as exc:
                                    merger.reject('malformed', f'undecodable JointState: {exc}')
                                    continue
                                names = state.names
                                if names is not names_seen:  # the decoder keeps the tuple while names repeat
                                    names_seen, names_match = names, match_names(names)
                                used = accept(names_match, state.position, state.velocity, state.stamp_ns, now)
                            else:
                                names = data.name
                                if names != names_seen:
                                    names_seen, names_match = names, match_names(names)
                                header = data.header.stamp
                                used = accept(
                                    names_match,
                                    data.position,
                                    data.velocity,
                                    header.sec * 1_000_000_000 + header.nanosec,
                                    now,
                                )
                            if used:
                                fresh = True
                                received = stamp if stamp > 0 else now
                    while queue:
                        msg, received = queue.popleft()
                        on_state(msg)
                    if phase and not fresh and start < deadline:
                        continue  # woke for a message that brought no newer state: wait on
                    now = wall()
                    age_ns = int(now - int(merger.stamp_ns.min())) if merger.complete else -1
                    # phase-locked: the trajectory time is the state's own stamp (as ros.trigger: state
                    # in timer mode); a fall-back step (no state by the deadline) runs on the wall clock
                    control(now, merger.newest_ns if fresh and phase else now)
                end = clock()
                # state in (DDS reception) -> the period's work done
                latency = wall() - received if received > 0 else -1
                if not 0 <= latency < 10_000_000_000:
                    latency = -1
                missed = 0
                if phase:
                    # the loop's own lateness only (a publisher that pauses is the state timeout's business):
                    # a state's step is missed when its efforts leave more than a period after the state
                    # arrived, a fall-back step when it ends more than a period after its deadline
                    late = latency if fresh else end - deadline
                    if late >= period_ns:
                        missed = late // period_ns
                    deadline = (start + fallback_ns) if fresh else deadline + period_ns
                    if end > deadline:
                        deadline += ((end - deadline) // period_ns + 1) * period_ns
                else:
                    deadline += period_ns
                    if end > deadline:  # overran into the next period: the lost deadlines are skipped
                        missed = (end - deadline) // period_ns + 1
                        deadline += missed * period_ns
                self._account(start, end, missed, age_ns, latency)
                if not frozen and self.timing.total_periods >= FREEZE_AFTER:
                    # start-up garbage (imports, the model, rclpy) moved out of the collector's sight:
                    # a collection during a period then only walks what the loop itself creates
                    frozen = True
                    gc.collect()
                    gc.freeze()
        except Exception as exc:  # noqa: BLE001 - a shutdown while publishing ends the loop
            if not self._stop.is_set() and node.context.ok():
                self.thread_error = f'{type(exc).__name__}: {exc}'
                node.get_logger().error(f'control loop thread stopped: {self.thread_error}')

    # ------------------------------------------------------------------ diagnostics

    def diagnostic_values(self):
        t = self.timing
        values = list(zip(('loop_' + f for f in TIMING_FIELDS), t.last))
        values += [
            ('loop_mode', self.mode),
            ('loop_setup', '; '.join(self.notes) if self.notes else '-'),
            ('loop_periods', t.total_periods),
            ('loop_missed_deadlines', t.total_missed),
            ('latency_p50_us', t.last_latency[0]),
            ('latency_p99_us', t.last_latency[1]),
            ('overrun_state', self.policy.state),
            ('overrun_consecutive_max', self.policy.longest),
            ('overrun_warnings', self.policy.warnings),
            ('overrun_safe_entries', self.policy.safe_entries),
        ]
        if self.thread_error:
            values.append(('loop_thread_error', self.thread_error))
        return [(k, v if not (isinstance(v, float) and math.isnan(v)) else 'n/a') for k, v in values]
