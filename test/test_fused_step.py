"""The fused compiled step (constraints.CompiledRows + kernels.rows.fused_step) equals the reference code.

- frame Jacobian and drift computed from Pinocchio's joint Jacobian (``data.J``) equal Pinocchio's own
  getFrameJacobian / getFrameClassicalAcceleration (LOCAL_WORLD_ALIGNED) for every frame of every robot;
- the compiled trajectories equal the Python trajectories (start time, components);
- compiled rows and actuator columns equal ConstraintStack.evaluate and ActuatorMap.matrix;
- ControllerCore's fused step equals its ServoSolver step (rows through ConstraintStack) and its
  safe-effort answers to bad input; the plant's fused right-hand side equals the unfused one;
- row types without a compiled form make build() return None (the reference path is kept).
"""

import numpy as np
import pinocchio as pin
import pytest

from uk_controller.constraints import CallableTerm, CompiledRows, ConstraintStack
from uk_controller.constraints.trajectories import trajectory as build_trajectory
from uk_controller.control.controller import ControllerCore
from uk_controller.control.status import Status
from uk_controller.core import uk
from uk_controller.kernels import dynamics, jit
from uk_controller.kernels.codes import INFO_LIMIT_ITERATIONS
from uk_controller.kernels.rows import frame_kinematics
from uk_controller.kernels.trajectory import trajectory_eval
from uk_controller.robots import load_robot
from uk_controller.settings.sections import trajectory_item


def trajectory(spec, file=None):
    """The trajectory of the map `spec`, made a typed item as a setup file's is."""
    return build_trajectory(trajectory_item(spec, file=file))


pytestmark = pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
ROBOTS = ['scara', 'five_bar', 'five_bar_redundant', 'dual_arm', 'planar_3r']
LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


def _states(setup, rng, count):
    for k in range(count):
        yield (
            setup.q0 + 0.3 * rng.standard_normal(setup.q0.size),
            2.0 * rng.standard_normal(setup.q0.size),
            0.37 * k + 0.11,
        )


@pytest.mark.parametrize('robot', ROBOTS)
def test_frame_kinematics_equal_pinocchio(robot):
    setup = load_robot(robot)
    model = setup.model
    pm, data = model.model, model.data
    rng = np.random.default_rng(3)
    for q, qd, _ in _states(setup, rng, 4):
        pin.computeAllTerms(pm, data, q, qd)
        pin.updateFramePlacements(pm, data)
        for fid in range(1, len(pm.frames)):
            cols = [int(pm.idx_vs[j]) for j in pm.supports[pm.frames[fid].parentJoint] if j > 0]
            chain = np.array([len(cols)] + cols, dtype=np.int64)
            J, d = np.zeros((6, model.n)), np.zeros(6)
            frame_kinematics(data.J, qd, chain, 0, data.oMf[fid].translation, J, d)
            np.testing.assert_allclose(J, pin.getFrameJacobian(pm, data, fid, LWA), rtol=0, atol=1e-13)
            ref = pin.getFrameClassicalAcceleration(pm, data, fid, LWA).vector
            np.testing.assert_allclose(d, ref, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ref).max()))


TRAJS = [
    {'type': 'hold', 'value': [0.3, -1.0]},
    {
        'type': 'helix',
        'radius': 0.05,
        'omega': 1.3,
        'centre': [0.1, 0.35, 0.2],
        'rate': 0.02,
        'phase': 0.4,
        'start_time': 0.5,
    },
    {'type': 'line', 'centre': [0.2, 0.3, 0.1], 'amplitude': 0.01, 'omega': 2.0, 'direction': [1.0, 2.0, 0.5]},
    {'type': 'object_motion', 'length': 0.8, 'omega': 1.5, 'phase': 0.2, 'components': [2, 0]},
    {
        'type': 'circle',
        'centre': [0.5, 0.0, 0.7],
        'radius': 0.1,
        'omega': 0.9,
        'u': [1.0, 0.0, 0.0],
        'v': [0.0, 0.6, 0.8],
        'start_time': -1.0,
    },
    {
        'type': 'polynomial',
        'times': [-0.5, 1.0, 2.5, 6.0],
        'waypoints': [0.0, 1.0, 0.4, -0.2, 0.3, 0.3, 1.0, 0.0],
        'start_time': 0.25,
    },
    {
        'type': 'spline',
        'times': [0.0, 1.0, 3.0, 4.5, 5.0],
        'waypoints': [0.1, 0.2, 0.3, 0.5, 0.1, 0.0, -0.2, 0.4, 0.3, 0.2, 0.0, 0.1, 0.0, 0.0, 0.0],
        'components': [2, 0],
    },
    {'type': 'spline', 'times': [0.0, 2.0, 3.0, 7.0], 'waypoints': [0.0, 1.0, -1.0, 0.5], 'bc_type': 'natural'},
    {
        'type': 'spline',
        'times': [0.0, 1.0, 2.0, 3.0, 4.0],
        'waypoints': [0.0, 1.0, 0.0, 2.0, 1.0],
        'bc_type': 'not-a-knot',
        'start_time': -0.5,
    },
]


@pytest.mark.parametrize('cfg', TRAJS, ids=[f"{c['type']}-{k}" for k, c in enumerate(TRAJS)])
def test_compiled_trajectories_equal_python(cfg):
    from uk_controller.constraints.compiled import _traj_spec

    traj = trajectory(cfg)
    kind, dim, floats, comps = _traj_spec(traj)
    P, V, A = np.zeros(dim), np.zeros(dim), np.zeros(dim)
    sel = np.arange(dim) if comps is None else np.array(comps)
    # the knots themselves, both sides of each, and points between (segment search, end holds)
    knots = np.asarray(cfg.get('times', []), float) + cfg.get('start_time', 0.0)
    times = np.concatenate((np.linspace(-2.0, 7.0, 13), knots, knots - 1e-9, knots + 1e-9))
    for t in times:
        trajectory_eval(kind, dim, floats, 0, t, P, V, A)
        p, v, a = traj(t)
        for got, ref in ((P[sel], p), (V[sel], v), (A[sel], a)):
            np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-15)


def _compiled(setup):
    B, between = setup.actuators.compiled_form()
    gains = uk.row_gains(setup.stabilization, setup.passive.rows.order, setup.servo.rows.order)
    return CompiledRows.build(
        setup.model, setup.passive, setup.servo, p=setup.actuators.p, B=B, between=between, gains=gains
    ), gains


@pytest.mark.parametrize('robot', ROBOTS)
@pytest.mark.slow
def test_compiled_rows_equal_constraint_stack(robot):
    setup = load_robot(robot)
    model = setup.model
    fz, _ = _compiled(setup)
    assert fz is not None
    rng = np.random.default_rng(5)
    mp = setup.passive.m
    for q, qd, t in _states(setup, rng, 5):
        model.compute(q, qd)
        fz.rows(q, qd, t)
        ref = [setup.passive.evaluate(model, q, qd, t), setup.servo.evaluate(model, q, qd, t)]
        for key in ('phi', 'phidot', 'A', 'b'):
            got = getattr(fz, key)
            np.testing.assert_allclose(got[:mp], getattr(ref[0], key), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(got[mp:], getattr(ref[1], key), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(fz.B, setup.actuators.matrix(model), rtol=0, atol=1e-14)


@pytest.mark.slow
def test_one_compiled_version_serves_every_number_of_frames():
    """The robots' programs name 1 to 5 frames; the fused kernel they run after Pinocchio's pass keeps one
    machine-code version for all of them (the frames' placements reach it as arrays of one rank, not as
    tuples whose length numba compiles into the type: 12-14 s of compiling per count on a fresh machine)."""
    from uk_controller.kernels import rows as row_kernels

    counts, versions = set(), []
    for robot in ROBOTS:
        setup = load_robot(robot)
        fz, _ = _compiled(setup)
        q = np.ascontiguousarray(setup.q0, float)
        fz.run(q, np.zeros_like(q), 0.25)
        counts.add(len(fz.frames))
        versions.append(set(row_kernels.fused_step.signatures))
    assert len(counts) >= 3, counts
    assert versions[-1] == versions[0], versions  # no robot after the first one added a version


@pytest.mark.parametrize('robot', ROBOTS)
@pytest.mark.slow
def test_fused_controller_equals_servo_solver_path(robot):
    fused = ControllerCore.from_config(robot)
    plain = ControllerCore.from_config(robot, backend='reference')
    assert fused.backend.name == 'compiled' and plain.backend.name == 'reference'
    rng = np.random.default_rng(7)
    for q, qd, t in _states(fused.setup, rng, 6):
        a, b = fused.step(q, qd, t), plain.step(q, qd, t)
        assert (a.ok, a.rank, a.passive_rank) == (b.ok, b.rank, b.passive_rank)
        assert a.status == b.status and (a.reason == b.reason or a.status != Status.OK)
        if fused.backend.info[INFO_LIMIT_ITERATIONS] == 0:
            np.testing.assert_allclose(a.effort, b.effort, rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(a.saturated, b.saturated)
        else:
            # the joint-limit stage's bounded least squares: both solve the same strictly convex problem to
            # its tolerance; its Hessian's condition (tie-break weight 1e-9) amplifies the paths' round-off
            np.testing.assert_allclose(a.effort, b.effort, rtol=0, atol=1e-7 * np.abs(b.effort).max())
            assert a.residual == pytest.approx(b.residual, rel=1e-6, abs=1e-9)
        for key in ('phi', 'phidot', 'task_error'):
            np.testing.assert_allclose(getattr(a, key), getattr(b, key), rtol=1e-13, atol=1e-13)
        assert a.condition == pytest.approx(b.condition, rel=1e-10)
    # results stay valid after later steps (fresh arrays per step)
    first = fused.step(fused.setup.q0, fused.setup.qd0, 0.0)
    kept = (first.effort.copy(), first.phi.copy(), first.saturated.copy())
    fused.step(fused.setup.q0 + 0.1, fused.setup.qd0, 0.5)
    np.testing.assert_array_equal(first.effort, kept[0])
    np.testing.assert_array_equal(first.phi, kept[1])
    np.testing.assert_array_equal(first.saturated, kept[2])


@pytest.mark.slow
def test_fused_controller_bad_input_and_hold():
    fused = ControllerCore.from_config('five_bar')
    plain = ControllerCore.from_config('five_bar', backend='reference')
    q, qd = fused.setup.q0, fused.setup.qd0
    for args in ((q + np.nan, qd, 0.1), (q, qd + np.inf, 0.1), (q, qd, float('nan')), (q[:2], qd, 0.1)):
        a, b = fused.step(*args), plain.step(*args)
        assert not a.ok and a.reason == b.reason and np.all(a.effort == 0.0)
    for c in (fused, plain):
        c.safe_effort = 'hold'
    good = fused.step(q, qd, 0.2).effort
    # round-off: the fused step's dynamics come from kernels.dynamics.tree_terms (kernels.packed), the plain one's from
    # Pinocchio
    np.testing.assert_allclose(plain.step(q, qd, 0.2).effort, good, rtol=1e-12, atol=1e-12)
    held = fused.step(q + np.nan, qd, 0.3)
    assert not held.ok and np.array_equal(held.effort, good)
    with pytest.raises(ValueError):
        fused.safe_effort = 'brake'


@pytest.mark.parametrize('robot', ['five_bar', 'five_bar_redundant'])
@pytest.mark.slow
def test_fused_plant_rhs_equals_unfused(robot):
    from uk_controller.sim.uk_plant import UKPlant

    fused = UKPlant.from_setup(load_robot(robot))
    plain = UKPlant.from_setup(load_robot(robot), backend='numpy')
    assert fused.dynamics == 'compiled_rows' and plain.dynamics == 'reference'
    rng = np.random.default_rng(8)
    for q, qd, t in _states(fused.setup, rng, 5):
        u = rng.standard_normal(fused.setup.actuators.p)
        np.testing.assert_allclose(
            fused.acceleration(q, qd, u, t), plain.acceleration(q, qd, u, t), rtol=1e-12, atol=1e-12
        )


@pytest.mark.slow
def test_build_declines_rows_without_compiled_form():
    """A callable term (user Python) has no form the compiled plant or loop could call: build() returns None
    unless external_rows=True (the controller's program, test/test_compiled_rows_all_types.py)."""
    setup = load_robot('planar_3r')
    model = setup.model

    def rows(model, q, qd, t, params):
        return q[:1] - 0.1, qd[:1], np.eye(1, model.n), np.zeros(1)

    stack = ConstraintStack([CallableTerm('c', rows, rows=1)], model.n)
    assert CompiledRows.build(model, ConstraintStack([], model.n), stack, p=3, B=np.eye(3)) is None
    program = CompiledRows.build(model, ConstraintStack([], model.n), stack, p=3, B=np.eye(3), external_rows=True)
    assert program is not None and program.external


@pytest.mark.parametrize('robot', ROBOTS)
@pytest.mark.slow
def test_compiled_tree_dynamics_equal_pinocchio(robot):
    """kernels.dynamics.tree_terms (own RNEA/CRBA) and frame_placements vs Pinocchio's computeAllTerms."""
    setup = load_robot(robot)
    model = setup.model
    parents, jtype, mf, grav = model.compiled_tree()
    nj, n = parents.size, model.n
    names = [f.name for f in model.model.frames][1:]
    fparents, fm = model.compiled_frames(names)
    oR, op, S = np.zeros((nj, 3, 3)), np.zeros((nj, 3)), np.zeros((6, n))
    M, h = np.zeros((n, n)), np.zeros(n)
    trans, rots = np.zeros((len(names), 3)), np.zeros((len(names), 3, 3))
    rng = np.random.default_rng(11)
    for q, qd, _ in _states(setup, rng, 4):
        dynamics.tree_terms(q, qd, parents, jtype, mf, grav, oR, op, S, M, h)
        dynamics.frame_placements(oR, op, fparents, fm, trans, rots)
        model.compute(q, qd)
        np.testing.assert_allclose(M, model.M, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(h, model.h, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(model.h).max()))
        np.testing.assert_allclose(S, model.data.J, rtol=0, atol=1e-13)
        for f, name in enumerate(names):
            np.testing.assert_allclose(trans[f], model.frame_position(name), rtol=0, atol=1e-13)
            np.testing.assert_allclose(rots[f], model.frame_rotation(name), rtol=0, atol=1e-13)


@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'planar_3r'])
@pytest.mark.slow
def test_compiled_plant_period_equals_reference_rk4(robot):
    """UKPlant's one-call RK4 period (kernels.plant.plant_rk4) equals its stage-by-stage RK4 on Pinocchio."""
    from uk_controller.sim.uk_plant import UKPlant

    fast = UKPlant.from_setup(load_robot(robot, {'simulation.substeps': 2}))
    ref = UKPlant.from_setup(load_robot(robot, {'simulation.substeps': 2}), backend='compiled_stages')
    assert fast.backend.name == 'compiled' and ref.backend.name == 'compiled_stages'
    rng = np.random.default_rng(13)
    for _ in range(100):
        u = 0.5 * rng.standard_normal(fast.setup.actuators.p)
        fast.step(u, 1e-3)
        ref.step(u, 1e-3)
    np.testing.assert_allclose(fast.q, ref.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.qd, ref.qd, rtol=0, atol=1e-10)
    assert fast.t == ref.t and fast.rhs_evaluations == ref.rhs_evaluations
    fast.reset(fast.q * np.nan, fast.qd)
    fast.step(np.zeros(fast.setup.actuators.p), 1e-3)
    assert np.isnan(fast.q).all()
