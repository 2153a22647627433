"""Robot setups made from the shipped planar 3R arm with one thing changed, for the robustness tests.

:func:`write_setup` writes a URDF text and a setup YAML (the planar_3r task: the tool on a circle and
level) into a folder and returns the YAML's path; :func:`urdf` is the shipped URDF with edits applied.
"""

from __future__ import annotations

import re
from pathlib import Path

from uk_controller.paths import share_dir

SHIPPED_URDF = share_dir() / 'urdf' / 'planar_3r.urdf'
SHIPPED_YAML = share_dir() / 'config' / 'planar_3r.yaml'
#: the moving links of planar_3r.urdf and their masses
LINKS = ('link1', 'link2', 'link3')
JOINTS = ('shoulder', 'elbow', 'wrist')


def urdf(masses=None, inertias=None, joint_types=None):
    """The shipped URDF with ``masses[link]``, ``inertias[link] = (ixx, iyy, izz, ixy, ixz, iyz)`` and
    ``joint_types[joint]`` replaced (a float is written with repr: nan, inf and -0.0 as they are)."""
    text = SHIPPED_URDF.read_text()
    for link, mass in (masses or {}).items():
        text = re.sub(
            rf'(<link name="{link}">.*?<mass value=")[^"]*(")', rf'\g<1>{mass!r}\g<2>', text, count=1, flags=re.S
        )
    for link, values in (inertias or {}).items():
        keys = ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz')
        element = '<inertia ' + ' '.join(f'{k}="{v!r}"' for k, v in zip(keys, values)) + '/>'
        text = re.sub(
            rf'(<link name="{link}">.*?)<inertia [^>]*/>', lambda m: m.group(1) + element, text, count=1, flags=re.S
        )
    for joint, kind in (joint_types or {}).items():
        text = re.sub(rf'<joint name="{joint}" type="[^"]*">', f'<joint name="{joint}" type="{kind}">', text, count=1)
    return text


def write_setup(folder, urdf_text, name='mutated', *, joints=True, extra=''):
    """``<folder>/<name>.urdf`` and ``<folder>/<name>.yaml`` (the planar_3r setup on that URDF); returns the
    YAML path. `joints`: keep the shipped ``robot.joints`` list (False: the URDF's own order and joints);
    `extra`: lines added under ``robot:`` (e.g. ``allow_nonphysical: true``)."""
    folder = Path(folder)
    (folder / f'{name}.urdf').write_text(urdf_text)
    text = SHIPPED_YAML.read_text()
    text = text.replace('package://uk_controller/urdf/planar_3r.urdf', f'{name}.urdf')
    text = text.replace('name: planar_3r', f'name: {name}')
    text = text.replace('duration: 12.0', 'duration: 0.05')
    if not joints:
        text = re.sub(r'\n\s*joints: \[shoulder, elbow, wrist\]', '', text)
        text = re.sub(r'\n\s*initial_(position|velocity): \[[^\]]*\]', '', text)
        text = re.sub(r'\n    actuators:.*?\n\n', '\n\n', text, flags=re.S)
        text = re.sub(r'\n\s*effort_joints: \[shoulder, elbow, wrist\]', '', text)
    if extra:
        text = text.replace('    robot:\n', '    robot:\n' + ''.join(f'      {line}\n' for line in extra.splitlines()))
    path = folder / f'{name}.yaml'
    path.write_text(text)
    return path


def fixed_only(folder, name='fixed'):
    """A setup whose URDF has fixed joints only (and the tool task): nothing can move."""
    return write_setup(folder, urdf(joint_types={j: 'fixed' for j in JOINTS}), name, joints=False)
