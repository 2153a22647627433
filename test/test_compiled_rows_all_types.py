"""Every row type and trajectory type the settings schema offers has a compiled twin.

- the SO(3) helpers of the compiled orientation rows (kernels/so3.py) equal Pinocchio's exp3 / log3, also
  near 0 and near pi;
- the compiled rows of EVERY term type and mode (frame position on any axes, planar and so3 orientation,
  joint_linear, loop closure position / planar angle / weld), fed by every trajectory type, equal the NumPy
  reference terms (``ConstraintStack`` on the 'numpy' backend): phi, phi', A, b on random states;
- the schema's lists themselves are enumerated: each constraint type x mode and each trajectory type of
  ``uk_controller.settings.schema`` builds a ControllerCore whose backend is ``compiled`` (a ``callable``'s user
  Python fills its rows after Pinocchio's pass, then the one compiled call runs: ``dynamics == 'pinocchio'``),
  and its steps equal the ``reference`` backend's. A new type or mode in the schema without an entry here, or
  without a compiled form, fails.
"""

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.constraints import (
    CompiledRows,
    ConstraintStack,
    FrameOrientation,
    FramePosition,
    JointLinear,
    JointPolynomial,
    LoopClosure,
)
from uk_controller.constraints.trajectories import trajectory as build_trajectory
from uk_controller.control.controller import ControllerCore
from uk_controller.kernels import jit
from uk_controller.robots import example_robot_data as erd
from uk_controller.robots import load_robot
from uk_controller.robots.setup import setup_from_settings
from uk_controller.settings import schema as settings
from uk_controller.settings.resolve import resolve
from uk_controller.settings.sections import trajectory_item


def trajectory(spec, file=None):
    """The trajectory of the map `spec`, made a typed item as a setup file's is."""
    return build_trajectory(trajectory_item(spec, file=file))


pytestmark = pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')


def _rotation_vectors(rng):
    """Random axes with angles from 0 to just below pi, including the branch points of log3/exp3."""
    angles = [
        0.0,
        1e-12,
        1e-9,
        1e-6,
        1e-4,
        1.2e-4,
        0.05,
        0.1,
        0.5,
        1.0,
        2.0,
        3.0,
        np.pi - 1e-2 - 1e-9,
        np.pi - 1e-2 + 1e-9,
        np.pi - 1e-3,
        np.pi - 1e-6,
    ]
    angles += list(rng.uniform(0.0, np.pi - 1e-3, 30))
    for angle in angles:
        axis = rng.standard_normal(3)
        yield angle * axis / np.linalg.norm(axis)


def test_so3_exp_log_equal_pinocchio():
    """kernels.so3.exp3 == pinocchio.exp3; kernels.so3.log3 == its NumPy reference constraints.so3.log3 to
    round-off, and both recover the rotation vector (and agree with pinocchio.log3 to its precision: its acos
    loses up to ~1e-11 just below pi - 1e-2, the atan2 form of ours does not)."""
    from uk_controller.constraints.so3 import log3 as log3_numpy
    from uk_controller.kernels.so3 import exp3, log3

    rng = np.random.default_rng(19)
    R, e = np.zeros((3, 3)), np.zeros(3)
    for r in _rotation_vectors(rng):
        exp3(r, R)
        np.testing.assert_allclose(R, pin.exp3(r), rtol=0, atol=4e-16)
        Rp = pin.exp3(r)
        log3(Rp, e)
        np.testing.assert_allclose(e, log3_numpy(Rp), rtol=0, atol=1e-15)
        # the rotation vector back: round-off of exp3 and log3 (near pi, where the axis comes from the
        # diagonal, ~1e-13 at these angles)
        tol = 1e-14 if np.linalg.norm(r) < np.pi - 1e-2 else 1e-12
        np.testing.assert_allclose(e, r, rtol=0, atol=tol)
        np.testing.assert_allclose(e, pin.log3(Rp), rtol=0, atol=5e-11)


# a trajectory of each type, by the dimension a term needs, moving about `base`
def _traj(kind, dim, base=None):
    base = np.zeros(dim) if base is None else np.asarray(base, float)

    def at(v):
        return [float(x) for x in np.asarray(v, float)[:dim] + base]

    if kind == 'hold':
        return {'type': 'hold', 'value': at([0.2, -0.1, 0.3])}
    if kind == 'helix':  # 3 components: take the ones needed
        cfg = {
            'type': 'helix',
            'radius': 0.05,
            'omega': 1.3,
            'centre': [0.1, 0.2, 0.3],
            'rate': 0.02,
            'components': list(range(dim)),
        }
        cfg['centre'] = [float(c) for c in np.asarray(cfg['centre']) + np.pad(base, (0, 3 - dim))]
        return cfg
    if kind == 'line':
        return {
            'type': 'line',
            'centre': at([0.3, -0.2, 0.25]),
            'amplitude': 0.1,
            'omega': 2.0,
            'direction': [1.0, 2.0, 0.5][:dim],
        }
    if kind == 'object_motion':
        off = np.array([1.2, 0.0, 0.0])
        off[[1, 0, 2][:dim]] += base
        return {
            'type': 'object_motion',
            'length': 0.8,
            'omega': 1.5,
            'offset': [float(x) for x in off],
            'components': [1, 0, 2][:dim],
        }
    if kind == 'circle':
        if dim == 1:
            return {
                'type': 'circle',
                'centre': [0.2, 0.1 + float(base[0])],
                'radius': 0.3,
                'omega': 0.9,
                'components': [1],
            }
        return {'type': 'circle', 'centre': at([0.3, -0.2, 0.25]), 'radius': 0.1, 'omega': 0.9}
    times = [0.0, 1.0, 2.5, 4.0]
    points = np.array([[0.0, 0.1, 0.2], [0.3, -0.2, 0.4], [0.1, 0.5, -0.3], [0.2, 0.2, 0.2]])[:, :dim] + base
    cfg = {'type': kind, 'times': times, 'waypoints': [float(x) for x in points.ravel()]}
    if kind == 'spline':
        cfg['bc_type'] = 'natural'
    return cfg


TRAJECTORY_CONFIGS = {kind: _traj for kind in settings.TRAJECTORY_TYPES}


def _terms(model, tool, other, kind, attitude=None):
    """One term of every compiled kind whose desired motion is a trajectory of type `kind` (the so3 one about
    the rotation vector `attitude`, so that the orientation error stays away from pi)."""
    t3, t1, t2 = trajectory(_traj(kind, 3)), trajectory(_traj(kind, 1)), trajectory(_traj(kind, 2))
    n = model.n
    return [
        FramePosition('pos', tool, ['x', 'y', 'z'], t3),
        FramePosition('pos_xz', tool, ['z', 'x'], t2),
        FrameOrientation('att', tool, trajectory(_traj(kind, 3, attitude)), mode='so3'),
        FrameOrientation('yaw', tool, t1, mode='planar', axis=(0.2, 0.1, 1.0), reference=(1.0, 0.3, 0.0)),
        JointLinear('sum', np.arange(1.0, n + 1.0), t1),
        JointPolynomial('poly', (0, 2), [0.1, 0.5, 0.2, -0.1, 0.05], (0.2, -0.3)),
        LoopClosure('weld', (tool, other), mode='weld', role='servo'),
        LoopClosure('hinge', (tool, other), axes=('y',), angle_axis=(0.0, 0.0, 1.0), role='servo'),
    ]


def _check_rows(setup, terms, rng, states=6):
    model = setup.model
    passive, servo = ConstraintStack(terms[-2:], model.n, 'numpy'), ConstraintStack(terms[:-2], model.n, 'numpy')
    fz = CompiledRows.build(model, passive, servo, p=model.n, B=np.eye(model.n))
    assert fz is not None
    for k in range(states):
        q = setup.q0 + 0.4 * rng.standard_normal(model.n)
        qd = 1.5 * rng.standard_normal(model.n)
        t = 0.61 * k - 0.3
        model.compute(q, qd)
        fz.rows(q, qd, t)
        ref = (passive.evaluate(model, q, qd, t), servo.evaluate(model, q, qd, t))
        mp = passive.m
        for key in ('phi', 'phidot', 'A', 'b'):
            got = getattr(fz, key)
            for part, want in ((got[:mp], getattr(ref[0], key)), (got[mp:], getattr(ref[1], key))):
                scale = max(1.0, np.abs(want).max())
                np.testing.assert_allclose(part, want, rtol=0, atol=1e-13 * scale, err_msg=key)


@pytest.mark.parametrize('kind', settings.TRAJECTORY_TYPES)
@pytest.mark.slow
def test_every_compiled_row_type_equals_the_reference_terms(kind):
    """Compiled rows (constraints.CompiledRows) == ConstraintStack.evaluate on the NumPy terms, for every term
    kind driven by a `kind` trajectory, on the SCARA (4 joints: so3 rows are rank deficient there, which the
    rows do not care about) and, when installed, the UR5 of example-robot-data."""
    rng = np.random.default_rng(191)
    scara = load_robot('scara')
    _check_rows(scara, _terms(scara.model, 'tool', 'link2', kind, [0.0, 0.0, 1.9]), rng)
    if erd.description(erd.UR5) is not None:
        setup = _ur5_setup({})
        _check_rows(setup, _terms(setup.model, erd.UR5_TOOL, 'forearm_link', kind, _ur5_attitude(setup)), rng)


# ----------------------------------------------------------------------------- the schema, enumerated

UR5_JOINTS = [
    'shoulder_pan_joint',
    'shoulder_lift_joint',
    'elbow_joint',
    'wrist_1_joint',
    'wrist_2_joint',
    'wrist_3_joint',
]


def _ur5_setup(constraints, names=None, order=None):
    """The UR5 with `constraints`; `order`: the URDF joints' indices in the order of q (robot.joints)."""
    urdf = erd.description(erd.UR5)
    order = list(range(6)) if order is None else list(order)
    joints = [UR5_JOINTS[i] for i in order]
    params = {
        'robot': {'urdf': str(urdf), 'joints': joints, 'initial_position': [erd.UR5_HOME[i] for i in order]},
        'constraints': dict(constraints, names=list(names if names is not None else constraints)),
        'control': {'pinv': 'svd'},
        # the task law's own step at every state (a target away from the start would be approached in joint
        # space first, by another controller than the program compared here)
        'approach': {'mode': 'off'},
    }
    return setup_from_settings(resolve(params=params))


def _ur5_attitude(setup):
    """Rotation vector of the UR5's tool at home."""
    model = setup.model
    model.compute(setup.q0, np.zeros(model.n))
    return pin.log3(model.frame_rotation(erd.UR5_TOOL))


def _callable_rows(model, q, qd, t, params):
    """A user function (test of the `callable` type): joint 1 follows 0.1 sin t."""
    A = np.zeros((1, model.n))
    A[0, 0] = 1.0
    return q[:1] - 0.1 * np.sin(t), qd[:1] - 0.1 * np.cos(t), A, -0.1 * np.sin(np.atleast_1d(t))


#: one setup per constraint type x mode of the schema: (type, mode) -> constraints map
CONSTRAINT_CASES = {
    ('frame_position', None): {
        'c': {
            'type': 'frame_position',
            'frame': 'tool0',
            'axes': ['x', 'z'],
            'trajectory': {'type': 'circle', 'centre': [0.4, 0.4], 'radius': 0.05, 'omega': 1.0},
        }
    },
    ('frame_orientation', 'planar'): {
        'c': {
            'type': 'frame_orientation',
            'mode': 'planar',
            'frame': 'tool0',
            'axis': [0.0, 0.0, 1.0],
            'trajectory': {'type': 'hold', 'value': [0.3]},
        }
    },
    ('frame_orientation', 'so3'): {
        'c': {
            'type': 'frame_orientation',
            'mode': 'so3',
            'frame': 'tool0',
            'trajectory': {'type': 'line', 'centre': [-2.2, 2.2, 0.0], 'amplitude': 0.2, 'direction': [0.0, 0.0, 1.0]},
        }
    },
    ('joint_linear', None): {
        'c': {
            'type': 'joint_linear',
            'joints': ['elbow_joint', 'wrist_1_joint'],
            'coefficients': [1.0, 1.0],
            'value': 0.1,
        }
    },
    ('joint_polynomial', None): {
        'c': {
            'type': 'joint_polynomial',
            'joints': ['wrist_1_joint', 'wrist_2_joint'],
            'polycoef': [0.05, 0.5, 0.2, -0.1],
            'reference': [-1.5, -1.5],
        },
        'p': {
            'type': 'frame_position',
            'frame': 'tool0',
            'axes': ['z'],
            'trajectory': {'type': 'hold', 'value': [0.45]},
        },
    },
    ('loop_closure', 'position'): {
        'c': {
            'type': 'loop_closure',
            'role': 'servo',
            'frames': ['tool0', 'world'],
            'axes': ['z'],
            'angle_axis': [0.0, 0.0, 1.0],
        }
    },
    ('loop_closure', 'weld'): {
        'c': {'type': 'loop_closure', 'role': 'servo', 'mode': 'weld', 'frames': ['tool0', 'forearm_link']}
    },
    ('callable', None): {'c': {'type': 'callable', 'function': f'{__file__}:_callable_rows', 'rows': 1}},
}
#: types whose rows are user Python: filled in Python after Pinocchio's pass, before the compiled call
USER_PYTHON_ROWS = {'callable'}


def test_the_cases_cover_the_schema():
    """Every constraint type and every mode the schema accepts has a case above (so a new one must get a case,
    and with it a compiled form)."""
    assert {t for t, _ in CONSTRAINT_CASES} == set(settings.CONSTRAINT_TYPES)
    mode_keys = [settings.item_keys('constraints.<name>', t).get('mode') for t in settings.CONSTRAINT_TYPES]
    modes = {m for key in mode_keys if key is not None for m in key.choices}  # each type's modes
    assert {m for _, m in CONSTRAINT_CASES if m} == modes
    assert set(TRAJECTORY_CONFIGS) == set(settings.TRAJECTORY_TYPES)


needs_ur5 = pytest.mark.skipif(erd.description(erd.UR5) is None, reason='example-robot-data not installed')


def _compare_steps(fast, ref, rng):
    """The compiled step (packed: own RNEA/CRBA) == the reference step, and == the same program run after
    Pinocchio's pass (CompiledRows.run, the other compiled path: frame rotations as Pinocchio's arrays)."""
    program = fast.backend.program
    for k in range(4):
        q = fast.setup.q0 + 0.2 * rng.standard_normal(fast.n)
        qd = rng.standard_normal(fast.n)
        a, b = fast.step(q, qd, 0.37 * k), ref.step(q, qd, 0.37 * k)
        assert (a.ok, a.status, a.rank) == (b.ok, b.status, b.rank)
        scale = max(1.0, np.abs(b.effort).max())
        np.testing.assert_allclose(a.effort, b.effort, rtol=1e-9, atol=1e-9 * scale)
        np.testing.assert_allclose(a.phi, b.phi, rtol=0, atol=1e-12)
        np.testing.assert_allclose(a.phidot, b.phidot, rtol=0, atol=1e-11)
        program.run(q, qd, 0.37 * k)
        np.testing.assert_allclose(program.effort, a.effort, rtol=1e-9, atol=1e-9 * scale)
        # the program keeps the posture rows (DESIGN.md "Redundancy") after the reported ones
        np.testing.assert_allclose(program.phi[: a.phi.size], a.phi, rtol=0, atol=1e-12)
    # a non-finite state: the same safe answer (a callable's function is not called with it)
    q = fast.setup.q0.copy()
    q[1] = np.nan
    a, b = fast.step(q, q * 0.0, 0.1), ref.step(q, q * 0.0, 0.1)
    assert not a.ok and (a.status, a.reason) == (b.status, b.reason)


@needs_ur5
@pytest.mark.parametrize('case', list(CONSTRAINT_CASES), ids=[f'{t}-{m}' for t, m in CONSTRAINT_CASES])
@pytest.mark.slow
def test_every_constraint_type_runs_compiled(case):
    setup = _ur5_setup(CONSTRAINT_CASES[case])
    fast = ControllerCore(setup)
    assert fast.backend.name == 'compiled'
    assert fast.backend.dynamics == ('pinocchio' if case[0] in USER_PYTHON_ROWS else 'kernels')
    _compare_steps(fast, ControllerCore(setup, backend='reference'), np.random.default_rng(7))


@needs_ur5
@pytest.mark.parametrize('kind', settings.TRAJECTORY_TYPES)
@pytest.mark.slow
def test_every_trajectory_type_runs_compiled(kind):
    home = _ur5_setup({})
    home.model.compute(home.q0, np.zeros(home.model.n))
    tool = home.model.frame_position(erd.UR5_TOOL) - np.array([0.3, -0.2, 0.25])
    cons = {
        'pos': {
            'type': 'frame_position',
            'frame': 'tool0',
            'axes': ['x', 'y', 'z'],
            'trajectory': _traj(kind, 3, tool),
        },
        'att': {
            'type': 'frame_orientation',
            'mode': 'so3',
            'frame': 'tool0',
            'trajectory': _traj(kind, 3, _ur5_attitude(home)),
        },
    }
    setup = _ur5_setup(cons)
    fast = ControllerCore(setup)
    assert fast.backend.name == 'compiled'
    _compare_steps(fast, ControllerCore(setup, backend='reference'), np.random.default_rng(8))


@needs_ur5
@pytest.mark.slow
def test_a_permuted_joint_order_runs_compiled():
    """robot.joints in another order than the URDF's: compiled (Pinocchio's pass, M and h in our order), equal
    to the reference backend, and the same efforts as the URDF order at the same state, permuted."""
    cons = dict(CONSTRAINT_CASES[('frame_orientation', 'so3')])
    cons['p'] = {
        'type': 'frame_position',
        'frame': 'tool0',
        'axes': ['x', 'z'],
        'trajectory': {'type': 'circle', 'centre': [0.4, 0.4], 'radius': 0.05, 'omega': 1.0},
    }
    cons['sum'] = {
        'type': 'joint_linear',
        'joints': ['wrist_3_joint', 'shoulder_pan_joint'],
        'coefficients': [1.0, 0.5],
        'value': 0.1,
    }
    order = [3, 0, 5, 1, 4, 2]
    permuted, plain = _ur5_setup(cons, order=order), _ur5_setup(cons)
    assert permuted.model.order_permuted and not plain.model.order_permuted
    fast = ControllerCore(permuted)
    assert fast.backend.name == 'compiled' and fast.backend.dynamics == 'pinocchio'
    _compare_steps(fast, ControllerCore(permuted, backend='reference'), np.random.default_rng(9))
    urdf_order = ControllerCore(plain)
    rng = np.random.default_rng(10)
    for k in range(4):
        q, qd = plain.q0 + 0.2 * rng.standard_normal(6), rng.standard_normal(6)
        a, b = fast.step(q[order], qd[order], 0.3 * k), urdf_order.step(q, qd, 0.3 * k)
        np.testing.assert_allclose(a.effort, b.effort[order], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(a.phi, b.phi, rtol=0, atol=1e-12)
