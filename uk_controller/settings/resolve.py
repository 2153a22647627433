"""``resolve(file, overrides) -> Settings``: the one way a robot setup becomes settings.

Every source of a setting ends here: the setup file (a path, or a shipped robot name as
:func:`uk_controller.paths.resolve_config` accepts), then the overrides, dotted keys -> values,
in the order given (last wins): CLI flags (``uk-controller simulate --rate 500`` is
``{'control.rate': 500.0}``), ROS ``-p`` / ``--params-file`` / launch arguments and live parameters
(ROS already names them dotted), sweep ``--grid`` / ``--set`` points. Then, once:

1. the merged tree is checked against the schema (:func:`uk_controller.settings.schema.check`:
   unknown keys with a suggestion, types, ranges, the cross-key rules); every failure is a
   :class:`~uk_controller.files.parameter_file.ConfigError` naming the file, the dotted key (or the
   flag that set it, ``labels``) and the accepted range;
2. the defaults are filled from the schema (never restated by a reader), and the defaults that are
   another key (``simulation.rate``, ``hardware.rate``: ``control.rate``; ``robot.name``: the file
   name) are filled here;
3. the result is a :class:`~uk_controller.settings.types.Settings` of frozen sections read by
   attribute (``settings.control.rate``).

An override whose value is None removes the key (the node's ``robot_description`` replaces
``robot.urdf`` and drops ``robot.xacro_args``).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from ..files.parameter_file import ConfigError, load_config
from ..paths import resolve_config
from . import schema as S
from .frozen import Section
from .sections import build_sections
from .types import Settings

__all__ = ['resolve', 'Settings', 'apply_overrides', 'changed_keys', 'refuse_fixed']


def apply_overrides(tree, overrides, *, file=None, labels=None):
    """A deep copy of the nested `tree` with the dotted `overrides` set (a value None removes the key)."""
    out = copy.deepcopy(tree) if tree else {}
    labels = labels or {}
    for dotted, value in (overrides or {}).items():
        parts = str(dotted).split('.')
        node = out
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                if value is None:
                    break
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(
                    f"{'.'.join(parts[: depth + 1])} is a value and also has sub-keys ({dotted})",
                    file=file,
                    key=labels.get(dotted, dotted),
                )
            node = child
        else:
            if value is None:
                node.pop(parts[-1], None)
            elif isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
                raise ConfigError('is a map; give one of its keys', file=file, key=labels.get(dotted, dotted))
            else:
                node[parts[-1]] = copy.deepcopy(value)
    return out


def _load(file, node):
    if file is None or file == '':
        return {}, None
    if isinstance(file, dict):
        raise TypeError('resolve(file): a path or a shipped robot name, not a dict (give the keys as overrides)')
    params, path = load_config(resolve_config(file), node=node)
    return params, Path(path)


def resolve(file=None, overrides=None, *, node=None, labels=None, source=None, params=None) -> Settings:
    """The checked, typed, immutable settings of `file` with `overrides` applied (module docstring).

    file       a setup file path or a shipped robot name (None: overrides only)
    overrides  {dotted key: value}, applied in order
    node       the node section of a multi-node parameter file (files.parameter_file.load_config)
    labels     {dotted key: what the user typed} for messages (``'--rate (control.rate)'``)
    source     how errors name where the values came from (default: the file)
    params     the already-read tree of `file` (a ROS node reads the file once to declare its keys)
    """
    if params is None:
        params, path = _load(file, node)
    else:
        path = None if file in (None, '') else Path(file)
    where = source if source is not None else path
    tree = apply_overrides(params, overrides, file=where, labels=labels)
    S.check(tree, where, names=labels)
    return build(tree, path, where)


def build(tree: dict, path: Path | None, where=None) -> Settings:
    """Settings of an already checked `tree` (only :func:`resolve` calls this)."""
    sections = build_sections(tree, where)
    fill: dict[str, dict] = {'robot': {'name': Path(path).stem if path else 'robot'}}
    for key, source in S.DEFAULT_FROM.items():  # defaults that are another key's value
        part, name = key.split('.')
        top, leaf = source.split('.')
        fill.setdefault(part, {})[name] = getattr(sections[top], leaf)
    if getattr(sections['simulation'], 'lockstep'):  # lockstep implies the plant publishes /clock
        fill['simulation']['publish_clock'] = True
    for name, values in fill.items():
        section = sections[name]
        missing = {k: v for k, v in values.items() if getattr(section, k) is None or getattr(section, k) is False}
        if missing:
            sections[name] = dataclasses.replace(section, **missing)  # type: ignore[type-var]
    return Settings(file=path, **sections)  # type: ignore[arg-type]


def changed_keys(old: Settings, new: Settings) -> list[str]:
    """The dotted keys whose values differ between two resolved setups (``control.safe_effort``,
    ``hardware.motor1.gear_ratio``), in schema order."""
    out: list[str] = []
    _diff(old, new, '', out)
    return out


def _diff(a, b, prefix, out):
    if isinstance(a, Section) and type(a) is type(b):
        for f in dataclasses.fields(a):  # type: ignore[arg-type]
            name = f.name
            key = prefix if name in ('items', 'options') else f'{prefix}.{name}' if prefix else name
            _diff(getattr(a, name), getattr(b, name), key, out)
    elif isinstance(a, dict) and isinstance(b, dict) and a != b:
        for k in dict.fromkeys([*a, *b]):
            _diff(a.get(k), b.get(k), f'{prefix}.{k}', out)
    elif a != b:
        out.append(prefix)


def refuse_fixed(old: Settings, new: Settings, *, source=None) -> list[str]:
    """The keys changed from `old` to `new`, all of them live (``live`` in the schema: may change while a
    controller runs); else ConfigError naming the first key that is fixed at start."""
    changed = changed_keys(old, new)
    for key in changed:
        if key != 'file' and not S.is_live(key):
            raise ConfigError(
                'cannot change while running (fixed at start; live: ' + ', '.join(S.live_keys()) + ')',
                file=source,
                key=key,
            )
    return changed
