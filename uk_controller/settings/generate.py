"""Write the typed section classes (uk_controller/settings/types.py) from the schema; the command
``python -m uk_controller.settings`` (:func:`main`).

``python -m uk_controller.settings --write-types`` runs :func:`write_types`; test/test_settings_types.py
regenerates the module and requires the checked-in file to be exactly that text, so a key added to the
schema (uk_controller/settings/schema.py, or a protocol's or trajectory type's keys) is an attribute of
its section class, with its type, for mypy and editors. The classes are plain source: one frozen
dataclass per map of the schema (``robot``, ``control``, ``ros.loop``, ``hardware.<name>``, ...) and
:class:`Settings`, which holds the top-level ones.

The types: a leaf is its checked value (``float``, ``int``, ``bool``, ``str``; a list is a tuple, a map a
:class:`~uk_controller.settings.frozen.FrozenDict`), optional (``| None``) when the schema gives it no
default and resolve does not fill it (:data:`~uk_controller.settings.schema.ALWAYS_FILLED`). A map of
named items is the field ``items`` (name -> the item's section); the ``hardware`` section also has
``options`` (protocol section name -> its options as written).

A typed item (:data:`~uk_controller.settings.schema.TYPED_ITEMS`: a constraint, its trajectory), whose keys
depend on its ``type``, is one class per type (``FramePositionConstraintSettings``,
``HelixTrajectorySettings``; base :class:`~uk_controller.settings.frozen.Item`): the keys that type reads,
each with that type's default, ``type`` a ``Literal`` of the type's name (so ``if item.type == 'helix'``
narrows the union for mypy), a required key (``Setting.required``) without ``| None``. A union alias names
them all (``ConstraintItem``, ``TrajectoryItem``); :data:`ITEM_CLASSES` maps ``(path, type)`` to the class.
A constraint written without ``type`` (it refines a closure of the robot description) is
``ConstraintRefinementSettings``: every constraint key, optional.
"""

from __future__ import annotations

import keyword
import textwrap
from pathlib import Path
from typing import Any

from . import schema as S

TYPES_FILE = Path(__file__).with_name('types.py')

_ANNOTATION = {
    'float': 'float',
    'int': 'int',
    'bool': 'bool',
    'str': 'str',
    'floats': 'tuple[float, ...]',
    'strs': 'tuple[str, ...]',
    'map': 'FrozenDict[str, Any]',
    'any': 'Any',
}

_HEADER = '''"""The typed sections of a resolved robot setup: one frozen dataclass per map of the schema.

GENERATED from uk_controller/settings/schema.py by ``python -m uk_controller.settings --write-types``: do
not edit (test/test_settings_types.py checks that this file is what the schema generates; the rules of
the types are in uk_controller/settings/generate.py). :func:`uk_controller.settings.resolve.resolve`
returns a :class:`Settings`; its sections are read by attribute (``settings.control.rate``,
``settings.ros.loop.window``, ``settings.hardware.items['motor1'].gear_ratio``; a constraint is the class
of its type: ``settings.constraints.items['tool_path'].trajectory.radius``) and never changed in
place (a changed value is a new ``Settings``: ``resolve`` again with the change as one more override;
a running consumer takes it through its ``apply_settings``, e.g. ``ControllerCore.apply_settings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .frozen import FrozenDict, Item, Section
'''


def class_name(path: str) -> str:
    """``ros.loop`` -> ``RosLoopSettings``, ``hardware.<name>`` -> ``HardwareItemSettings``."""
    return ''.join(p.title().replace('_', '') for p in path.replace('<name>', 'item').split('.')) + 'Settings'


def _comment(text: str, indent: str = '    ') -> list[str]:
    return [f'{indent}#: {line}' for line in textwrap.wrap(text, 120 - len(indent) - 3, break_on_hyphens=False)]


def _annotation(setting: S.Setting, dotted: str) -> str:
    base = _ANNOTATION.get(setting.type, 'Any')
    if setting.default is None and dotted not in S.ALWAYS_FILLED and base != 'Any':
        return f'{base} | None'
    return base


def _classes(path: str, node: dict, typed_items: set, out: list, table: list) -> str:
    """Append the class of the map at `path` (after the classes of its sub-maps) to `out`; its name."""
    name = class_name(path)
    lines = ['', '', '@dataclass(frozen=True, slots=True, kw_only=True)', f'class {name}(Section):']
    lines.append(f'    """Section ``{path}`` of a robot setup."""')
    lines.append('')
    for part, child in node.items():
        if part == '<name>':
            continue
        if keyword.iskeyword(part) or not part.isidentifier():
            raise ValueError(f'setting {path}.{part}: {part!r} cannot be an attribute name')
        if isinstance(child, dict):
            sub = _classes(f'{path}.{part}', child, typed_items, out, table)
            lines += _comment(f'the section {path}.{part}')
            lines.append(f'    {part}: {sub}')
            continue
        doc = child.doc + (f' [{child.unit}]' if child.unit else '')
        lines += _comment(doc)
        lines.append(f'    {part}: {_annotation(child, child.key)}')
    if '<name>' in node and path not in typed_items:
        item = _classes(f'{path}.<name>', node['<name>'], typed_items, out, table)
        lines += _comment(f'the named items of {path} (name -> section)')
        lines.append(f'    items: FrozenDict[str, {item}]')
    elif path in typed_items:
        item = _item_classes(f'{path}.<name>', out, table)
        if f'{path}.<name>' in S.REFINES_CLOSURE:
            item = f'{item} | {_item_class_name(f"{path}.<name>", None)}'
        lines += _comment(f'the named items of {path} (name -> the item of its type)')
        lines.append(f'    items: FrozenDict[str, {item}]')
    if path == 'hardware':
        lines += _comment('protocol option section name -> its options as the file writes them')
        lines.append('    options: FrozenDict[str, FrozenDict[str, Any]]')
    out.extend(lines)
    table.append((path, name))
    return name


def _item_class_name(path: str, kind: str | None) -> str:
    """``('constraints.<name>', 'frame_position')`` -> ``FramePositionConstraintSettings``; `kind` None: the
    refinement class (``ConstraintRefinementSettings``)."""
    suffix = S.TYPED_ITEMS[path]
    head = 'Refinement' if kind is None else ''.join(p.title() for p in kind.replace('-', '_').split('_'))
    return f'{suffix}{head}Settings' if kind is None else f'{head}{suffix}Settings'


def _item_classes(path: str, out: list, table: list) -> str:
    """Append one class per type of the typed item at `path` (after the classes of its sub-items), and the
    union alias of them, to `out`; the alias's name."""
    subs: dict[str, str] = {}
    kinds: list[str | None] = [*S.item_types(path)]
    if path in S.REFINES_CLOSURE:
        kinds.append(None)
    names = []
    for kind in kinds:
        keys = S.item_keys(path, kind)
        for key, setting in keys.items():
            if setting.type == 'section' and key not in subs:
                subs[key] = _item_classes(f'{path}.{key}', out, table)
        name = _item_class_name(path, kind)
        lines = ['', '', '@dataclass(frozen=True, slots=True, kw_only=True)', f'class {name}(Item):']
        if kind is None:
            lines.append(f'    """Item ``{path}`` without ``type``: refines the closure of the same name that the')
            lines.append('    robot description declares (which gives the type)."""')
        else:
            lines.append(f'    """Item ``{path}`` of type ``{kind}``."""')
        lines.append('')
        for key, setting in keys.items():
            if keyword.iskeyword(key) or not key.isidentifier():
                raise ValueError(f'setting {path}.{key}: {key!r} cannot be an attribute name')
            if setting.type == 'section':
                lines += _comment(setting.doc)
                optional = kind is None or not setting.required
                lines.append(f'    {key}: {subs[key]}' + (' | None' if optional else ''))
                continue
            lines += _comment(setting.doc + (f' [{setting.unit}]' if setting.unit else ''))
            if key == 'type':  # the discriminator: `item.type == 'helix'` narrows the union for mypy
                lines.append(f'    type: Literal[{kind!r}]' if kind is not None else '    type: None')
                continue
            base = _ANNOTATION.get(setting.type, 'Any')
            optional = kind is None or (setting.default is None and not setting.required)
            lines.append(f'    {key}: {base}' + (' | None' if optional and base != 'Any' else ''))
        out.extend(lines)
        table.append(((path, kind), name))
        if kind is not None:
            names.append(name)
    alias = S.TYPED_ITEMS[path] + 'Item'
    out += ['', '', f'#: an item ``{path}`` of any type', f'{alias} = (']
    out += [f'    {"| " if i else ""}{name}' for i, name in enumerate(names)]
    out.append(')')
    return alias


def types_source() -> str:
    """The text of uk_controller/settings/types.py as the schema generates it (ruff-formatted)."""
    tree, typed_items = S.section_tree()
    out: list[str] = [_HEADER.rstrip('\n')]
    table: list[tuple[Any, str]] = []
    sections = [(part, node) for part, node in tree.items() if isinstance(node, dict)]
    top = [(part, _classes(part, node, typed_items, out, table)) for part, node in sections]
    out += ['', '', '@dataclass(frozen=True, slots=True, kw_only=True)', 'class Settings(Section):']
    out.append('    """A resolved robot setup: one typed, immutable section per top-level map of the schema, and the')
    out.append('    setup file it came from (``file``; None for a setup made of parameters only). Made by')
    out.append('    :func:`uk_controller.settings.resolve.resolve`, never by hand."""')
    out.append('')
    out += [f'    {part}: {name}' for part, name in top]
    out.append('    file: Path | None = None')
    out += ['', '', '#: dotted schema path of a map -> its class (uk_controller/settings/sections.py builds them)']
    out.append('CLASSES: dict[str, type[Section]] = {')
    out += [f'    {path!r}: {name},' for path, name in table if isinstance(path, str)]
    out.append('}')
    out += ['#: (schema path of a typed item, its type) -> its class (type None: a refinement of a closure)']
    out.append('ITEM_CLASSES: dict[tuple[str, str | None], type[Item]] = {')
    out += [f'    {path!r}: {name},' for path, name in table if not isinstance(path, str)]
    out.append('}')
    return '\n'.join(out) + '\n'


def write_types(path: Path | None = None) -> None:
    """Write :func:`types_source` to `path` (default: uk_controller/settings/types.py)."""
    Path(path or TYPES_FILE).write_text(types_source())


def main(argv: list[str] | None = None) -> None:
    """``python -m uk_controller.settings [--write-docs] [--write-types]``: print the settings table, or write
    it into docs/config.md between its markers (``--write-docs``) and the typed section classes into
    uk_controller/settings/types.py (``--write-types``)."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if '--write-docs' in argv:
        S.write_docs(Path(__file__).resolve().parents[2] / 'docs' / 'config.md')
    if '--write-types' in argv:
        write_types()
    if not {'--write-docs', '--write-types'} & set(argv):
        sys.stdout.write(S.markdown_table())
