"""The one settings schema (uk_controller/settings/schema.py): unknown keys, ranges, defaults, docs table."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest

from uk_controller.files.parameter_file import ConfigError, load_config
from uk_controller.robots import setup_from_settings
from uk_controller.settings import schema as S
from uk_controller.settings.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]
ROBOTS = sorted(p.stem for p in (ROOT / 'config').glob('*.yaml') if not p.stem.startswith('controllers'))


def test_docs_config_table_is_the_schema():
    text = (ROOT / 'docs' / 'config.md').read_text()
    start = text.index(S.DOC_BEGIN) + len(S.DOC_BEGIN)
    end = text.index(S.DOC_END)
    assert text[start:end].strip() == S.markdown_table().strip(), (
        'docs/config.md is out of date: python -m uk_controller.settings --write-docs'
    )


@pytest.mark.parametrize('robot', ROBOTS)
def test_every_key_of_the_shipped_configs_is_declared(robot):
    params, path = load_config(ROOT / 'config' / f'{robot}.yaml')
    S.check(params, path)


def _flat(tree, prefix=''):
    for k, v in tree.items():
        if isinstance(v, dict) and k != 'params':
            yield from _flat(v, f'{prefix}{k}.')
        else:
            yield f'{prefix}{k}'


@pytest.mark.parametrize('robot', ROBOTS)
def test_every_shipped_key_is_in_the_docs_table(robot):
    """Independent of the schema walk: each dotted key of the file, with item names replaced by <name>,
    appears in the docs table."""
    params, _ = load_config(ROOT / 'config' / f'{robot}.yaml')
    text = (ROOT / 'docs' / 'config.md').read_text()
    names = set()
    for section in ('actuators', 'constraints'):
        names |= {k for k in (params.get(section) or {}) if k != 'names'}
    for key in _flat(params):
        generic = '.'.join('<name>' if part in names else part for part in key.split('.'))
        assert f'`{generic}`' in text, key


@pytest.mark.parametrize(
    'path, value, fragment',
    [
        (('stabilisation',), {'omega': 20.0}, "did you mean 'stabilization'"),
        (('control', 'rte'), 5.0, "did you mean 'rate'"),
        (('control', 'safe_efort'), 'hold', "did you mean 'safe_effort'"),
        (('constraints', 'tool_path', 'trajectory', 'radus'), 0.05, "did you mean 'radius'"),
        (('constraints', 'tool_path', 'coefficients'), [1.0], "not a key of type 'frame_position'"),
        (('actuators', 'motr1'), {'joint': 'joint1'}, 'not listed in actuators.names'),
    ],
)
def test_misspelt_keys_are_errors_naming_file_key_and_suggestion(path, value, fragment):
    params, file = load_config(ROOT / 'config' / 'scara.yaml')
    params = copy.deepcopy(params)
    node = params
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    with pytest.raises(ConfigError) as err:
        setup_from_settings(resolve(file, params=params))
    assert err.value.key == '.'.join(path)
    assert str(file) in str(err.value) and fragment in str(err.value)


@pytest.mark.parametrize(
    'key, value, accepted',
    [
        ('stabilization.omega', -15.0, '(0, 1000] rad/s'),
        ('stabilization.omega', float('nan'), '(0, 1000] rad/s'),
        ('stabilization.omega', 1e9, '(0, 1000] rad/s'),
        ('control.rate', 0.0, '(0, 20000] Hz'),
        ('control.rate', 1e9, '(0, 20000] Hz'),
        ('simulation.substeps', 0, '[1, 1000]'),
        ('simulation.mass_scale', 0.0, '(0, 1000]'),
        ('simulation.measurement_delay', -3, '[0, 10000] periods'),
        ('simulation.sensor_noise', -1.0, '[0, 10] rad or m'),
        ('control.safe_effort', 'hodl', 'one of zero, hold'),
    ],
)
def test_out_of_range_values_name_key_and_accepted_range(key, value, accepted):
    params, file = load_config(ROOT / 'config' / 'scara.yaml')
    params = copy.deepcopy(params)
    section, leaf = key.split('.')
    params.setdefault(section, {})[leaf] = value
    with pytest.raises(ConfigError) as err:
        S.check(params, file)
    assert err.value.key == key and accepted in str(err.value)


def test_cross_key_rules():
    params, file = load_config(ROOT / 'config' / 'scara.yaml')
    fast = copy.deepcopy(params)
    fast['stabilization'] = {'convention': 'critical', 'omega': 300.0}
    fast['control']['rate'] = 1000.0
    with pytest.raises(ConfigError, match='rate/4'):
        S.check(fast, file)
    dog = copy.deepcopy(params)
    dog['hardware'] = {'watchdog': 0.0005}
    with pytest.raises(ConfigError, match='control period') as err:
        S.check(dog, file)
    assert err.value.key == 'hardware.watchdog'
    long = copy.deepcopy(params)
    long['simulation']['duration'] = 3000.0
    with pytest.raises(ConfigError, match='control periods'):
        S.check(long, file)


def test_one_default_per_key_everywhere():
    """control.rate: ControllerCore, the serial bridge and the sim node read the schema's default."""
    import inspect

    from uk_controller.control import controller

    src = (ROOT / 'uk_controller' / 'ros' / 'serial_bridge_node.py').read_text()
    assert "get('rate', 100.0)" not in src
    assert "control.get('rate', 1000.0)" not in inspect.getsource(controller)
    settings = resolve()
    assert settings.control.state_timeout == S.default('control.state_timeout')
    assert settings.ros.trigger == S.default('ros.trigger')


def test_a_key_is_one_entry(monkeypatch):
    """One more entry in the schema's table adds a key: it is then accepted, range-checked, in the docs
    table and has its default; the table back as it was, the key is unknown again (the schema is rebuilt
    from the table, never appended to)."""
    params, file = load_config(ROOT / 'config' / 'scara.yaml')
    params = copy.deepcopy(params)
    params['control']['example_gain'] = 3.0
    with pytest.raises(ConfigError, match='example_gain'):
        S.check(params, file)
    monkeypatch.setattr(
        S,
        'SETTINGS',
        (*S.SETTINGS, S.Setting('control.example_gain', 'float', 2.0, '1/s', 'an example', low=0.0, high=5.0)),
    )
    S.check(params, file)
    params['control']['example_gain'] = 9.0
    with pytest.raises(ConfigError, match=r'\[0, 5\] 1/s'):
        S.check(params, file)
    assert '`control.example_gain`' in S.markdown_table()
    assert S.default('control.example_gain') == 2.0
    monkeypatch.undo()
    with pytest.raises(ConfigError, match='example_gain'):
        S.check(params, file)


# ------------------------------------------------------------------ choices read from their tables
# Each named choice lives once, in the table that implements it; the schema, the CLI flags and the
# docs table read it from there. Adding a name to the table alone must make it valid everywhere, and
# removing one must make it invalid everywhere: a second copy of a list (in the schema or in an
# argparse ``choices=``) fails one of these two tests.


def _pinv_table():
    from uk_controller.core.pinv import reference

    return reference.PINV_METHODS, reference.pinv_svd


def _plant_table():
    from uk_controller.sim import plants

    return plants.PLANTS, plants.PLANTS['uk']


def _integrator_table(monkeypatch, add=None, remove=None):
    from uk_controller.sim import plants

    names = tuple(n for n in plants.INTEGRATORS if n != remove) + ((add,) if add else ())
    monkeypatch.setattr(plants, 'INTEGRATORS', names)


CHOICE_TABLES = [  # (schema key, simulate flag, a name the shipped table has)
    ('control.pinv', '--pinv', 'mgs'),
    ('simulation.plant', '--plant', 'mujoco'),
    ('simulation.integrator', '--integrator', 'solve_ivp'),
]


def _add(monkeypatch, key, name):
    if key == 'control.pinv':
        table, entry = _pinv_table()
        monkeypatch.setitem(table, name, entry)
    elif key == 'simulation.plant':
        table, entry = _plant_table()
        monkeypatch.setitem(table, name, entry)
    else:
        _integrator_table(monkeypatch, add=name)


def _remove(monkeypatch, key, name):
    if key == 'control.pinv':
        monkeypatch.delitem(_pinv_table()[0], name)
    elif key == 'simulation.plant':
        monkeypatch.delitem(_plant_table()[0], name)
    else:
        _integrator_table(monkeypatch, remove=name)


def _simulate_args(flag, value):
    from uk_controller.cli import build_parser

    return build_parser().parse_args(['simulate', 'scara', flag, value])


@pytest.mark.parametrize('key, flag, _shipped', CHOICE_TABLES)
def test_a_name_added_to_its_table_is_accepted_by_schema_cli_and_docs(key, flag, _shipped, monkeypatch):
    name = 'dummy_choice'
    setting = S.lookup(key)
    assert name not in setting.choices
    with pytest.raises(ConfigError):
        S.check_value(setting, name)
    _add(monkeypatch, key, name)
    assert name in setting.choices
    assert S.check_value(setting, name) == name
    section, leaf = key.split('.')
    S.check({section: {leaf: name}}, 'robot.yaml')
    assert getattr(_simulate_args(flag, name), flag[2:]) == name
    row = next(line for line in S.markdown_table().splitlines() if line.startswith(f'| `{key}` |'))
    assert name in row, row


@pytest.mark.parametrize('key, flag, shipped', CHOICE_TABLES)
def test_a_name_missing_from_its_table_is_refused_by_schema_and_cli(key, flag, shipped, monkeypatch, capsys):
    setting = S.lookup(key)
    assert S.check_value(setting, shipped) == shipped
    _remove(monkeypatch, key, shipped)
    with pytest.raises(ConfigError, match=key):
        S.check_value(setting, shipped)
    section, leaf = key.split('.')
    with pytest.raises(ConfigError, match=key):
        S.check({section: {leaf: shipped}}, 'robot.yaml')
    with pytest.raises(SystemExit) as exit_:
        _simulate_args(flag, shipped)
    assert exit_.value.code == 2 and f"invalid choice: '{shipped}'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_schema_and_its_choices_need_no_optional_package():
    """Reading the choices (and the docs table) imports the tables, not numba, MuJoCo or the serial stacks."""
    code = (
        'import sys; from uk_controller.settings import schema as S; S.markdown_table(); '
        '[S.check_value(S.lookup(k), S.default(k)) for k in ("control.pinv", "simulation.plant", '
        '"simulation.integrator", "hardware.protocol")]; '
        'print(sorted(m for m in ("numba", "mujoco", "serial", "dynamixel_sdk") if m in sys.modules))'
    )
    out = subprocess.run(
        [sys.executable, '-c', code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, 'PYTHONPATH': str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '[]'
