"""One test per defect, each failing on the code before it.

1  --mcap onto the robot file overwrote it          test_output_onto_an_input_is_refused
4  a failed run exited 0 saying "task tracked"       test_failed_run_exits_2_and_never_says_tracked
6  a callable raising / returning garbage / NaN     test_callable_constraint_misbehaving_gives_safe_effort_and_a_run,
                                                     test_callable_nan_in_A_is_safe_effort_not_rank_lost,
                                                     test_unknown_error_never_reads_as_settled
8  disk full or a bad output path                    test_simulate_out_on_a_full_disk, test_mcap_on_a_full_disk,
                                                     test_mcap_onto_a_folder_is_refused, test_sweep_out_*,
                                                     test_serial_runner.py::test_run_log_on_a_full_disk
9  memory of a long run; YAML alias bomb, huge file  test_streamed_run_equals_the_whole_run,
                                                     test_streamed_memory_does_not_grow_with_the_log,
                                                     test_yaml_alias_bomb_and_huge_file_are_refused
10 non-UTF-8 / binary YAML, symlink loop, duplicates test_unreadable_setup_files_exit_2_naming_the_file,
                                                     test_duplicate_keys_name_the_key_and_both_lines
12 --delay longer than the run; bare NaN in runs.jsonl  test_delay_*, test_runs_jsonl_is_strict_json

The answers are checked with the properties of docs/guarantees.md (hostile.check_answer / check_summary).
"""

import csv
import dataclasses
import math
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hostile import (
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
    unmount,
    write_setup,
)

from uk_controller.control.status import StepClass
from uk_controller.files.parameter_file import ConfigError, load_config
from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import CHUNK_STEPS, simulate


@pytest.fixture(scope='module', autouse=True)
def _planar_kernels(robots):
    robots('planar_3r')


def _rows(path):
    with open(path, newline='') as fh:
        return list(csv.reader(fh))


# ----------------------------------------------- outputs never overwrite inputs


@pytest.mark.parametrize('target', ['config', 'urdf', 'config_as_log'])
@pytest.mark.slow
def test_output_onto_an_input_is_refused(tmp_path, target, monkeypatch):
    """`simulate ./arm.yaml --mcap ./arm.yaml` wrote a 111 kB MCAP over the robot file (exit 0)."""
    urdf = tmp_path / 'arm.urdf'
    shutil.copy(PLANAR.parent.parent / 'urdf' / 'planar_3r.urdf', urdf)
    params = planar_params()
    params['robot']['urdf'] = 'arm.urdf'
    out = tmp_path / 'out'
    if target == 'config_as_log':  # the setup file is named log.csv and --out is its folder
        config = write_setup(tmp_path / 'log.csv', params)
        args = ['simulate', config, '--out', tmp_path, '--duration', '0.05', '--no-plots']
    else:
        config = write_setup(tmp_path / 'arm.yaml', params)
        victim = config if target == 'config' else urdf
        monkeypatch.chdir(tmp_path)
        args = [
            'simulate',
            './arm.yaml',
            '--out',
            out,
            '--duration',
            '0.05',
            '--no-plots',
            '--mcap',
            f'./{victim.name}',
        ]
    before = digests([config, urdf])
    code, stdout, stderr = run_cli(*args)
    check_answer(code, stdout, stderr)
    assert code == 2 and 'is an input of this run' in stderr, stderr
    assert digests([config, urdf]) == before
    assert not out.exists() or not any(out.iterdir())


# --------------------------------------------------------- a failed run exits 2


@pytest.mark.slow
def test_failed_run_exits_2_and_never_says_tracked(tmp_path):
    """`--mass-scale 1e-300`: "FAILED: plant state not finite ...; task tracked ...", exit 0."""
    out = tmp_path / 'out'
    code, stdout, stderr = run_cli(
        'simulate', 'planar_3r', '--mass-scale', '1e-300', '--duration', '0.2', '--no-plots', '--out', out
    )
    check_answer(code, stdout, stderr)
    assert code == 2 and 'FAILED' in stdout and 'FAILED' in stderr
    summary = check_summary(out / 'summary.json')
    assert summary['failure'] and summary['verdict'].startswith('FAILED') and 'NOT tracked' in summary['verdict']
    rows = _rows(out / 'log.csv')  # the log of the steps before the failure is kept
    assert len(rows) - 1 == summary['steps'] < 200


# -------------------------------------------- a misbehaving callable constraint


@pytest.mark.parametrize('mode', ['raise', 'none', 'short', 'text', 'wrong_shape', 'nan_A', 'inf_phi', 'nan_b'])
@pytest.mark.slow
def test_callable_constraint_misbehaving_gives_safe_effort_and_a_run(tmp_path, mode):
    """A user function raising mid-run or returning None lost the whole run (traceback, nothing
    written). Now every step from the fault on returns the safe effort, the run is written, and the
    summary counts those steps. Compared with the same run whose function never misbehaves."""
    from_t = 0.1
    (tmp_path / 'good').mkdir()
    (tmp_path / 'bad').mkdir()
    good = callable_setup(tmp_path / 'good', 'good')
    bad = callable_setup(tmp_path / 'bad', mode, from_t=from_t)
    inputs = digests([bad, bad.parent / 'level_rows.py'])
    code, stdout, stderr = run_cli('simulate', bad, '--no-plots', '--out', tmp_path / 'o_bad')
    check_answer(code, stdout, stderr)
    assert code == 0, stderr
    assert digests([bad, bad.parent / 'level_rows.py']) == inputs
    summary = check_summary(tmp_path / 'o_bad' / 'summary.json')
    rows = _rows(tmp_path / 'o_bad' / 'log.csv')
    t = np.array([float(r[0]) for r in rows[1:]])
    status = [r[-1] for r in rows[1:]]
    faulty = t >= from_t - 1e-12
    assert all(s == 'safe_effort' for s, f in zip(status, faulty) if f)
    assert summary['safe_effort_steps'] == int(faulty.sum()) == summary['steps_by_status']['safe_effort']
    assert 'task NOT tracked' in summary['verdict'] and 'safe effort' in summary['verdict']
    # the steps before the fault are those of the well-behaved function, value for value
    run_cli('simulate', good, '--no-plots', '--out', tmp_path / 'o_good')
    good_rows = _rows(tmp_path / 'o_good' / 'log.csv')
    assert rows[: 1 + int((~faulty).sum())] == good_rows[: 1 + int((~faulty).sum())]
    assert check_summary(tmp_path / 'o_good' / 'summary.json')['verdict'].startswith('task tracked')


@pytest.mark.slow
def test_callable_nan_in_A_is_safe_effort_not_rank_lost(tmp_path):
    """NaN in a callable's A was logged as rank_lost with ok=1 and zero effort; now the step is
    NUMERICAL_ERROR (safe effort), and its reason names the constraint and the array."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.control.status import Status, step_class

    setup = load_robot(callable_setup(tmp_path, 'nan_A'))
    core = ControllerCore(setup)
    res = core.step(setup.q0, setup.qd0, 0.0)
    assert not res.ok and res.status == Status.NUMERICAL_ERROR
    assert "'tool_level'" in res.reason and 'non-finite values in A' in res.reason
    assert step_class(res, setup.servo.m, setup.actuators.p) == StepClass.SAFE_EFFORT
    assert not np.any(res.effort)


@pytest.mark.slow
def test_callable_module_failing_at_import_names_the_file(tmp_path):
    """A user module that raises while it is imported was a traceback; now exit 2 naming the setup,
    the key and the module."""
    (tmp_path / 'bad_rows.py').write_text('raise RuntimeError("boom at import")\n')
    params = planar_params()
    params['constraints']['tool_level'] = {
        'role': 'servo',
        'type': 'callable',
        'function': 'bad_rows.py:level',
        'rows': 1,
    }
    config = write_setup(tmp_path / 'imp.yaml', params)
    code, stdout, stderr = run_cli('simulate', config, '--no-plots', '--out', tmp_path / 'o')
    check_answer(code, stdout, stderr)
    assert code == 2 and 'constraints.tool_level.function' in stderr and 'bad_rows.py' in stderr
    assert 'boom at import' in stderr and not (tmp_path / 'o').exists()


@pytest.mark.parametrize('mode', ['inf_phi', 'raise'])
@pytest.mark.slow
def test_unknown_error_never_reads_as_settled(tmp_path, mode):
    """NaN/Inf rows from the first step gave "settles at 0.000 s" (console "at nan s")."""
    config = callable_setup(tmp_path, mode, from_t=0.0)
    code, stdout, stderr = run_cli('simulate', config, '--no-plots', '--out', tmp_path / 'o')
    check_answer(code, stdout, stderr)
    summary = check_summary(tmp_path / 'o' / 'summary.json')
    assert summary['settling_time_s'] is None and summary['task_error_max'] is None
    assert summary['task_error_unknown_steps'] > 0 and 'does not settle below' in stdout
    assert 'task tracked' not in stdout


# ------------------------------------------------------------------ a full disk


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    """``small_disk(capacity)``: a folder whose file system holds `capacity` bytes: a tmpfs when it can
    be mounted (root), else the package's writers under it fail after `capacity` bytes (injected)."""
    mounted = []

    def make(capacity, name='disk', injected=False):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        if not injected and mount_tmpfs(folder, capacity):
            mounted.append(folder)
        else:
            inject_full_disk(monkeypatch, folder, capacity)
        return folder

    yield make
    for folder in mounted:
        unmount(folder)


@pytest.mark.parametrize('injected', [False, True], ids=['tmpfs', 'injected_writer'])
@pytest.mark.slow
def test_simulate_out_on_a_full_disk(tmp_path, small_disk, injected):
    """A traceback, `log.csv.part` left and no summary. Now: exit 2 naming the file, the rows written
    before the error kept in log.csv.part (each a row of the full run), the summary printed. On a
    tmpfs where it mounts, and with the injected writer (the fallback) in any case."""
    disk = small_disk(64 * 1024, injected=injected)
    code, stdout, stderr = run_cli('simulate', 'planar_3r', '--duration', '1', '--no-plots', '--out', disk)
    check_answer(code, stdout, stderr)
    assert code == 2 and 'log.csv' in stderr and 'No space left on device' in stderr and 'lost' in stderr
    assert 'task tracked' in stdout or 'task NOT tracked' in stdout  # the summary of the run is printed
    assert not (disk / 'log.csv').exists()
    kept = _rows(disk / 'log.csv.part')
    code, _, _ = run_cli('simulate', 'planar_3r', '--duration', '1', '--no-plots', '--out', tmp_path / 'ref')
    full = _rows(tmp_path / 'ref' / 'log.csv')
    complete = [r for r in kept if len(r) == len(full[0])][:-1]  # the last row may be cut
    assert 10 < len(complete) < len(full) and complete == full[: len(complete)]


@pytest.mark.slow
def test_mcap_on_a_full_disk(tmp_path, small_disk):
    pytest.importorskip('mcap_ros2')
    disk = small_disk(32 * 1024)
    out = tmp_path / 'out'
    code, stdout, stderr = run_cli(
        'simulate', 'planar_3r', '--duration', '0.5', '--no-plots', '--out', out, '--mcap', disk / 'run.mcap'
    )
    check_answer(code, stdout, stderr)
    assert code == 2 and 'run.mcap' in stderr and 'No space left on device' in stderr
    assert not (disk / 'run.mcap').exists() and (disk / 'run.mcap.part').exists()
    assert len(_rows(out / 'log.csv')) == 501  # the other outputs are complete
    check_summary(out / 'summary.json')


@pytest.mark.slow
def test_mcap_onto_a_folder_is_refused(tmp_path):
    (tmp_path / 'rec').mkdir()
    code, stdout, stderr = run_cli(
        'simulate',
        'planar_3r',
        '--duration',
        '0.05',
        '--no-plots',
        '--out',
        tmp_path / 'out',
        '--mcap',
        tmp_path / 'rec',
    )
    check_answer(code, stdout, stderr)
    assert code == 2 and '--mcap' in stderr and 'is a folder' in stderr
    assert not any((tmp_path / 'rec').iterdir())


def _sweep(out, *extra):
    return run_cli(
        'sweep',
        'planar_3r',
        '--grid',
        'stabilization.omega=10,20,30',
        '--duration',
        '0.05',
        '--jobs',
        '1',
        '--no-plots',
        '--out',
        out,
        *extra,
    )


@pytest.mark.slow
def test_sweep_out_an_existing_file(tmp_path):
    target = tmp_path / 'results.txt'
    target.write_text('keep me\n')
    code, stdout, stderr = _sweep(target)
    check_answer(code, stdout, stderr)
    assert code == 2 and '--out' in stderr and 'not a folder' in stderr
    assert target.read_text() == 'keep me\n'


@pytest.mark.slow
def test_sweep_out_on_a_full_disk(tmp_path, small_disk):
    """runs.jsonl keeps the finished runs (strict JSON); the table never appears half-written."""
    disk = small_disk(4 * 1024)  # about 6 of the 12 rows of runs.jsonl fit
    code, stdout, stderr = _sweep(disk, '--grid', 'control.rate=250,500,1000,2000')
    check_answer(code, stdout, stderr)
    assert code == 2 and 'No space left on device' in stderr and 'runs.jsonl' in stderr and '--resume' in stderr
    assert not (disk / 'table.csv').exists()
    text = (disk / 'runs.jsonl').read_text()
    rows = (
        check_jsonl(disk / 'runs.jsonl') if text.endswith('\n') else check_jsonl_lines(text.splitlines()[:-1])
    )  # the last line may be cut: resume skips it
    assert 0 < len(rows) < 12 and all(r['status'] == 'ok' for r in rows)


@pytest.mark.slow
def test_sweep_table_on_a_full_disk(tmp_path, small_disk):
    """The journal fits, a table does not: each table file is complete or absent."""
    disk = small_disk(8 * 1024)
    code, stdout, stderr = _sweep(disk, '--grid', 'control.rate=500,1000')
    check_answer(code, stdout, stderr)
    assert code == 2 and 'No space left on device' in stderr and 'every finished run is in' in stderr
    assert len(check_jsonl(disk / 'runs.jsonl')) == 6
    for name in ('table.csv', 'table.parquet'):
        if (disk / name).exists() and name.endswith('.csv'):
            assert len(_rows(disk / name)) == 7
    assert not [p for p in disk.iterdir() if p.name.endswith('.part')]


# ------------------------------------------------- runs streamed to their sinks


@pytest.mark.slow
def test_streamed_run_equals_the_whole_run():
    """simulate(sink=...) hands over the run in chunks of CHUNK_STEPS rows, forgets them, and keeps
    every keep_every-th row: the chunks put together are the whole (unstreamed) run bit for bit and
    the summary of the streamed run is the whole run's."""
    setup = load_robot('planar_3r', {'simulation.duration': (2.5 * CHUNK_STEPS) / 1000.0})
    whole = simulate(setup)
    chunks = []

    def keep(chunk):  # the chunk's arrays are views of a buffer the next chunk reuses
        chunks.append(
            dataclasses.replace(chunk, **{k: v.copy() for k, v in vars(chunk).items() if isinstance(v, np.ndarray)})
        )

    streamed = simulate(setup, sink=keep, keep_every=7)
    assert all(c.t.size <= CHUNK_STEPS for c in chunks) and len(chunks) == 3
    assert [c.first_step for c in chunks] == [0, CHUNK_STEPS, 2 * CHUNK_STEPS]
    for name in ('t', 'q', 'qd', 'effort', 'phi', 'phidot', 'task_error', 'ok', 'status', 'saturated'):
        joined = np.concatenate([getattr(c, name) for c in chunks])
        assert np.array_equal(joined, getattr(whole, name)), name
        assert np.array_equal(getattr(streamed, name), getattr(whole, name)[::7]), name
    a, b = whole.summary(), streamed.summary()
    for key in a:
        if key not in ('wall_time_s', 'real_time_factor', 'step_time_median_us'):
            assert a[key] == b[key], key


@pytest.mark.slow
def test_streamed_memory_does_not_grow_with_the_log():
    """Peak traced memory of a streamed run grows by the per-step figures of RunStats (27 B/step, twice
    while they are joined at the end) and the kept rows, not by the log (173 B/step for the planar 3R,
    and the text of log.csv on top before): 9 chunks vs 3."""
    simulate(load_robot('planar_3r', {'simulation.duration': 0.01}))  # kernels loaded before measuring

    def peak(chunks):
        long_run = load_robot('planar_3r', {'simulation.duration': chunks * CHUNK_STEPS / 1000.0})
        tracemalloc.start()
        simulate(long_run, sink=lambda c: None, keep_every=1000)
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size

    log_bytes_per_step = sum(
        v.nbytes
        for v in vars(simulate(load_robot('planar_3r', {'simulation.duration': 0.001}))).values()
        if isinstance(v, np.ndarray)
    )
    extra = (peak(9) - peak(3)) / (6 * CHUNK_STEPS)
    assert log_bytes_per_step > 150
    assert extra < log_bytes_per_step / 2, (extra, log_bytes_per_step)


@pytest.mark.slow
def test_yaml_alias_bomb_and_huge_file_are_refused(tmp_path):
    """Both hung the loader (2.6 GB after 120 s)."""
    levels = ''.join(f'    l{i}: &l{i} [' + ', '.join([f'*l{i - 1}'] * 9) + ']\n' for i in range(1, 9))
    bomb = tmp_path / 'bomb.yaml'
    bomb.write_text('/**:\n  ros__parameters:\n    l0: &l0 [x, x, x, x, x, x, x, x, x]\n' + levels)
    with pytest.raises(ConfigError, match='expands to more than .* YAML nodes'):
        load_config(bomb)
    huge = tmp_path / 'huge.yaml'
    huge.write_text('/**:\n  ros__parameters:\n    robot:\n      initial_position: [' + '0.0, ' * 400_000 + '0.0]\n')
    with pytest.raises(ConfigError, match='larger than'):
        load_config(huge)
    many = tmp_path / 'many.yaml'  # under the size limit, over the node limit
    many.write_text('/**:\n  ros__parameters:\n    robot:\n      initial_position: [' + '0,' * 150_000 + '0]\n')
    with pytest.raises(ConfigError, match='YAML nodes'):
        load_config(many)
    for path in (bomb, huge):
        code, stdout, stderr = run_cli('simulate', path)
        check_answer(code, stdout, stderr)
        assert code == 2 and str(path) in stderr


# ------------------------------------------------------- unreadable setup files


@pytest.mark.slow
def test_unreadable_setup_files_exit_2_naming_the_file(tmp_path):
    latin1 = tmp_path / 'latin1.yaml'
    latin1.write_bytes(PLANAR.read_bytes().replace(b'# The "any URDF"', b'# caf\xe9: the "any URDF"'))
    binary = tmp_path / 'binary.yaml'
    binary.write_bytes(bytes(range(256)) * 4)
    (tmp_path / 'loop_a.yaml').symlink_to(tmp_path / 'loop_b.yaml')
    (tmp_path / 'loop_b.yaml').symlink_to(tmp_path / 'loop_a.yaml')
    folder = tmp_path / 'folder.yaml'
    folder.mkdir()
    cases = {
        latin1: ['not UTF-8', 'byte 0xe9 at line 1'],
        binary: ['binary file'],
        tmp_path / 'loop_a.yaml': ['symlink loop'],
        folder: ['not a file'],
    }
    for path, words in cases.items():
        code, stdout, stderr = run_cli('simulate', path, '--no-plots', '--out', tmp_path / 'out')
        check_answer(code, stdout, stderr)
        assert code == 2 and path.name in stderr and all(w in stderr for w in words), stderr
    assert not (tmp_path / 'out').exists()


@pytest.mark.slow
def test_duplicate_keys_name_the_key_and_both_lines(tmp_path):
    text = PLANAR.read_text()
    lines = text.splitlines()
    rate = next(i for i, line in enumerate(lines) if line.strip().startswith('rate:')) + 1
    dup_key = tmp_path / 'dup_key.yaml'
    dup_key.write_text(text.replace('      rate: 1000.0\n', '      rate: 1000.0\n      rate: 250.0\n'))
    with pytest.raises(ConfigError) as err:
        load_config(dup_key)
    assert err.value.key == 'control.rate' and f'lines {rate} and {rate + 1}' in str(err.value)
    dup_section = tmp_path / 'dup_section.yaml'
    dup_section.write_text(text + '    control:\n      rate: 500.0\n')
    with pytest.raises(ConfigError) as err:
        load_config(dup_section)
    first = next(i for i, line in enumerate(lines) if line == '    control:') + 1
    assert err.value.key == 'control' and f'lines {first} and {len(lines) + 1}' in str(err.value)
    load_config(PLANAR)  # the shipped files have none


# --------------------------------------------------- a delay as long as the run


@pytest.mark.slow
def test_delay_not_shorter_than_the_run_is_refused(tmp_path):
    """--delay 10000 on a 2000-step run marked 1330 steps ok while acting on the frozen initial sample."""
    code, stdout, stderr = run_cli(
        'simulate', 'planar_3r', '--duration', '0.2', '--delay', '10000', '--no-plots', '--out', tmp_path / 'o'
    )
    check_answer(code, stdout, stderr)
    assert code == 2 and '--delay' in stderr and 'accepted: [0, 199] periods' in stderr
    assert not (tmp_path / 'o').exists()


@pytest.mark.slow
def test_delay_steps_without_a_measurement_are_safe_effort():
    """The first `delay` periods have no measurement: safe effort (status safe_effort), never 'ok';
    from then on the controller acts on the state `delay` periods old, as a delayed sensor gives it."""
    delay = 30
    setup = load_robot('planar_3r', {'simulation.duration': 0.2, 'simulation.measurement_delay': delay})
    res = simulate(setup)
    assert np.all(res.status[:delay] == StepClass.SAFE_EFFORT) and not res.ok[:delay].any()
    assert not np.any(res.effort[:delay])
    assert res.ok[delay:].all()
    from uk_controller.control.controller import ControllerCore

    core = ControllerCore(load_robot('planar_3r'))
    core.reset(res.t[0])
    k = delay + 17  # the effort at step k is the controller's answer to the state at k - delay
    expected = core.step(res.q[k - delay], res.qd[k - delay], res.t[k])  # old state, the time of now
    assert np.array_equal(res.effort[k], expected.effort)


@pytest.mark.slow
def test_runs_jsonl_is_strict_json(tmp_path):
    """10,694 bare NaN in runs.jsonl (not JSON). Rows with NaN metrics are written as null and read
    back as NaN (resume), and the file parses with NaN refused."""
    from uk_controller.sweep.runner import METRICS, Journal

    journal = Journal(tmp_path / 'runs.jsonl')
    row = {'run_id': 'a', 'index': 0, 'status': 'failed', **{m: math.nan for m in METRICS}, 'wall_time_s': float('inf')}
    journal.append(row)
    journal.append({**row, 'run_id': 'b', 'task_error_max': 0.5})
    lines = check_jsonl(journal.path)
    assert lines[0]['task_error_max'] is None and lines[1]['task_error_max'] == 0.5
    back = journal.load()
    assert math.isnan(back['a']['settling_time_s']) and back['b']['task_error_max'] == 0.5
    code, stdout, stderr = _sweep(tmp_path / 'sweep', '--set', 'simulation.mass_scale=1e-300')
    check_answer(code, stdout, stderr)
    for line in check_jsonl(tmp_path / 'sweep' / 'runs.jsonl'):
        assert all(v is None or not isinstance(v, float) or math.isfinite(v) for v in line.values())


@pytest.mark.slow
def test_guarantees_doc_names_tests_that_exist():
    """docs/guarantees.md names the test holding each guarantee: every one exists (linked from README)."""
    import re

    from doc_refs import missing_tests

    root = Path(__file__).resolve().parents[1]
    text = (root / 'docs' / 'guarantees.md').read_text()
    assert 'docs/guarantees.md' in (root / 'README.md').read_text()
    refs, last = [], None
    for path, name in re.findall(r'`(test/test_\w+\.py)?(?:::(\w+))?`', text):  # `file::name`, `file`, `::name`
        last = path or last
        if name:
            refs.append((last, name))
    missing = missing_tests(refs)
    assert len(refs) > 15 and not missing, missing
