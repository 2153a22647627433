"""Physical validity of a robot description, checked once when it is loaded.

The equations of motion ``M(q) q'' + h = tau`` (seed 000 eq 11) need a mass matrix that is
symmetric positive definite: the UK acceleration (seed 000 eq 9) and Chen's servo control (seed 004
eq 35) both use ``M^-1``. ``M = sum_j J_j^T I_j J_j`` over the bodies (Featherstone's composite
rigid-body form), so it is positive definite for every q when every moving body's spatial inertia
``I_j`` is, and a body's spatial inertia is positive definite exactly when

- its mass is positive, ``m > 0``, and
- its rotational inertia about the centre of mass ``I_c`` is positive definite: principal moments
  ``I_1, I_2, I_3 > 0``, and, for a real distribution of mass, they satisfy the triangle
  inequality ``I_a + I_b >= I_c`` for every ordering (``I_xx = int (y^2 + z^2) dm`` etc., so
  ``I_xx + I_yy - I_zz = 2 int z^2 dm >= 0``).

Checked here, on the bodies that move (those a non-fixed joint carries; bodies welded to the world
never enter M):

- every ``<inertial>`` of a moving URDF link (the file as written, before Pinocchio merges links
  joined by fixed joints, so a negative mass hidden under a heavier parent is still found): a mass
  distribution that exists (``m >= 0``, ``I_c`` positive semi-definite, the triangle inequality), so a
  point-mass frame link welded to a body (SO-101's ``gripper_frame_link``: 1e-9 kg, zero inertia) passes;
- every joint's body as Pinocchio built it (URDF, xacro, MJCF, SDF: what the dynamics uses), strictly
  (``m > 0``, ``I_c`` positive definite, the triangle inequality). A
  joint that carries no mass at all is allowed (a massless link between two joints, e.g. a
  universal joint written as two revolutes) as long as the mass matrix at the neutral
  configuration is positive definite (Cholesky);
- at least one movable joint: a description of fixed joints only has no generalized coordinates;
- every URDF link is a body of the model (Pinocchio drops a part of the joint graph that does not hang
  from the root, e.g. a cycle, without a word).

Violations are a :class:`~uk_controller.files.parameter_file.ConfigError` naming the setup file, the description
file, the body and the figure. ``robot.allow_nonphysical: true`` accepts such a model knowingly
(e.g. a singular mass matrix on purpose, seed 002 eqs 37-43): the violations are logged as warnings
and the load goes on. A description without movable joints, or with links the model lost, is an error
either way.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET

import numpy as np

LOG = logging.getLogger(__name__)
#: relative tolerance of the triangle inequality and of positive definiteness (a thin rod has
#: I_axial ~ 0 and I_1 + I_axial = I_2 up to rounding)
RTOL = 1e-9


def inertia_problem(mass, inertia, strict=True):
    """Why a body of `mass` and 3x3 rotational inertia about its centre of mass is not physical, or None.

    `strict` (a body a joint moves): ``m > 0`` and ``I_c`` positive definite. Not strict (one ``<inertial>``
    of a URDF link, before Pinocchio adds the links welded to it): any mass distribution that exists,
    ``m >= 0`` and ``I_c`` positive semi-definite -- a point mass (``I_c = 0``, the dummy frame links of
    many public descriptions) or a thin rod is real; a massless link carries no inertia."""
    inertia = np.asarray(inertia, dtype=float)
    if not (np.isfinite(mass) and np.all(np.isfinite(inertia))):
        return f'non-finite mass or inertia (mass {mass!r})'
    if not (mass > 0.0 if strict else mass >= 0.0):
        return f'mass {mass:g} kg is not positive' if strict else f'mass {mass:g} kg is negative'
    if not np.allclose(inertia, inertia.T, rtol=0.0, atol=RTOL * max(1.0, np.abs(inertia).max())):
        return 'inertia matrix is not symmetric'
    moments = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    if mass == 0.0 and np.any(moments != 0.0):
        return f'mass {mass:g} kg with a rotational inertia: no mass distribution has it'
    scale = max(float(np.abs(moments).max()), np.finfo(float).tiny)
    if moments[0] <= RTOL * scale if strict else moments[0] < -RTOL * scale:
        return (
            f'inertia is not positive {"definite" if strict else "semi-definite"}: principal moments '
            f'{", ".join(f"{m:.6g}" for m in moments)} kg m^2'
        )
    if moments[0] + moments[1] < moments[2] * (1.0 - RTOL):
        return (
            f'principal moments {", ".join(f"{m:.6g}" for m in moments)} kg m^2 break the triangle '
            f'inequality ({moments[0]:.6g} + {moments[1]:.6g} < {moments[2]:.6g}): no mass distribution '
            'has them'
        )
    return None


def _urdf_links(text):
    """``{moving link name: (mass, 3x3 inertia) or None}`` of a URDF text (None: no <inertial>).

    A link moves when a non-fixed joint lies on its path from the root."""
    root = ET.fromstring(text)
    parent_joint = {}
    for joint in root.iter('joint'):
        if joint.find('parent') is None or joint.find('child') is None:
            continue  # <joint> elements of <ros2_control> / <transmission>
        parent_joint[joint.find('child').get('link')] = (joint.find('parent').get('link'), joint.get('type'))

    def moves(link, seen=()):
        while link in parent_joint and link not in seen:
            seen = seen + (link,)
            link, kind = parent_joint[link]
            if kind != 'fixed':
                return True
            if link in seen:
                return False
        return False

    links = {}
    for link in root.findall('link'):
        name = link.get('name')
        if not moves(name):
            continue
        inertial = link.find('inertial')
        if inertial is None:
            links[name] = None
            continue
        mass_el, i_el = inertial.find('mass'), inertial.find('inertia')

        def value(element, key):
            try:
                return float(element.get(key, '0')) if element is not None else 0.0
            except ValueError:
                return float('nan')

        mass = value(mass_el, 'value')
        ixx, iyy, izz, ixy, ixz, iyz = (value(i_el, k) for k in ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz'))
        links[name] = (mass, np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]))
    return links


def unreached_links(model, urdf_text):
    """Links of the URDF text that are not bodies of the model (Pinocchio silently drops a part of the
    joint graph that does not hang from the root, e.g. a cycle)."""
    if urdf_text is None:
        return []
    try:
        names = [link.get('name') for link in ET.fromstring(urdf_text).findall('link')]
    except ET.ParseError:
        return []
    frames = {frame.name for frame in model.model.frames}
    return [name for name in names if name not in frames]


def problems(model, urdf_text=None):
    """Every physical-validity problem of `model` (a RobotModel), as sentences (empty: valid).

    `urdf_text`: the URDF the model was built from, when it was one (per-link check)."""
    import pinocchio as pin

    pm = model.model
    found = []
    if urdf_text is not None:
        try:
            links = _urdf_links(urdf_text)
        except ET.ParseError:
            links = {}
        for name, body in links.items():
            if body is None:
                continue
            mass, inertia = body
            why = inertia_problem(mass, inertia, strict=False)  # the joint's whole body is judged below
            if why:
                found.append(f'link {name!r}: {why}')
    massless = []
    for j in range(1, pm.njoints):
        body = pm.inertias[j]
        if body.mass == 0.0 and not np.any(body.inertia):
            massless.append(pm.names[j])
            continue
        why = inertia_problem(float(body.mass), np.array(body.inertia))
        if why and not found:  # a bad link was named already: its joint's body repeats it
            found.append(f'body moved by joint {pm.names[j]!r}: {why}')
    if not found and pm.nv:
        data = pm.createData()
        M = pin.crba(pm, data, pin.neutral(pm))
        M = np.triu(M) + np.triu(M, 1).T
        try:
            np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            found.append(
                'the mass matrix at the neutral configuration is not positive definite'
                + (f' (joints carrying no mass: {", ".join(massless)})' if massless else '')
            )
    return found


def check(model, *, config_path=None, key='robot.urdf', urdf_text=None, allow_nonphysical=False):
    """Raise :class:`~uk_controller.files.parameter_file.ConfigError` when `model` has no movable joint or (unless
    `allow_nonphysical`) is not physical; with `allow_nonphysical` log the problems as warnings."""
    from ..files.parameter_file import ConfigError

    source = getattr(model, 'source', None)
    what = f'the robot description {source}' if source else 'the robot description'
    lost = unreached_links(model, urdf_text)
    if lost:
        raise ConfigError(
            f'{what}: links {", ".join(lost)} are not connected to the root link (a joint cycle, '
            'or a joint whose parent is its own child); Pinocchio would drop them without a word',
            file=config_path,
            key=key,
        )
    if model.model.nv == 0:
        raise ConfigError(
            f'{what} has no movable joint (every joint is fixed): nothing to control; give '
            'revolute, continuous or prismatic joints',
            file=config_path,
            key=key,
        )
    found = problems(model, urdf_text)
    if not found:
        return []
    if allow_nonphysical:
        for why in found:
            LOG.warning('%s: %s (accepted: robot.allow_nonphysical is true)', source or config_path, why)
        return found
    raise ConfigError(
        f'{what} is not physical: ' + '; '.join(found) + '. Fix the <inertial> values, or set '
        'robot.allow_nonphysical: true to accept the model knowingly',
        file=config_path,
        key=key,
    )


def check_loaded(model, robot, key, config_path=None):
    """:func:`check` for a model just built by ``robots.setup.load_description``: `robot` is the
    ``robot`` section of the resolved settings (``robot.allow_nonphysical``), `key` the description key
    (``urdf``, ``mjcf``, ``sdf``), `config_path` the setup file."""
    text = getattr(model, 'source_text', None)
    if text is None and getattr(model, 'source_kind', None) == 'urdf' and model.source is not None:
        try:
            text = open(model.source, encoding='utf-8', errors='replace').read()
        except OSError:
            text = None
    return check(
        model,
        config_path=config_path,
        key=f'robot.{key}',
        urdf_text=text,
        allow_nonphysical=bool(robot.allow_nonphysical),
    )
