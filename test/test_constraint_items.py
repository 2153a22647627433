"""Every row type and trajectory type of docs/config.md, built from a setup file that gives each of its keys
a value other than the default: the built row (or trajectory) carries that value, read back from the term,
not from the settings. The list of keys comes from the schema, so a key added to a type without a case
here fails :func:`test_every_key_of_every_type_is_written_with_a_non_default_value`."""

import math

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from uk_controller.constraints import TYPES as ROW_TYPES
from uk_controller.constraints import trajectories as T
from uk_controller.files import rcl_yaml
from uk_controller.robots import load_robot
from uk_controller.settings import schema as S
from uk_controller.settings.resolve import resolve
from uk_controller.settings.types import FramePositionConstraintSettings, HelixTrajectorySettings

ROW = 'constraints.<name>'
TRAJ = 'constraints.<name>.trajectory'

USER = '''
import numpy as np

def two_rows(model, q, qd, t, params):
    g = params['gain']
    A = np.array([[g, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return A @ q, A @ qd, A, np.zeros(2)
'''


def _traj(kind, **keys):
    return {'type': kind, 'start_time': 0.25, **keys}


#: trajectory name -> its map: every trajectory type, each key of it not at its default somewhere
TRAJECTORIES = {
    'helix_rate': _traj(
        'helix', radius=0.07, omega=1.5, centre=[0.1, 0.2, 0.3], rate=0.04, phase=0.3, components=[0, 2]
    ),
    'helix_pitch': _traj('helix', radius=0.06, omega=2.0, pitch=0.2),
    'line': _traj('line', centre=[0.4, 0.1], amplitude=0.05, omega=0.7, direction=[0.0, 2.0], phase=0.2),
    'object_length': _traj('object_motion', length=0.8, omega=1.3, phase=0.1),
    'object_offset': _traj('object_motion', offset=[0.3, 0.1, 0.0], amplitude=[0.1, 0.2, 0.0]),
    'circle': _traj('circle', centre=[0.5, 0.2], radius=0.1, omega=0.9, u=[0.0, 1.0], v=[1.0, 0.0], phase=0.4),
    'polynomial': _traj('polynomial', times=[0.0, 1.0, 3.0], waypoints=[0.5, 0.2, 0.6, 0.3, 0.4, 0.1], dim=2),
    'spline': _traj(
        'spline', times=[0.0, 1.0, 2.0], waypoints=[0.5, 0.2, 0.6, 0.3, 0.4, 0.1], dim=2, bc_type='natural'
    ),
    'hold': _traj('hold', value=[0.5, 0.25]),
}

#: constraint name -> its map: every row type, each key of it not at its default somewhere (frame rows in
#: x-z: two components, so each two-component trajectory above drives one)
ROWS = {
    'position': {'type': 'frame_position', 'role': 'passive', 'frame': 'link3', 'axes': ['x', 'z']},
    'planar': {
        'type': 'frame_orientation',
        'role': 'passive',
        'frame': 'link2',
        'mode': 'planar',
        'axis': [0.0, 1.0, 0.0],
        'reference': [0.0, 0.0, 1.0],
        'zero_direction': [1.0, 0.0, 0.0],
        'trajectory': _traj('hold', value=[0.3]),
    },
    'so3': {
        'type': 'frame_orientation',
        'frame': 'tool',
        'mode': 'so3',
        'trajectory': _traj('hold', value=[0.1, 0.2, 0.3]),
    },
    'coupling': {
        'type': 'joint_linear',
        'role': 'passive',
        'coefficients': [2.0, -1.0],
        'joints': ['wrist', 'shoulder'],
        'value': 0.125,
    },
    'coupling_moving': {
        'type': 'joint_linear',
        'coefficients': [1.0, 1.0, 1.0],
        'trajectory': _traj('line', centre=[0.2], amplitude=0.1),
    },
    'polynomial_coupling': {
        'type': 'joint_polynomial',
        'role': 'servo',
        'joints': ['elbow', 'wrist'],
        'polycoef': [0.1, 0.5, 0.02],
        'reference': [0.3, -0.2],
    },
    'closure': {
        'type': 'loop_closure',
        'role': 'servo',
        'frames': ['link1', 'tool'],
        'axes': ['z'],
        'mode': 'position',
        'angle_axis': [0.0, 1.0, 0.0],
        'reference': [1.0, 0.0, 0.0],
    },
    'weld': {'type': 'loop_closure', 'frames': ['link2', 'tool'], 'mode': 'weld'},
    'user': {
        'type': 'callable',
        'role': 'passive',
        'function': 'user_rows.py:two_rows',
        'params': {'gain': 3.0},
        'rows': 2,
        'order': 1,
    },
}
#: each trajectory drives one frame_position row (x-z)
for _name, _spec in TRAJECTORIES.items():
    ROWS[f'follow_{_name}'] = {'type': 'frame_position', 'frame': 'tool', 'axes': ['x', 'z'], 'trajectory': _spec}
ROWS['position']['trajectory'] = _traj('hold', value=[0.1, 0.2])
ROWS['follow_helix_pitch']['axes'] = ['x', 'y', 'z']  # a helix has three components (no components key)
ROWS['follow_object_length']['axes'] = ['x', 'y', 'z']
ROWS['follow_object_offset']['axes'] = ['x', 'y', 'z']


def _non_default(path, spec):
    """The keys of `spec` whose value is not the schema's default for its type."""
    keys = S.item_keys(path, spec['type'])
    plain = {key: list(s.default) if isinstance(s.default, tuple) else s.default for key, s in keys.items()}
    return {key for key, value in spec.items() if key != 'type' and value != plain[key]}


def test_every_key_of_every_type_is_written_with_a_non_default_value():
    """The cases cover the schema: each key of each type has a non-default value in at least one case (the
    keys every trajectory type has, start_time and components, in at least one trajectory)."""
    common = {k.name for k in T.COMMON_KEYS}
    for path, cases, types in ((ROW, ROWS, ROW_TYPES), (TRAJ, TRAJECTORIES, tuple(T.TYPES))):
        for kind in types:
            written = set().union(*(_non_default(path, spec) for spec in cases.values() if spec['type'] == kind))
            want = set(S.item_keys(path, kind)) - {'type'} - (common if path == TRAJ else set())
            assert want <= written, f'{path} type {kind}: no non-default case for {sorted(want - written)}'
    assert common <= set().union(*(_non_default(TRAJ, spec) for spec in TRAJECTORIES.values()))


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp('items')
    (folder / 'user_rows.py').write_text(USER)
    params = {
        'robot': {'urdf': 'package://uk_controller/urdf/planar_3r.urdf', 'joints': ['shoulder', 'elbow', 'wrist']},
        'constraints': {'names': list(ROWS), **ROWS},
    }
    path = folder / 'items.yaml'
    path.write_text(rcl_yaml.dump({'/**': {'ros__parameters': params}}))
    return load_robot(path)


def _term(setup, name):
    stack = setup.passive if name in setup.passive.names else setup.servo
    return stack[name]


def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def test_resolve_gives_the_typed_items(setup):
    """resolve() returns the items as their type's class, defaults filled, by attribute."""
    item = resolve(setup.config_path).constraints.items['follow_helix_pitch']
    assert type(item) is FramePositionConstraintSettings and type(item.trajectory) is HelixTrajectorySettings
    assert item.role == 'servo' and item.trajectory.phase == 0.0 and item.trajectory.pitch == 0.2
    assert setup.constraints['user'].params == {'gain': 3.0}


def test_rows_carry_their_keys(setup):
    q = np.array([0.3, -0.4, 0.5])
    pos = _term(setup, 'position')
    assert pos.role == 'passive' and pos.frame == 'link3' and list(pos.idx) == [0, 2]

    planar = _term(setup, 'planar')
    assert planar.role == 'passive' and planar.frame == 'link2' and planar.mode == 'planar' and planar.m == 1
    np.testing.assert_allclose(planar.axis, [0.0, 1.0, 0.0])
    np.testing.assert_allclose(planar.reference, [0.0, 0.0, 1.0])
    np.testing.assert_allclose(planar.e1, [1.0, 0.0, 0.0])
    so3 = _term(setup, 'so3')
    assert so3.mode == 'so3' and so3.m == 3 and so3.frame == 'tool'

    coupling = _term(setup, 'coupling')
    assert coupling.role == 'passive'
    np.testing.assert_array_equal(coupling.c, [-1.0, 0.0, 2.0])  # joints wrist, shoulder in q order
    np.testing.assert_array_equal(coupling.traj(7.0)[0], [0.125])
    moving = _term(setup, 'coupling_moving')
    np.testing.assert_array_equal(moving.c, [1.0, 1.0, 1.0])
    assert moving.traj(0.25)[0][0] == pytest.approx(0.2 + 0.1)  # line at its start time: centre + amplitude

    poly = _term(setup, 'polynomial_coupling')
    assert poly.role == 'servo' and poly.index == (1, 2)
    np.testing.assert_array_equal(poly.c, [0.1, 0.5, 0.02, 0.0, 0.0])
    np.testing.assert_array_equal(poly.reference, [0.3, -0.2])

    closure = _term(setup, 'closure')
    assert closure.role == 'servo' and closure.frames == ('link1', 'tool') and closure.mode == 'position'
    assert list(closure.idx) == [2] and closure.m == 2  # z and the planar angle
    np.testing.assert_allclose(closure.planar[0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(closure.planar[2], [1.0, 0.0, 0.0])
    weld = _term(setup, 'weld')
    assert weld.mode == 'weld' and weld.m == 6 and weld.role == 'passive'

    user = _term(setup, 'user')
    assert user.role == 'passive' and user.m == 2 and list(user.order) == [1, 1] and user.params == {'gain': 3.0}
    setup.model.compute(q, np.zeros(3))
    np.testing.assert_allclose(user.evaluate(setup.model, q, np.zeros(3), 0.0).phi, [3.0 * q[0], q[1]])


def _at(traj, tau):
    """(p, v, a) of `traj` at tau after its start time (every case starts at 0.25 s)."""
    return traj(0.25 + tau)


def test_trajectories_carry_their_keys(setup):
    """Each trajectory, evaluated, against its closed form written here with the file's values."""
    tau = 0.6

    h = _term(setup, 'follow_helix_rate').traj  # components [0, 2] of x, y, z
    ang = 1.5 * tau + 0.3
    p, v, _ = _at(h, tau)
    np.testing.assert_allclose(p, [0.1 + 0.07 * math.sin(ang), 0.3 + 0.04 * tau], atol=1e-15)
    np.testing.assert_allclose(v, [0.07 * 1.5 * math.cos(ang), 0.04], atol=1e-15)
    assert h(0.25)[0][1] == pytest.approx(0.3)  # start_time: tau = 0 at t = 0.25

    h = _term(setup, 'follow_helix_pitch').traj
    p, _, _ = _at(h, tau)
    np.testing.assert_allclose(
        p, [0.06 * math.sin(2.0 * tau), 0.06 * math.cos(2.0 * tau), 0.2 * 2.0 / (2 * math.pi) * tau]
    )

    line = _term(setup, 'follow_line').traj
    p, _, _ = _at(line, tau)
    np.testing.assert_allclose(p, np.array([0.4, 0.1]) + 0.05 * math.cos(0.7 * tau + 0.2) * np.array([0.0, 1.0]))

    obj = _term(setup, 'follow_object_length').traj
    p, _, _ = _at(obj, tau)
    np.testing.assert_allclose(p, [1.5 * 0.8, 0.4 * (1.0 - math.cos(1.3 * tau + 0.1)), 0.0], atol=1e-15)
    obj = _term(setup, 'follow_object_offset').traj
    p, _, _ = _at(obj, tau)
    np.testing.assert_allclose(p, np.array([0.3, 0.1, 0.0]) + np.array([0.1, 0.2, 0.0]) * (1.0 - math.cos(tau)))

    circle = _term(setup, 'follow_circle').traj
    p, _, _ = _at(circle, tau)
    c, s = math.cos(0.9 * tau + 0.4), math.sin(0.9 * tau + 0.4)
    np.testing.assert_allclose(p, [0.5 + 0.1 * s, 0.2 + 0.1 * c])  # u = second axis, v = first

    points = np.array([[0.5, 0.2], [0.6, 0.3], [0.4, 0.1]])
    poly = _term(setup, 'follow_polynomial').traj
    s = (2.0 - 1.0) / 2.0
    np.testing.assert_allclose(
        _at(poly, 2.0)[0], points[1] + (points[2] - points[1]) * (10 * s**3 - 15 * s**4 + 6 * s**5)
    )

    spline = _term(setup, 'follow_spline').traj
    ref = CubicSpline([0.0, 1.0, 2.0], points, axis=0, bc_type='natural')
    np.testing.assert_allclose(_at(spline, tau)[0], ref(tau), atol=1e-14)
    np.testing.assert_allclose(_at(spline, 1e-9)[2], [0.0, 0.0], atol=1e-6)  # natural: no curvature at the ends

    hold = _term(setup, 'follow_hold').traj
    np.testing.assert_array_equal(hold(9.0)[0], [0.5, 0.25])
    assert hold.start_time == 0.25
    assert poly.dim == spline.dim == 2  # the dim the files give (checked against times and waypoints)
