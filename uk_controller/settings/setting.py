"""One setting of the schema (uk_controller/settings/schema.py): its declaration and the check of one value.

:class:`Setting` is one key of a robot setup (type, default, unit, accepted range or choices, live or
not); :func:`check_value` checks and normalises one value against it, raising
:class:`~uk_controller.files.parameter_file.ConfigError` that names the key and the accepted range. The schema
(:data:`uk_controller.settings.schema.SETTINGS`) is a tuple of these; the YAML loader, ROS parameters, live
updates and CLI flags all check values here.
"""

from __future__ import annotations

import difflib
import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..files.parameter_file import ConfigError

#: No default: the key is required where it applies, or optional without a value.
NONE = None


class RegistryNames(Sequence):
    """The names of a registry table, read from the module that implements them, when first asked.

    ``RegistryNames('uk_controller.core.pinv.reference', 'PINV_METHODS')`` is the tuple of the keys of that
    dict (or the items of that tuple) *as the table holds them now*: a method added to the table is a
    valid ``choices`` entry of the schema, of the CLI flags built from it and of the docs table, with
    no second list to edit. The module is imported on first use, not when the schema is imported, so
    ``uk_controller.settings.schema`` needs neither numba, MuJoCo, pyserial nor dynamixel_sdk, and a table
    that lives above the schema in the layers (sim/, hardware/) is read without an import cycle.
    """

    def __init__(self, module: str, table: str):
        self.module, self.table = module, table

    def names(self) -> tuple:
        return tuple(getattr(importlib.import_module(self.module), self.table))

    def __getitem__(self, index):
        return self.names()[index]

    def __len__(self):
        return len(self.names())

    def __iter__(self):
        return iter(self.names())

    def __contains__(self, name):
        return name in self.names()

    def __eq__(self, other):
        if isinstance(other, RegistryNames):
            return (self.module, self.table) == (other.module, other.table)
        return isinstance(other, (tuple, list)) and self.names() == tuple(other)

    def __hash__(self):
        return hash((self.module, self.table))

    def __repr__(self):
        return f'RegistryNames({self.module}.{self.table})'


@dataclass(frozen=True)
class Setting:
    """One key of the robot setup.

    type     'float' | 'int' | 'bool' | 'str' | 'floats' | 'strs' | 'map' (open, user-defined)
    low/high accepted range (None: unbounded); ``low_open``/``high_open``: strict bound
    choices  accepted strings (type str / strs): a tuple, or :class:`RegistryNames` of the table that
             implements them
    live     may change while the controller runs (``ros2 param set``)
    when     (sibling key, values): the key exists only when the sibling has one of the values
    required a key of a typed item (``constraints.<name>``, its ``trajectory``) that the item's type needs:
             an item of that type without it is an error naming the key
    """

    key: str
    type: str
    default: object = NONE
    unit: str = ''
    doc: str = ''
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: Sequence = ()
    live: bool = False
    when: tuple = ()
    length: int | None = None
    required: bool = False

    def range_text(self):
        """The accepted values in words, e.g. ``(0, 20000] Hz`` or ``one of zero, hold``."""
        if self.choices:
            return 'one of ' + ', '.join(self.choices)
        if self.type == 'bool':
            return 'true or false'
        if self.low is None and self.high is None:
            return {
                'float': 'a finite number',
                'int': 'an integer',
                'floats': 'finite numbers',
                'str': 'a string',
                'strs': 'strings',
                'map': 'a map',
            }.get(self.type, self.type)
        unit = f' {self.unit}' if self.unit else ''
        if self.high is None:
            return f'{">" if self.low_open else ">="} {self.low:g}{unit}'
        if self.low is None:
            return f'{"<" if self.high_open else "<="} {self.high:g}{unit}'
        return f'{"(" if self.low_open else "["}{self.low:g}, {self.high:g}{")" if self.high_open else "]"}{unit}'


def number_ok(value):
    """A real number (a bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_value(setting, value, *, file=None, key=None):
    """`value` checked and normalised (ints in float keys -> float); ConfigError naming the key and range."""
    key = key or setting.key
    want = setting.range_text()

    def bad(message):
        if message.startswith(('must be ' + want, 'must be in ' + want)):
            return ConfigError(message, file=file, key=key)
        return ConfigError(f'{message}; accepted: {want}', file=file, key=key)

    t = setting.type
    if t in ('map', 'any', 'section'):
        return value
    if t == 'bool':
        if not isinstance(value, bool):
            raise bad(f'must be true or false, got {value!r}')
        return value
    if t == 'str':
        if isinstance(value, bool) and {'on', 'off'} <= set(setting.choices):
            value = 'on' if value else 'off'  # YAML 1.1 (PyYAML, ROS) reads an unquoted on / off as a boolean
        if not isinstance(value, str):
            raise bad(f'must be a string, got {value!r}')
        if setting.choices and value not in setting.choices:
            close = difflib.get_close_matches(value, setting.choices, 1)
            raise bad(
                f'{value!r} is not one of {", ".join(setting.choices)}'
                + (f' (did you mean {close[0]!r}?)' if close else '')
            )
        return value
    if t == 'strs':
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
            raise bad(f'must be a list of strings, got {value!r}')
        if setting.choices and any(v not in setting.choices for v in items):
            raise bad(f'{value!r} has an entry that is not valid')
        if setting.length is not None and len(items) != setting.length:
            raise bad(f'must have {setting.length} entries, got {len(items)}')
        return list(items)
    if t in ('float', 'int'):
        if t == 'int':
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and math.isfinite(value) and value == int(value):
                    value = int(value)
                else:
                    raise bad(f'must be a whole number, got {value!r}')
        elif not number_ok(value):
            raise bad(f'must be a number, got {value!r}')
        _check_range(setting, value, bad)
        return float(value) if t == 'float' else int(value)
    if t == 'floats':
        items = [value] if number_ok(value) else value
        if not isinstance(items, (list, tuple)) or not all(number_ok(v) for v in items):
            raise bad(f'must be a list of numbers, got {value!r}')
        if setting.length is not None and len(items) != setting.length:
            raise bad(f'must have {setting.length} entries, got {len(items)}')
        for v in items:
            _check_range(setting, v, bad)
        return [float(v) for v in items]
    raise ValueError(f'setting {setting.key}: unknown type {t}')


def _in(text):
    return f'in {text}' if text[:1] in '([' else text


def _check_range(setting, value, bad):
    if not math.isfinite(value):
        raise bad(f'must be finite, got {value!r}')
    lo, hi = setting.low, setting.high
    if lo is not None and (value < lo or (setting.low_open and value == lo)):
        raise bad(f'must be {_in(setting.range_text())}, got {value!r}')
    if hi is not None and (value > hi or (setting.high_open and value == hi)):
        raise bad(f'must be {_in(setting.range_text())}, got {value!r}')
