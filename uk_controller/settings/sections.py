"""Build the typed sections (uk_controller/settings/types.py) from a checked parameter tree.

:func:`uk_controller.settings.resolve.resolve` checks the tree against the schema and calls
:func:`build_sections`: every class of :data:`~uk_controller.settings.types.CLASSES` is filled from the
map at its schema path, key by key as the schema declares them (:func:`~uk_controller.settings.schema.section_tree`):

- a leaf is its checked value (:func:`~uk_controller.settings.setting.check_value`) or the schema
  default, frozen (:func:`~uk_controller.settings.frozen.freeze`: a list is a tuple, a map a
  :class:`~uk_controller.settings.frozen.FrozenDict`);
- a sub-map of fixed keys (``ros.loop``, ``hardware.dynamixel``) is a nested section;
- a map of named items (``actuators.<name>``, ``hardware.<name>``) is the field ``items``: name -> the
  item's section (its defaults filled); items whose keys depend on a ``type`` (``constraints.<name>``,
  their trajectories) stay checked read-only maps, which the constraint builders read by key.

A class whose fields are not the schema's keys (types.py not regenerated after a schema change) is an
error here, naming the command that regenerates it.
"""

from __future__ import annotations

import dataclasses

from . import schema as S
from .frozen import FrozenDict, freeze
from .setting import check_value
from .types import CLASSES, Section


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
    cls = CLASSES.get(path)
    have = [f.name for f in dataclasses.fields(cls)] if cls is not None else None  # type: ignore[arg-type]
    if have != want:
        raise RuntimeError(
            f'uk_controller/settings/types.py does not match the schema at {path!r}: '
            'run python -m uk_controller.settings --write-types'
        )


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
                else freeze(raw if isinstance(raw, dict) else {})
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
