"""resolve(file, overrides) -> Settings: one resolution, typed immutable sections, one
ConfigError, every source of a value an override of the same resolution.

The expected values are computed independently of resolve(): from the setup file as PyYAML reads it and
from the schema's declarations (schema.SETTINGS), never from resolve's own output.
"""

import argparse
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

import uk_controller.settings.resolve as resolve_module
from uk_controller.files import rcl_yaml
from uk_controller.files.parameter_file import ConfigError
from uk_controller.settings import schema as S
from uk_controller.settings.frozen import FrozenDict, Section
from uk_controller.settings.resolve import resolve
from uk_controller.settings.types import Settings

ROOT = Path(__file__).resolve().parents[1]
SCARA = ROOT / 'config' / 'scara.yaml'


def file_tree(path):
    """The ``ros__parameters`` of a shipped setup, read by PyYAML directly."""
    return yaml.safe_load(path.read_text())['/**']['ros__parameters']


def dig(tree, key):
    node = tree
    for part in key.split('.'):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def attr(settings, key):
    node = settings
    for part in key.split('.'):
        node = getattr(node, part)
    return node


def normal(value):
    """A schema value as resolve is expected to hold it: ints of float keys as floats, lists as tuples."""
    if isinstance(value, (list, tuple)):
        return tuple(normal(v) for v in value)
    return value


# ----------------------------------------------------------------------------- values and defaults


def test_every_key_is_the_file_value_or_the_schema_default():
    """Every type-free key of the schema, for scara: the file's value if it gives one, else the schema's
    default (scalars of list keys as one-entry tuples); the keys whose default is another key are
    filled from it (simulation.rate, hardware.rate: control.rate; robot.name: the file name)."""
    tree = file_tree(SCARA)
    settings = resolve('scara')
    derived = {'simulation.rate': 'control.rate', 'hardware.rate': 'control.rate'}
    checked = 0
    for s in S.SETTINGS:
        if s.when or s.type == 'section' or '<name>' in s.key or s.key.count('.') < 1:
            continue
        given = dig(tree, s.key)
        if given is None and s.key in derived:
            given = dig(tree, derived[s.key]) or S.default(derived[s.key])
        expected = given if given is not None else s.default
        if s.key == 'robot.name' and expected is None:
            expected = 'scara'
        if expected is not None and s.type == 'floats' and not isinstance(expected, (list, tuple)):
            expected = [expected]
        if expected is not None and s.type in ('float', 'floats'):
            expected = [float(v) for v in expected] if isinstance(expected, (list, tuple)) else float(expected)
        value = attr(settings, s.key)
        assert value == normal(expected), s.key
        assert type(value) is type(normal(expected)), s.key
        checked += 1
    assert checked > 80  # the whole schema, not a handful of keys
    assert settings.file == SCARA


def test_named_items_fill_their_defaults():
    settings = resolve('scara', {'hardware.motor2.gear_ratio': 3.0})
    names = file_tree(SCARA)['actuators']['names']
    assert list(settings.hardware.items) == names
    assert settings.hardware.items['motor2'].gear_ratio == 3.0
    assert settings.hardware.items['motor1'].gear_ratio == S.default('hardware.<name>.gear_ratio')
    assert settings.actuators.items['motor1'].joint == file_tree(SCARA)['actuators']['motor1']['joint']


def test_settings_are_immutable():
    settings = resolve('scara')
    assert isinstance(settings, Settings) and isinstance(settings.control, Section)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.control.rate = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.control = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.constraints.items['tool_path'].type = 'hold'
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.constraints.items['tool_path'].trajectory.radius = 1.0
    with pytest.raises(TypeError):
        settings.constraints.items.pop('tool_path')
    assert isinstance(settings.constraints.items, FrozenDict)
    assert isinstance(settings.stabilization.omega, tuple)
    with pytest.raises(AttributeError):  # slots: no attribute appears by mistake
        object.__setattr__(settings.control, 'rte', 1.0)


# ----------------------------------------------------------------------------- one source, one resolution


def _count_checks(monkeypatch):
    calls = {'check': 0, 'load': 0}
    real_check, real_load = S.check, resolve_module.load_config

    def check(*args, **kwargs):
        calls['check'] += 1
        return real_check(*args, **kwargs)

    def load(*args, **kwargs):
        calls['load'] += 1
        return real_load(*args, **kwargs)

    monkeypatch.setattr(S, 'check', check)
    monkeypatch.setattr(resolve_module, 'load_config', load)
    return calls


def test_cli_flag_reaches_the_settings_and_the_file_is_checked_once(monkeypatch):
    from uk_controller import cli
    from uk_controller.robots import load_robot

    calls = _count_checks(monkeypatch)
    args = cli.build_parser().parse_args(['simulate', 'scara', '--rate', '500', '--omega', '20'])
    overrides, labels = cli.simulate_overrides(args)
    setup = load_robot(args.robot, overrides, labels=labels)
    assert calls == {'check': 1, 'load': 1}
    assert setup.settings.control.rate == 500.0 and setup.settings.stabilization.omega == (20.0,)
    assert float(setup.stabilization.kp) == 20.0**2  # the gains built from the override


def test_sweep_set_reaches_the_settings(monkeypatch):
    from uk_controller.sweep import cli as SC
    from uk_controller.sweep import runner as R

    parser = argparse.ArgumentParser()
    SC.add_sweep_parser(parser.add_subparsers())
    args = parser.parse_args(
        ['sweep', 'planar_3r', '--set', 'control.rate=500', '--grid', 'stabilization.omega=5,10', '--duration', '0.1']
    )
    context, keys, specs = SC.prepare(args)
    calls = _count_checks(monkeypatch)
    setup = R.build_setup(context, specs[1]['overrides'])
    assert calls['check'] == 1 and calls['load'] == 0  # the file was read once, by prepare
    assert setup.settings.control.rate == 500.0 and setup.settings.stabilization.omega == (10.0,)


def test_run_flags_reach_the_serial_settings(monkeypatch):
    from uk_controller.hardware.calibration import HardwareConfig
    from uk_controller.hardware.run_command import add_run_arguments, run_overrides
    from uk_controller.robots import load_robot

    parser = add_run_arguments(argparse.ArgumentParser())
    args = parser.parse_args(['scara', '--port', '/dev/ttyTEST9', '--rate', '400'])
    overrides, labels = run_overrides(args)
    calls = _count_checks(monkeypatch)
    setup = load_robot(args.config, overrides, labels=labels)
    hw = HardwareConfig.from_setup(setup)
    assert calls == {'check': 1, 'load': 1}
    # --rate is the control rate, as in simulate and emulate; the bus follows it (the file sets no hardware.rate)
    assert hw.port == '/dev/ttyTEST9' and setup.settings.control.rate == 400.0 and hw.rate == 400.0
    default = HardwareConfig.from_setup(load_robot('scara'))
    assert default.port == S.default('hardware.port') and default.rate == file_tree(SCARA)['control']['rate']


def test_the_sampling_rule_sees_the_bus_rate():
    """The bus samples the state at hardware.rate: a bus slower than the controller is the loop's rate for
    the sampling rule (the SCARA's omega = 15 rad/s needs >= 60 Hz), named as the key that set it."""
    with pytest.raises(ConfigError) as err:
        resolve('scara', {'hardware.rate': 30.0})
    assert 'natural frequency 15 rad/s is too fast for hardware.rate 30 Hz' in str(err.value), str(err.value)
    with pytest.raises(ConfigError, match=r'too fast for --bus \(hardware.rate\) 30 Hz'):
        resolve('scara', {'hardware.rate': 30.0}, labels={'hardware.rate': '--bus (hardware.rate)'})
    assert resolve('scara', {'hardware.rate': 60.0}).hardware.rate == 60.0


class _Param:
    def __init__(self, value):
        self.value = value
        from rclpy.parameter import Parameter

        self.type_ = Parameter.Type.STRING if isinstance(value, str) else Parameter.Type.DOUBLE


class _FakeNode:
    """What read_settings asks of an rclpy node: the parameters given with -p (no DDS started)."""

    def __init__(self, **given):
        self.params = {k: _Param(v) for k, v in given.items()}

    def has_parameter(self, name):
        return name in self.params

    def declare_parameter(self, name, value):
        self.params[name] = _Param(value)

    def get_parameter(self, name):
        return self.params[name]

    def get_parameters_by_prefix(self, prefix):
        return dict(self.params)


def test_ros_parameter_reaches_the_same_field(monkeypatch):
    pytest.importorskip('rclpy')
    from uk_controller.ros.node_setup import read_settings, resolve_live

    calls = _count_checks(monkeypatch)
    node = _FakeNode(config='scara', **{'control.rate': 500.0, 'hardware.port': '/dev/ttyROS'})
    state = read_settings(node)
    assert calls['check'] == 1
    assert state.settings.control.rate == 500.0 and state.settings.hardware.port == '/dev/ttyROS'
    assert state.settings.file == SCARA
    # a live parameter is one more override of the same resolution (cross-key rules included)
    assert resolve_live(state, {'stabilization.omega': 30.0}).stabilization.omega == (30.0,)
    with pytest.raises(ConfigError, match=r'rate/4'):
        resolve_live(state, {'stabilization.omega': 200.0})


# ----------------------------------------------------------------------------- one error type


@pytest.mark.parametrize(
    'overrides, key, words',
    [
        ({'control.rat': 500.0}, 'control.rat', "did you mean 'rate'"),  # unknown key + suggestion
        ({'control.rate': -5.0}, 'control.rate', '(0, 20000] Hz'),  # range
        ({'control.pinv': 'svdd'}, 'control.pinv', "did you mean 'svd'"),  # choice + suggestion
        ({'hardware.watchdog': 0.0001}, 'hardware.watchdog', 'longer than the control period'),  # cross-key
        ({'ros.loop.priority': 120}, 'ros.loop.priority', '[0, 99]'),  # was SettingsError
        ({'ros.effort_joints': ['a', 'a']}, 'ros.effort_joints', 'duplicates'),  # was ParameterError
        ({'simulation.max_command_lag': 3}, 'simulation.max_command_lag', 'publish_clock'),  # was ParameterError
        ({'hardware.motor1.direction': 2.0}, 'hardware.motor1.direction', '1.0 or -1.0'),  # was HardwareConfigError
    ],
)
def test_every_bad_input_is_one_config_error_naming_file_key_and_range(overrides, key, words):
    from uk_controller.hardware.calibration import HardwareConfig
    from uk_controller.robots import load_robot

    with pytest.raises(ConfigError) as err:
        HardwareConfig.from_setup(load_robot('scara', overrides))
    assert type(err.value) is ConfigError
    assert err.value.key == key and str(SCARA) in str(err.value) and words in str(err.value), str(err.value)


def test_sweep_spec_errors_are_config_errors():
    from uk_controller.sweep import grid as G

    with pytest.raises(ConfigError, match=r"did you mean 'control.rate'"):
        G.key_type(file_tree(SCARA), 'control.rat')


def test_the_other_error_types_are_gone():
    names = ('ParameterError', 'SettingsError', 'HardwareConfigError', 'SweepSpecError')
    for path in (ROOT / 'uk_controller').rglob('*.py'):
        text = path.read_text()
        for name in names:
            assert not re.search(rf'\b{name}\b', text), (path, name)


# ----------------------------------------------------------------------------- readers

CONSUMERS = [
    'robots/setup.py',
    'control/controller.py',
    'control/redundancy.py',
    'sim/closed_loop.py',
    'sim/uk_plant.py',
    'sim/mujoco_plant.py',
    'sim/report.py',
    'sim/mcap_log.py',
    'ros/params.py',
    'ros/sim_node.py',
    'ros/serial_bridge_node.py',
    'ros/node_setup.py',
    'ros/controller_node.py',
    'ros/control_loop.py',
    'hardware/run_command.py',
    'hardware/emulate_command.py',
    'hardware/serial_loop.py',
    'sweep/runner.py',
    'sweep/grid.py',
    'sweep/cli.py',
    'cli.py',
]


@pytest.mark.parametrize('module', CONSUMERS)
def test_consumers_neither_check_nor_restate_defaults(module):
    """The schema runs in resolve() only: a consumer reads attributes of Settings, never the raw tree
    (``setup.config``), a default (``S.default``/``S.get``) or a second check (``check``/``check_cross``)."""
    text = (ROOT / 'uk_controller' / module).read_text()
    for pattern in (
        r'\.config\.get\(',
        r'\bsetup\.config\b',
        r'\bS\.get\(',
        r'\.default\(\'',
        r'\bcheck_cross\(',
        r'\bS\.check\(',
        r'\bsettings\.check\(',
        r"get\('rate', 1000",
    ):
        assert not re.search(pattern, text), (module, pattern)


def test_robot_setup_carries_settings_not_a_dict():
    from uk_controller.robots import RobotSetup, load_robot

    fields = {f.name: f.type for f in dataclasses.fields(RobotSetup)}
    assert 'config' not in fields and fields['settings'] == 'Settings'
    setup = load_robot('scara')
    assert isinstance(setup.settings, Settings)
    assert not any(
        isinstance(getattr(setup, f), dict) and not isinstance(getattr(setup, f), FrozenDict) for f in fields
    )


def test_settings_survive_a_trip_to_a_worker_process():
    """Sweep workers and process pools receive what they run by pickle: the copy equals the original."""
    import pickle

    settings = resolve('scara', {'hardware.motor1.gear_ratio': 2.0})
    copy = pickle.loads(pickle.dumps(settings))
    assert copy == settings and copy is not settings
    assert copy.hardware.items['motor1'].gear_ratio == 2.0 and isinstance(copy.constraints.items, FrozenDict)


# ----------------------------------------------------------------------------- Python defaults


def _planar_with(tmp_path, **simulation):
    """config/planar_3r.yaml (its URDF named by package://) with `simulation` keys set."""
    tree = yaml.safe_load((ROOT / 'config' / 'planar_3r.yaml').read_text())
    tree['/**']['ros__parameters']['simulation'].update(simulation)
    path = tmp_path / 'planar_3r_edited.yaml'
    path.write_text(rcl_yaml.dump(tree))  # names such as y quoted, as ROS needs them
    return path


def _mass(model):
    return sum(inertia.mass for inertia in model.model.inertias)


@pytest.mark.slow
def test_simulate_runs_the_plant_and_mass_scale_of_the_file(tmp_path):
    """simulate(setup) with no plant or mass_scale runs what the file says, as the CLI does."""
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    path = _planar_with(tmp_path, mass_scale=1.3, duration=0.02)
    result = simulate(load_robot(path))
    assert result.settings['mass_scale'] == 1.3
    assert result.q.tobytes() == simulate(load_robot(path, {'simulation.mass_scale': 1.3})).q.tobytes()
    assert result.q.tobytes() != simulate(load_robot(path, {'simulation.mass_scale': 1.0})).q.tobytes()
    pytest.importorskip('mujoco')
    assert simulate(load_robot(_planar_with(tmp_path, plant='mujoco', duration=0.02))).plant == 'mujoco'


@pytest.mark.slow
def test_controller_from_config_and_plants_follow_the_file(tmp_path):
    """ControllerCore.from_config builds the controller of the file: its model is the description as
    written, as in simulate (simulation.mass_scale is the plant's mismatch, never the controller's), and
    a plant made from its setup has the file's mismatch; an override of simulation.mass_scale is the plant's."""
    from uk_controller.control.controller import ControllerCore
    from uk_controller.sim.closed_loop import make_plant
    from uk_controller.sim.uk_plant import UKPlant

    path = _planar_with(tmp_path, mass_scale=1.3)
    written = _mass(ControllerCore.from_config('planar_3r').model)
    ctrl = ControllerCore.from_config(path)
    assert _mass(ctrl.model) == written
    assert ctrl.setup.settings.simulation.mass_scale == 1.3
    scaled = _mass(UKPlant.from_setup(ctrl.setup).model)
    assert scaled > written
    assert _mass(make_plant(ctrl.setup).model) == scaled
    unscaled = ControllerCore.from_config(path, {'simulation.mass_scale': 1.0})
    assert _mass(unscaled.model) == written
    assert _mass(UKPlant.from_setup(unscaled.setup).model) == written


def test_plant_flags_default_to_the_file(tmp_path):
    """--plant of simulate, emulate and sweep is an override of simulation.plant only when given; a sweep's
    run ids still name the plant the runs use (the file's 'uk' for a shipped robot: ids as before)."""
    from uk_controller import cli
    from uk_controller.sweep import cli as SC
    from uk_controller.sweep import grid as G

    parser = cli.build_parser()
    for argv in (['simulate', 'scara'], ['emulate', 'scara'], ['sweep', 'scara', '--grid', 'control.rate=500']):
        assert parser.parse_args(argv).plant is None, argv
    overrides, labels = cli.simulate_overrides(parser.parse_args(['simulate', 'scara', '--plant', 'mujoco']))
    assert overrides['simulation.plant'] == 'mujoco' and labels['simulation.plant'].startswith('--plant')
    assert 'simulation.plant' not in cli.simulate_overrides(parser.parse_args(['simulate', 'scara']))[0]
    for robot, plant in (('planar_3r', 'uk'), (str(_planar_with(tmp_path, plant='mujoco')), 'mujoco')):
        args = parser.parse_args(['sweep', robot, '--grid', 'control.rate=400,500', '--duration', '0.1'])
        context, _, specs = SC.prepare(args)
        assert context['plant'] is None
        fixed = {'simulation.duration': 0.1}
        assert [s['run_id'] for s in specs] == [
            G.run_id(context['robot'], plant, {**s['overrides'], **fixed}) for s in specs
        ]
