"""Helpers of the hostile-input tests (test_hostile_io.py) and the fuzzing harness (test_fuzz_io.py):
the CLI in this process with its output captured, setup files derived from the shipped planar 3R, a
callable constraint that misbehaves on request, a full file system, and the checks every answer of a
command must pass (docs/guarantees.md, last section)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from uk_controller.files import rcl_yaml
from uk_controller.files.io_safety import loads_strict
from uk_controller.paths import share_dir

PLANAR = share_dir() / 'config' / 'planar_3r.yaml'


def run_cli(*args):
    """``uk-controller ARGS`` in this process: (exit code, stdout, stderr). An exception escaping
    ``main`` (a traceback for the user) fails the calling test."""
    from uk_controller.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def run_subprocess(*args, timeout=300, cwd=None):
    """``uk-controller ARGS`` as a user runs it (a traceback shows on stderr)."""
    proc = subprocess.run(
        [sys.executable, '-m', 'uk_controller.cli', *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    return proc.returncode, proc.stdout, proc.stderr


def planar_params():
    """The shipped planar 3R setup as a dict (the ``/**`` section's ros__parameters)."""
    return yaml.safe_load(PLANAR.read_text())['/**']['ros__parameters']


def write_setup(path, params):
    """`params` as a ROS parameter file at `path` (returns the path)."""
    path = Path(path)
    path.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}, sort_keys=False))
    return path


#: A callable constraint equal to the planar 3R's ``tool_level`` row (q1 + q2 + q3 = 0, the tool
#: horizontal), misbehaving from ``params.from_t`` on as ``params.mode`` says.
CALLABLE_SOURCE = '''
import numpy as np

def level(model, q, qd, t, params):
    mode = params.get('mode', 'good')
    if t >= params.get('from_t', 0.0) and t < params.get('until_t', 1e9):
        if mode == 'raise':
            raise RuntimeError('user code failed')
        if mode == 'none':
            return None
        if mode == 'short':
            return (q[:1], qd[:1])
        if mode == 'text':
            return ('a', 'b', 'c', 'd')
        if mode == 'wrong_shape':
            return np.zeros(2), np.zeros(2), np.ones((2, 3)), np.zeros(2)
        bad = {'nan_A': ('A', np.nan), 'inf_phi': ('phi', np.inf), 'nan_b': ('b', np.nan),
               'inf_phidot': ('phidot', -np.inf)}.get(mode)
    else:
        bad = None
    phi = np.array([q[0] + q[1] + q[2]])
    phidot = np.array([qd[0] + qd[1] + qd[2]])
    A = np.ones((1, 3))
    b = np.zeros(1)
    out = {'phi': phi, 'phidot': phidot, 'A': A, 'b': b}
    if bad is not None:
        out[bad[0]] = np.full_like(out[bad[0]], bad[1])
    return out['phi'], out['phidot'], out['A'], out['b']
'''

CALLABLE_MODES = ('raise', 'none', 'short', 'text', 'wrong_shape', 'nan_A', 'inf_phi', 'nan_b', 'inf_phidot')


def callable_setup(folder, mode='good', from_t=0.0, until_t=1e9, duration=0.2):
    """A planar 3R setup in `folder` whose tool_level row is :data:`CALLABLE_SOURCE`'s ``level``."""
    folder = Path(folder)
    (folder / 'level_rows.py').write_text(CALLABLE_SOURCE)
    params = planar_params()
    params['constraints']['tool_level'] = {
        'role': 'servo',
        'type': 'callable',
        'function': 'level_rows.py:level',
        'rows': 1,
        'params': {'mode': mode, 'from_t': float(from_t), 'until_t': float(until_t)},
    }
    params['simulation']['duration'] = duration
    return write_setup(folder / f'level_{mode}.yaml', params)


def digests(paths):
    """{path: sha256} of the files among `paths` (to prove inputs are byte-identical afterwards)."""
    return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths if Path(p).is_file()}


def check_answer(code, stdout, stderr, *, allowed=(0, 2)):
    """The properties every answer of a command has (docs/guarantees.md): an allowed exit code, no
    traceback, an error message on exit 2, and no success words next to a failure."""
    assert code in allowed, f'exit {code}\nstdout: {stdout[-2000:]}\nstderr: {stderr[-2000:]}'
    assert 'Traceback' not in stderr and 'Traceback' not in stdout, stderr[-3000:]
    if code == 2:
        assert 'error' in stderr, stderr
    if 'FAILED' in stdout:
        assert 'task tracked' not in stdout and 'settles below' not in stdout.replace('does not settle below', ''), (
            stdout
        )
    assert not re.search(r'\b(nan|inf)\b', stdout), stdout  # a figure that is not a number reads 'unknown'


def check_summary(path):
    """summary.json parses as strict JSON (no NaN/Infinity) and does not contradict itself; returns it."""
    summary = loads_strict(Path(path).read_text())
    verdict = summary.get('verdict', '')
    assert not re.search(r'\b(nan|inf)\b', verdict), verdict
    if summary.get('failure'):
        assert verdict.startswith('FAILED') and 'task tracked' not in verdict, summary
        assert summary.get('settling_time_s') is None, summary
    if 'task tracked' in verdict:
        assert summary['settling_time_s'] is not None and summary['task_error_final'] is not None
        assert summary['task_error_final'] < summary['settle_tol'], summary
    if summary.get('settling_time_s') is not None:
        assert summary['task_error_final'] is not None, summary
    return summary


def check_jsonl(path):
    """Every line of a runs.jsonl is strict JSON; returns the rows."""
    return check_jsonl_lines(Path(path).read_text().splitlines())


def check_jsonl_lines(lines):
    return [loads_strict(line) for line in lines if line.strip()]


# ------------------------------------------------------------------------- a full file system


def mount_tmpfs(folder, size):
    """Mount a tmpfs of `size` bytes on `folder` (created); True when it worked (root), else False."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            ['mount', '-t', 'tmpfs', '-o', f'size={int(size)}', 'tmpfs', str(folder)], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def unmount(folder):
    subprocess.run(['umount', '-l', str(folder)], capture_output=True, timeout=30)


class FullDisk:
    """A file object that accepts `capacity` bytes and then fails as a full disk does (ENOSPC); the
    injected writer used where no tmpfs can be mounted."""

    def __init__(self, real, budget):
        self._real, self._budget = real, budget

    def write(self, data):
        if len(data) > self._budget[0]:  # what fits is written, as on a real disk
            self._real.write(data[: self._budget[0]])
            self._budget[0] = 0
            raise OSError(errno.ENOSPC, 'No space left on device')
        self._budget[0] -= len(data)
        return self._real.write(data)

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._real.close()


def inject_full_disk(monkeypatch, folder, capacity):
    """Every file opened for writing under `folder` by the package's writers shares `capacity` bytes."""
    import builtins

    from uk_controller.files import io_safety
    from uk_controller.sweep import runner

    budget = [int(capacity)]
    real_open = builtins.open
    folder = str(Path(folder).resolve())

    def fake_open(file, mode='r', *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if any(m in mode for m in 'wax') and str(Path(file).resolve()).startswith(folder):
            return FullDisk(handle, budget)
        return handle

    for module in (io_safety, runner):
        monkeypatch.setattr(module, 'open', fake_open, raising=False)
    return budget


def loads(text):
    return json.loads(text)
