"""Robot descriptions a user already has: URDF, xacro, MJCF (with its loop closures), SDF.

A setup names exactly one of

- ``robot.urdf``: a URDF file, or a ``.xacro`` file expanded with the ``xacro``
  package (``robot.xacro_args``: a map of xacro arguments);
- ``robot.mjcf``: a MuJoCo MJCF file, its ``<include>`` elements expanded and the whole checked before
  Pinocchio reads it (:mod:`.mjcf_check`). Its tree becomes the model (Pinocchio's
  MJCF parser) and its ``<equality>`` ``connect`` / ``weld`` elements become
  passive ``loop_closure`` constraints, merged with those of the YAML;
- ``robot.sdf``: an SDF model; joints that close loops become closures, a root
  link without a joint to the world is fixed or free (``robot.base``; :mod:`.sdf`).

Closures read from a file are constraint maps exactly as the YAML would write
them (``role: passive, type: loop_closure, frames: [a, b], mode: position|weld``),
so :func:`merge_closures` can merge them into the ``constraints`` section: a
YAML entry with the same name refines the file's (e.g. ``axes: [x, y]`` for a
planar mechanism), other YAML entries are added.

MuJoCo semantics of an equality (MuJoCo XML reference, ``equality/connect`` and
``equality/weld``): with ``site1``/``site2`` the two sites coincide (connect: their
origins; weld: their frames). With ``body1``/``body2``, ``connect``'s ``anchor`` is a
point in body1's frame and the point of body2 it must meet is where that anchor
lies at the reference configuration qpos0; ``weld``'s ``relpose`` (pos, quat) is
body2's pose in body1's frame, from qpos0 when omitted. Frames named
``<closure>/1`` and ``<closure>/2`` are added to the model for body-based equalities.
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .description_error import DescriptionError, read_utf8

#: the keys that name a robot description (``robot.<key>``; a setup gives exactly one)
DESCRIPTION_KEYS = ('urdf', 'mjcf', 'sdf')
#: the descriptions that can hold loop closures themselves (MJCF equalities, SDF joints that close loops)
CLOSURE_KEYS = ('mjcf', 'sdf')


def description_key(robot, config_path=None):
    """Which of ``robot.urdf`` / ``robot.mjcf`` / ``robot.sdf`` the ``robot`` section gives (exactly one);
    `robot` is a map or the typed section of resolved settings."""
    from .parameter_file import ConfigError

    read = robot.get if isinstance(robot, dict) else (lambda k: getattr(robot, k, None))
    given = [k for k in DESCRIPTION_KEYS if read(k) not in (None, '')]
    if len(given) != 1:
        what = 'none of them' if not given else ' and '.join(f'robot.{k}' for k in given)
        raise ConfigError(
            ('missing: ' if not given else '')
            + f'give exactly one robot description: robot.urdf (URDF or .xacro), robot.mjcf '
            f'(MuJoCo XML) or robot.sdf; got {what}',
            file=config_path,
            key=f'robot.{given[-1]}' if given else 'robot.urdf',
        )
    return given[0]


# ----------------------------------------------------------------------------- URDF and xacro


def is_xacro(path):
    return str(path).endswith('.xacro')


def expand_xacro(path, args=None):
    """The URDF text of a ``.xacro`` file, expanded by the ``xacro`` package with `args` (name -> value)."""
    try:
        import xacro
    except ImportError:
        raise DescriptionError(
            f'{path} is a xacro file and the xacro package is not installed '
            '(pip install xacro, or apt install ros-<distro>-xacro)'
        ) from None
    mappings = {str(k): str(v) for k, v in (args or {}).items()}
    try:
        doc = xacro.process_file(str(path), mappings=mappings)
    except Exception as exc:  # xacro raises XacroException, ExpatError, NameError, ...
        raise DescriptionError(f'xacro could not expand {path}: {type(exc).__name__}: {exc}') from None
    return doc.toprettyxml(indent='  ')


def urdf_text(path, xacro_args=None, config_path=None):
    """The URDF text of `path`: the file, or its xacro expansion with `xacro_args`."""
    from .parameter_file import ConfigError

    if is_xacro(path):
        try:
            return expand_xacro(path, xacro_args)
        except DescriptionError as exc:
            raise ConfigError(str(exc), file=config_path, key='robot.urdf') from None
    check_xacro_args('urdf', path, path, xacro_args, config_path)
    return read_utf8(path)


def check_xacro_args(key, written, file, xacro_args, config_path=None):
    """``robot.xacro_args`` goes with a ``.xacro`` ``robot.urdf`` only: a ConfigError naming it otherwise
    (`key` the description key, `written` its value as the setup writes it, `file` the file found)."""
    from .parameter_file import ConfigError

    if xacro_args and (key != 'urdf' or not is_xacro(file)):
        raise ConfigError(
            f'given, but robot.{key} ({written}) is not a .xacro file', file=config_path, key='robot.xacro_args'
        )


def _finite_numbers(element, attribute, count, where):
    """Refuse `attribute` of `element` unless it holds `count` finite numbers (absent: fine)."""
    text = element.get(attribute)
    if text is None:
        return None
    try:
        values = [float(x) for x in text.split()]
    except ValueError:
        values = None
    if values is None or (count and len(values) != count) or not all(np.isfinite(v) for v in values):
        want = f'{count} finite numbers' if count else 'a finite number'
        raise DescriptionError(f'{where}: {attribute}="{text}" must be {want}')
    return values


def check_urdf_text(text, path):
    """Refuse a URDF text before Pinocchio sees it (:class:`DescriptionError` naming `path`, the element
    and what to change): XML that parses; each link with at most one parent joint; joints forming a tree
    (no cycle) in which every link hangs from the one root; every number finite (joint and inertial
    origins, axes, inertias, masses, limits, mimic coefficients); ``lower <= upper`` joint limits."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DescriptionError(f'{path} is not well-formed XML: {exc}') from None
    links = [link.get('name') for link in root.findall('link')]
    parent_of = {}
    for joint in root.findall('joint'):
        name = joint.get('name')
        where = f'{path}: joint {name!r}'
        parent, child = joint.find('parent'), joint.find('child')
        if parent is None or child is None:
            raise DescriptionError(f'{where} needs a <parent link=...> and a <child link=...>')
        p, c = parent.get('link'), child.get('link')
        for end in (p, c):
            if end not in links:
                raise DescriptionError(f'{where} names link {end!r}, which is not a <link> of the file')
        if c in parent_of:
            raise DescriptionError(
                f'{where}: link {c!r} already has parent joint {parent_of[c][1]!r}; a link has '
                'one parent (close loops with a loop_closure constraint instead)'
            )
        parent_of[c] = (p, name)
        origin = joint.find('origin')
        if origin is not None:
            _finite_numbers(origin, 'xyz', 3, f'{where} <origin>')
            _finite_numbers(origin, 'rpy', 3, f'{where} <origin>')
        axis = joint.find('axis')
        if axis is not None:
            xyz = _finite_numbers(axis, 'xyz', 3, f'{where} <axis>')
            if xyz is not None and not any(xyz) and joint.get('type') not in ('fixed', 'floating'):
                raise DescriptionError(f'{where} <axis>: xyz="{axis.get("xyz")}" is the zero vector; give a direction')
        limit = joint.find('limit')
        if limit is not None:
            for key in ('lower', 'upper', 'effort', 'velocity'):
                _finite_numbers(limit, key, 1, f'{where} <limit>')
            lo, hi = limit.get('lower'), limit.get('upper')
            if lo is not None and hi is not None and float(lo) > float(hi) and joint.get('type') != 'continuous':
                raise DescriptionError(f'{where} <limit>: lower={lo} is above upper={hi}; swap them')
        mimic = joint.find('mimic')
        if mimic is not None:
            _finite_numbers(mimic, 'multiplier', 1, f'{where} <mimic>')
            _finite_numbers(mimic, 'offset', 1, f'{where} <mimic>')
    for link in root.findall('link'):
        name = link.get('name')
        inertial = link.find('inertial')
        if inertial is None:
            continue
        where = f'{path}: link {name!r} <inertial>'
        for tag, keys in (
            ('origin', ('xyz', 'rpy')),
            ('mass', ('value',)),
            ('inertia', ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz')),
        ):
            element = inertial.find(tag)
            if element is not None:
                for key in keys:
                    _finite_numbers(element, key, 3 if tag == 'origin' else 1, f'{where} <{tag}>')
    roots = [name for name in links if name not in parent_of]
    for start in parent_of:  # a walk up from every link ends at a root, or meets itself
        seen, link = [], start
        while link in parent_of:
            if link in seen:
                cycle = seen[seen.index(link) :]
                joints = [parent_of[x][1] for x in cycle]
                raise DescriptionError(
                    f'{path}: joints {", ".join(map(repr, joints))} form a cycle (links '
                    f'{" <- ".join(cycle)}); a URDF is a tree: close loops with a loop_closure '
                    'constraint instead'
                )
            seen.append(link)
            link = parent_of[link][0]
    if len(roots) != 1:
        raise DescriptionError(
            f'{path}: {len(roots)} links have no parent joint ({", ".join(roots) or "none"}); a URDF '
            'has one root link: join the others to the tree with a joint'
        )


# ----------------------------------------------------------------------------- MJCF


def _floats(text, count, where):
    try:
        values = [float(x) for x in (text or '').split()]
    except ValueError:
        values = []
    if len(values) != count:
        raise DescriptionError(f'{where}: expected {count} numbers, got {text!r}')
    return np.array(values)


def _mjcf_body_names(root):
    """Every <body> of <worldbody>, named or not (a nameless body is reported by its position)."""
    names = []
    for wb in root.iter('worldbody'):
        for i, body in enumerate(wb.iter('body')):
            names.append(body.get('name') or f'<unnamed body #{i}>')
    return names


def _prepared_mjcf(path):
    """(text, equality elements) of an MJCF prepared for Pinocchio's parser.

    The file is read, its ``<include>`` elements expanded and checked first (:func:`.mjcf_check.checked_mjcf`:
    structure, finite numbers, ordered ranges), so Pinocchio sees one file without includes. The
    ``<equality>`` section is removed (we read it ourselves: Pinocchio 4.1 crashes on site-based
    ``connect`` and reads body-based ones only); several ``<worldbody>`` sections (one per included file)
    become one, as MuJoCo merges them; and when ``<worldbody>`` holds several bodies, or one body
    with a pose, they are wrapped in one body without joints, ``uk_worldbody`` (Pinocchio 4.1 silently dropped
    every top-level body after the first, and the pose of the first: a gripper posed upside down came out
    upright; a body without joints is welded to its parent, so the model is unchanged).
    """
    from .mjcf_check import checked_mjcf

    root, _ = checked_mjcf(path)
    equalities = []
    for section in root.findall('equality'):
        equalities.extend(list(section))
        root.remove(section)
    worldbodies = root.findall('worldbody')
    for extra in worldbodies[1:]:
        worldbodies[0].extend(list(extra))
        root.remove(extra)
    for wb in worldbodies[:1]:
        bodies = wb.findall('body')
        posed = bool(bodies) and any(
            bodies[0].get(k) is not None for k in ('pos', 'quat', 'euler', 'axisangle', 'xyaxes', 'zaxis')
        )
        if len(bodies) > 1 or posed:
            wrapper = ET.Element('body', name='uk_worldbody')
            for body in bodies:
                wb.remove(body)
                wrapper.append(body)
            wb.append(wrapper)
    _name_main_class(root)
    return ET.tostring(root, encoding='unicode'), equalities


def _name_main_class(root):
    """Give the top-level ``<default>`` its MuJoCo name ``main`` when an element names that class: MuJoCo
    calls the top level ``main`` whether it is written or not, Pinocchio 4.1 knows a class only by its
    ``class`` attribute (``class="main"`` otherwise stops it with "unordered_map::at")."""
    if not any(el.get(key) == 'main' for el in root.iter() if el.tag != 'default' for key in ('class', 'childclass')):
        return
    tops = root.findall('default')
    if not tops:
        root.insert(0, ET.Element('default', {'class': 'main'}))
    elif tops[0].get('class') is None:
        tops[0].set('class', 'main')


def _build_from_text(text, folder, builder):
    """Run `builder(filename)` on `text` written next to the original (relative includes and mesh
    paths keep working), or in the temp dir if that folder is read-only."""
    for where in (folder, None):
        try:
            fd, name = tempfile.mkstemp(prefix='.uk_controller_', suffix='.xml', dir=where)
        except OSError:
            continue
        try:
            with os.fdopen(fd, 'w', encoding='utf-8') as handle:
                handle.write(text)
            return builder(name)
        finally:
            os.unlink(name)
    raise DescriptionError('cannot write a temporary file')


def load_mjcf(path):
    """``(pinocchio.Model, constraints)`` of an MJCF file (:func:`read_mjcf` without the extras)."""
    model, constraints, _ = read_mjcf(path)
    return model, constraints


def read_mjcf(path):
    """``(pinocchio.Model, constraints, extras)`` of an MJCF file; constraints is a dict name -> constraint
    map: the connect/weld closures and the joint/tendon couplings (:mod:`uk_controller.files.description_extras`);
    extras the :class:`~uk_controller.files.description_extras.DescriptionExtras` (joint dynamics, fixed tendons).

    Every body of the file must reach the model (checked by name against the model's BODY frames).
    """
    import pinocchio as pin

    from .description_extras import ExtrasError, mjcf_extras
    from .mjcf_check import checked_mjcf

    path = Path(path)
    text, equalities = _prepared_mjcf(path)
    try:
        model = _build_from_text(text, path.parent, pin.buildModelFromMJCF)
    except DescriptionError:
        raise
    except Exception as exc:
        raise DescriptionError(f'Pinocchio cannot read MJCF {path}: {exc}') from None
    root, _ = checked_mjcf(path)  # the file as written, includes expanded (for bodies and extras)
    bodies = _mjcf_body_names(root)
    lost = [b for b in bodies if not model.existFrame(b, pin.FrameType.BODY)]
    if lost:
        raise DescriptionError(
            f'bodies of {path} missing from the model Pinocchio built: {", ".join(lost)} '
            '(a parser limitation; please report it with the file)'
        )
    couplings = [eq for eq in equalities if isinstance(eq.tag, str) and eq.tag in ('joint', 'tendon')]
    closures = _mjcf_closures(model, [eq for eq in equalities if eq not in couplings], path)
    try:
        extras = mjcf_extras(root, couplings, path)
    except ExtrasError as exc:
        raise DescriptionError(str(exc)) from None
    for name in extras.constraints:
        if name in closures:
            raise DescriptionError(f'{path}: two equalities named {name!r}')
    constraints = {**closures, **extras.constraints}
    return model, constraints, extras


def _mjcf_closures(model, equalities, path):
    import pinocchio as pin

    closures = {}
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))  # MuJoCo's qpos0 (joint ref = 0)

    def body_frame(name, where):
        if name in (None, '', 'world'):
            return 0  # the universe frame (MuJoCo: world)
        if not model.existFrame(name, pin.FrameType.BODY):
            raise DescriptionError(f'{where}: unknown body {name!r}')
        return model.getFrameId(name, pin.FrameType.BODY)

    def site_frame(name, where):
        if not name or not model.existFrame(name):
            raise DescriptionError(f'{where}: unknown site {name!r}')
        return name

    def add_frame(name, fid_body, placement_in_body):
        body = model.frames[fid_body]
        frame = pin.Frame(name, body.parentJoint, body.placement * placement_in_body, pin.FrameType.OP_FRAME)
        model.addFrame(frame)
        return name

    for i, eq in enumerate(equalities):
        if eq.tag is ET.Comment or not isinstance(eq.tag, str):
            continue
        name = eq.get('name') or f'{eq.tag}_{i}'
        where = f'{path}: <equality><{eq.tag} name="{name}">'
        if eq.get('active', 'true').lower() == 'false':
            continue
        if eq.tag not in ('connect', 'weld'):
            raise DescriptionError(f'{where}: equality type {eq.tag!r} is not supported (connect, weld, joint, tendon)')
        if name in closures:
            raise DescriptionError(f'{where}: two equalities named {name!r}')
        if eq.get('site1') or eq.get('site2'):
            frames = [site_frame(eq.get('site1'), where), site_frame(eq.get('site2'), where)]
        else:
            if not eq.get('body1'):
                raise DescriptionError(f'{where}: give body1 (and body2, default the world) or site1 and site2')
            f1 = body_frame(eq.get('body1'), where)
            f2 = body_frame(eq.get('body2'), where)  # MuJoCo: body2 omitted = the world
            o1, o2 = data.oMf[f1], data.oMf[f2]
            if eq.tag == 'connect':
                anchor = _floats(eq.get('anchor'), 3, where + ' anchor')
                on1 = pin.SE3(np.eye(3), anchor)
                on2 = o2.actInv(o1 * on1)  # the same point of body2 at qpos0
                on2 = pin.SE3(np.eye(3), on2.translation)
            else:
                relpose = eq.get('relpose')
                if relpose is not None:
                    values = _floats(relpose, 7, where + ' relpose')
                    if np.allclose(values[3:], 0.0):  # MuJoCo: all-zero quat -> from qpos0
                        relpose = None
                if relpose is None:
                    on1 = o1.actInv(o2)  # body2 in body1 at qpos0
                else:
                    w, x, y, z = values[3:] / np.linalg.norm(values[3:])
                    on1 = pin.SE3(pin.Quaternion(w, x, y, z).toRotationMatrix(), values[:3])
                on2 = pin.SE3.Identity()
            frames = [add_frame(f'{name}/1', f1, on1), add_frame(f'{name}/2', f2, on2)]
        closures[name] = {
            'role': 'passive',
            'type': 'loop_closure',
            'frames': frames,
            'mode': 'weld' if eq.tag == 'weld' else 'position',
        }
    return closures


# ----------------------------------------------------------------------------- SDF


def load_sdf(path, base='fixed'):
    """``(pinocchio.Model, closures, DescriptionExtras)`` of an SDF model: our reader
    (:func:`uk_controller.files.sdf.read_sdf`, whose docstring lists what it reads and refuses). It is used
    even where Pinocchio was built with SDFormat: its parser gives a free flyer with a quaternion, and this
    package's coordinates are one number per joint."""
    from .sdf import read_sdf as read

    return read(path, base)


def read_sdf(path, base='fixed'):
    """See :func:`uk_controller.files.sdf.read_sdf`."""
    from .sdf import read_sdf as read

    return read(path, base)


# ----------------------------------------------------------------------------- merging


def _signature(spec):
    """What makes two passive rows the same, for :func:`merge_closures` (None: not compared): a closure's
    pair of frames, a joint_linear row's joint -> coefficient map scaled to a leading 1 and its value."""
    if spec.get('role', 'passive' if spec.get('type') == 'loop_closure' else 'servo') != 'passive':
        return None
    if spec.get('type') == 'loop_closure' and isinstance(spec.get('frames'), (list, tuple)):
        return ('loop_closure', frozenset(spec['frames']))
    if spec.get('type') == 'joint_linear' and spec.get('joints') and 'trajectory' not in spec:
        try:
            pairs = sorted((str(j), float(c)) for j, c in zip(spec['joints'], spec.get('coefficients') or ()))
            lead = next(c for _, c in pairs if c != 0.0)
            return (
                'joint_linear',
                tuple((j, round(c / lead, 12)) for j, c in pairs if c != 0.0),
                round(float(spec.get('value', 0.0)) / lead, 12),
            )
        except (TypeError, ValueError, StopIteration):
            return None
    return None


def merge_closures(constraints, closures, config_path=None):
    """The ``constraints`` section with the file's `closures` merged in (a new dict; see module doc)."""
    from .parameter_file import ConfigError

    if not closures:
        return constraints
    constraints = dict(constraints or {})
    names = list(constraints.get('names') or [])
    merged = {}
    for name, spec in closures.items():
        entry = dict(spec)
        if name in constraints:
            extra = constraints[name] or {}
            if not isinstance(extra, dict):
                raise ConfigError('must be a map', file=config_path, key=f'constraints.{name}')
            fixed = (
                ('type', 'frames', 'role')
                if entry['type'] == 'loop_closure'
                else ('type', 'role', 'joints', 'coefficients', 'value', 'polycoef', 'reference')
            )
            what = f'between {entry["frames"]}' if 'frames' in entry else f'on joints {entry.get("joints")}'
            for key in fixed:
                if key in extra and extra[key] != entry.get(key):
                    raise ConfigError(
                        f'{name!r} is a {entry["type"]} of the robot description ({what}); the YAML '
                        f'may refine it ({"axes, mode" if entry["type"] == "loop_closure" else "nothing"}) '
                        f'but not change its {key}; rename the YAML constraint to add a different one',
                        file=config_path,
                        key=f'constraints.{name}.{key}',
                    )
            entry.update(extra)
        merged[name] = entry
    signatures = {_signature(spec): name for name, spec in merged.items()}
    signatures.pop(None, None)
    for name in names:
        if name not in merged:
            spec = constraints.get(name)
            twin = signatures.get(_signature(spec)) if isinstance(spec, dict) else None
            if twin is not None:
                raise ConfigError(
                    f'{name!r} repeats the robot description\'s {twin!r} (the same '
                    f'{merged[twin]["type"]} row); remove it, or name it {twin!r} to refine the '
                    'file\'s',
                    file=config_path,
                    key=f'constraints.{name}',
                )
            merged[name] = spec
    out = {k: v for k, v in constraints.items() if k != 'names' and k not in merged}
    out.update(merged)
    out['names'] = list(closures) + [n for n in names if n not in closures]
    return out
