"""Sweeps under signals, unreachable or authenticated Ray clusters, and sizes that need confirmation.

The bounds below are generous (a loaded 2-core machine): today's code missed each of them by minutes
(a 2,500-run grid ran to its end 43 s after Ctrl-C; SIGTERM left both workers and the tracker running;
``--ray 127.0.0.1:1`` ran 420 s), so none of them measures speed.
"""

import argparse
import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from uk_controller.files.parameter_file import ConfigError
from uk_controller.sweep import cli as SC

ROOT = Path(__file__).resolve().parents[1]
#: 10,000 short planar_3r runs: minutes of work, so a sweep that finished them instead of stopping fails
BIG = ['sweep', 'planar_3r', '--grid', 'stabilization.omega=5:40:10000', '--duration', '0.5', '--no-plots']


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')]))
    env.update(extra)
    return env


def _start(args, tmp_path, **env):
    """The CLI in its own process group (as a shell runs a command: Ctrl-C reaches the whole group)."""
    log = open(tmp_path / 'stderr.log', 'w')
    proc = subprocess.Popen(
        [sys.executable, '-m', 'uk_controller.cli', *map(str, args)],
        cwd=tmp_path,
        env=_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    proc.log = tmp_path / 'stderr.log'
    return proc


def _wait_for(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def _group(pgid):
    out = subprocess.run(['pgrep', '-g', str(pgid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _stop_and_check(proc, sig, to_group, code):
    """Send `sig` once runs are being recorded; the sweep must exit with `code`, keep the finished runs
    and leave no process of its group behind."""
    journal_lines = lambda: sum(1 for _ in open(proc.out / 'runs.jsonl')) if (proc.out / 'runs.jsonl').exists() else 0  # noqa: E731
    try:
        # readiness, not speed: spawning and warming the workers may take minutes on a loaded machine
        assert _wait_for(lambda: journal_lines() >= 20 or proc.poll() is not None, 600), proc.log.read_text()
        assert proc.poll() is None, proc.log.read_text()
        if to_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        assert proc.wait(60) == code, proc.log.read_text()[-2000:]
        assert _wait_for(lambda: not _group(proc.pid), 30), f'left running: {_group(proc.pid)}'
    finally:
        for pid in _group(proc.pid):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    err = proc.log.read_text()
    assert 'Traceback' not in err, err[-3000:]
    done = journal_lines()
    assert 0 < done < 10_000 and f'{done} finished runs' in err, err[-1000:]


@pytest.mark.slow
def test_ctrl_c_cancels_the_sweep_and_stops_the_workers(tmp_path, robots):
    robots('planar_3r')  # the workers load its kernels instead of each compiling them
    proc = _start(BIG + ['--jobs', '2', '--out', tmp_path / 'out'], tmp_path)
    proc.out = tmp_path / 'out'
    _stop_and_check(proc, signal.SIGINT, to_group=True, code=130)


@pytest.mark.slow
def test_sigterm_to_the_parent_leaves_no_worker_or_tracker(tmp_path, robots):
    robots('planar_3r')  # the workers load its kernels instead of each compiling them
    proc = _start(BIG + ['--jobs', '2', '--out', tmp_path / 'out'], tmp_path)
    proc.out = tmp_path / 'out'
    _stop_and_check(proc, signal.SIGTERM, to_group=False, code=143)


@pytest.mark.slow
def test_unreachable_ray_address_fails_with_exit_2(tmp_path):
    pytest.importorskip('ray')
    proc = subprocess.run(
        [
            sys.executable,
            '-m',
            'uk_controller.cli',
            'sweep',
            'planar_3r',
            '--grid',
            'stabilization.omega=5,10',
            '--no-plots',
            '--out',
            str(tmp_path / 'out'),
            '--ray',
            '127.0.0.1:1',
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert 'cannot connect to 127.0.0.1:1' in proc.stderr and 'Traceback' not in proc.stderr, proc.stderr[-2000:]


def _args(*argv):
    parser = argparse.ArgumentParser()
    SC.add_sweep_parser(parser.add_subparsers())
    return parser.parse_args(['sweep', *argv])


def test_a_large_sweep_needs_yes(tmp_path):
    """A grid of 10^6 runs was started without a word (2.9 GB in the parent, 3.5 h)."""
    million = [
        'planar_3r',
        '--grid',
        'stabilization.omega=5:40:100',
        '--grid',
        'simulation.mass_scale=0.5:2:100',
        '--grid',
        'simulation.sensor_noise=0:1e-4:100',
    ]
    with pytest.raises(ConfigError) as err:
        SC.prepare(_args(*million))
    assert '1,000,000 runs' in str(err.value) and '--yes' in str(err.value)
    # the estimate is the grid's size: 10,000 runs pass, 11,000 do not; long runs count by their periods
    grid = [
        'planar_3r',
        '--grid',
        'stabilization.omega=5:40:10',
        '--grid',
        'simulation.mass_scale=0.5:2:10',
        '--grid',
        'simulation.sensor_noise=0:1e-4:10',
        '--duration',
        '1',
    ]
    assert len(SC.prepare(_args(*grid, '--grid', 'control.rate=250:1000:10'))[2]) == 10_000
    with pytest.raises(ConfigError) as err:
        SC.prepare(_args(*grid, '--grid', 'control.rate=250:1000:11'))
    assert '11,000 runs' in str(err.value)
    with pytest.raises(ConfigError) as err:  # 101 runs of 1000 s at 1 kHz: 1.01e8 periods
        SC.prepare(_args('planar_3r', '--grid', 'stabilization.omega=5:40:101', '--duration', '1000'))
    assert 'periods' in str(err.value)
    assert (
        SC.prepare(_args('planar_3r', '--grid', 'stabilization.omega=5:40:101', '--duration', '1000', '--yes'))[2][-1][
            'index'
        ]
        == 100
    )


# ----------------------------------------------------------------------------- Ray token authentication


def _table(out):
    with open(out / 'table.csv', newline='') as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and all(r['status'] == 'ok' for r in rows), rows
    return rows


def _settings_columns(out):
    """Every column that depends on the settings only (not the worker, times or rates)."""
    from uk_controller.sweep.runner import MEASURED

    return [{k: v for k, v in r.items() if k not in MEASURED} for r in _table(out)]


def _ray(args, env, timeout=180):
    return subprocess.run(
        [sys.executable, '-m', 'ray.scripts.scripts', *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_sweep_connects_to_a_head_started_with_ray_start_after_a_local_sweep(tmp_path, robots):
    """The same table from the process pool, a local Ray head and a head started with `ray start`.

    A local Ray sweep leaves ~/.ray/auth_token; `ray start --head` then enables token auth and
    `--ray auto` (RAY_ADDRESS set) was refused with InvalidAuthToken. A temporary HOME and Ray temp dir
    keep the user's ~/.ray and /tmp/ray out of it; the head listens on 127.0.0.1 only and is stopped by
    ending its own process group (`ray stop` would stop every Ray process of the machine). Half the runs
    are noisy: their seeds come from the settings, so every executor draws the same noise."""
    pytest.importorskip('ray')
    robots('planar_3r')  # the sweeps' workers load its kernels instead of each compiling them
    home = tmp_path / 'home'
    home.mkdir()
    temp = tempfile.mkdtemp(prefix='ukray', dir='/tmp')  # short: Ray's socket paths live under it
    env = _env(HOME=str(home), RAY_TMPDIR=temp, RAY_USAGE_STATS_ENABLED='0')
    env.pop('RAY_AUTH_MODE', None)
    env.pop('RAY_ADDRESS', None)
    small = ['sweep', 'planar_3r', '--grid', 'stabilization.omega=5,10', '--duration', '0.05', '--no-plots']
    small += ['--grid', 'simulation.sensor_noise=0,1e-5']

    def sweep(name, *how, env=env):
        done = subprocess.run(
            [sys.executable, '-m', 'uk_controller.cli', *small, '--out', str(tmp_path / name), *how],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    sweep('pool', '--jobs', '2')
    sweep('local', '--ray', 'local')
    assert (home / '.ray' / 'auth_token').is_file()  # what a local Ray head leaves behind
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    head = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'ray.scripts.scripts',
            'start',
            '--head',
            '--block',
            f'--port={port}',
            '--node-ip-address=127.0.0.1',
            '--num-cpus=2',
            '--include-dashboard=false',
            '--disable-usage-stats',
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / 'head.log', 'w'),
        start_new_session=True,
    )
    try:
        client = dict(env, RAY_ADDRESS=f'127.0.0.1:{port}')

        def listening():
            with socket.socket() as s:
                return s.connect_ex(('127.0.0.1', port)) == 0

        def ready():
            status = ['status', '--address', f'127.0.0.1:{port}']
            return _ray(status, dict(client, RAY_AUTH_MODE='token'), 60).returncode == 0

        # the head's port first (a connect), then `ray status` (each call a Python process importing Ray)
        assert _wait_for(listening, 300), (tmp_path / 'head.log').read_text()[-3000:]
        assert _wait_for(ready, 300), (tmp_path / 'head.log').read_text()[-3000:]
        proc = sweep('auto', '--ray', 'auto', env=client)
        assert 'InvalidAuthToken' not in proc.stderr
        # the same runs as the local sweeps gave (every column that depends on the settings only)
        assert _settings_columns(tmp_path / 'auto') == _settings_columns(tmp_path / 'local')
        assert _settings_columns(tmp_path / 'auto') == _settings_columns(tmp_path / 'pool')
        noisy = [r for r in _table(tmp_path / 'auto') if r['simulation.sensor_noise'] != '0.0']
        assert len({r['seed'] for r in noisy}) == 2 and all(r['task_error_rms'] != '' for r in noisy)
        workers = {name: {r['worker'] for r in _table(tmp_path / name)} for name in ('pool', 'local', 'auto')}
        assert workers['auto'].isdisjoint(workers['pool'] | workers['local'])  # the head's processes ran them
    finally:
        try:
            os.killpg(head.pid, signal.SIGTERM)
            head.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        # what is left is killed: `ray start --block` may otherwise wait 30 s on a stopped process of its
        # group, and nothing here depends on a graceful stop of the head
        _wait_for(lambda: not _group(head.pid), 5)
        for pid in _group(head.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # ended meanwhile
                pass
        head.wait(30)
        shutil.rmtree(temp, ignore_errors=True)  # Ray's sessions, logs and sockets of both heads
