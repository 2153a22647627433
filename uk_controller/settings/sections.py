"""Build the typed sections (uk_controller/settings/types.py) from a checked parameter tree.

:func:`uk_controller.settings.resolve.resolve` checks the tree against the schema and calls
:func:`build_sections`: every class of :data:`~uk_controller.settings.types.CLASSES` is filled from the
map at its schema path, key by key as the schema declares them (:func:`~uk_controller.settings.schema.section_tree`):

- a leaf is its checked value (:func:`~uk_controller.settings.setting.check_value`) or the schema
  default, frozen (:func:`~uk_controller.settings.frozen.freeze`: a list is a tuple, a map a
  :class:`~uk_controller.settings.frozen.FrozenDict`);
- a sub-map of fixed keys (``ros.loop``, ``hardware.dynamixel``) is a nested section;
- a map of named items (``actuators.<name>``, ``hardware.<name>``) is the field ``items``: name -> the
  item's section (its defaults filled);
- an item whose keys depend on its ``type`` (``constraints.<name>``, its ``trajectory``:
  :data:`~uk_controller.settings.schema.TYPED_ITEMS`) is the class of its type (:func:`build_item`), its
  type's defaults filled, a required key that is missing an error naming it. The same function makes the
  closures a robot description declares (uk_controller/robots/setup.py), and :func:`constraint_item` /
  :func:`trajectory_item` a map written in code, so every item the builders read is one of these classes.

A class whose fields are not the schema's keys (types.py not regenerated after a schema change) is an
error here, naming the command that regenerates it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..files.parameter_file import ConfigError
from . import schema as S
from .frozen import FrozenDict, Item, freeze
from .setting import check_value
from .types import CLASSES, ITEM_CLASSES, ConstraintItem, ConstraintRefinementSettings, Section, TrajectoryItem


def _shape():
    """``(tree, typed_items)`` of the schema as it was when this module was imported, checked against the
    generated classes."""
    tree, typed_items = S.section_tree()
    _check_classes('', tree, typed_items)
    return tree, typed_items


def _check_classes(path, node, typed_items):
    for part, child in node.items():
        if isinstance(child, dict) and part != '<name>':
            _check_classes(f'{path}.{part}' if path else part, child, typed_items)
    if '<name>' in node and path not in typed_items:
        _check_classes(f'{path}.<name>', node['<name>'], typed_items)
    if not path:
        return
    want = [k for k in node if k != '<name>']
    if '<name>' in node or path in typed_items:
        want.append('items')
    if path == 'hardware':
        want.append('options')
    _check_fields(path, CLASSES.get(path), want)
    if path in typed_items:
        _check_items(f'{path}.<name>')


def _check_fields(where, cls, want):
    have = [f.name for f in dataclasses.fields(cls)] if cls is not None else None
    if have != want:
        raise RuntimeError(
            f'uk_controller/settings/types.py does not match the schema at {where!r}: '
            'run python -m uk_controller.settings --write-types'
        )


def _check_items(path):
    kinds = [*S.item_types(path), *((None,) if path in S.REFINES_CLOSURE else ())]
    for kind in kinds:
        keys = S.item_keys(path, kind)
        _check_fields(f'{path} ({kind or "no type"})', ITEM_CLASSES.get((path, kind)), list(keys))
        for key, setting in keys.items():
            if setting.type == 'section':
                _check_items(f'{path}.{key}')


def item_class(path: str, kind: str | None) -> type[Item]:
    """The class of the typed item at schema `path` of type `kind` (uk_controller/settings/types.py); for a
    type added to its table after types.py was generated, a class with the same fields made now (its
    attributes are right, only mypy and editors do not know it until ``--write-types``)."""
    cls = ITEM_CLASSES.get((path, kind))
    if cls is not None:
        return cls
    keys = tuple(S.item_keys(path, kind))
    if (path, kind, keys) not in _MADE:
        name = ''.join(p.title() for p in str(kind).split('_')) + S.TYPED_ITEMS[path] + 'Settings'
        _MADE[path, kind, keys] = dataclasses.make_dataclass(
            name, [(key, Any) for key in keys], bases=(Item,), frozen=True, slots=True, kw_only=True
        )
    return _MADE[path, kind, keys]


#: the classes item_class made for types newer than types.py: (path, type, keys) -> class
_MADE: dict[tuple, type[Item]] = {}


def build_item(path: str, spec: Any, file: Any = None, at: str | None = None) -> Item:
    """The typed item at schema `path` (``constraints.<name>``, ``constraints.<name>.trajectory``) from its
    checked map `spec`: the class of its ``type``, each key the checked value or that type's default; a
    required key that is missing is a ConfigError naming `file` and the dotted key (`at`, default `path`).
    A constraint without ``type`` is a :class:`ConstraintRefinementSettings` (it refines a closure of the
    robot description, which gives the type)."""
    at = at or path
    spec = spec if isinstance(spec, dict) else {}
    kind = spec.get('type')
    if kind is None and path not in S.REFINES_CLOSURE:
        raise ConfigError('required key is missing', file=file, key=f'{at}.type')
    if kind is not None:
        kind = check_value(S.lookup(f'{path}.type'), kind, file=file, key=f'{at}.type')
    values: dict[str, Any] = {}
    for key, setting in S.item_keys(path, kind).items():
        raw = spec.get(key)
        dotted = f'{at}.{key}'
        if raw is None and setting.required and kind is not None:
            what = 'section' if setting.type == 'section' else 'key'
            raise ConfigError(f'required {what} is missing', file=file, key=dotted)
        if setting.type == 'section':
            values[key] = None if raw is None else build_item(f'{path}.{key}', raw, file, dotted)
            continue
        if raw is None and kind is not None:
            raw = setting.default
        values[key] = None if raw is None else freeze(check_value(setting, raw, file=file, key=dotted))
    given = frozenset(k for k, v in spec.items() if v is not None and k in values)
    return item_class(path, kind)(**values).placed(file, at, given)


def constraint_item(
    name: str, spec: Any, file: Any = None, at: str | None = None
) -> ConstraintItem | ConstraintRefinementSettings:
    """The typed item of the constraint map `spec` (a map written in code, a closure of a description),
    checked as a setup file's ``constraints.<name>`` is (:func:`~uk_controller.settings.schema.check_item`);
    errors name `file` and ``constraints.<name>.<key>`` (or `at`)."""
    at = at or f'constraints.{name}'
    S.check_item('constraints.<name>', spec, file, at)
    return build_item('constraints.<name>', spec, file, at)  # type: ignore[return-value]


def trajectory_item(spec: Any, file: Any = None, at: str = 'trajectory') -> TrajectoryItem:
    """The typed item of the trajectory map `spec`, checked as ``constraints.<name>.trajectory`` is; errors
    name `file` and ``<at>.<key>``."""
    S.check_item('constraints.<name>.trajectory', spec, file, at)
    return build_item('constraints.<name>.trajectory', spec, file, at)  # type: ignore[return-value]


def _build(path, node, typed_items, tree, file, dotted, names=()):
    """The section of class ``CLASSES[path]`` from the checked map `tree` at `dotted` (`names`: the
    items listed for a map of named items, filled with their defaults when absent)."""
    tree = tree if isinstance(tree, dict) else {}
    values = {}
    for name, child in node.items():
        if name == '<name>':
            continue
        key = f'{dotted}.{name}'
        if isinstance(child, dict):
            values[name] = _build(f'{path}.{name}', child, typed_items, tree.get(name), file, key)
            continue
        raw = tree.get(name)
        if raw is None:
            raw = child.default
        values[name] = None if raw is None else freeze(check_value(child, raw, file=file, key=key))
    protocols: list = []
    if path == 'hardware':
        protocols = [k for k, v in tree.items() if isinstance(v, dict) and k in S.protocol_sections()]
        values['options'] = FrozenDict((k, freeze(tree[k])) for k in protocols)
    if '<name>' in node or path in typed_items:
        listed = [n for n in (names or ()) if isinstance(n, str)]  # (hardware: every motor, defaults filled)
        present = [k for k, v in tree.items() if isinstance(v, dict) and k not in node and k not in protocols]
        items = {}
        for item in dict.fromkeys(listed + present):
            raw = tree.get(item)
            items[item] = (
                _build(f'{path}.<name>', node['<name>'], typed_items, raw, file, f'{dotted}.{item}')
                if path not in typed_items
                else build_item(f'{path}.<name>', raw, file, f'{dotted}.{item}')
            )
        values['items'] = FrozenDict(items)
    return CLASSES[path](**values)


def build_sections(tree: dict, file=None) -> dict[str, Section]:
    """{top-level section name: its typed section} of the checked nested `tree` (`file` names errors)."""
    shape, typed_items = _SHAPE
    # a motor without its own map still has a calibration (the defaults); other named items are the maps given
    listed = {'hardware': (tree.get('hardware') or {}).get('motors') or (tree.get('actuators') or {}).get('names')}
    out = {}
    for name, node in shape.items():
        if not isinstance(node, dict):
            continue
        names = listed.get(name) or ()
        names = (names,) if isinstance(names, str) else names
        out[name] = _build(name, node, typed_items, tree.get(name), file, name, names)
    return out


_SHAPE = _shape()
