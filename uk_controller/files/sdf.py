"""Our reader of SDF models (SDFormat specification, sdformat.org): the subset that mechanisms and legged
robots such as Agility's Cassie (``example-robot-data``'s ``cassie_v2.sdf``) use.

The pip Pinocchio has no SDFormat parser, so this reader is what every user gets. What it reads:

- one ``<model>`` (no nested models); ``<link>`` with ``<pose>`` in the model frame and ``<inertial>``
  (``<pose>`` in the link, ``<mass>``, ``<inertia>`` about the centre of mass). Visuals, collisions,
  sensors and plugins are ignored (they do not change the dynamics this package models);
- ``<joint>`` of type ``revolute``, ``continuous``, ``prismatic``, ``fixed``, ``universal`` and ``ball``
  with ``<parent>``, ``<child>``, ``<pose>`` in the child link, ``<axis><xyz>`` (and ``<axis2>`` of a
  universal joint) in the joint frame, or in the model frame with ``expressed_in="__model__"`` or the
  SDF 1.4-1.6 ``<use_parent_model_frame>true``, ``<limit>`` (lower, upper, effort, velocity) and
  ``<dynamics>`` (damping, friction, spring_stiffness, spring_reference): the joint's passive dynamics
  (:mod:`uk_controller.model.joint_dynamics`), so Cassie's leaf springs are joint springs here.

The link poses describe the zero configuration. The kinematic tree is grown from the world (and from a
root link that no joint names as child, see *base*), one joint at a time, in file order: 1-DOF and fixed
joints from a placed parent first, then the same joints from a placed child (the joint then carries its
parent link, about the negated axis so that q keeps the file's sign: a rod the file hangs on a ball joint
is reached through its other end), ball and universal joints last. Each link hangs on the first joint
that reaches it; a later joint whose two links are placed closes a loop and becomes a passive
``loop_closure`` between its frame on the child and the same point of the parent at the zero
configuration:

- ``ball``: ``mode: position``, the 3 rows of the two points coinciding (a spherical joint's closure);
- ``revolute``/``continuous``: ``mode: position`` as well (the point; the hinge axis is not held, as in
  Pinocchio's own SDF parser, whose loop joints are 3D contacts);
- ``fixed``: ``mode: weld`` (6 rows).

In the tree, a universal joint is two revolute joints at the same point (``<name>_1`` about ``<axis>``,
then ``<name>_2`` about ``<axis2>``): that is what a universal joint is, with no mass between the axes.

*base* says what holds a root link that no joint connects to ``world`` (a legged robot's pelvis):

- ``fixed``: welded where the file places it (a robot hung on a gantry);
- ``free``: six coordinates ``base_x``, ``base_y``, ``base_z`` (world-axis translations from the file's
  pose) then ``base_yaw``, ``base_pitch``, ``base_roll`` (rotations about z, the new y, the new x: the
  Z-Y-X Euler angles of the root relative to the file's attitude). The dynamics in these coordinates are
  exact; they are singular at pitch = +-90 deg, where M loses rank (a standing robot is far from it).
  Pinocchio keeps a free flyer as a 7-number configuration with a quaternion; this package's joint
  space is one number per coordinate, so it uses the Euler chain.

Refused, naming the element: other joint types (``screw``, ``gearbox``, ``revolute2``), a ball joint the
tree needs (no other joint reaches its child), a universal or prismatic joint that closes a loop, poses
``relative_to`` another frame and ``<pose frame="...">``, more than one root link, links no joint path
reaches, nested models and ``<include>``, ``<axis><mimic>`` (not read: the coupling goes in the YAML), a
file that is not UTF-8, any number the file writes that is not finite (``inf`` or ``nan`` text; an absent
limit is SDF's "no limit"), an inertia Pinocchio cannot build.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .description_error import DescriptionError, read_utf8
from .description_extras import DescriptionExtras

JOINT_TYPES = ('revolute', 'continuous', 'prismatic', 'fixed', 'universal', 'ball')
BASES = ('fixed', 'free')
#: the free base's coordinates, in q order: translations along world x, y, z, then Z-Y-X Euler angles
FREE_BASE_JOINTS = (
    ('base_x', 'prismatic', (1.0, 0.0, 0.0)),
    ('base_y', 'prismatic', (0.0, 1.0, 0.0)),
    ('base_z', 'prismatic', (0.0, 0.0, 1.0)),
    ('base_yaw', 'revolute', (0.0, 0.0, 1.0)),
    ('base_pitch', 'revolute', (0.0, 1.0, 0.0)),
    ('base_roll', 'revolute', (1.0, 0.0, 0.0)),
)
_TREE_FIRST = ('revolute', 'continuous', 'prismatic', 'fixed')


def _error(message):
    return DescriptionError(message)


def _floats(text, count, where):
    try:
        values = [float(x) for x in (text or '').split()]
    except ValueError:
        values = []
    if len(values) != count or not np.all(np.isfinite(values)):
        raise _error(f'{where}: expected {count} finite numbers, got {text!r}')
    return np.array(values)


def _number(element, key, default, where):
    """The number of `element`'s ``<key>`` child, `default` when there is none. A number the file writes must
    be finite: an absent limit is SDF's "no limit" (infinite here), ``inf`` or ``nan`` text is refused."""
    text = element.findtext(key) if element is not None else None
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float('nan')
    if not np.isfinite(value):
        raise _error(
            f'{where} <{key}>: {text.strip()!r} is not a finite number; write a decimal value'
            + (' (leave the element out for no limit)' if key in ('lower', 'upper', 'effort', 'velocity') else '')
        )
    return value


def _pose(element, where):
    """SE3 of an SDF ``<pose>`` (x y z roll pitch yaw, fixed-axis RPY as URDF), identity if absent."""
    import pinocchio as pin

    text = element.findtext('pose') if element is not None else None
    if text is None:
        return pin.SE3.Identity()
    values = _floats(text, 6, where + ' <pose>')
    return pin.SE3(pin.rpy.rpyToMatrix(*values[3:]), values[:3])


def _axis(joint, tag, name, jw, where):
    """Unit axis of ``<axis>`` / ``<axis2>`` in the joint frame (jw: the joint frame in the world)."""
    axis_el = joint.find(tag)
    xyz = axis_el.find('xyz') if axis_el is not None else None
    axis = _floats(xyz.text if xyz is not None else '0 0 1', 3, f'{where} <{tag}><xyz>')
    norm = float(np.linalg.norm(axis))
    if norm == 0.0:
        raise _error(f'{where} <{tag}><xyz>: zero axis')
    axis = axis / norm
    in_model = axis_el is not None and (axis_el.findtext('use_parent_model_frame') or '').strip().lower() in (
        '1',
        'true',
    )
    expressed = xyz.get('expressed_in') if xyz is not None else None
    if expressed == '__model__':
        in_model = True
    elif expressed not in (None, '', name):
        raise _error(f'{where} <{tag}><xyz expressed_in="{expressed}">: only the joint frame or __model__ is supported')
    return jw.rotation.T @ axis if in_model else axis


def _passive_dynamics(joint, tag, where):
    """``{damping, friction, stiffness, spring_reference}`` of ``<axis><dynamics>`` (zeros omitted)."""
    dyn = joint.find(f'{tag}/dynamics')
    if dyn is None:
        return {}
    at = f'{where} <{tag}><dynamics>'
    values = {
        'damping': _number(dyn, 'damping', 0.0, at),
        'friction': _number(dyn, 'friction', 0.0, at),
        'stiffness': _number(dyn, 'spring_stiffness', 0.0, at),
        'spring_reference': _number(dyn, 'spring_reference', 0.0, at),
    }
    for key in ('damping', 'friction', 'stiffness'):
        if not (0.0 <= values[key] < np.inf):
            raise _error(f'{where} <dynamics>: {key} must be finite and >= 0, got {values[key]}')
    return {k: v for k, v in values.items() if v != 0.0}


def _limits(joint, tag, where):
    """(effort, velocity, lower, upper) of ``<axis><limit>`` (inf when absent or negative: SDF's 'none')."""
    limit = joint.find(f'{tag}/limit')
    at = f'{where} <{tag}><limit>'
    effort = _number(limit, 'effort', np.inf, at)
    velocity = _number(limit, 'velocity', np.inf, at)
    lower = _number(limit, 'lower', -np.inf, at)
    upper = _number(limit, 'upper', np.inf, at)
    if lower > upper:
        raise _error(f'{where} <limit>: lower {lower} > upper {upper}; swap them')
    return (np.inf if effort < 0 else effort, np.inf if velocity < 0 else velocity, lower, upper)


def _check_poses(xml_model, path):
    for element in xml_model.iter('pose'):
        if element.get('relative_to') not in (None, '', '__model__'):
            raise _error(
                f'{path}: <pose relative_to="{element.get("relative_to")}"> is not supported; give link '
                'poses in the model frame and joint poses in their child link'
            )
        if element.get('frame') not in (None, ''):
            raise _error(
                f'{path}: <pose frame="{element.get("frame")}"> is not supported; give link poses in the '
                'model frame and joint poses in their child link'
            )


def _grow_tree(joints, roots):
    """(tree, loops, placed, reversed names): tree joints in an order where each parent is placed first.

    Passes, each restarted from the first after any progress: 1-DOF and fixed joints from a placed parent;
    the same joints from a placed child (the joint then carries its parent link: a rod that the file hangs
    on a ball joint is reached through its other end); ball and universal joints last. A joint whose two
    links are placed closes a loop."""
    placed = set(roots)
    tree, loops, pending, reversed_ = [], [], list(joints), set()
    passes = (('forward', _TREE_FIRST), ('reverse', _TREE_FIRST), ('forward', JOINT_TYPES))
    while pending:
        progress = False
        for direction, kinds in passes:
            for item in list(pending):
                joint, where, kind, parent, child = item
                if kind not in kinds:
                    continue
                if direction == 'reverse':
                    if child not in placed or parent in placed:
                        continue
                    item = (joint, where, kind, child, parent)
                    reversed_.add(joint.get('name'))
                elif parent not in placed:
                    continue
                pending.remove((joint, where, kind, parent, child))
                progress = True
                (loops if item[4] in placed else tree).append(item)
                placed.add(item[4])
            if progress:
                break
        if not progress:
            break
    return _depth_first(tree, roots), loops, placed, reversed_


def _depth_first(tree, roots):
    """The tree joints in depth-first order (children in file order): Pinocchio's algorithms (CRBA's
    subtree blocks of M) need every subtree to occupy consecutive joint indices."""
    children = {}
    for item in tree:
        children.setdefault(item[3], []).append(item)
    ordered, stack = [], [(link, 0) for link in reversed(roots)]
    stack = [item for link in reversed(roots) for item in reversed(children.get(link, []))]
    while stack:
        item = stack.pop()
        ordered.append(item)
        stack.extend(reversed(children.get(item[4], [])))
    return ordered


def read_sdf(path, base='fixed'):
    """``(pinocchio.Model, closures, DescriptionExtras)`` of an SDF model (module docstring); `base`: 'fixed'
    or 'free' for a root link no joint connects to the world."""
    import pinocchio as pin

    if base not in BASES:
        raise ValueError(f'base must be one of {BASES}, got {base!r}')
    path = Path(path)
    try:
        root = ET.fromstring(read_utf8(path))
    except ET.ParseError as exc:
        raise _error(f'cannot parse SDF {path}: {exc}') from None
    models = root.findall('model') if root.tag == 'sdf' else []
    if len(models) != 1:
        raise _error(f'{path}: expected <sdf> with one <model>, found {len(models)}')
    xml_model = models[0]
    if xml_model.find('model') is not None or xml_model.find('include') is not None:
        raise _error(
            f'{path}: nested models (<model> or <include> in the <model>) are not supported; write '
            'their links and joints into the one model'
        )
    _check_poses(xml_model, path)
    links = {}
    for link in xml_model.findall('link'):
        name = link.get('name')
        if not name or name in links or name == 'world':
            raise _error(f'{path}: links need unique names other than world ({name!r})')
        links[name] = link
    joints, names = [], set()
    for joint in xml_model.findall('joint'):
        name = joint.get('name')
        where = f'{path}: <joint name="{name}">'
        if not name or name in names:
            raise _error(f'{where}: joints need unique names')
        names.add(name)
        kind = joint.get('type')
        if kind not in JOINT_TYPES:
            raise _error(f'{where}: type {kind!r} not supported ({", ".join(JOINT_TYPES)})')
        parent, child = joint.findtext('parent', '').strip(), joint.findtext('child', '').strip()
        for link in (parent, child):
            if link != 'world' and link not in links:
                raise _error(f'{where}: unknown link {link!r}')
        if child == 'world':
            raise _error(f'{where}: the world cannot be a child')
        if child == parent:
            raise _error(f'{where}: parent and child are the same link {child!r}')
        for tag in ('axis', 'axis2'):
            if joint.find(f'{tag}/mimic') is not None:
                raise _error(
                    f'{where} <{tag}><mimic>: a mimic joint is not read from SDF; write the coupling as a '
                    'passive joint_linear constraint of the setup (q_follower - multiplier q_leader = '
                    'offset) and remove the <mimic>'
                )
            if joint.find(tag) is not None:  # every number the file writes is finite, read later or not
                _floats(joint.findtext(f'{tag}/xyz', '0 0 1'), 3, f'{where} <{tag}><xyz>')
                _limits(joint, tag, where)
                _passive_dynamics(joint, tag, where)
        joints.append((joint, where, kind, parent, child))
    children = {j[4] for j in joints}
    roots = [name for name in links if name not in children]
    if len(roots) > 1:
        raise _error(f'{path}: links {roots} are each a root (no joint names them as child); join them into one tree')
    world_of = {name: _pose(link, f'{path}: <link name="{name}">') for name, link in links.items()}
    world_of['world'] = pin.SE3.Identity()
    tree, loops, placed, reversed_ = _grow_tree(joints, ['world'] + roots)
    unplaced = sorted(set(links) - placed)
    if unplaced:
        among = [j.get('name') for j, _, _, parent, child in joints if parent in unplaced or child in unplaced]
        how = (
            f'their joints {among} join them only to each other (a cycle or a chain off the tree)'
            if among
            else 'no joint names them'
        )
        raise _error(
            f'{path}: links {unplaced} are not connected to the root by joints: {how}; join one of them '
            'to the world or to a link of the tree'
        )
    if base == 'free':
        clash = sorted(names & {n for n, _, _ in FREE_BASE_JOINTS})
        if clash:
            raise _error(f'{path}: joints {clash} clash with the free base\'s coordinate names')

    model = pin.Model()
    model.name = xml_model.get('name') or path.stem
    joint_of = {'world': 0}  # link -> Pinocchio joint it moves with
    joint_world = {0: pin.SE3.Identity()}  # Pinocchio joint -> its frame in the world at the zero configuration
    frame_of = {'world': 0}
    limits = []  # (joint id, kind, effort, velocity, lower, upper)
    extras = DescriptionExtras()

    def add_joint(parent_jid, kind, axis, jw, name, parent_frame):
        axis = np.asarray(axis, dtype=float)
        if kind == 'continuous':
            # Pinocchio 4.1's Python RevoluteUnboundedUnaligned takes no axis: the unbounded joint turns
            # about the z of a frame turned onto the axis, and the joint's named frame keeps the file's attitude
            turn = pin.SE3(pin.Quaternion.FromTwoVectors(np.array([0.0, 0.0, 1.0]), axis).matrix(), np.zeros(3))
            jm, at = pin.JointModelRUBZ(), jw * turn
        else:
            turn = None
            jm = {'revolute': pin.JointModelRevoluteUnaligned, 'prismatic': pin.JointModelPrismaticUnaligned}[kind](
                axis
            )
            at = jw
        jid = model.addJoint(parent_jid, jm, joint_world[parent_jid].actInv(at), name)
        joint_world[jid] = at
        if turn is None:
            frame = model.addJointFrame(jid, parent_frame)
        else:
            frame = model.addFrame(pin.Frame(name, jid, parent_frame, turn.inverse(), pin.FrameType.JOINT))
        return jid, frame

    def add_body(link, jid, parent_frame):
        in_joint = joint_world[jid].actInv(world_of[link])
        frame_of[link] = model.addBodyFrame(link, jid, in_joint, parent_frame)
        joint_of[link] = jid
        inertial = links[link].find('inertial')
        if inertial is None:
            return
        where = f'{path}: <link name="{link}"><inertial>'
        mass = _number(inertial, 'mass', 0.0, where)
        el = inertial.find('inertia')

        def get(k):
            return _number(el, k, 0.0, where + ' <inertia>')

        inertia = np.array(
            [
                [get('ixx'), get('ixy'), get('ixz')],
                [get('ixy'), get('iyy'), get('iyz')],
                [get('ixz'), get('iyz'), get('izz')],
            ]
        )
        com = in_joint * _pose(inertial, where)
        try:
            body = pin.Inertia(mass, np.zeros(3), inertia)
        except RuntimeError as exc:  # e.g. "The 3d inertia should be positive."
            raise _error(
                f'{where}: mass {mass:g} and <inertia> {inertia.tolist()} are not a rigid body\'s '
                f'({exc}); give a mass >= 0 and a positive definite inertia about the centre of '
                'mass'
            ) from None
        model.appendBodyToJoint(jid, com.act(body), pin.SE3.Identity())

    for link in roots:  # the root link: welded, or on the free base's six coordinates
        if base == 'fixed':
            joint_world.setdefault(0, pin.SE3.Identity())
            add_body(link, 0, 0)
            continue
        jid, frame = 0, 0
        at = pin.SE3(np.eye(3), world_of[link].translation)
        for name, kind, axis in FREE_BASE_JOINTS:
            jid, frame = add_joint(jid, kind, axis, at, name, frame)
            limits.append((jid, kind, np.inf, np.inf, -np.inf, np.inf))
        add_body(link, jid, frame)
    for joint, where, kind, parent, child in tree:
        name = joint.get('name')
        # the joint frame in the world: its <pose> is in the file's child link (the parent here when reversed)
        flip = name in reversed_
        jw = world_of[parent if flip else child] * _pose(joint, where)
        jid, frame = joint_of[parent], frame_of[parent]
        if kind == 'ball':
            raise _error(
                f'{where}: a ball joint in the kinematic tree is not supported (this package\'s '
                'coordinates are one number per joint); it is supported where it closes a loop, i.e. '
                'when another joint also reaches its child link'
            )
        if kind == 'universal':
            axes = [(f'{name}_1', 'axis'), (f'{name}_2', 'axis2')]
        elif kind != 'fixed':
            axes = [(name, 'axis')]
        else:
            axes = []
        for coordinate, tag in axes:
            rotation_kind = 'revolute' if kind == 'universal' else kind
            axis = _axis(joint, tag, name, jw, where)
            # reversed: the parent link moves about -axis by the same q (R(a, q)^-1 = R(-a, q))
            jid, frame = add_joint(jid, rotation_kind, -axis if flip else axis, jw, coordinate, frame)
            limits.append((jid, rotation_kind, *_limits(joint, tag, where)))
            passive = _passive_dynamics(joint, tag, where)
            if passive:
                extras.joint_dynamics[coordinate] = passive
        add_body(child, jid, frame)
    effort, velocity = np.array(model.effortLimit), np.array(model.velocityLimit)
    lower, upper = np.array(model.lowerPositionLimit), np.array(model.upperPositionLimit)
    for jid, kind, e, v, lo, hi in limits:
        iv, iq = model.idx_vs[jid], model.idx_qs[jid]
        effort[iv], velocity[iv] = e, v
        if kind != 'continuous':
            lower[iq], upper[iq] = lo, hi
    model.effortLimit, model.velocityLimit = effort, velocity
    model.lowerPositionLimit, model.upperPositionLimit = lower, upper
    closures = {}
    for joint, where, kind, parent, child in loops:
        if kind in ('prismatic', 'universal'):
            raise _error(
                f'{where}: a {kind} joint closing a loop is not supported (ball, revolute, continuous '
                'and fixed joints are)'
            )
        name = joint.get('name')
        jw = world_of[child] * _pose(joint, where)
        frames = []
        for k, link in enumerate((parent, child)):
            jid = joint_of[link]
            frame = f'{name}/{k + 1}'
            model.addFrame(pin.Frame(frame, jid, joint_world[jid].actInv(jw), pin.FrameType.OP_FRAME))
            frames.append(frame)
        closures[name] = {
            'role': 'passive',
            'type': 'loop_closure',
            'frames': frames,
            'mode': 'weld' if kind == 'fixed' else 'position',
        }
    return model, closures, extras
