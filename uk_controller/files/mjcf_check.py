"""An MJCF file as Pinocchio's parser and MuJoCo will read it, checked before either sees it.

:func:`checked_mjcf` reads the main file as UTF-8, expands every ``<include file="...">`` in place (MuJoCo's
rule: the included file's ``<mujoco>`` children replace the element; the path is looked up in the main file's
folder, then in the including file's; a file is included once) and refuses, with a
:class:`~uk_controller.files.description_error.DescriptionError` naming the file (and the include an element
came from), the element and what to change:

- structure: no ``<worldbody>`` body at all (Pinocchio's parser would stop at "no body found in parsed tree"),
  a ``<body>`` outside ``<worldbody>`` (nothing would reach it), a joint of the world itself, MuJoCo's
  ``<frame>``, ``<replicate>`` and ``<attach>`` (Pinocchio 4.1 does not read them), a joint type MuJoCo does
  not have, two bodies, joints or sites with one name (each becomes a Pinocchio frame, and a name is how
  closures, couplings and the setup find it), a body named ``world``, a ``class``/``childclass`` that no
  ``<default>`` defines;
- numbers: every attribute of :data:`NUMBERS` (poses, axes, inertials, masses, ranges, joint dynamics,
  equality anchors, relposes and polycoefs, tendon coefficients, ...) holds finite numbers, as many as MuJoCo
  takes; axes, quaternions and frame vectors are not zero; ranges are ordered (``lower <= upper``; MuJoCo
  itself accepts a NaN with a warning and an inverted range without one);
- equalities between an element and itself (``body1 == body2``, ``site1 == site2``, ``joint1 == joint2``,
  ``tendon1 == tendon2``): their rows are zero or a contradiction, never a closure.

The expanded tree is what :func:`uk_controller.files.description.read_mjcf` hands Pinocchio (written next to
the main file) and reads closures, couplings and joint dynamics from; MuJoCo's plant loads the main file and
expands the same includes itself.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from .description_error import DescriptionError, read_utf8

#: MJCF attributes that hold numbers: name -> (fewest, most) numbers MuJoCo takes (most None: no bound
#: checked here, MuJoCo refuses too many itself; damping and stiffness take a polynomial in MuJoCo 4).
NUMBERS = {
    'pos': (3, 3),
    'quat': (4, 4),
    'euler': (3, 3),
    'axisangle': (4, 4),
    'xyaxes': (6, 6),
    'zaxis': (3, 3),
    'fromto': (6, 6),
    'axis': (3, 3),
    'range': (2, 2),
    'actuatorfrcrange': (2, 2),
    'ctrlrange': (2, 2),
    'forcerange': (2, 2),
    'diaginertia': (3, 3),
    'fullinertia': (6, 6),
    'anchor': (3, 3),
    'relpose': (7, 7),
    'mass': (1, 1),
    'density': (1, 1),
    'ref': (1, 1),
    'springref': (1, 1),
    'armature': (1, 1),
    'frictionloss': (1, 1),
    'damping': (1, None),
    'stiffness': (1, None),
    'polycoef': (1, 5),
    'coef': (1, 1),
    'size': (1, 3),
    'gear': (1, 6),
    'gravity': (3, 3),
    'timestep': (1, 1),
    'margin': (1, 1),
}
#: MuJoCo's joint types (MJCF ``<joint type>``)
JOINT_TYPES = ('hinge', 'slide', 'ball', 'free')
#: attributes whose two numbers are a lower and an upper bound
RANGES = ('range', 'actuatorfrcrange', 'ctrlrange', 'forcerange')
#: MuJoCo elements of <worldbody> that Pinocchio's MJCF parser (4.1) does not read: a <frame> (a pose for
#: the bodies, sites and geoms it holds) stops it with "No such node (body)" or an index error
_UNREAD = ('frame', 'replicate', 'attach')


class _Origins:
    """Where each element of the expanded tree was written: the main file, or an included file."""

    def __init__(self, main):
        self.main = main
        self.included = {}  # id(element) -> included file
        self.elements = []  # keeps the included elements alive, so their ids stay theirs

    def mark(self, element, file):
        for el in element.iter():
            self.included[id(el)] = file
            self.elements.append(el)

    def where(self, element, what=None):
        """``<main>: <tag name="..."> (from <include>)``: the file, the element and the include it came from."""
        name = element.get('name')
        tag = f'<{element.tag} name="{name}">' if name else f'<{element.tag}>'
        origin = self.included.get(id(element))
        return f'{self.main}: {what or tag}' + (f' (from the included {origin})' if origin is not None else '')


def _read_xml(path, where):
    try:
        text = read_utf8(path)
    except DescriptionError as exc:
        raise DescriptionError(f'{where}: {exc}' if where else str(exc)) from None
    except OSError as exc:
        raise DescriptionError(f'{where or path}: cannot read {path}: {exc.strerror or exc}') from None
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        prefix = f'{where}: ' if where else ''
        raise DescriptionError(f'{prefix}{path} is not well-formed XML: {exc}') from None


def _expand(element, main, including, seen, origins):
    """Replace each <include> under `element` by the children of the file it names (module docstring)."""
    i = 0
    while i < len(element):
        child = element[i]
        if child.tag != 'include':
            _expand(child, main, including, seen, origins)
            i += 1
            continue
        name = child.get('file')
        where = origins.where(child, f'<include file="{name}">')
        if not name:
            raise DescriptionError(f'{where}: give the file to include (file="...")')
        folders = list(dict.fromkeys([main.parent, including.parent]))
        target = next((folder / name for folder in folders if (folder / name).is_file()), None)
        if target is None:
            raise DescriptionError(
                f'{where}: no such file (looked in {" and ".join(map(str, folders))}); '
                'fix the path, relative to the main file'
            )
        if target.resolve() in seen:
            raise DescriptionError(
                f'{where}: {target} is already included (a file is included once; an '
                'include of the main file or of a file that includes it is a cycle); '
                'remove this <include>'
            )
        seen.add(target.resolve())
        sub = _read_xml(target, where)
        if sub.tag != 'mujoco':
            raise DescriptionError(
                f'{where}: {target} has root element <{sub.tag}>; an included file is an MJCF '
                'file whose <mujoco> children are inserted here'
            )
        for grandchild in sub:
            origins.mark(grandchild, target)
        _expand(sub, main, target, seen, origins)
        parts = list(sub)
        element[i : i + 1] = parts
        i += len(parts)


def _numbers(element, attribute, origins):
    """The numbers of `attribute` of `element` (None when absent), refused unless finite and as many as
    :data:`NUMBERS` says."""
    text = element.get(attribute)
    if text is None:
        return None
    fewest, most = NUMBERS[attribute]
    try:
        values = [float(x) for x in text.split()]
    except ValueError:
        values = None
    count_ok = values is not None and len(values) >= fewest and (most is None or len(values) <= most)
    if not count_ok or not all(math.isfinite(v) for v in values):
        if fewest == most:
            want = f'{fewest} finite number{"s" if fewest > 1 else ""}'
        elif most is None:
            want = f'at least {fewest} finite number{"s" if fewest > 1 else ""}'
        else:
            want = f'{fewest} to {most} finite numbers'
        raise DescriptionError(
            f'{origins.where(element)}: {attribute}="{text}" must be {want}; write the value in decimal'
        )
    return values


def _norm(values):
    return math.sqrt(sum(v * v for v in values))


def _check_numbers(element, origins):
    values = {a: _numbers(element, a, origins) for a in NUMBERS if a in element.attrib}
    where = origins.where(element)
    for attribute in RANGES:
        pair = values.get(attribute)
        if pair is not None and pair[0] > pair[1]:
            raise DescriptionError(
                f'{where}: {attribute}="{element.get(attribute)}": lower {pair[0]:g} is above '
                f'upper {pair[1]:g}; swap them'
            )
    zero = []
    if values.get('quat') is not None and _norm(values['quat']) == 0.0:
        zero.append('quat')
    if values.get('axisangle') is not None and _norm(values['axisangle'][:3]) == 0.0:
        zero.append('axisangle')
    if values.get('zaxis') is not None and _norm(values['zaxis']) == 0.0:
        zero.append('zaxis')
    if values.get('axis') is not None and _norm(values['axis']) == 0.0 and element.tag == 'joint':
        zero.append('axis')
    if zero:
        hint = 'a unit quaternion w x y z' if zero[0] == 'quat' else 'a direction'
        raise DescriptionError(f'{where}: {zero[0]}="{element.get(zero[0])}" is zero; give {hint}')
    xy = values.get('xyaxes')
    if xy is not None:
        x, y = xy[:3], xy[3:]
        cross = (x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0])
        if _norm(cross) == 0.0:
            raise DescriptionError(
                f'{where}: xyaxes="{element.get("xyaxes")}": the x and y axes must be nonzero and not parallel'
            )


def _check_structure(root, origins, includes):
    main = origins.main
    worldbodies = root.findall('worldbody')
    bodies = [b for wb in worldbodies for b in wb.iter('body')]
    if not bodies:
        where = 'no <worldbody>' if not worldbodies else 'its <worldbody> holds no <body>'
        if includes:
            raise DescriptionError(
                f'{main}: {where}, with the included {", ".join(map(str, includes))}; the model '
                'needs at least one <body> with a joint under <worldbody>: check that the '
                '<include> names the file with the robot\'s bodies'
            )
        raise DescriptionError(f'{main}: {where}; the model needs at least one <body> with a joint under <worldbody>')
    parent_of = {child: parent for parent in root.iter() for child in parent}
    in_world = {id(b) for b in bodies}
    for element in root.iter('body'):
        if id(element) not in in_world:
            holder = parent_of.get(element)
            raise DescriptionError(
                f'{origins.where(element)}: a <body> under <{getattr(holder, "tag", "?")}> is '
                'not part of the model (nothing reaches it); move it under <worldbody> or a '
                '<body>'
            )
    for wb in worldbodies:
        for element in wb.iter():
            holder = parent_of.get(element)
            if element.tag in _UNREAD:
                raise DescriptionError(
                    f'{origins.where(element)}: MuJoCo\'s <{element.tag}> is not read by '
                    'Pinocchio\'s MJCF parser; write what it holds out as <body> elements (a '
                    '<frame>\'s pose added to the pose of each body, site and geom in it)'
                )
            if element.tag in ('joint', 'freejoint') and holder is not None and holder.tag != 'body':
                raise DescriptionError(
                    f'{origins.where(element)}: a joint under <{holder.tag}> has no body to move; '
                    'move it into the <body> it should move'
                )
    names = {}  # bodies, joints and sites become Pinocchio frames, found by name: one name space
    for wb in worldbodies:
        for element in wb.iter():
            name = element.get('name')
            if element.tag not in ('body', 'joint', 'freejoint', 'site') or not name:
                continue
            if element.tag == 'body' and name == 'world':
                raise DescriptionError(
                    f'{origins.where(element)}: "world" is the name of MuJoCo\'s world body; rename this body'
                )
            if name in names:
                first = names[name]
                where = origins.included.get(id(first), origins.main)
                what = (
                    f'a second <{element.tag}> named {name!r} (the first is in {where})'
                    if first.tag == element.tag
                    else f'named {name!r} like a <{first.tag}> (in {where})'
                )
                raise DescriptionError(
                    f'{origins.where(element)}: {what}; bodies, joints and sites become frames '
                    'that closures, couplings and the setup find by name: rename one'
                )
            names[name] = element
    for element in root.iter('joint'):  # a body's joint or a default's (not an equality's or a tendon's)
        kind = element.get('type')
        holder = getattr(parent_of.get(element), 'tag', '')
        if kind is not None and kind not in JOINT_TYPES and holder in ('body', 'default'):
            raise DescriptionError(
                f'{origins.where(element)}: type="{kind}" is not a MuJoCo joint type ({", ".join(JOINT_TYPES)})'
            )
    classes = {d.get('class', 'main') for d in root.iter('default')} | {'main'}
    for element in root.iter():
        for key in ('class', 'childclass'):
            value = element.get(key)
            if value is not None and element.tag != 'default' and value not in classes:
                raise DescriptionError(
                    f'{origins.where(element)}: {key}="{value}" names no <default class>; '
                    f'defined: {", ".join(sorted(classes))}'
                )


def _check_equalities(root, origins):
    for section in root.findall('equality'):
        for eq in section:
            if not isinstance(eq.tag, str):
                continue
            for a, b in (('body1', 'body2'), ('site1', 'site2'), ('joint1', 'joint2'), ('tendon1', 'tendon2')):
                if eq.get(a) is not None and eq.get(a) == eq.get(b):
                    raise DescriptionError(
                        f'{origins.where(eq)}: {a} and {b} are both {eq.get(a)!r}; an equality '
                        f'between an element and itself constrains nothing: name two different '
                        f'{a[:-1]}s'
                    )


def checked_mjcf(path):
    """``(root, includes)`` of the MJCF file `path`: its tree with every ``<include>`` expanded, and the
    files included; refused with a :class:`DescriptionError` as the module docstring says."""
    path = Path(path)
    root = _read_xml(path, None)
    if root.tag != 'mujoco':
        raise DescriptionError(f'{path} is not an MJCF file (root element <{root.tag}>, expected <mujoco>)')
    origins = _Origins(path)
    seen = {path.resolve()}
    _expand(root, path, path, seen, origins)
    includes = sorted(seen - {path.resolve()})
    _check_structure(root, origins, includes)
    for element in root.iter():
        if isinstance(element.tag, str):
            _check_numbers(element, origins)
    _check_equalities(root, origins)
    return root, includes
