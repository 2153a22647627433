"""The typed, immutable sections of a resolved robot setup, generated from the schema's declarations.

:func:`uk_controller.settings.resolve.resolve` returns a :class:`Settings`: one frozen dataclass per
top-level map of the schema (``settings.control.rate``, ``settings.ros.loop.window``,
``settings.hardware.items['motor1'].gear_ratio``). The classes are made here from
:data:`uk_controller.settings.schema.SETTINGS` (one declaration: a key added there is an attribute here,
its default the schema's), once, when this module is imported.

- a leaf is its checked value (:func:`~uk_controller.settings.setting.check_value`) or the schema
  default; a list is a tuple, a map a :class:`FrozenDict` (a ``dict`` that refuses every change), so
  nothing reachable from a Settings can be changed in place;
- a sub-map of fixed keys (``ros.loop``, ``hardware.dynamixel``) is a nested section;
- a map of named items (``actuators.<name>``, ``hardware.<name>``) is the field ``items``: name -> the
  item's section (its defaults filled); items whose keys depend on a ``type`` (``constraints.<name>``,
  their trajectories) stay checked read-only maps, which the constraint builders read by key.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from . import schema as S
from .setting import check_value


class FrozenDict(dict):
    """A read-only dict (still a ``dict`` for the readers that test ``isinstance(x, dict)``)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError('a resolved setting cannot be changed: resolve again with an override')

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self):
        return hash(tuple(sorted(self.items(), key=lambda kv: str(kv[0]))))

    def __copy__(self):
        return self

    def __reduce__(self):  # pickled as its items (the default would call __setitem__)
        return FrozenDict, (dict(self),)

    def __deepcopy__(self, memo):
        return self

    def thaw(self):
        """A plain, mutable deep copy (for code that builds a new tree from this one)."""
        return thaw(self)


def freeze(value):
    """`value` with every dict made a :class:`FrozenDict` and every list a tuple (recursively)."""
    if isinstance(value, dict):
        return FrozenDict((k, freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value):
    """Inverse of :func:`freeze`: plain dicts and lists."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


_PY_TYPE = {
    'float': float,
    'int': int,
    'bool': bool,
    'str': str,
    'floats': tuple,
    'strs': tuple,
    'map': FrozenDict,
    'any': Any,
}


def _schema_tree():
    """{part: Setting | subtree} of the schema keys that have no ``when`` (the type-free ones), plus the
    set of map paths whose named items have type-dependent keys (kept as read-only maps)."""
    tree, typed_items = {}, set()
    for s in S.all_settings():
        parts = s.key.split('.')
        if s.when or s.type == 'section':
            if '<name>' in parts:
                typed_items.add('.'.join(parts[: parts.index('<name>')]))
            continue
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = s
    return tree, typed_items


class Section:
    """Base of the generated section classes: frozen, with ``as_dict()`` for reports."""

    __slots__ = ()

    def as_dict(self):
        """The section as a plain nested dict (for summaries and logs)."""
        return {
            f.name: (
                v.as_dict()
                if isinstance(v, Section)
                else {k: (x.as_dict() if isinstance(x, Section) else thaw(x)) for k, x in v.items()}
                if f.name == 'items'
                else thaw(v)
            )
            for f in dataclasses.fields(self)
            for v in (getattr(self, f.name),)
        }


def _class_name(path):
    return ''.join(p.title().replace('_', '') for p in path.replace('<name>', 'item').split('.')) + 'Settings'


def _make_class(path, node, typed_items):
    """The frozen dataclass of the map at dotted `path` (and of its sub-maps), with a ``build`` that
    reads a checked tree."""
    fields, builders = [], []
    for name, child in node.items():
        if name == '<name>':
            continue
        if isinstance(child, dict):
            sub = _make_class(f'{path}.{name}', child, typed_items)
            fields.append((name, sub, dataclasses.field(default=None)))
            builders.append((name, 'section', sub))
        else:
            fields.append(
                (
                    name,
                    _PY_TYPE.get(child.type, Any) | None if child.default is None else _PY_TYPE.get(child.type, Any),
                    dataclasses.field(default=None),
                )
            )
            builders.append((name, 'leaf', child))
    item_class = None
    if '<name>' in node and path not in typed_items:
        item_class = _make_class(f'{path}.<name>', node['<name>'], typed_items)
    if '<name>' in node or path in typed_items:
        fields.append(('items', FrozenDict, dataclasses.field(default_factory=FrozenDict)))
    if path == 'hardware':  # section -> the options the file gives (hardware.<section>.*), as written
        fields.append(('options', FrozenDict, dataclasses.field(default_factory=FrozenDict)))
    cls = dataclasses.make_dataclass(_class_name(path), fields, bases=(Section,), frozen=True, slots=True)
    cls.__doc__ = f'Section ``{path}`` of a robot setup (generated from uk_controller/settings/schema.py).'
    cls.__module__ = __name__  # importable by name: Settings pickle (worker processes)
    globals()[cls.__name__] = cls

    def build(tree, file=None, dotted=path, names=()):
        tree = tree if isinstance(tree, dict) else {}
        values = {}
        for name, kind, what in builders:
            key = f'{dotted}.{name}'
            if kind == 'section':
                values[name] = what.build(tree.get(name), file, key)
                continue
            raw = tree.get(name)
            if raw is None:
                raw = what.default
                values[name] = None if raw is None else freeze(check_value(what, raw, file=file, key=key))
            else:
                values[name] = freeze(check_value(what, raw, file=file, key=key))
        protocols = ()
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
                    item_class.build(raw, file, f'{dotted}.{item}')
                    if item_class is not None
                    else freeze(raw if isinstance(raw, dict) else {})
                )
            values['items'] = FrozenDict(items)
        return cls(**values)

    cls.build = staticmethod(build)
    return cls


_TREE, _TYPED_ITEMS = _schema_tree()
#: top-level section name -> generated class (robot, actuators, constraints, stabilization, control, ...)
SECTION_CLASSES = {
    name: _make_class(name, node, _TYPED_ITEMS) for name, node in _TREE.items() if isinstance(node, dict)
}


def _settings_class():
    fields = [(name, cls, dataclasses.field(default=None)) for name, cls in SECTION_CLASSES.items()]
    fields.append(('file', Path | None, dataclasses.field(default=None)))
    cls = dataclasses.make_dataclass('Settings', fields, bases=(Section,), frozen=True, slots=True)
    cls.__doc__ = (
        'A resolved robot setup: one typed, immutable section per top-level map of the schema, '
        'and the setup file it came from (``file``; None for a setup made of parameters only). '
        'Made by uk_controller.settings.resolve.resolve, never by hand.'
    )
    cls.__module__ = __name__
    return cls


Settings = _settings_class()
