"""The protocol registry is the one list of motor protocols.

The settings schema (``hardware.protocol`` choices, the ``hardware.<name>.*`` option keys and
their defaults), the CLI ``--protocol`` choices, the calibration and the factories all agree
with it; and the recipe of its docstring (one subpackage plus one registry line) is enough for
a new protocol to run a SafeBus against its emulator.
"""

import textwrap
from pathlib import Path

import numpy as np
import pytest

from uk_controller.cli import build_parser
from uk_controller.files.parameter_file import ConfigError
from uk_controller.hardware import registry
from uk_controller.hardware.bus import MotorBus
from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.emulator import DeviceEmulator, IndependentJointsPlant
from uk_controller.settings import schema as S
from uk_controller.settings.resolve import resolve

NAMES = registry.names()


def test_settings_schema_lists_the_registry_protocols():
    assert S.PROTOCOLS == NAMES
    assert S.lookup('hardware.protocol').choices == NAMES
    assert S.default('hardware.protocol') == registry.DEFAULT_PROTOCOL


@pytest.mark.parametrize('name', NAMES)
def test_settings_schema_option_keys_and_defaults_are_the_registry_calibration_defaults(name):
    defaults = registry.get(name).defaults()
    prefix = f'hardware.{registry.get(name).section_name}.'
    schema = {s.key[len(prefix) :]: s for s in S.SETTINGS if s.key.startswith(prefix)}
    assert set(schema) == set(defaults), name
    for key, setting in schema.items():
        if setting.default is not S.NONE:
            assert setting.default == defaults[key], f'{prefix}{key}'


@pytest.mark.parametrize('name', NAMES)
def test_registry_line_names_a_bus_and_a_device_of_that_protocol(name):
    entry = registry.get(name)
    bus, device = entry.bus_class(), entry.device_class()
    assert issubclass(bus, MotorBus) and bus.protocol == name
    assert issubclass(device, DeviceEmulator) and device.protocol == name
    assert bus.__module__ == f'uk_controller.hardware.protocols.{name}.bus'
    assert device.__module__ == f'uk_controller.hardware.protocols.{name}.device'


def test_unknown_protocol_is_an_error_naming_the_accepted_ones():
    hw = HardwareConfig.default(['m1'])
    with pytest.raises(ValueError, match='canopen.*' + ', '.join(NAMES)):
        registry.make_bus(HardwareConfig.default(['m1'], protocol='canopen'))
    with pytest.raises(ValueError, match='canopen'):
        registry.make_emulator('canopen', IndependentJointsPlant([1.0]), hw)
    params = {'actuators': {'names': ['m1']}, 'hardware': {'protocol': 'canopen'}}
    with pytest.raises(ConfigError, match='hardware.protocol'):
        HardwareConfig.from_settings(resolve('robot.yaml', params=params))


def test_a_protocol_added_to_the_registry_is_accepted_by_schema_and_cli(monkeypatch):
    """The registry line alone (no schema edit): the schema accepts the name, docs/config.md lists it,
    and ``run``/``emulate --protocol`` take it."""
    setting = S.lookup('hardware.protocol')
    with pytest.raises(ConfigError, match='hardware.protocol'):
        S.check({'hardware': {'protocol': 'echo'}}, 'robot.yaml')
    monkeypatch.setitem(registry.PROTOCOLS, 'echo', registry.Protocol('echo', bus='EchoBus', device='EchoDevice'))
    assert S.check_value(setting, 'echo') == 'echo'
    S.check({'hardware': {'protocol': 'echo'}}, 'robot.yaml')
    row = next(line for line in S.markdown_table().splitlines() if line.startswith('| `hardware.protocol` |'))
    assert 'echo' in row, row
    for command in ('run', 'emulate'):
        assert build_parser().parse_args([command, 'scara', '--protocol', 'echo']).protocol == 'echo'


def test_protocol_option_keys_are_declared_by_the_codec_only():
    """The schema's ``hardware.<protocol>.*`` entries are the codecs' SETTINGS (no copy in settings.py),
    and a protocol added to the registry brings its codec's keys along."""
    for name in NAMES:
        entry = registry.get(name)
        prefix = f'hardware.{entry.section_name}.'
        schema = [s for s in S.SETTINGS if s.key.startswith(prefix)]
        # the section's keys, then (can_mit) the per-motor map hardware.<name>.<MOTOR_SECTION>.*
        assert schema == [s for s in entry.settings() if s.key.startswith(prefix)], name
        assert all(s.key.startswith((prefix, 'hardware.<name>.')) for s in entry.settings()), name
        assert all(any(s is t for t in S.SETTINGS) for s in entry.settings())
    source = (Path(S.__file__)).read_text()
    assert not any(f"'hardware.{section}." in source for section in registry.sections())
    assert "'hardware.<name>.mit." not in source


def test_a_registered_protocol_brings_its_option_settings(tmp_path, monkeypatch):
    pkg = tmp_path / 'gain_protocol'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('')
    (pkg / 'codec.py').write_text(
        textwrap.dedent('''
        from uk_controller.settings.setting import Setting
        OPTIONS = {'gain': 1.0}
        SETTINGS = (Setting('hardware.gain.gain', 'float', 1.0, '', 'a gain', low=0.0),)
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(
        registry.PROTOCOLS, 'gain', registry.Protocol('gain', bus='B', device='D', package='gain_protocol')
    )
    keys = [s.key for s in S._protocol_settings()]
    assert keys[-1] == 'hardware.gain.gain' and keys.count('hardware.gain.gain') == 1


def test_a_protocol_missing_from_the_registry_is_refused_by_schema_and_cli(monkeypatch, capsys):
    S.check({'hardware': {'protocol': 'odrive'}}, 'robot.yaml')
    # a copy without it (deleting and restoring the entry would move it to the end of the table)
    monkeypatch.setattr(registry, 'PROTOCOLS', {k: v for k, v in registry.PROTOCOLS.items() if k != 'odrive'})
    with pytest.raises(ConfigError, match="hardware.protocol.*'odrive' is not one of"):
        S.check({'hardware': {'protocol': 'odrive'}}, 'robot.yaml')
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(['run', 'scara', '--protocol', 'odrive'])
    assert exit_.value.code == 2 and "invalid choice: 'odrive'" in capsys.readouterr().err


@pytest.mark.parametrize('command', ['run', 'emulate'])
def test_cli_protocol_choices_are_the_registry(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([command, 'scara', '--protocol', 'canopen'])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'canopen'" in err and all(name in err for name in NAMES), err


@pytest.mark.serial
def test_factories_give_the_section_over_the_registry_defaults():
    """hardware.dynamixel.current_unit from the config wins; the other units keep the defaults."""
    params = {
        'actuators': {'names': ['m1'], 'm1': {'effort_limit': 1.0}},
        'hardware': {'protocol': 'dynamixel', 'dynamixel': {'current_unit': 1e-3}},
    }
    hw = HardwareConfig.from_settings(resolve('robot.yaml', params=params))
    bus = registry.make_bus(hw.at_port('/nonexistent'))  # not opened
    defaults = registry.get('dynamixel').defaults()
    assert bus.options == {**defaults, 'current_unit': 1e-3}
    emu = registry.make_emulator('dynamixel', IndependentJointsPlant([1.0]), hw)
    try:
        assert emu.options == bus.options
    finally:
        emu.close()


@pytest.mark.serial
def test_a_new_protocol_is_one_subpackage_and_one_registry_line(tmp_path, monkeypatch):
    """The docstring's recipe: a protocol package (here outside the tree, `package=`) with codec, bus
    and device, one Protocol line, and SafeBus arms and drives the emulated motors through it."""
    from uk_controller.hardware.faults import stepped_bus
    from uk_controller.hardware.safety import ARMED

    pkg = tmp_path / 'echo_protocol'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('"""A test protocol: uk_binary framing under another name."""\n')
    (pkg / 'codec.py').write_text("OPTIONS = {'gain': 1.0}\n")
    (pkg / 'bus.py').write_text(
        textwrap.dedent('''
        from uk_controller.hardware.protocols.uk_binary.bus import UKBinaryBus

        class EchoBus(UKBinaryBus):
            protocol = 'echo'
        ''')
    )
    (pkg / 'device.py').write_text(
        textwrap.dedent('''
        from uk_controller.hardware.protocols.uk_binary.device import UKBinaryDevice

        class EchoDevice(UKBinaryDevice):
            protocol = 'echo'
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(
        registry.PROTOCOLS,
        'echo',
        registry.Protocol('echo', bus='EchoBus', device='EchoDevice', package='echo_protocol'),
    )

    assert 'echo' in registry.names()
    assert 'echo' in build_parser().parse_args(['emulate', 'scara', '--protocol', 'echo']).protocol
    params = {
        'actuators': {'names': ['m1', 'm2'], 'm1': {'effort_limit': 2.0}, 'm2': {'effort_limit': 2.0}},
        'hardware': {'protocol': 'echo', 'echo': {'gain': 3.0}},
    }
    hw = HardwareConfig.from_settings(resolve('robot.yaml', params=params))
    assert hw.protocol == 'echo' and hw.options == {'echo': {'gain': 3.0}}
    plant = IndependentJointsPlant(np.full(2, 0.05), 0.5)
    clock, emu, safe = stepped_bus(hw, plant, 0.004, protocol='echo', watchdog=0.1)
    try:
        assert type(emu).__name__ == 'EchoDevice' and emu.options == {'gain': 3.0}
        assert safe.connect(raise_errors=True)
        effort = np.array([0.5, -0.25])
        for _ in range(20):
            safe.cycle(effort, clock())
            clock.advance(0.004)
        assert safe.state == ARMED and type(safe.bus).__name__ == 'EchoBus'
        np.testing.assert_allclose(emu.joint_effort(), effort, rtol=1e-6)  # float32 currents on the wire
    finally:
        safe.shutdown()
        emu.close()
