"""Bad CLI input gives exit code 2 and a message naming the argument/key and the accepted
range, never a traceback, and nothing is written; Ctrl-C keeps what ran; summaries say when the task
was not tracked and why. Every case here failed (traceback, silent default, or a result that looked
fine) before the settings schema."""

import copy
import csv
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from uk_controller.files import rcl_yaml
from uk_controller.files.parameter_file import load_config
from uk_controller.paths import share_dir

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope='module')
def _scara_kernels(robots):
    """The SCARA's kernels compiled (or loaded) in this process first: the CLI subprocesses below then
    load them from the cache within their timeout, however busy the machine."""
    robots('scara')


def cli(*args, cwd=None, timeout=120):
    return subprocess.run(
        [sys.executable, '-m', 'uk_controller.cli', *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def _no_traceback(proc):
    assert 'Traceback' not in proc.stderr and 'Traceback' not in proc.stdout, proc.stderr


@pytest.mark.parametrize(
    'flags, names',
    [
        (['--duration', '0'], ['--duration', 'simulation.duration', '(0, 3600] s']),
        (['--duration', '-1'], ['--duration', '(0, 3600] s']),
        (['--rate', '0'], ['--rate', 'control.rate', '(0, 20000] Hz']),
        (['--rate', '-100'], ['--rate', '(0, 20000] Hz']),
        (['--rate', '1e9', '--duration', '0.01'], ['--rate', '(0, 20000] Hz']),
        (['--substeps', '0'], ['--substeps', '[1, 1000]']),
        (['--mass-scale', '0'], ['--mass-scale', '(0, 1000]']),
        (['--delay', '-3'], ['--delay', '[0, 10000] periods']),
        (['--noise', '-1'], ['--noise', '[0, 10] rad or m']),
        (['--omega', '-15'], ['--omega', 'stabilization.omega', '(0, 1000] rad/s']),
        (['--omega', 'nan'], ['--omega', 'finite']),
        (['--alpha', '-1', '--beta', '4'], ['--alpha', '(0, 2000]']),
        (['--alpha', '3'], ['--alpha and --beta']),
        (['--transient', '5', '--duration', '2'], ['--transient', 'simulation.transient', '[0, 2) s']),
        (['--rate', '20000', '--duration', '3000'], ['--duration', 'control periods']),
        (['--omega', '400', '--rate', '1000'], ['--omega', 'rate/4']),
    ],
)
@pytest.mark.slow
def test_bad_simulate_flags_exit_2_naming_flag_and_range(tmp_path, flags, names):
    out = tmp_path / 'out'
    proc = cli('simulate', 'scara', '--no-plots', '--out', out, *flags)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    _no_traceback(proc)
    for name in names:
        assert name in proc.stderr, proc.stderr
    assert not out.exists() or not any(out.iterdir())  # nothing written


def _yaml_with(tmp_path, edit, name='robot.yaml'):
    params, _ = load_config(ROOT / 'config' / 'scara.yaml')
    params = copy.deepcopy(params)
    params['robot']['urdf'] = str(share_dir() / 'urdf' / 'scara.urdf')
    edit(params)
    path = tmp_path / name
    path.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}))
    return path


@pytest.mark.parametrize(
    'edit, names',
    [
        (lambda p: p.__setitem__('stabilisation', {'omega': 20.0}), ['stabilisation', "did you mean 'stabilization'"]),
        (lambda p: p['control'].__setitem__('rte', 5.0), ['control.rte', "did you mean 'rate'"]),
        (
            lambda p: p['control'].__setitem__('safe_efort', 'hold'),
            ['control.safe_efort', "did you mean 'safe_effort'"],
        ),
        (lambda p: p['simulation'].__setitem__('substeps', 0), ['simulation.substeps', '[1, 1000]']),
    ],
)
@pytest.mark.slow
def test_bad_yaml_exit_2_naming_file_and_key(tmp_path, edit, names):
    path = _yaml_with(tmp_path, edit)
    out = tmp_path / 'out'
    proc = cli('simulate', path, '--duration', '0.01', '--no-plots', '--out', out)
    assert proc.returncode == 2, proc.stderr
    _no_traceback(proc)
    assert str(path) in proc.stderr
    for name in names:
        assert name in proc.stderr, proc.stderr
    assert not out.exists()


@pytest.mark.slow
def test_out_on_a_file_or_read_only_folder(tmp_path):
    existing = tmp_path / 'file.txt'
    existing.write_text('keep me')
    proc = cli('simulate', 'scara', '--duration', '0.01', '--no-plots', '--out', existing)
    assert proc.returncode == 2 and '--out' in proc.stderr and 'not a folder' in proc.stderr
    _no_traceback(proc)
    assert existing.read_text() == 'keep me'
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / 'ro'
        ro.mkdir()
        ro.chmod(0o555)
        try:
            proc = cli('simulate', 'scara', '--duration', '0.01', '--no-plots', '--out', ro / 'sub')
            assert proc.returncode == 2 and '--out' in proc.stderr and str(ro) in proc.stderr
            _no_traceback(proc)
        finally:
            ro.chmod(0o755)


def _summary(out):
    text = (out / 'summary.json').read_text()
    return json.loads(text, parse_constant=lambda c: pytest.fail(f'summary.json holds {c}: not JSON'))


@pytest.mark.slow
def test_out_of_reach_task_is_reported_as_not_tracked(tmp_path):
    path = _yaml_with(
        tmp_path, lambda p: p['constraints']['tool_path']['trajectory'].__setitem__('centre', [5.0, 0.35, 0.0])
    )
    out = tmp_path / 'out'
    proc = cli('simulate', path, '--duration', '1', '--no-plots', '--out', out)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith('task NOT tracked') and 'out of reach' in first and 'saturated' in first, first
    summary = _summary(out)
    by_status = summary['steps_by_status']
    # the bounded correction approaches the far target at its capped speed (steps 'ok' while no limit is
    # reached); from then on the joints or efforts are at their limits
    assert summary['steps'] == 1000 and by_status['saturated'] + by_status['limited'] > 500
    with open(out / 'log.csv') as fh:
        statuses = [row['status'] for row in csv.DictReader(fh)]
    assert len(statuses) == 1000 and set(statuses) <= {'ok', 'saturated', 'limited'}
    assert statuses[-100:] == ['limited'] * 100 or set(statuses[-100:]) <= {'saturated', 'limited'}


@pytest.mark.slow
def test_under_actuated_task_is_reported_with_the_reason(tmp_path):
    def two_motors(p):
        p['actuators'] = {'names': ['motor1', 'motor2'], 'motor1': {'joint': 'joint1'}, 'motor2': {'joint': 'joint2'}}

    path = _yaml_with(tmp_path, two_motors)
    out = tmp_path / 'out'
    proc = cli('simulate', path, '--duration', '0.5', '--no-plots', '--out', out)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert 'NOT tracked' in first and 'under-actuated' in first and '2 actuators' in first, first
    summary = _summary(out)
    assert summary['steps_by_status']['servo_inconsistent'] == summary['steps']
    with open(out / 'log.csv') as fh:
        assert {row['status'] for row in csv.DictReader(fh)} == {'servo_inconsistent'}


@pytest.mark.slow
def test_tracked_run_says_so_and_summary_is_strict_json(tmp_path):
    out = tmp_path / 'out'
    proc = cli('simulate', 'scara', '--duration', '0.5', '--no-plots', '--out', out, '--transient', '0.45')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith('task tracked')
    summary = _summary(out)
    assert summary['interrupted'] is False and summary['steps'] == 500
    # a run that never settles: settling_time is NaN inside, null in the file
    proc = cli('simulate', 'scara', '--duration', '0.05', '--no-plots', '--out', out)
    assert proc.returncode == 0
    assert _summary(out)['settling_time_s'] is None


@pytest.mark.slow
def test_ctrl_c_writes_what_ran_marks_interrupted_exits_130(tmp_path):
    out = tmp_path / 'out'
    proc = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'uk_controller.cli',
            'simulate',
            'scara',
            '--duration',
            '300',
            '--noise',
            '1e-6',
            '--rate',
            '1000',
            '--no-plots',
            '--out',
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the progress line is printed from inside the control loop, after the handler is installed (before it:
    # the approach's decision, from the plant's start)
    first = proc.stderr.readline()
    line = first if 'simulating' in first else proc.stderr.readline()
    assert first.startswith('joint-space approach: not used') or first is line, first
    assert 'simulating scara' in line, line
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert 'Traceback' not in stderr and 'interrupted' in stderr
    assert stdout.splitlines()[0].startswith('INTERRUPTED')
    summary = _summary(out)
    assert summary['interrupted'] is True and 0 < summary['steps'] < 300_000
    with open(out / 'log.csv') as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == summary['steps']
    assert all(math.isfinite(float(r['t'])) for r in rows[-3:])
    assert not list(out.glob('*.part'))


@pytest.mark.parametrize(
    'flags, names',
    [
        (['--watchdog', '-1'], ['--watchdog', 'hardware.watchdog', '(0, 10] s']),
        (['--watchdog', '1e-6'], ['--watchdog', 'control period']),
        (['--watchdog', '0'], ['--watchdog', '(0, 10] s']),
        (['--rate', '0'], ['--rate', 'control.rate', '(0, 20000] Hz']),
        (['--rate', '-5'], ['--rate', '(0, 20000] Hz']),
        pytest.param(
            ['--log', '/proc/no_such_dir/run.csv'], ['--log', '/proc/no_such_dir/run.csv'], marks=pytest.mark.slow
        ),  # gets as far as the log file: 1.5 s
    ],
)
@pytest.mark.slow
def test_bad_run_flags_exit_2_naming_flag_and_range(flags, names):
    proc = cli('run', 'scara', '--port', '/dev/null/not_a_port', *flags)
    assert proc.returncode == 2, proc.stderr
    _no_traceback(proc)
    for name in names:
        assert name in proc.stderr, proc.stderr


def _sampling_error(proc):
    """The line of stderr that names the sampling rule, without the command's own prefix."""
    line = next((s for s in proc.stderr.splitlines() if 'natural frequency' in s), '')
    return line.split('error: ', 1)[-1].split('run: ', 1)[-1]


@pytest.mark.slow
def test_run_rate_is_the_control_rate_and_refused_like_simulate(tmp_path):
    """``run --rate`` sets control.rate, as simulate's and emulate's do, so the sampling rule sees the rate
    the motors would run at: the SCARA's omega = 15 rad/s at 30 Hz is refused before any port is opened,
    with simulate's words."""
    run = cli('run', 'scara', '--port', '/dev/null/not_a_port', '--rate', '30')
    sim = cli('simulate', 'scara', '--no-plots', '--out', tmp_path / 'out', '--rate', '30')
    assert run.returncode == 2 and sim.returncode == 2, (run.stderr, sim.stderr)
    _no_traceback(run)
    words = 'natural frequency 15 rad/s is too fast for --rate (control.rate) 30 Hz'
    assert words in run.stderr and words in sim.stderr, (run.stderr, sim.stderr)
    assert _sampling_error(run) == _sampling_error(sim)
    assert 'not_a_port' not in run.stderr  # refused at the settings, not at the port


@pytest.mark.slow
def test_run_refuses_a_rate_the_bus_would_not_run_at(tmp_path):
    """run steps the controller once per bus cycle: a --rate other than the file's hardware.rate would not be
    the rate that runs, so it is refused naming both (before any port is opened)."""
    path = _yaml_with(tmp_path, lambda p: p.__setitem__('hardware', {**p.get('hardware', {}), 'rate': 200.0}))
    proc = cli('run', path, '--port', '/dev/null/not_a_port', '--rate', '100')
    assert proc.returncode == 2, proc.stderr
    _no_traceback(proc)
    for words in ('--rate (control.rate) 100 Hz', 'hardware.rate 200 Hz', str(path)):
        assert words in proc.stderr, proc.stderr
    assert 'not_a_port' not in proc.stderr


@pytest.mark.slow
def test_bench_unknown_robot_exit_2():
    proc = cli('bench', '--robots', 'nope')
    assert proc.returncode == 2 and "no robot setup 'nope'" in proc.stderr and 'scara' in proc.stderr
    _no_traceback(proc)


@pytest.mark.slow
def test_help_and_a_bad_flag_import_no_solver_or_compiler():
    """`uk-controller --help` and an exit on a bad flag build the whole parser (every subcommand's
    options and choices) in a fresh interpreter without importing SciPy, numba, Pinocchio or
    Matplotlib: the command answers without waiting for the imports of what it would run."""
    code = (
        'import sys\n'
        'from uk_controller.cli import build_parser\n'
        'parser = build_parser()\n'
        'parser.format_help()\n'
        'for argv in (["simulate", "scara", "--duration", "0"], ["run", "scara", "--nope"], ["sweep", "--nope"]):\n'
        '    try:\n'
        '        parser.parse_args(argv)\n'
        '    except SystemExit:\n'
        '        pass\n'
        'heavy = {"scipy", "numba", "pinocchio", "matplotlib"}\n'
        'print(" ".join(sorted({m.split(".")[0] for m in sys.modules} & heavy)))\n'
    )
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '', f'imported while parsing: {proc.stdout.strip()}'
