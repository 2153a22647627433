"""Fuzzing harness, the input/output half: mutated setup files, user callables that raise
or return garbage, and failing file systems thrown at the commands, with the properties of
docs/guarantees.md checked on every answer:

- the exit code is 0 or 2, never an exception escaping the command (a traceback for the user);
- an exit 2 says what is wrong on stderr; a FAILED run never says "task tracked";
- every input file is byte-identical afterwards;
- summary.json and runs.jsonl are strict JSON (NaN refused) and do not contradict themselves;
- a file under its final name is complete (log.csv has one row per control step), a partial one
  only ever sits in ``<name>.part``.

Hypothesis drives the mutations with fixed seeds of examples per test (``max_examples``, no
deadline), so the harness stays within about a minute; the subprocess variant (stderr of a real
process) is ``slow``.
"""

import codecs
import csv
import itertools

import pytest
import yaml
from hostile import (
    CALLABLE_SOURCE,
    PLANAR,
    callable_setup,
    check_answer,
    check_jsonl,
    check_jsonl_lines,
    check_summary,
    digests,
    inject_full_disk,
    mount_tmpfs,
    planar_params,
    run_cli,
    run_subprocess,
    unmount,
    write_setup,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from uk_controller.files.parameter_file import ConfigError
from uk_controller.robots import load_robot

FUZZ = settings(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
TEXT = PLANAR.read_text()
LINES = TEXT.splitlines(keepends=True)
KEY_LINES = [i for i, line in enumerate(LINES) if ':' in line and not line.lstrip().startswith('#')]


@pytest.fixture(scope='module', autouse=True)
def _planar_kernels(robots):
    robots('planar_3r')


@pytest.fixture(scope='module')
def scratch(tmp_path_factory):
    """One folder per test module; each example works in a fresh sub-folder of it."""
    return tmp_path_factory.mktemp('fuzz')


_COUNTER = itertools.count()


def _fresh(scratch):
    """A new empty folder (Hypothesis seeds `random` per example: names come from a counter)."""
    folder = scratch / f'ex{next(_COUNTER)}'
    folder.mkdir()
    return folder


# ----------------------------------------------------------------------------- mutated YAML


def _scalar():
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=12),
        st.sampled_from(
            [
                '.nan',
                '-.inf',
                '!!binary aGVsbG8=',
                '~',
                "'y'",
                'y',
                '0x1F',
                '1e400',
                '[]',
                '{}',
                '*undefined',
                '&a x',
                '!!python/object:os.system',
                '|',
                '- a',
            ]
        ),
    )


@st.composite
def mutated_yaml(draw):
    """Bytes of a planar 3R setup changed by one or more of: a byte in another encoding or a random
    byte, a NUL, a BOM, another Unicode encoding, truncation, a duplicated key line or section, a
    value replaced by a YAML scalar of another type, an alias bomb, a long list, deep nesting."""
    lines = list(LINES)
    kinds = draw(
        st.lists(
            st.sampled_from(
                [
                    'latin1',
                    'byte',
                    'nul',
                    'bom',
                    'utf16',
                    'truncate',
                    'dup_line',
                    'dup_section',
                    'value',
                    'bomb',
                    'long_list',
                    'deep',
                    'tab',
                ]
            ),
            min_size=1,
            max_size=3,
        )
    )
    encoding = 'utf-8'
    for kind in kinds:
        if kind == 'dup_line':
            i = draw(st.sampled_from(KEY_LINES))
            lines.insert(i + 1, lines[i])
        elif kind == 'dup_section':
            lines += ['    control:\n', f'      rate: {draw(st.sampled_from(["500.0", "2000.0", "abc"]))}\n']
        elif kind == 'value':
            i = draw(st.sampled_from(KEY_LINES))
            key, _, _ = lines[i].partition(':')
            value = draw(_scalar())
            lines[i] = f'{key}: {value if isinstance(value, str) else yaml.safe_dump(value).splitlines()[0]}\n'
        elif kind == 'bomb':
            width, depth = draw(st.integers(2, 12)), draw(st.integers(2, 9))
            lines += ['    b0: &b0 [' + ', '.join(['x'] * width) + ']\n']
            lines += [f'    b{d}: &b{d} [' + ', '.join([f'*b{d - 1}'] * width) + ']\n' for d in range(1, depth)]
        elif kind == 'long_list':
            n = draw(st.sampled_from([10, 1000, 120_000, 300_000]))
            lines += ['    long: [' + ', '.join(['0.5'] * n) + ']\n']
        elif kind == 'deep':
            n = draw(st.sampled_from([10, 200, 5000]))
            lines += ['    deep: ' + '[' * n + ']' * n + '\n']
        elif kind == 'tab':
            i = draw(st.sampled_from(KEY_LINES))
            lines[i] = lines[i].replace('  ', '\t', 1)
        elif kind == 'utf16':
            encoding = 'utf-16'
    data = ''.join(lines).encode(encoding)
    for kind in kinds:
        at = draw(st.integers(0, len(data)))
        if kind == 'latin1':
            data = data[:at] + 'é'.encode('latin-1') + data[at:]
        elif kind == 'byte':
            data = data[:at] + bytes([draw(st.integers(0x80, 0xFF))]) + data[at:]
        elif kind == 'nul':
            data = data[:at] + b'\0' + data[at:]
        elif kind == 'bom':
            data = codecs.BOM_UTF8 + data
        elif kind == 'truncate':
            data = data[:at]
    return kinds, data


@settings(FUZZ, max_examples=60)
@given(case=mutated_yaml())
@pytest.mark.slow
def test_mutated_yaml_loads_or_names_the_file(scratch, case):
    """load_robot on a mutated setup returns a setup or raises ConfigError naming the file; the file is
    unchanged; a duplicated key or section is never accepted."""
    kinds, data = case
    path = _fresh(scratch) / 'arm.yaml'
    path.write_bytes(data)
    try:
        setup = load_robot(path)
    except ConfigError as exc:
        assert str(path) in str(exc) or path.name in str(exc), exc
        event(f'refused: {str(exc).split(": ", 2)[-1][:40]}')
    else:
        event('loaded')
        assert setup.model.n == 3
        assert data.count(b'\n    control:\n') < 2, 'a duplicated control: section was accepted'
        if 'dup_line' in kinds:  # accepted only if the duplicated line is a list item or a comment
            assert yaml.safe_load(data.decode('utf-8-sig'))
    assert path.read_bytes() == data


@settings(FUZZ, max_examples=12)
@given(case=mutated_yaml())
@pytest.mark.slow
def test_mutated_yaml_through_simulate(scratch, case):
    """The same files through `uk-controller simulate` (in this process): exit 0 or 2, never an
    exception; on 0 a strict, consistent summary; the input unchanged; nothing written on 2."""
    kinds, data = case
    folder = _fresh(scratch)
    path = folder / 'arm.yaml'
    path.write_bytes(data)
    code, stdout, stderr = run_cli('simulate', path, '--duration', '0.02', '--no-plots', '--out', folder / 'out')
    check_answer(code, stdout, stderr)
    event(f'exit {code}')
    assert path.read_bytes() == data
    if code == 0:
        check_summary(folder / 'out' / 'summary.json')
    else:
        assert not (folder / 'out' / 'log.csv').exists()


# ----------------------------------------------------------------------------- user callables

GARBAGE = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.lists(st.one_of(st.floats(), st.integers(-3, 3), st.none(), st.text(max_size=2)), max_size=5),
    st.lists(st.lists(st.floats(), max_size=4), min_size=4, max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)

GARBAGE_SOURCE = (
    CALLABLE_SOURCE
    + '''

def garbage(model, q, qd, t, params):
    if t >= params['from_t']:
        value = params['value']
        return tuple(value) if params.get('as_tuple') and isinstance(value, list) else value
    return level(model, q, qd, t, {'mode': 'good'})
'''
)


@settings(FUZZ, max_examples=25)
@given(
    mode=st.sampled_from(
        ['raise', 'none', 'short', 'text', 'wrong_shape', 'nan_A', 'inf_phi', 'nan_b', 'inf_phidot', 'good']
    ),
    from_t=st.sampled_from([0.0, 0.0105, 0.0305]),
    until_t=st.sampled_from([0.0205, 0.0405, 1e9]),
)
@pytest.mark.slow
def test_callable_modes(scratch, mode, from_t, until_t):
    """Every step whose function misbehaves returns the safe effort (status safe_effort), every other
    step is the controller's solution; the run is written; exit 0."""
    folder = _fresh(scratch)
    config = callable_setup(folder, mode, from_t=from_t, until_t=until_t, duration=0.05)
    inputs = digests([config, folder / 'level_rows.py'])
    code, stdout, stderr = run_cli('simulate', config, '--no-plots', '--out', folder / 'out')
    check_answer(code, stdout, stderr)
    assert code == 0
    assert digests([config, folder / 'level_rows.py']) == inputs
    summary = check_summary(folder / 'out' / 'summary.json')
    with open(folder / 'out' / 'log.csv', newline='') as fh:
        rows = list(csv.reader(fh))[1:]
    assert len(rows) == summary['steps'] == 50
    for row in rows:
        t = float(row[0])
        faulty = mode != 'good' and from_t <= t < until_t  # bounds halfway between steps
        assert (row[-1] == 'safe_effort') == faulty, (t, row[-1])


@settings(FUZZ, max_examples=25)
@given(value=GARBAGE, as_tuple=st.booleans(), from_t=st.sampled_from([0.0, 0.02]))
@pytest.mark.slow
def test_callable_returning_garbage(scratch, value, as_tuple, from_t):
    """A function returning any value (None, a number, text, lists of the wrong size or type, a dict):
    those steps are safe effort, the run is written, exit 0; never an exception."""
    folder = _fresh(scratch)
    (folder / 'level_rows.py').write_text(GARBAGE_SOURCE)
    params = planar_params()
    params['constraints']['tool_level'] = {
        'role': 'servo',
        'type': 'callable',
        'function': 'level_rows.py:garbage',
        'rows': 1,
        'params': {'from_t': from_t, 'value': value, 'as_tuple': as_tuple},
    }
    params['simulation']['duration'] = 0.04
    try:
        config = write_setup(folder / 'g.yaml', params)
    except (yaml.YAMLError, ValueError):
        return  # a value YAML cannot hold as a parameter
    code, stdout, stderr = run_cli('simulate', config, '--no-plots', '--out', folder / 'out')
    check_answer(code, stdout, stderr)
    event(f'exit {code}')
    if code == 2:  # the file could not hold the value (e.g. a None or a dict in params)
        assert 'params' in stderr or 'tool_level' in stderr, stderr
        return
    summary = check_summary(folder / 'out' / 'summary.json')
    assert summary['steps'] == 40 and summary['safe_effort_steps'] <= 40 - round(from_t * 1000)


# ----------------------------------------------------------------------------- failing file systems


@pytest.fixture(scope='module')
def disks(tmp_path_factory):
    """``disks(capacity)``: an empty folder on a file system with `capacity` bytes: a tmpfs (root) or,
    where none can be mounted, a folder whose writers fail after `capacity` bytes (injected)."""
    base = tmp_path_factory.mktemp('disks')
    mounted = []
    patch = pytest.MonkeyPatch()

    def make(capacity):
        folder = base / f'd{next(_COUNTER)}'
        if mount_tmpfs(folder, capacity):
            mounted.append(folder)
        else:
            inject_full_disk(patch, folder, capacity)
        return folder

    yield make
    patch.undo()
    for folder in mounted:
        unmount(folder)


@settings(FUZZ, max_examples=16)
@given(
    capacity=st.sampled_from([4096, 8192, 20000, 65536, 200_000, 1 << 20]),
    where=st.sampled_from(['out', 'mcap', 'both']),
    duration=st.sampled_from([0.05, 0.3, 1.0]),
    log_every=st.sampled_from([1, 7]),
)
@pytest.mark.slow
def test_simulate_on_a_small_disk(scratch, disks, capacity, where, duration, log_every):
    """simulate with --out and/or --mcap on a file system of `capacity` bytes: exit 0 with every file
    complete, or exit 2 naming what could not be written; a file under its final name is always
    complete, partial data only in `.part`."""
    disk = disks(capacity)
    folder = _fresh(scratch)
    out = disk if where in ('out', 'both') else folder / 'out'
    mcap = (disk / 'run.mcap') if where in ('mcap', 'both') else None
    args = ['simulate', 'planar_3r', '--duration', duration, '--no-plots', '--out', out, '--log-every', log_every]
    if mcap is not None and not _has_mcap():
        mcap = None
    if mcap is not None:
        args += ['--mcap', mcap]
    code, stdout, stderr = run_cli(*args)
    check_answer(code, stdout, stderr)
    event(f'exit {code}')
    steps = round(duration * 1000)
    if (out / 'log.csv').exists():
        with open(out / 'log.csv', newline='') as fh:
            assert len(list(csv.reader(fh))) == 1 + -(-steps // log_every)
    if (out / 'summary.json').exists():
        assert check_summary(out / 'summary.json')['steps'] == steps
    if code == 0:
        assert (out / 'log.csv').exists() and (out / 'summary.json').exists()
        assert mcap is None or mcap.exists()
        assert not [p for p in disk.iterdir() if p.name.endswith('.part')]
    else:
        assert 'No space left on device' in stderr, stderr
    if mcap is not None and mcap.exists():
        from mcap.reader import make_reader

        with open(mcap, 'rb') as fh:
            assert sum(1 for _ in make_reader(fh).iter_messages()) > steps


def _has_mcap():
    try:
        import mcap_ros2  # noqa: F401

        return True
    except ImportError:
        return False


@pytest.mark.parametrize('what', ['log.csv', 'summary.json', 'efforts.png', 'mcap', 'sweep_out', 'run_log'])
@pytest.mark.slow
def test_a_folder_where_a_file_is_expected(tmp_path, what):
    """A folder in the place of an output file: refused before anything runs (exit 2, the flag and the
    path named), the folder left as it was."""
    out = tmp_path / 'out'
    blocker = {
        'mcap': tmp_path / 'rec.mcap',
        'sweep_out': tmp_path / 'sw' / 'runs.jsonl',
        'run_log': tmp_path / 'run.csv',
    }.get(what, out / what)
    blocker.mkdir(parents=True)
    (blocker / 'inside.txt').write_text('keep')
    if what == 'mcap':
        args = ['simulate', 'planar_3r', '--duration', '0.02', '--no-plots', '--out', out, '--mcap', blocker]
    elif what == 'sweep_out':
        args = [
            'sweep',
            'planar_3r',
            '--grid',
            'stabilization.omega=10,20',
            '--duration',
            '0.02',
            '--jobs',
            '1',
            '--no-plots',
            '--out',
            tmp_path / 'sw',
        ]
    elif what == 'run_log':
        args = ['run', 'scara', '--port', tmp_path / 'ttyUSB9', '--protocol', 'uk_binary', '--log', blocker]
    else:
        args = ['simulate', 'planar_3r', '--duration', '0.02', '--out', out]
    code, stdout, stderr = run_cli(*args)
    check_answer(code, stdout, stderr)
    assert code == 2 and 'is a folder' in stderr and str(blocker) in stderr, stderr
    assert [p.name for p in blocker.iterdir()] == ['inside.txt']


@settings(FUZZ, max_examples=6)
@given(capacity=st.sampled_from([4096, 8192, 16384, 65536]), runs=st.sampled_from([2, 6, 12]))
@pytest.mark.slow
def test_sweep_on_a_small_disk(scratch, disks, capacity, runs):
    """sweep --out on a small file system: exit 0 or 2; runs.jsonl strict JSON (a cut last line aside),
    table.csv complete whenever it exists."""
    disk = disks(capacity)
    omegas = ','.join(str(10 + 2 * i) for i in range(runs))
    code, stdout, stderr = run_cli(
        'sweep',
        'planar_3r',
        '--grid',
        f'stabilization.omega={omegas}',
        '--duration',
        '0.02',
        '--jobs',
        '1',
        '--no-plots',
        '--out',
        disk,
    )
    check_answer(code, stdout, stderr)
    event(f'exit {code}')
    journal = disk / 'runs.jsonl'
    if journal.exists():
        text = journal.read_text()
        lines = text.splitlines()
        rows = check_jsonl(journal) if text.endswith('\n') else check_jsonl_lines(lines[:-1])
        assert len(rows) <= runs
    if (disk / 'table.csv').exists():
        with open(disk / 'table.csv', newline='') as fh:
            assert len(list(csv.reader(fh))) == runs + 1
    if code == 0:
        assert len(check_jsonl(journal)) == runs


# ----------------------------------------------------------------------------- as a user runs it


@pytest.mark.slow
@settings(FUZZ, max_examples=6)
@given(case=mutated_yaml())
def test_mutated_yaml_in_a_subprocess(scratch, case):
    """A real process: exit 0 or 2 and no traceback on stderr (what a user sees)."""
    kinds, data = case
    folder = _fresh(scratch)
    path = folder / 'arm.yaml'
    path.write_bytes(data)
    code, stdout, stderr = run_subprocess('simulate', path, '--duration', '0.02', '--no-plots', '--out', folder / 'out')
    check_answer(code, stdout, stderr)
    assert path.read_bytes() == data
