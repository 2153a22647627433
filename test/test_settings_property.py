"""Property test (hypothesis): perturbed shipped setups and CLI flags either run or are refused with
exit code 2 and a message naming the key or flag; never a traceback, a hang or NaN in an output.

Perturbations of one key of a shipped setup: wrong type, sign flip, zero, NaN, huge, missing,
misspelt, an extra key. Flags: each simulate flag with zero, negative, NaN, Inf, huge or a valid
value. Runs are kept short (a few control periods) so the whole test takes seconds.
"""

import contextlib
import copy
import csv
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uk_controller import cli
from uk_controller.files import rcl_yaml
from uk_controller.files.parameter_file import load_config

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = ('scara', 'five_bar', 'planar_3r')
PARAMS = {r: load_config(ROOT / 'config' / f'{r}.yaml')[0] for r in ROBOTS}


def _leaves(tree, prefix=()):
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _leaves(v, prefix + (k,))
        else:
            yield prefix + (k,)


LEAVES = {r: sorted(_leaves(p)) for r, p in PARAMS.items()}


def _run(argv):
    """uk-controller in-process: (exit code, stderr); any exception other than SystemExit escapes."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse errors
            code = exc.code
    return code, err.getvalue()


def _outputs_are_finite(out):
    summary = json.loads(
        (out / 'summary.json').read_text(), parse_constant=lambda c: pytest.fail(f'summary.json holds {c}')
    )
    assert summary['steps'] >= 1
    with open(out / 'log.csv') as fh:
        for row in csv.DictReader(fh):
            for key, value in row.items():
                if key != 'status' and value != '':  # empty: unknown (safe-effort step)
                    assert math.isfinite(float(value)), (key, value)


def _perturb(value, kind, key):
    if kind == 'wrong_type':
        return 'abc' if not isinstance(value, str) else 3.5
    if kind == 'sign':
        if isinstance(value, bool) or isinstance(value, str):
            return value
        if isinstance(value, list):
            return [-v if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in value]
        return -value
    if kind == 'zero':
        return [0.0 for _ in value] if isinstance(value, list) else (0 if isinstance(value, int) else 0.0)
    if kind == 'nan':
        return [math.nan for _ in value] if isinstance(value, list) else math.nan
    if kind == 'huge':
        return [1e12 for _ in value] if isinstance(value, list) else 1e12
    raise AssertionError(kind)


KINDS = ('wrong_type', 'sign', 'zero', 'nan', 'huge', 'missing', 'misspelt', 'extra')


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(robot=st.sampled_from(ROBOTS), data=st.data(), kind=st.sampled_from(KINDS))
@pytest.mark.slow
def test_perturbed_setup_runs_or_is_refused_naming_the_key(tmp_path_factory, robot, data, kind):
    params = copy.deepcopy(PARAMS[robot])
    urdf = PARAMS[robot]['robot']['urdf']
    if '://' not in urdf:  # relative to the shipped YAML's folder
        params['robot']['urdf'] = str((ROOT / 'config' / urdf).resolve())
    path = data.draw(st.sampled_from(LEAVES[robot]), label='key')
    node = params
    for part in path[:-1]:
        node = node[part]
    leaf = path[-1]
    named = '.'.join(path)
    if kind == 'missing':
        del node[leaf]
    elif kind == 'misspelt':
        wrong = leaf[:-1] + ('x' if leaf[-1] != 'x' else 'y')
        node[wrong] = node.pop(leaf)
        named = '.'.join(path[:-1] + (wrong,))
    elif kind == 'extra':
        node[leaf + '_extra'] = 1.0
        named = '.'.join(path[:-1] + (leaf + '_extra',))
    else:
        node[leaf] = _perturb(node[leaf], kind, named)
    tmp = tmp_path_factory.mktemp('p')
    setup = tmp / 'robot.yaml'
    setup.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}))
    out = tmp / 'out'
    code, err = _run(['simulate', str(setup), '--duration', '0.02', '--no-plots', '--out', str(out)])
    assert 'Traceback' not in err
    assert code in (0, 2), (code, err)
    if code == 2:
        # the message names the key (a missing key may be reported by what needs it: its section
        # or, for a names list, the items it no longer lists)
        section = path[0]
        assert named in err or f'{section}.' in err or f'{section}:' in err, err
        assert not out.exists()
    else:
        _outputs_are_finite(out)


FLAG_VALUES = ['0', '-1', 'nan', 'inf', '1e12', '-1e-9', 'abc', '0.5', '2', '1']


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    flag=st.sampled_from(sorted(cli.SIMULATE_FLAGS)), value=st.sampled_from(FLAG_VALUES), robot=st.sampled_from(ROBOTS)
)
@pytest.mark.slow
def test_perturbed_flags_run_or_are_refused_naming_the_flag(tmp_path_factory, flag, value, robot):
    argv = ['simulate', robot, '--no-plots', '--out', str(tmp_path_factory.mktemp('f') / 'out')]
    if flag != '--duration':
        argv += ['--duration', '0.02']
    elif value not in ('0', '-1', 'nan', 'inf', '1e12', '-1e-9', 'abc'):
        value = '0.01'  # a valid duration: keep the run short
    if flag in ('--alpha', '--beta'):
        argv += ['--alpha', value, '--beta', value]
    else:
        argv += [flag, value]
    code, err = _run(argv)
    assert 'Traceback' not in err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert flag in err or (flag in ('--alpha', '--beta') and '--alpha' in err), err
    else:
        _outputs_are_finite(Path(argv[4]))
