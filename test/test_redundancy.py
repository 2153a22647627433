"""Redundancy resolution (DESIGN.md "Redundancy", uk.redundancy_effort, kernels/servo.py null_space_step).

Independent references: an equality-constrained least-squares (KKT) solve of the whole problem, SVDs of
N B computed here, the plant's own constrained dynamics, and the controller without the term.
"""

import copy

import numpy as np
import pytest
import scipy.linalg

from uk_controller.control.controller import ControllerCore
from uk_controller.core import uk
from uk_controller.files.parameter_file import ConfigError, load_config
from uk_controller.kernels import jit
from uk_controller.paths import resolve_config
from uk_controller.robots import load_robot
from uk_controller.robots.setup import setup_from_settings
from uk_controller.settings.resolve import resolve
from uk_controller.sim.closed_loop import simulate
from uk_controller.sim.report import write_csv

RNG = np.random.default_rng(19)


def _system(n, p, mp, ms):
    X = RNG.normal(size=(n, n))
    M = X @ X.T + n * np.eye(n)
    return (
        M,
        RNG.normal(size=n),
        RNG.normal(size=(n, p)),
        RNG.normal(size=(ms, n)),
        RNG.normal(size=ms),
        RNG.normal(size=(mp, n)),
        RNG.normal(size=mp),
    )


def _kkt_motion(M, Q, B, As, bs, Ap, bp, a_p):
    """q'' minimizing |q'' - a_p|_M over every (q'', u, lambda) with M q'' = Q + B u + A_p^T lambda,
    A_p q'' = b_p, A_s q'' = b_s: the equality-constrained least squares by the null-space method."""
    n, p, mp = M.shape[0], B.shape[1], Ap.shape[0]
    C = np.block([[M, -B, -Ap.T], [Ap, np.zeros((mp, p + mp))], [As, np.zeros((As.shape[0], p + mp))]])
    e = np.concatenate((Q, bp, bs))
    x0 = np.linalg.lstsq(C, e, rcond=None)[0]
    Z = scipy.linalg.null_space(C)
    # the free motions: the q'' part of the null space of C (internal forces change u and lambda only)
    U, sv, _ = np.linalg.svd(Z[:n], full_matrices=False)
    D = U[:, sv > 1e-9]
    Lt = np.linalg.cholesky(M).T
    y = np.linalg.lstsq(Lt @ D, Lt @ (a_p - x0[:n]), rcond=None)[0]
    return x0[:n] + D @ y


@pytest.mark.parametrize('shape', [(7, 7, 0, 3), (6, 6, 2, 2), (6, 4, 1, 1), (5, 8, 2, 2)])
def test_null_space_term_keeps_task_and_closures_and_is_the_kkt_optimum(shape):
    n, p, mp, ms = shape
    M, Q, B, As, bs, Ap, bp = _system(n, p, mp, ms)
    a_p = RNG.normal(size=n) * 3.0
    kw = dict(A_passive=Ap if mp else None, b_passive=bp if mp else None, on_infeasible='raise')
    plain = uk.servo_control(M, Q, B, As, bs, **kw)
    res = uk.servo_control(M, Q, B, As, bs, posture_accel=a_p, **kw)
    scale = max(1.0, np.abs(As @ plain.qdd).max())
    assert np.abs(As @ res.qdd - As @ plain.qdd).max() < 1e-12 * scale * 10  # the task rows: round-off
    if mp:
        assert np.abs(Ap @ res.qdd - Ap @ plain.qdd).max() < 1e-11 * max(1.0, np.abs(bp).max())
    # the motion is the M-norm optimum over everything the dynamics, closures and task allow
    best = _kkt_motion(M, Q, B, As, bs, Ap, bp, a_p)
    assert np.abs(res.qdd - best).max() < 1e-8 * max(1.0, np.abs(best).max())
    assert np.abs(res.qdd - plain.qdd).max() > 1e-3  # and the term did move something
    # dimensions against SVDs computed here: N B with N = M^-1 - M^-1 Ap^T (Ap M^-1 Ap^T)^+ Ap M^-1
    Mi = np.linalg.inv(M)
    N = Mi - (Mi @ Ap.T @ np.linalg.pinv(Ap @ Mi @ Ap.T) @ Ap @ Mi if mp else 0.0)
    rank_nb = np.linalg.matrix_rank(N @ B, tol=1e-9)
    rank_g = np.linalg.matrix_rank(As @ N @ B, tol=1e-9)
    assert (res.null_motion, res.null_internal) == (rank_nb - rank_g, p - rank_nb)


@pytest.mark.parametrize('backend', ['numpy', 'numba'])
@pytest.mark.parametrize('shape', [(7, 7, 0, 3, 4), (6, 4, 2, 1, 2), (4, 6, 1, 2, 0), (5, 8, 0, 6, 3)])
@pytest.mark.slow
def test_servo_solver_redundancy_equals_reference(shape, backend):
    """ServoSolver (the compiled twin servo_solve / null_space_step, and the NumPy path) against
    servo_control with the posture acceleration formed here from the posture rows."""
    if backend == 'numba' and not jit.AVAILABLE:
        pytest.skip('numba not installed')
    n, p, mp, ms, nos = shape
    M, Q, B, As, bs, Ap, bp = _system(n, p, mp, ms)
    rows = np.vstack([np.eye(n)] + [np.eye(n)[j : j + 1] * (1.0 if j % 2 else -1.0) for j in range(nos)])
    nsec = rows.shape[0]
    phis, phids = RNG.normal(size=nsec), RNG.normal(size=nsec)
    kd, kp = 3.0, 7.0
    gains = np.zeros((2, mp + ms + nsec))
    gains[:, mp + ms :] = [[kd], [kp]]
    target = RNG.normal(size=p)
    solver = uk.ServoSolver(n, p, mp, ms + nsec, backend=backend, secondary=nsec, one_sided=nos, internal_effort=target)
    solver.solve_rows(
        np.tril(M),
        Q,
        np.zeros(n),
        B,
        np.vstack((As, rows)),
        np.concatenate((bs, np.zeros(nsec))),
        np.concatenate((np.zeros(ms), phis)),
        np.concatenate((np.zeros(ms), phids)),
        Ap,
        bp,
        np.zeros(mp),
        np.zeros(mp),
        gains,
    )
    rhs = -(kd * phids + kp * phis)
    active = np.ones(nsec, dtype=bool)
    active[nsec - nos :] = phis[nsec - nos :] < 0.0
    ref = uk.servo_control(
        M,
        Q,
        B,
        As,
        bs,
        A_passive=Ap if mp else None,
        b_passive=bp if mp else None,
        posture_accel=rows[active].T @ rhs[active],
        internal_effort=target,
        on_infeasible='report',
    )
    scale = max(1.0, np.abs(ref.u).max())
    assert np.abs(solver.u - ref.u).max() < 1e-9 * scale
    assert np.abs(solver.qdd - ref.qdd).max() < 1e-9 * max(1.0, np.abs(ref.qdd).max())
    assert (solver.result().null_motion, solver.result().null_internal) == (ref.null_motion, ref.null_internal)


def _params(name):
    params, path = load_config(resolve_config(name))
    return copy.deepcopy(params), path


@pytest.mark.slow
def test_no_freedom_no_posture_rows():
    """Where the task uses every degree of freedom nothing is added (the shipped robots' numbers stay
    bit-identical: bench/fingerprint.py); dimensions against an SVD of N B at the initial state."""
    for name, expected in (
        ('scara', (0, 0)),
        ('five_bar', (0, 0)),
        ('five_bar_redundant', (0, 1)),
        ('dual_arm', (0, 3)),
        ('planar_3r', (0, 0)),
    ):
        setup = load_robot(name)
        ctrl = ControllerCore(setup, backend='reference')
        red = ctrl.redundancy
        assert red.secondary == 0 and not red.active
        passive, servo, B = setup.evaluate(setup.q0, setup.qd0, 0.0)
        Mi = np.linalg.inv(setup.model.M)
        Ap = passive.A
        N = Mi - (Mi @ Ap.T @ np.linalg.pinv(Ap @ Mi @ Ap.T) @ Ap @ Mi if setup.passive.m else 0.0)
        rank_nb = np.linalg.matrix_rank(N @ B, tol=1e-9)
        rank_g = np.linalg.matrix_rank(servo.A @ N @ B, tol=1e-9)
        assert (red.null_motion, red.null_internal) == (rank_nb - rank_g, B.shape[1] - rank_nb) == expected, name


@pytest.mark.slow
def test_internal_force_target_changes_efforts_not_motion():
    """five_bar_redundant (3 motors, 2 DOF): the target's component in null(N B) is added; the plant's
    constrained acceleration under both efforts is the same, the efforts differ by exactly that component."""
    base = load_robot('five_bar_redundant')
    params, path = _params('five_bar_redundant')
    target = [2.0, -1.0, 0.5]
    params['internal_force'] = {'effort': target}
    loaded = setup_from_settings(resolve(path, params=params))
    plain, squeezed = ControllerCore(base), ControllerCore(loaded)
    assert squeezed.redundancy.active and squeezed.backend.name == plain.backend.name
    model = base.model
    rng = np.random.default_rng(3)
    for k in range(5):
        q = base.q0 + rng.normal(size=base.n) * 0.01
        qd = rng.normal(size=base.n) * 0.05
        r0, r1 = plain.step(q, qd, 0.1 * k), squeezed.step(q, qd, 0.1 * k)
        assert r0.ok and r1.ok and (r1.null_motion, r1.null_internal) == (0, 1)
        passive, _, B = base.evaluate(q, qd, 0.1 * k)
        M, h = model.M, model.h
        acc = [uk.constrained_acceleration(M, B @ u - h, passive.A, passive.b) for u in (r0.effort, r1.effort)]
        assert np.abs(acc[1] - acc[0]).max() < 1e-9 * max(1.0, np.abs(acc[0]).max())
        # the difference is the target's projection on null(N B) (SVD here)
        Mi = np.linalg.inv(M)
        Ap = passive.A
        NB = (Mi - Mi @ Ap.T @ np.linalg.pinv(Ap @ Mi @ Ap.T) @ Ap @ Mi) @ B
        _, sv, Vt = np.linalg.svd(NB)
        Z = Vt[np.count_nonzero(sv > 1e-9 * sv[0]) :].T
        assert Z.shape[1] == 1
        assert np.allclose(r1.effort - r0.effort, Z @ (Z.T @ target), atol=1e-9)
        assert np.abs(r1.effort - r0.effort).max() > 0.1
    # a short closed loop: the same motion, other efforts. (The effort is held over a period while N(q) B
    # turns with q, so the target's share moves the plant by O(dt) between control instants: ~1e-6 rad.)
    short = {'simulation.duration': 0.5}
    runs = [
        simulate(s)
        for s in (load_robot('five_bar_redundant', short), setup_from_settings(resolve(path, short, params=params)))
    ]
    assert np.abs(runs[0].q - runs[1].q).max() < 1e-5
    assert np.abs(runs[0].effort - runs[1].effort).max() > 0.1


def test_internal_force_target_length_is_checked():
    params, path = _params('five_bar_redundant')
    params['internal_force'] = {'effort': [1.0, 2.0]}
    with pytest.raises(ConfigError, match='internal_force.effort'):
        ControllerCore(setup_from_settings(resolve(path, params=params)))


def _planar_hold_params(posture):
    """planar_3r with its tool POSITION held (2 rows on 3 joints: one free direction)."""
    params, path = _params('planar_3r')
    setup = load_robot('planar_3r')
    model = setup.model
    model.compute(setup.q0, np.zeros(3))
    tool = np.asarray(model.frame_position('tool'), dtype=float)
    params['constraints'] = {
        'names': ['tool_hold'],
        'tool_hold': {
            'role': 'servo',
            'type': 'frame_position',
            'frame': 'tool',
            'axes': ['x', 'z'],
            'trajectory': {'type': 'hold', 'value': [float(tool[0]), float(tool[2])]},
        },
    }
    params['robot']['initial_velocity'] = [0.0, 0.0, 0.0]
    params['posture'] = posture
    return params, path, setup, tool


def _same_tool(setup, tool, q3):
    """(q1, q2) putting the tool at `tool` (x, z) with the wrist at q3: a point of the self-motion manifold."""
    from scipy.optimize import least_squares

    model = setup.model

    def residual(x):
        model.compute(np.array([x[0], x[1], q3]), np.zeros(3))
        return np.asarray(model.frame_position('tool'))[[0, 2]] - tool[[0, 2]]

    sol = least_squares(residual, setup.q0[:2], xtol=1e-15, ftol=1e-15, gtol=1e-15)
    return np.array([sol.x[0], sol.x[1], q3])


@pytest.mark.slow
def test_posture_converges_where_the_task_leaves_freedom(tmp_path):
    params, path, setup, tool = _planar_hold_params({'omega': 5.0})
    q_ref = _same_tool(setup, tool, setup.q0[2] + 0.4)
    params['posture']['reference'] = q_ref.tolist()
    loaded = setup_from_settings(resolve(path, params=params))
    ctrl = ControllerCore(loaded)
    assert ctrl.redundancy.null_motion == 1 and ctrl.redundancy.secondary >= 3
    if jit.AVAILABLE:
        assert ctrl.backend.name == 'compiled'
    res = simulate(setup_from_settings(resolve(path, {'simulation.duration': 4.0}, params=params)))
    start = np.linalg.norm(setup.q0 - q_ref)
    assert res.posture_error[0] == pytest.approx(start)
    assert res.posture_error[-1] < 1e-3 * start  # the free direction reached q_ref
    assert np.abs(res.task_error).max() < 1e-5  # while the tool stayed put (ZOH: ~2e-6 m)
    assert res.summary()['null_space_motion'] == 1
    # the CSV carries the posture error |q - q_ref| and the dimensions
    write_csv(res, tmp_path / 'log.csv')
    header = (tmp_path / 'log.csv').read_text().splitlines()[0].split(',')
    data = np.genfromtxt(tmp_path / 'log.csv', delimiter=',', skip_header=1, usecols=range(len(header) - 1))
    col = header.index('posture_error')
    assert np.allclose(data[:, col], np.linalg.norm(res.q - q_ref, axis=1), rtol=1e-8, atol=1e-12)
    assert set(data[:, header.index('null_motion')]) == {1.0}
    # the same arm without the term: the free direction is left to gravity (Chen's z = 0)
    params['posture']['enabled'] = False
    off = simulate(setup_from_settings(resolve(path, {'simulation.duration': 4.0}, params=params)))
    assert off.posture_error[-1] > 0.1 * start


@pytest.mark.slow
def test_posture_on_every_backend_agrees():
    """compiled, reference and general (servo_control) backends give the same efforts with the posture."""
    params, path, setup, tool = _planar_hold_params({'omega': 5.0})
    params['posture']['reference'] = _same_tool(setup, tool, setup.q0[2] + 0.4).tolist()
    loaded = setup_from_settings(resolve(path, params=params))
    backends = ['reference', 'general'] + (['compiled'] if jit.AVAILABLE else [])
    ctrls = {b: ControllerCore(loaded, backend=b) for b in backends}
    rng = np.random.default_rng(5)
    for k in range(6):
        q = loaded.q0 + rng.normal(size=3) * 0.2
        q[2] = loaded.model.position_limits[1][2] - 0.01 if k == 5 else q[2]  # inside a limit margin
        qd = rng.normal(size=3) * 0.3
        out = {b: c.step(q, qd, 0.01 * k) for b, c in ctrls.items()}
        ref = out['reference']
        assert ref.ok and ref.null_motion == 1
        for b, r in out.items():
            assert np.allclose(r.effort, ref.effort, rtol=1e-9, atol=1e-9), b
            assert r.posture_error == pytest.approx(ref.posture_error)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
@pytest.mark.slow
def test_compiled_posture_error_is_the_subtracted_norm():
    """The compiled step reads |q - q_ref| from its posture rows' phi instead of subtracting
    again: the figure must be bit for bit ``sqrt((q - q_ref) . (q - q_ref))`` computed here, and the null-space
    dimensions those of the reference backend, on random states (limit rows active in some)."""
    params, path, setup, tool = _planar_hold_params({'omega': 5.0})
    loaded = setup_from_settings(resolve(path, params=params))
    fast, ref = ControllerCore(loaded, backend='compiled'), ControllerCore(loaded, backend='reference')
    assert fast._view._posture is not None and ref._view._posture is None  # the fast path runs, not the other
    q_ref = fast.redundancy.q_ref
    rng = np.random.default_rng(19)
    for k in range(12):
        q = loaded.q0 + rng.normal(size=3) * (0.05 if k < 6 else 0.6)
        qd = rng.normal(size=3) * 0.3
        got, want = fast.step(q, qd, 0.01 * k), ref.step(q, qd, 0.01 * k)
        assert got.ok and want.ok
        d = q - q_ref
        assert got.posture_error == np.sqrt(d @ d) == want.posture_error
        assert (got.null_motion, got.null_internal) == (want.null_motion, want.null_internal)
