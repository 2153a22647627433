"""`uk-controller sweep`: grids, key validation, runs equal to direct `simulate` calls, local pool,
failures, resume, table, heat-map cells and the best settings. Sweeps on Ray (a local head, a head
started with `ray start`): test_sweep_signals.py."""

import csv
import json
import math
import os
import sys

import numpy as np
import pytest

from uk_controller.cli import main
from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import simulate
from uk_controller.sweep import grid as G
from uk_controller.sweep import runner as R
from uk_controller.sweep import table as T

MEASURED = set(R.MEASURED)
# a small SCARA grid: 2 x 2 x 2 runs of 0.3 s at 250/500 Hz
SMALL = [
    '--grid',
    'stabilization.omega=10:30:2',
    '--grid',
    'control.rate=250,500',
    '--grid',
    'simulation.mass_scale=1,1.2',
    '--duration',
    '0.3',
]


def _rows(path):
    with open(path, newline='') as fh:
        return list(csv.DictReader(fh))


def _settings_columns(rows):
    return [{k: v for k, v in r.items() if k not in MEASURED} for r in rows]


def _sweep(tmp_path, name, *extra):
    out = tmp_path / name
    assert main(['sweep', 'scara', *SMALL, '--out', str(out), '--no-plots', *extra]) == 0
    return out


# ----------------------------------------------------------------------------- specs and keys


def test_ranges_lists_and_grid_order():
    key, values = G.parse_spec('stabilization.omega=5:50:10')
    assert key == 'stabilization.omega'
    np.testing.assert_array_equal(values.values(), 5.0 + 5.0 * np.arange(10))  # count, stop included
    _, geo = G.parse_spec('stabilization.omega=1:1000:4:log')
    np.testing.assert_allclose(geo.values(), [1, 10, 100, 1000], rtol=1e-12)
    _, listed = G.parse_spec('simulation.sensor_noise=0,1e-4')
    assert listed == [0, 1e-4]
    runs = G.expand({'a': [1, 2], 'b': ['x', 'y', 'z']})
    assert runs == [{'a': a, 'b': b} for a in (1, 2) for b in 'xyz']  # last key fastest
    samples = G.expand({'a': G.Range(2.0, 3.0), 'b': [7, 8]}, random=50, sample_seed=3)
    assert len(samples) == 50 and all(2.0 <= s['a'] <= 3.0 and s['b'] in (7, 8) for s in samples)
    assert samples == G.expand({'a': G.Range(2.0, 3.0), 'b': [7, 8]}, random=50, sample_seed=3)


def test_seed_depends_on_the_settings_only():
    a = G.run_seed('scara', 'uk', {'x': 1.0, 'y': 2})
    assert a == G.run_seed('scara', 'uk', {'y': 2, 'x': 1.0})  # not on the order of the keys
    assert a != G.run_seed('scara', 'uk', {'x': 1.5, 'y': 2})
    assert a != G.run_seed('scara', 'mujoco', {'x': 1.0, 'y': 2})
    assert 0 <= a < 2**32


@pytest.mark.parametrize(
    'spec, words',
    [
        ('stabilization.omgea=5,10', ["unknown setting 'stabilization.omgea'", "did you mean 'stabilization.omega'"]),
        ('constraints.tool_path.trajectory.radiu=0.1', ["'constraints.tool_path.trajectory.radius'"]),
        ('control.rate=fast,1000', ['control.rate', "'fast' is not a float"]),
        ('simulation.measurement_delay=0.5', ['simulation.measurement_delay', 'not an int']),
        ('control.pinv=svd,bogus', ['control.pinv', "'bogus' is not one of"]),  # the loader's own check
        ('control.rate=-5,100', ['control.rate', 'must be in (0, 20000] Hz']),
        ('robot=1', ['robot', 'is a section']),
    ],
)
def test_bad_grid_keys_and_values_exit_2_naming_the_key(spec, words, tmp_path, capsys):
    assert main(['sweep', 'scara', '--grid', spec, '--out', str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith('error: ') and 'Traceback' not in err
    for word in words:
        assert word in err
    assert not (tmp_path / 'runs.jsonl').exists()


@pytest.mark.slow
def test_a_convention_set_with_its_gains_on_the_grid_resolves(tmp_path):
    """`--set stabilization.convention=seed000` needs alpha and beta, which only the grid gives: the sweep's
    settings are resolved with the grid's first values, and every run carries its own pair."""
    out = tmp_path / 'seed000'
    args = ['sweep', 'scara', '--set', 'stabilization.convention=seed000', '--grid', 'stabilization.alpha=0.5,2']
    args += ['--grid', 'stabilization.beta=50,200', '--duration', '0.02', '--out', str(out), '--no-plots']
    assert main(args) == 0
    rows = _rows(out / 'table.csv')
    pairs = sorted((float(r['stabilization.alpha']), float(r['stabilization.beta'])) for r in rows)
    assert pairs == [(0.5, 50.0), (0.5, 200.0), (2.0, 50.0), (2.0, 200.0)]


# ----------------------------------------------------------------------------- runs


@pytest.mark.slow
def test_rows_equal_direct_simulate_calls_and_the_pool_equals_one_process(tmp_path):
    pooled = _rows(_sweep(tmp_path, 'pool', '--jobs', '2') / 'table.csv')
    single = _rows(_sweep(tmp_path, 'single', '--jobs', '1') / 'table.csv')
    assert len(pooled) == 8
    assert _settings_columns(pooled) == _settings_columns(single)
    assert len({r['worker'] for r in pooled}) >= 1
    # every row is what `uk-controller simulate` would compute with the same settings as arguments
    for row in pooled[::3]:
        setup = load_robot(
            'scara',
            {
                'simulation.duration': 0.3,
                'control.rate': float(row['control.rate']),
                'stabilization.omega': float(row['stabilization.omega']),
                'simulation.mass_scale': float(row['simulation.mass_scale']),
            },
        )
        result = simulate(setup, seed=int(row['seed']))
        summary = result.summary()
        for metric in ('task_error_max', 'task_error_rms', 'settling_time_s', 'effort_peak', 'saturated_fraction'):
            assert float(row[metric]) == summary[metric] or (math.isnan(summary[metric]) and row[metric] == 'nan'), (
                metric
            )
        assert int(row['steps']) == result.t.size == round(0.3 * float(row['control.rate']))
    # the mass mismatch reaches the plant: same gains and rate, different errors
    by_mass = {
        r['simulation.mass_scale']: r['task_error_rms']
        for r in pooled
        if r['stabilization.omega'] == '10.0' and r['control.rate'] == '250.0'
    }
    assert by_mass['1.0'] != by_mass['1.2']


@pytest.mark.slow
def test_parquet_holds_the_csv_table(tmp_path):
    pq = pytest.importorskip('pyarrow.parquet')
    out = _sweep(tmp_path, 'pq', '--jobs', '1')
    table = pq.read_table(out / 'table.parquet').to_pylist()
    rows = T.read_csv(out / 'table.csv')
    assert len(table) == len(rows)
    for a, b in zip(table, rows):
        for key, value in b.items():
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(a[key])
            elif key != 'reason':
                assert a[key] == value, key


@pytest.mark.slow
def test_failed_and_diverged_runs_are_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    import uk_controller.sim.closed_loop as closed_loop

    real = closed_loop.simulate

    def flaky(setup, **kwargs):
        if setup.settings.control.rate == 250.0 and setup.settings.stabilization.omega == (30.0,):
            raise FloatingPointError('plant blew up')
        return real(setup, **kwargs)

    monkeypatch.setattr(closed_loop, 'simulate', flaky)
    out = tmp_path / 'flaky'
    assert (
        main(
            [
                'sweep',
                'scara',
                *SMALL,
                '--out',
                str(out),
                '--no-plots',
                '--jobs',
                '1',
                '--diverge-at',
                '0.0163',
                '--mcap',
                '1',
            ]
        )
        == 0
    )
    rows = T.read_csv(out / 'table.csv')
    # the chosen run re-run and recorded: one joint state per step of its row
    reader = pytest.importorskip('mcap_ros2.reader')
    states = list(reader.read_ros2_messages(str(out / 'mcap' / 'run_0001.mcap'), topics=['/joint_states']))
    assert len(states) == rows[1]['steps'] == round(0.3 * rows[1]['control.rate'])
    failed = [r for r in rows if r['status'] == 'failed']
    assert len(failed) == 2 and all('FloatingPointError: plant blew up' in r['reason'] for r in failed)
    assert all(math.isnan(r['task_error_rms']) for r in failed)
    diverged = [r for r in rows if r['status'] == 'diverged']
    assert diverged and all(max(r['task_error_max'], r['closure_residual_max']) > 0.0163 for r in diverged)
    assert all(r['task_error_max'] <= 0.0163 for r in rows if r['status'] == 'ok')
    printed = capsys.readouterr().out
    assert f"{len(diverged)} diverged" in printed and '2 failed' in printed


@pytest.mark.slow
def test_resume_skips_done_runs(tmp_path, monkeypatch):
    out = _sweep(tmp_path, 'resume', '--jobs', '1')
    first = _rows(out / 'table.csv')
    lines = (out / 'runs.jsonl').read_text().splitlines()
    (out / 'runs.jsonl').write_text('\n'.join(lines[:5]) + '\n{"run_id": "cut sho')  # interrupted after 5
    calls = []
    real = R.run_one
    monkeypatch.setattr(R, 'run_one', lambda context, spec: calls.append(spec['index']) or real(context, spec))
    assert main(['sweep', 'scara', *SMALL, '--out', str(out), '--no-plots', '--jobs', '1', '--resume']) == 0
    done = {json.loads(line)['index'] for line in lines[:5]}
    assert sorted(calls) == sorted(set(range(8)) - done)
    assert _settings_columns(_rows(out / 'table.csv')) == _settings_columns(first)


# ----------------------------------------------------------------------------- table, heat maps, best


def _fake_rows():
    rows = []
    rng = np.random.default_rng(1)
    for i, (a, b, c) in enumerate((a, b, c) for a in (1.0, 2.0, 3.0) for b in (10, 20) for c in (0.5, 1.5)):
        rows.append(
            {
                'index': i,
                'status': 'ok',
                'a': a,
                'b': b,
                'c': c,
                'settling_time_s': float(rng.uniform(1, 2)),
                'task_error_rms': float(rng.uniform()),
                'safe_effort_steps': 0,
                'saturated_fraction': 0.0 if (a, c) != (3.0, 1.5) else 0.1,
            }
        )
    return rows


def test_best_is_the_worst_case_optimum_over_the_other_keys():
    rows = _fake_rows()
    settings, value, members = T.best(rows, 'settling_time_s', by=['a'])
    brute = {}
    for a in (1.0, 2.0, 3.0):
        group = [r for r in rows if r['a'] == a]
        if all(r['saturated_fraction'] == 0 for r in group):
            brute[a] = max(r['settling_time_s'] for r in group)
    assert settings == {'a': min(brute, key=brute.get)} and value == min(brute.values())
    assert 3.0 not in brute  # a group with a saturated run never wins
    single = T.best(rows, 'task_error_rms')
    assert single[1] == min(r['task_error_rms'] for r in rows if r['saturated_fraction'] == 0)


@pytest.mark.slow
def test_heatmap_cells_are_the_worst_case_over_the_other_keys(tmp_path):
    rows = _fake_rows()
    rows[3]['status'] = 'failed'
    rows[3]['task_error_rms'] = math.nan
    path, grids = T.heatmap(
        rows, 'a', 'b', 'task_error_rms', tmp_path / 'h.png', facet=None, reduce='max', marks=[('seed 000', 1.5, 15)]
    )
    assert path.stat().st_size > 1000
    ((_, z, bad),) = grids
    for i, b in enumerate((10, 20)):
        for j, a in enumerate((1.0, 2.0, 3.0)):
            cell = [r for r in rows if r['a'] == a and r['b'] == b]
            if any(r['status'] != 'ok' for r in cell):
                assert bad[i, j] and np.isnan(z[i, j])
            else:
                assert z[i, j] == max(r['task_error_rms'] for r in cell)
    _, faceted = T.heatmap(rows, 'a', 'b', 'settling_time_s', tmp_path / 'f.png', facet='c')
    assert [f[0] for f in faceted] == [0.5, 1.5]
    assert faceted[1][1][0, 0] == next(r['settling_time_s'] for r in rows if (r['a'], r['b'], r['c']) == (1, 10, 1.5))


def test_a_local_ray_head_listens_on_loopback_only(monkeypatch):
    """`--ray local` starts its head on 127.0.0.1 with Ray's cluster mode off: Ray otherwise advertises the
    machine's reachable address, and the sweep's traffic would leave the machine's loopback."""
    import types

    calls = []
    ray = types.ModuleType('ray')
    ray.init = lambda **options: calls.append(options) or 'context'
    ray.shutdown = lambda: None
    private = types.ModuleType('ray._private')
    constants = types.ModuleType('ray._private.ray_constants')
    constants.ENABLE_RAY_CLUSTER = True
    ray._private, private.ray_constants = private, constants
    for name, module in (('ray', ray), ('ray._private', private), ('ray._private.ray_constants', constants)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv('RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER', '1')
    assert R.start_ray('local', num_cpus=2) == 'context'
    assert len(calls) == 1 and calls[0]['_node_ip_address'] == '127.0.0.1' and calls[0]['num_cpus'] == 2
    assert 'address' not in calls[0] and constants.ENABLE_RAY_CLUSTER is False
    assert os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] == '0'
