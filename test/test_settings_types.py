"""The typed settings classes (uk_controller/settings/types.py): generated from the schema, checked in,
and what mypy reads (setup.cfg [mypy]) to catch a misspelled or mistyped setting in its readers."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from uk_controller.settings import generate, sections, types
from uk_controller.settings import schema as S
from uk_controller.settings.resolve import resolve

ROOT = Path(__file__).resolve().parents[1]

#: the settings package and its direct readers: mypy must find nothing in them (setup.cfg checks their
#: unannotated functions too)
MYPY_TARGETS = (
    'uk_controller/settings',
    'uk_controller/constraints/stack.py',
    'uk_controller/constraints/trajectories.py',
    'uk_controller/robots/setup.py',
    'uk_controller/control/controller.py',
    'uk_controller/control/rearm.py',
    'uk_controller/hardware/run_command.py',
    'uk_controller/sim/closed_loop.py',
    'uk_controller/sim/plants.py',
)


def test_types_module_is_what_the_schema_generates():
    assert generate.TYPES_FILE.read_text() == generate.types_source(), (
        'uk_controller/settings/types.py is out of date: python -m uk_controller.settings --write-types'
    )


def test_write_types_writes_the_generated_source(tmp_path, monkeypatch, capsys):
    target = tmp_path / 'types.py'
    monkeypatch.setattr(generate, 'TYPES_FILE', target)
    generate.main(['--write-types'])
    assert target.read_text() == generate.types_source()
    assert capsys.readouterr().out == ''  # writing prints no table
    generate.main([])
    assert capsys.readouterr().out == S.markdown_table()


def test_a_key_added_to_the_schema_is_a_typed_attribute(monkeypatch):
    """The generated text follows the schema: a new key is a field of its section with its type (so the
    checked-in module would no longer match, and the test above fails until it is regenerated)."""
    assert 'example_gain' not in generate.types_source()
    monkeypatch.setattr(
        S, 'SETTINGS', (*S.SETTINGS, S.Setting('control.example_gain', 'floats', None, '1/s', 'an example'))
    )
    text = generate.types_source()
    control = text[text.index('class ControlSettings(Section):') :]
    control = control[: control.index('\n\n\n')]
    assert control.endswith('    #: an example [1/s]\n    example_gain: tuple[float, ...] | None')
    assert text != generate.TYPES_FILE.read_text()


def test_classes_that_do_not_match_the_schema_are_refused(monkeypatch):
    tree, typed_items = S.section_tree()
    sections._check_classes('', tree, typed_items)  # the checked-in classes match
    tree['control']['example_gain'] = S.Setting('control.example_gain', 'float', 1.0)
    with pytest.raises(RuntimeError, match=r"'control'.*--write-types"):
        sections._check_classes('', tree, typed_items)


def test_resolved_settings_are_the_generated_classes():
    settings = resolve('scara', {'hardware.motors': ['motor1'], 'ros.loop.window': 2.0})
    assert type(settings) is types.Settings
    for name, cls in types.CLASSES.items():
        if '.' not in name:
            assert type(getattr(settings, name)) is cls
    assert type(settings.ros.loop) is types.RosLoopSettings and settings.ros.loop.window == 2.0
    assert type(settings.hardware.items['motor1']) is types.HardwareItemSettings
    assert settings.hardware.items['motor1'].gear_ratio == S.default('hardware.<name>.gear_ratio')
    # the keys resolve always fills are typed without None, and are filled
    assert settings.simulation.rate == settings.control.rate and settings.robot.name == 'scara'
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.control.rate = 1.0


@pytest.fixture(scope='module')
def mypy_run(tmp_path_factory):
    """One mypy run over the settings, their readers and a file that misspells a setting."""
    pytest.importorskip('mypy', reason='mypy is not installed (pip install mypy, or the test extra of setup.py)')
    tmp = tmp_path_factory.mktemp('mypy')
    probe = tmp / 'probe_settings.py'
    probe.write_text(
        'from uk_controller.settings.resolve import resolve\n'
        '\n'
        "settings = resolve('scara')\n"
        'period: float = 1.0 / settings.control.rate\n'
        'window: float = settings.ros.loop.window\n'
        'ratio: float = settings.hardware.items["motor1"].gear_ratio\n'
        'rate: float = settings.control.rte\n'
        "item = settings.constraints.items['tool_path']\n"
        "if item.type == 'frame_position':\n"
        '    axes: tuple[str, ...] = item.axes\n'
        '    mode: str = item.mode\n'
    )
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    cmd = [sys.executable, '-m', 'mypy', '--config-file', str(ROOT / 'setup.cfg'), '--cache-dir', str(tmp / 'cache')]
    done = subprocess.run(
        [*cmd, *MYPY_TARGETS, str(probe)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    return done, probe


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_settings_and_their_readers(mypy_run):
    done, probe = mypy_run
    errors = [line for line in done.stdout.splitlines() if ': error:' in line and probe.name not in line]
    assert not errors, done.stdout + done.stderr
    assert 'Found 2 errors in 1 file' in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_finds_a_misspelled_setting(mypy_run):
    done, probe = mypy_run
    errors = [line for line in done.stdout.splitlines() if ': error:' in line and probe.name in line]
    assert len(errors) == 2, done.stdout + done.stderr
    assert f'{probe.name}:7: error: "ControlSettings" has no attribute "rte"' in errors[0]
    # a constraint item narrowed by its type has that type's keys only (a frame_position row has no mode)
    assert f'{probe.name}:11: error: "FramePositionConstraintSettings" has no attribute "mode"' in errors[1]
    assert done.returncode == 1
