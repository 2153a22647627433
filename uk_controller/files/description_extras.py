"""What a robot description says beyond its kinematic tree: couplings, tendons, passive joint dynamics.

Read from the file as its own tool defines it, so a user's description is used unedited:

URDF (ROS URDF spec, ``<joint>``):

- ``<mimic joint="leader" multiplier="m" offset="o"/>``: ``q_joint = m q_leader + o``, a passive
  ``joint_linear`` row named ``mimic_<joint>`` (coefficients ``[1, -m]`` on ``[joint, leader]``, value ``o``);
  the mimic joint stays a coordinate of q and the row makes it follow exactly (not an independent joint);
- ``<dynamics damping="d" friction="f"/>``: viscous damping and Coulomb friction of the joint.

MJCF (MuJoCo XML reference; default classes, ``childclass`` and ``<compiler angle>`` resolved as MuJoCo does):

- ``<joint damping stiffness springref armature frictionloss>``: the joint's passive dynamics
  (:mod:`uk_controller.model.joint_dynamics`); ``springref`` and ``ref`` of a hinge are in degrees unless
  ``<compiler angle="radian">``;
- ``<equality><joint joint1 joint2 polycoef="c0 c1 c2 c3 c4">``: MuJoCo's coupling
  ``q1 - q1_0 = c0 + c1 d + c2 d^2 + c3 d^3 + c4 d^4``, ``d = q2 - q2_0`` (q_0: the joints' ``ref``; without
  joint2, ``q1 - q1_0 = c0``). Linear (c2 = c3 = c4 = 0): a passive ``joint_linear`` row
  ``q1 - c1 q2 = c0 + q1_0 - c1 q2_0``; otherwise a passive ``joint_polynomial`` row with the same polynomial
  (:class:`uk_controller.constraints.JointPolynomial`);
- ``<tendon><fixed name="t"><joint joint="j" coef="c"/>...``: a fixed tendon, length ``L = sum c_j q_j``; an
  actuator of the YAML with ``tendon: t`` gets the column ``B[j] = c_j`` (virtual work of a tendon force);
- ``<equality><tendon tendon1 tendon2 polycoef>`` between fixed tendons, linear only: the ``joint_linear`` row
  ``L1 - c1 L2 = c0 + L1_0 - c1 L2_0`` (L_0 at the joints' ``ref``).

Not read (docs/config.md "Bring your own robot"): joint limits' softness (solref/solimp), contacts, spatial
tendons, MJCF actuators' own gains (the YAML's actuators are effort sources), URDF ``<transmission>``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np


class ExtrasError(ValueError):
    """A coupling, tendon or joint attribute of the description cannot be used (message names the element)."""


@dataclass
class DescriptionExtras:
    """``constraints``: name -> passive constraint map (as the YAML writes them); ``joint_dynamics``: joint name
    -> {damping, stiffness, spring_reference, armature, friction}; ``tendons``: fixed tendon name -> {joint: coef}."""

    constraints: dict = field(default_factory=dict)
    joint_dynamics: dict = field(default_factory=dict)
    tendons: dict = field(default_factory=dict)


def _number(text, where, default=0.0):
    if text is None:
        return default
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        raise ExtrasError(f'{where}: expected a number, got {text!r}') from None


def _numbers(text, where):
    try:
        return [float(x) for x in (text or '').split()]
    except ValueError:
        raise ExtrasError(f'{where}: expected numbers, got {text!r}') from None


# ----------------------------------------------------------------------------- URDF


def urdf_extras(text, where='URDF'):
    """:class:`DescriptionExtras` of a URDF's text: ``<mimic>`` rows and ``<dynamics>`` (module docstring)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ExtrasError(f'cannot parse {where}: {exc}') from None
    extras = DescriptionExtras()
    movable = {j.get('name') for j in root.iter('joint') if j.get('type') not in (None, 'fixed', 'floating', 'planar')}
    leaders = {}  # mimic joint -> the joint it follows
    for joint in root.iter('joint'):
        name = joint.get('name')
        if name not in movable:
            continue
        at = f'{where}: <joint name="{name}">'
        dyn = joint.find('dynamics')
        if dyn is not None:
            values = {
                'damping': _number(dyn.get('damping'), at + '<dynamics damping>'),
                'friction': _number(dyn.get('friction'), at + '<dynamics friction>'),
            }
            if any(values.values()):
                extras.joint_dynamics[name] = values
        mimic = joint.find('mimic')
        if mimic is not None:
            leader = mimic.get('joint')
            if leader not in movable:
                raise ExtrasError(f'{at}<mimic joint="{leader}">: not a movable joint of the URDF')
            if leader == name:  # the row q - m q = o: zero (m = 1, o = 0), a contradiction or q fixed
                raise ExtrasError(
                    f'{at}<mimic joint="{leader}">: a joint cannot mimic itself; name the joint it '
                    'follows, or remove the <mimic>'
                )
            leaders[name] = leader
            multiplier = _number(mimic.get('multiplier'), at + '<mimic multiplier>', 1.0)
            offset = _number(mimic.get('offset'), at + '<mimic offset>', 0.0)
            extras.constraints[f'mimic_{name}'] = {
                'role': 'passive',
                'type': 'joint_linear',
                'joints': [name, leader],
                'coefficients': [1.0, -multiplier],
                'value': offset,
            }
    for start in leaders:  # a mimic chain ends at a joint that mimics nothing, or comes back: a cycle
        chain, joint = [start], leaders[start]
        while joint in leaders and joint not in chain:
            chain.append(joint)
            joint = leaders[joint]
        if joint == start:
            raise ExtrasError(
                f'{where}: joints {", ".join(map(repr, chain))} mimic each other in a cycle '
                f'({" -> ".join(chain + [start])}); none of them is free to lead: remove the <mimic> '
                f'of one of them'
            )
    return extras


# ----------------------------------------------------------------------------- MJCF


def mjcf_default_classes(root):
    """``{class: {tag: {attribute: value}}}`` of an MJCF's ``<default>`` tree, inheritance resolved (a nested
    default starts from its parent's values; the top level is class ``main``)."""
    classes = {}

    def walk(node, inherited, name):
        own = {tag: dict(attrs) for tag, attrs in inherited.items()}
        for child in node:
            if isinstance(child.tag, str) and child.tag != 'default':
                own.setdefault(child.tag, {}).update(child.attrib)
        classes[name] = own
        for child in node.findall('default'):
            walk(child, own, child.get('class'))

    for top in root.findall('default'):
        walk(top, {}, top.get('class', 'main'))
    return classes


def mjcf_joints(root):
    """``{joint name: attributes}`` of every named ``<joint>`` of the worldbody, each with its class defaults
    (own ``class``, else the nearest body ``childclass``, else ``main``) under its own attributes."""
    classes = mjcf_default_classes(root)
    joints = {}

    def walk(body, childclass):
        cc = body.get('childclass', childclass)
        for el in body:
            if el.tag == 'joint':
                attrs = dict(classes.get(el.get('class', cc), {}).get('joint', {}))
                attrs.update(el.attrib)
                if el.get('name'):
                    joints[el.get('name')] = attrs
            elif el.tag == 'body':
                walk(el, cc)

    for wb in root.findall('worldbody'):
        walk(wb, 'main')
    return joints


def _angle_scale(root):
    compiler = root.find('compiler')
    unit = compiler.get('angle', 'degree') if compiler is not None else 'degree'
    return 1.0 if unit == 'radian' else math.pi / 180.0


def mjcf_extras(root, equalities, path):
    """:class:`DescriptionExtras` of an MJCF (`root` its parsed tree, `equalities` its ``<equality>`` children
    other than connect/weld); module docstring."""
    extras = DescriptionExtras()
    scale = _angle_scale(root)
    joints = mjcf_joints(root)
    ref = {}
    for name, a in joints.items():
        at = f'{path}: <joint name="{name}">'
        kind = a.get('type', 'hinge')
        angular = scale if kind == 'hinge' else 1.0
        ref[name] = _number(a.get('ref'), at + ' ref') * angular
        values = {
            'damping': _number(a.get('damping'), at + ' damping'),
            'stiffness': _number(a.get('stiffness'), at + ' stiffness'),
            'spring_reference': _number(a.get('springref'), at + ' springref') * angular,
            'armature': _number(a.get('armature'), at + ' armature'),
            'friction': _number(a.get('frictionloss'), at + ' frictionloss'),
        }
        if any(values[k] for k in ('damping', 'stiffness', 'armature', 'friction')):
            extras.joint_dynamics[name] = values
    for section in root.findall('tendon'):
        for tendon in section:
            if tendon.tag != 'fixed':
                continue
            tname = tendon.get('name')
            coefs = {}
            for j in tendon.findall('joint'):
                jn = j.get('joint')
                if jn not in joints:
                    raise ExtrasError(f'{path}: <tendon><fixed name="{tname}"><joint joint="{jn}">: unknown joint')
                coefs[jn] = coefs.get(jn, 0.0) + _number(j.get('coef'), f'{path}: tendon {tname} coef')
            if tname:
                extras.tendons[tname] = coefs
    for i, eq in enumerate(equalities):
        name = eq.get('name') or f'{eq.tag}_{i}'
        at = f'{path}: <equality><{eq.tag} name="{name}">'
        if eq.get('active', 'true').lower() == 'false':
            continue
        poly = _numbers(eq.get('polycoef', '0 1 0 0 0'), at + ' polycoef')
        if not 1 <= len(poly) <= 5:
            raise ExtrasError(f'{at}: polycoef takes up to 5 numbers, got {len(poly)}')
        poly = (poly + [0.0] * 5)[:5]
        if eq.tag == 'joint':
            j1, j2 = eq.get('joint1'), eq.get('joint2')
            for j in (j1, j2):
                if j is not None and j not in joints:
                    raise ExtrasError(f'{at}: unknown joint {j!r}')
            if j1 is None:
                raise ExtrasError(f'{at}: joint1 is required')
            if j2 is None:
                spec = {'joints': [j1], 'coefficients': [1.0], 'value': poly[0] + ref[j1]}
            elif not any(poly[2:]):
                spec = {
                    'joints': [j1, j2],
                    'coefficients': [1.0, -poly[1]],
                    'value': poly[0] + ref[j1] - poly[1] * ref[j2],
                }
            else:
                extras.constraints[name] = {
                    'role': 'passive',
                    'type': 'joint_polynomial',
                    'joints': [j1, j2],
                    'polycoef': poly,
                    'reference': [ref[j1], ref[j2]],
                }
                continue
            extras.constraints[name] = {'role': 'passive', 'type': 'joint_linear', **spec}
        elif eq.tag == 'tendon':
            t1, t2 = eq.get('tendon1'), eq.get('tendon2')
            for t in (t1, t2):
                if t is not None and t not in extras.tendons:
                    raise ExtrasError(f'{at}: {t!r} is not a fixed tendon of the file (only fixed tendons are read)')
            if t1 is None:
                raise ExtrasError(f'{at}: tendon1 is required')
            if any(poly[2:]) and t2 is not None:
                raise ExtrasError(
                    f'{at}: a nonlinear tendon coupling is not supported; write it in the YAML (a callable constraint)'
                )
            coefs = dict(extras.tendons[t1])
            value = poly[0] + sum(c * ref[j] for j, c in coefs.items())
            if t2 is not None:
                for j, c in extras.tendons[t2].items():
                    coefs[j] = coefs.get(j, 0.0) - poly[1] * c
                    value -= poly[1] * c * ref[j]
            names = [j for j, c in coefs.items() if c != 0.0]
            extras.constraints[name] = {
                'role': 'passive',
                'type': 'joint_linear',
                'joints': names,
                'coefficients': [coefs[j] for j in names],
                'value': value,
            }
        else:
            raise ExtrasError(f'{at}: equality type {eq.tag!r} is not supported (connect, weld, joint, tendon)')
    return extras


def tendon_column(extras, tendon, joint_names):
    """The actuator column (n,) of a force on fixed tendon `tendon`: ``B[j] = coef_j`` (L = sum coef_j q_j)."""
    column = np.zeros(len(joint_names))
    for joint, coef in extras.tendons[tendon].items():
        if joint not in joint_names:
            raise ExtrasError(f'tendon {tendon!r} pulls on joint {joint!r}, which is not a coordinate of the model')
        column[joint_names.index(joint)] += coef
    return column
