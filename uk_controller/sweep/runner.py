"""Running a sweep: one run, in-process, on a local process pool, or on a Ray cluster.

Every backend calls the same :func:`run_one`, which builds the robot from the
base parameters with the run's overrides and calls
:func:`uk_controller.sim.closed_loop.simulate` (the function ``uk-controller
simulate`` uses) with the run's seed. A run's outcome depends only on its
settings, so the table is the same, bit for bit, whichever backend ran it and in
whatever order; only the measured columns (:data:`MEASURED`: wall time,
real-time factor, step time, worker) differ between any two runs.

Each worker builds and runs a few periods of the robot once when it starts
(:func:`warm_up`), which loads the numba kernels from their on-disk cache -- or
compiles them, once, if the cache is cold -- so no run pays for it.

A run that raises, returns non-finite values or diverges becomes a row with
``status`` 'failed' or 'diverged' and the ``reason``; a worker process that dies
is replaced and its run recorded as failed. Finished rows are appended to
``runs.jsonl`` in the output folder as they arrive; a resumed sweep skips every
run whose ``run_id`` is already there.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sys
import threading
import time
import traceback

import numpy as np

#: Summary metrics of a run, in table order (see :meth:`SimulationResult.summary`).
METRICS = [
    'task_error_max',
    'task_error_rms',
    'task_error_final',
    'settling_time_s',
    'closure_residual_max',
    'effort_peak',
    'saturated_fraction',
    'steps',
    'ok_steps',
    'safe_effort_steps',
    'saturated_steps',
]
#: Measured (machine- and load-dependent) columns; every other column is a function of the settings.
#: (wall_time_s: the simulation loop; run_time_s: building the robot, simulating and summarizing)
MEASURED = ['step_time_median_us', 'wall_time_s', 'real_time_factor', 'run_time_s', 'worker']


def make_context(
    robot, params, path, plant=None, transient=None, settle_tol=1e-3, diverge_at=1.0, fixed=None, convention=None
):
    """What every run of a sweep shares (picklable: sent once to each worker): the setup file as read
    (`params`, `path`), the overrides every run has (``--set``: `fixed`) and the sweep's options (`plant`:
    the plant of every run, None for each run's ``simulation.plant``)."""
    return {
        'robot': robot,
        'params': params,
        'path': str(path) if path else None,
        'plant': plant,
        'transient': transient,
        'settle_tol': settle_tol,
        'diverge_at': diverge_at,
        'fixed': dict(fixed or {}),
        'convention': convention,
    }


def build_setup(context, overrides, extra=None):
    """The RobotSetup of one run: the file with the fixed, then the run's overrides, then the sweep's
    ``--plant`` (``simulation.plant``) and `extra` ({dotted key: value} or a callable(settings) -> such a
    dict, e.g. a duration in control periods), resolved once."""
    from ..robots import setup_from_settings
    from ..settings.resolve import resolve

    merged = {**context['fixed'], **overrides}
    if context.get('plant') is not None:
        merged['simulation.plant'] = context['plant']
    if callable(extra):
        extra = extra(resolve(context['path'], merged, params=context['params']))
    return setup_from_settings(resolve(context['path'], {**merged, **(extra or {})}, params=context['params']))


def simulate_run(context, spec, progress=None):
    """``(setup, SimulationResult)`` of one run (also used to re-run chosen runs for MCAP)."""
    from ..sim.closed_loop import simulate

    setup = build_setup(context, spec['overrides'])
    # every setting from the resolved setup (the file, the fixed and the run's overrides, --plant)
    return setup, simulate(setup, seed=spec['seed'], progress=progress)


def warm_up(context):
    """Build the robot (with the first run's settings) and simulate a few periods: loads (or
    compiles, once) the compiled kernels. Never raises: a run that cannot start says so itself."""
    from ..sim.closed_loop import simulate

    start = time.perf_counter()
    try:
        simulate(build_setup(context, context.get('warm_overrides') or {}, _few_periods))
    except Exception:  # noqa: BLE001
        pass
    return time.perf_counter() - start


def _few_periods(settings):
    """A warm-up run of a few control periods (past the measurement delay; no transient)."""
    periods = 3 + settings.simulation.measurement_delay
    return {'simulation.duration': periods / settings.control.rate, 'simulation.transient': 0.0}


def _worker_name():
    return f'{socket.gethostname()}:{os.getpid()}'


def failed_row(spec, status, reason):
    row = {
        'index': spec['index'],
        'run_id': spec['run_id'],
        'seed': spec['seed'],
        'status': status,
        'reason': reason,
        **spec['overrides'],
    }
    row.update({m: math.nan for m in METRICS})
    row.update(
        {
            'step_time_median_us': math.nan,
            'wall_time_s': math.nan,
            'real_time_factor': math.nan,
            'run_time_s': math.nan,
            'worker': _worker_name(),
        }
    )
    return row


def run_one(context, spec):
    """One run -> one table row (never raises for a failure of the run itself)."""
    start = time.perf_counter()
    try:
        _, result = simulate_run(context, spec)
    except Exception as exc:  # noqa: BLE001 - every failure of a run is data for the table
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return failed_row(
            spec, 'failed', f'{type(exc).__name__}: {exc} ({os.path.basename(last.filename)}:{last.lineno})'
        )
    s = result.summary(context['transient'], context['settle_tol'])
    row = {
        'index': spec['index'],
        'run_id': spec['run_id'],
        'seed': spec['seed'],
        'status': 'ok',
        'reason': '',
        **spec['overrides'],
    }
    row.update({m: s[m] for m in METRICS if m in s})
    row.update(
        {
            'steps': int(result.t.size),
            'ok_steps': int(result.ok.sum()),
            'saturated_steps': int(result.saturated.any(axis=1).sum()),
        }
    )
    row.update(
        {
            'step_time_median_us': s['step_time_median_us'],
            'wall_time_s': s['wall_time_s'],
            'real_time_factor': s['real_time_factor'],
            'run_time_s': time.perf_counter() - start,
            'worker': _worker_name(),
        }
    )
    finite = all(np.isfinite(a).all() for a in (result.q, result.qd, result.effort, result.phi))
    if not finite:
        bad = int(np.argmax(~np.isfinite(result.phi).all(axis=1) | ~np.isfinite(result.q).all(axis=1)))
        row.update(status='diverged', reason=f'non-finite state or residual from t = {result.t[bad]:.4g} s')
    elif max(s['task_error_max'], s['closure_residual_max']) > context['diverge_at']:
        row.update(
            status='diverged',
            reason=f"task error {s['task_error_max']:.3g} or closure residual "
            f"{s['closure_residual_max']:.3g} above {context['diverge_at']:g}",
        )
    return row


# ----------------------------------------------------------------------------- local pool

_CONTEXT = None


def _die_with_parent():
    """Linux: this process gets SIGKILL when the process that started it dies (prctl PR_SET_PDEATHSIG),
    so a sweep killed outright (SIGKILL, OOM killer) leaves no worker running."""
    if not sys.platform.startswith('linux'):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the call
            os._exit(1)
    except (OSError, AttributeError):
        pass


def _pool_init(context):
    global _CONTEXT
    # Ctrl-C reaches the whole process group: the parent decides (it cancels the runs and stops us)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    _CONTEXT = context
    warm_up(context)


def _pool_run(spec):
    return run_one(_CONTEXT, spec)


def run_sequential(context, specs, on_row):
    """In this process, one run after the other (``--jobs 1``)."""
    warm_up(context)
    for spec in specs:
        on_row(run_one(context, spec))


def run_local(context, specs, on_row, jobs=None):
    """A process pool of `jobs` workers (default: every core), each warmed up once.

    Workers are spawned (not forked: numba and BLAS threads do not survive a fork)
    with one BLAS thread each. If a worker dies, the pool is rebuilt and the runs
    it lost are tried once more; a run that kills two workers is recorded as failed.
    """
    import concurrent.futures as cf
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool

    jobs = jobs or os.cpu_count() or 1
    if jobs == 1 or len(specs) <= 1:
        return run_sequential(context, specs, on_row)
    attempts = {spec['run_id']: 0 for spec in specs}
    todo = list(specs)
    saved = {k: os.environ.get(k) for k in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')}
    os.environ.update({k: '1' for k in saved})  # inherited by the spawned workers
    try:
        while todo:
            lost = []
            pool = cf.ProcessPoolExecutor(
                max_workers=min(jobs, len(todo)),
                mp_context=mp.get_context('spawn'),
                initializer=_pool_init,
                initargs=(context,),
            )
            try:
                futures = {pool.submit(_pool_run, spec): spec for spec in todo}
                for future in cf.as_completed(futures):
                    spec = futures[future]
                    try:
                        on_row(future.result())
                    except BrokenProcessPool:
                        attempts[spec['run_id']] += 1
                        if attempts[spec['run_id']] >= 2:
                            on_row(failed_row(spec, 'failed', 'worker process died during the run'))
                        else:
                            lost.append(spec)
            except BaseException:
                stop_pool(pool)  # Ctrl-C, SIGTERM: cancel the queued runs, stop the running ones now
                raise
            pool.shutdown(wait=True)
            todo = lost
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def stop_pool(pool, grace=0.5):
    """Cancel every queued run of `pool` and end its workers at once (SIGKILL after `grace` s of SIGTERM:
    a run inside a compiled chunk does not return to Python for SIGTERM's default action to matter)."""
    processes = list((getattr(pool, '_processes', None) or {}).values())
    manager = getattr(pool, '_executor_manager_thread', None)  # shutdown(wait=False) forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    end = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, end - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(1.0)
    if manager is not None:
        # the pool's manager thread sees its workers gone and closes its wake-up pipe; left running, it
        # races with concurrent.futures' exit hook, which then writes to the closed pipe ("Exception
        # ignored ... Bad file descriptor" at exit, Python 3.11)
        manager.join(5.0)


class Interrupted(KeyboardInterrupt):
    """A sweep stopped by a signal (``signal`` is its name)."""

    def __init__(self, name):
        super().__init__(name)
        self.signal = name


class StopOnSignals:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread while inside this block (the pool and
    Ray loops then cancel their runs); the previous handlers are restored afterwards."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self.old = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.old[sig] = signal.signal(sig, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        for sig in StopOnSignals.SIGNALS:  # a second Ctrl-C must not interrupt the clean-up
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signal.Signals(signum).name)

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        return False


# ----------------------------------------------------------------------------- Ray


def import_ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("--ray needs Ray: pip install 'uk-controller[sweep]' (or pip install ray)") from None
    return ray


#: how long connecting to an existing Ray cluster (--ray auto or HOST:PORT) may take before the sweep
#: fails (docs/sweep.md): a TCP connection to the address first, then Ray's own handshake
RAY_CONNECT_TIMEOUT = 30.0


def _ray_address(address):
    """The HOST:PORT a non-local `address` names (auto: $RAY_ADDRESS), or None when Ray must find it."""
    if address == 'auto':
        address = os.environ.get('RAY_ADDRESS') or None
        if address in (None, 'auto', 'local'):
            return None
    if address.startswith('ray://'):
        address = address[len('ray://') :]
    return address


def _reachable(address, timeout):
    """None when a TCP connection to HOST:PORT opens within `timeout` s, else why not."""
    host, _, port = address.rpartition(':')
    try:
        port = int(port)
    except ValueError:
        return f'{address!r} is not HOST:PORT'
    try:
        with socket.create_connection((host.strip('[]') or '127.0.0.1', port), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def ray_token_present():
    """True when a Ray authentication token is available to this process, where Ray's CLI looks for one:
    $RAY_AUTH_TOKEN, the file $RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token (Ray's token-auth docs)."""
    if os.environ.get('RAY_AUTH_TOKEN', '').strip():
        return True
    for path in (os.environ.get('RAY_AUTH_TOKEN_PATH'), os.path.join(os.path.expanduser('~'), '.ray', 'auth_token')):
        try:
            if path and os.path.getsize(path) > 0:
                return True
        except OSError:
            pass
    return False


def use_token_auth_like_ray_cli():
    """Connect to an existing cluster as ``ray start`` / the ``ray`` CLI do: with token authentication
    when a token is present and RAY_AUTH_MODE is not set. A local sweep (``ray.init()``) leaves
    ~/.ray/auth_token behind; a head started afterwards with ``ray start --head`` then requires the token,
    and a client connecting through RAY_ADDRESS without RAY_AUTH_MODE=token was refused (InvalidAuthToken)."""
    if 'RAY_AUTH_MODE' not in os.environ and ray_token_present():
        os.environ['RAY_AUTH_MODE'] = 'token'
        # Ray reads its configuration, RAY_AUTH_MODE included, once per process: when ray is imported
        # already (the CLI checks it is installed first), have it read the environment again
        raylet = sys.modules.get('ray._raylet')
        config = getattr(raylet, 'Config', None)
        if config is not None and hasattr(config, 'initialize'):
            config.initialize('')
        return True
    return False


def _init_in_thread(ray, options, timeout):
    """``ray.init(**options)`` in a helper thread, waited for in short slices, so that a signal stops the
    sweep at once (ray.init blocks in C++, where a Python signal handler cannot run) and a cluster that does
    not answer fails after `timeout` s (None: no bound)."""
    outcome = {}

    def init():
        try:
            outcome['context'] = ray.init(**options)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome['error'] = exc

    thread = threading.Thread(target=init, name='ray_init', daemon=True)
    thread.start()
    end = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        thread.join(0.1)
        if end is not None and time.monotonic() > end and thread.is_alive():
            raise TimeoutError(f'no answer within {timeout:g} s')
    if 'error' in outcome:
        raise outcome['error']
    return outcome.get('context')


def _keeping_signal_handlers(function, **kwargs):
    """``function(**kwargs)`` with the SIGINT/SIGTERM handlers it installs replaced by the previous ones."""
    if threading.current_thread() is not threading.main_thread():
        return function(**kwargs)
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return function(**kwargs)
    finally:
        for sig, handler in old.items():
            if handler is not None:
                signal.signal(sig, handler)


def start_ray(address, attempts=3, connect_timeout=None, **extra):
    """``ray.init`` for `address` ('local': a new head on 127.0.0.1 only; 'auto'; HOST:PORT).

    A head's raylet must register within Ray's fixed 30 s; on a loaded machine it may not,
    so starting is tried `attempts` times. An existing cluster must accept a TCP connection and
    answer within `connect_timeout` s (default :data:`RAY_CONNECT_TIMEOUT`). Raises RuntimeError
    with Ray's reason.
    """
    import logging

    ray = import_ray()
    options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING, **extra)
    timeout = None
    if address == 'local':
        # a head on loopback only (Ray otherwise advertises the machine's reachable address)
        os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'
        try:
            import ray._private.ray_constants as ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = False
        except (ImportError, AttributeError):
            pass
        options['_node_ip_address'] = '127.0.0.1'
    else:
        options['address'] = address
        timeout = RAY_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        target = _ray_address(address)
        if target is not None:
            why = _reachable(target, timeout)
            if why:
                raise RuntimeError(f'Ray ({address}): cannot connect to {target}: {why}')
        use_token_auth_like_ray_cli()
    for attempt in range(attempts):
        try:
            if address == 'local':
                # in this thread: Ray ties the head's processes to the life of the thread that starts them
                # (PR_SET_PDEATHSIG); our signal handlers stay (ray.init installs its own SIGTERM handler)
                return _keeping_signal_handlers(ray.init, **options)
            return _init_in_thread(ray, options, timeout)
        except TimeoutError as exc:
            raise RuntimeError(
                f'Ray ({address}) did not answer: {exc} (a Ray head listens there? `ray status --address ...` tells)'
            ) from None
        except Exception as exc:  # noqa: BLE001 - Ray raises bare Exception on a start-up timeout
            ray.shutdown()
            if attempt == attempts - 1 or 'timed out' not in str(exc):
                raise RuntimeError(f'Ray ({address}) did not start: {exc}') from None


class _RayWorker:
    """A Ray actor holding one warmed-up worker (the kernels load once per actor)."""

    def __init__(self, context):
        self.context = context
        self.warm_up_s = warm_up(context)

    def run(self, spec):
        return run_one(self.context, spec)


def run_ray(context, specs, on_row, address='auto', jobs=None):
    """The runs on a Ray cluster: `address` 'auto' (the running cluster), 'local' (start one
    on this machine, on loopback) or HOST:PORT. One actor per CPU of the cluster (or `jobs`)."""
    ray = import_ray()
    started = False
    pending, actors = {}, []
    try:
        if not ray.is_initialized():
            started = True  # (a head half-started when a signal came is shut down too)
            start_ray(address)
        actor_cls = ray.remote(num_cpus=1)(_RayWorker)
        n = jobs or max(1, int(ray.cluster_resources().get('CPU', 1)))
        queue = list(specs)

        def submit(actor):
            if queue:
                spec = queue.pop(0)
                pending[actor.run.remote(spec)] = (actor, spec)

        actors.extend(actor_cls.remote(context) for _ in range(min(n, len(queue))))
        for actor in actors:
            submit(actor)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)  # a signal is seen within 0.2 s
            if not done:
                continue
            actor, spec = pending.pop(done[0])
            try:
                row = ray.get(done[0])
            except Exception as exc:  # noqa: BLE001 - a dead actor: record the run, replace the actor
                row = failed_row(
                    spec,
                    'failed',
                    f'Ray worker failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ""}',
                )
                ray.kill(actor, no_restart=True)
                actor = actor_cls.remote(context)
                actors.append(actor)
            on_row(row)
            submit(actor)
        for actor in actors:  # free their CPUs now, not when the handles are collected
            ray.kill(actor, no_restart=True)
    except BaseException:
        # Ctrl-C, SIGTERM: cancel the running tasks and end the actors on the cluster, not only here
        for ref in list(pending):
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001
                pass
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        raise
    finally:
        if started and ray.is_initialized():
            ray.shutdown()


# ----------------------------------------------------------------------------- journal


class Journal:
    """``runs.jsonl``: one JSON row per finished run, appended and flushed as it arrives."""

    def __init__(self, path):
        self.path = path

    def load(self):
        rows = {}
        if os.path.exists(self.path):
            with open(self.path, encoding='utf-8') as fh:
                for line in fh:
                    line = line.strip()
                    if line:
                        try:
                            row = json.loads(line)
                        except json.JSONDecodeError:
                            continue  # a line cut short by an interrupted sweep
                        if not isinstance(row, dict) or 'run_id' not in row:
                            continue
                        for key in METRICS + MEASURED:  # null in the file: NaN in the table
                            if key in row and row[key] is None:
                                row[key] = math.nan
                        rows[row['run_id']] = row
        return rows

    def append(self, row):
        """One line of strict JSON (a NaN metric is written as null; :meth:`load` reads it back as NaN)."""
        from ..files.io_safety import dumps_strict

        with open(self.path, 'a', encoding='utf-8') as fh:
            fh.write(dumps_strict(row) + '\n')


class Progress:
    """``[#####.....] 12/24 runs, 1 failed, 20 s, ETA 25 s`` on stderr."""

    def __init__(self, total, stream=None, label='sweep'):
        self.total, self.done, self.bad = total, 0, 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self.label = label
        self._last = -1.0

    def update(self, row):
        self.done += 1
        self.bad += row['status'] != 'ok'
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        if not self.tty and self.done < self.total and elapsed - self._last < 5.0:
            return
        self._last = elapsed
        filled = int(25 * self.done / max(self.total, 1))
        text = (
            f"{self.label} [{'#' * filled}{'.' * (25 - filled)}] {self.done}/{self.total} runs, "
            f'{self.bad} not ok, {elapsed:.0f} s, ETA {eta:.0f} s'
        )
        self.stream.write(('\r' + text + ('\n' if self.done == self.total else '')) if self.tty else text + '\n')
        self.stream.flush()
