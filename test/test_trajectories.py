"""Trajectories: analytic derivatives against finite differences, paper formulas, factory errors."""

import numpy as np
import pytest

from uk_controller.constraints.trajectories import trajectory as build_trajectory
from uk_controller.files.parameter_file import ConfigError
from uk_controller.settings.sections import trajectory_item


def trajectory(spec, file=None):
    """The trajectory of the map `spec`, made a typed item as a setup file's is."""
    return build_trajectory(trajectory_item(spec, file=file))


CONFIGS = {
    'helix': {'type': 'helix', 'radius': 0.05, 'omega': 1.2566370614359172, 'centre': [0.0, 0.35, 0.0], 'rate': 0.02},
    'helix_pitch': {
        'type': 'helix',
        'radius': 0.1,
        'omega': -2.0,
        'centre': [0.1, 0.2, 0.3],
        'pitch': 0.05,
        'phase': 0.3,
        'start_time': 1.5,
    },
    'line': {'type': 'line', 'centre': [0.1, 0.2], 'amplitude': 0.01},
    'line3': {
        'type': 'line',
        'centre': [0.1, 0.2, 0.0],
        'amplitude': 0.03,
        'omega': 2.5,
        'direction': [1.0, 1.0, 0.5],
        'phase': 0.2,
    },
    'object_motion': {'type': 'object_motion'},
    'object_xy': {'type': 'object_motion', 'length': 0.8, 'omega': 1.5, 'components': [0, 1]},
    'circle': {'type': 'circle', 'centre': [0.5, 0.2], 'radius': 0.15, 'omega': 1.0},
    'circle3': {
        'type': 'circle',
        'centre': [0.5, 0.2, 0.1],
        'radius': 0.15,
        'omega': 0.7,
        'u': [0.0, 1.0, 0.0],
        'v': [0.0, 0.0, 1.0],
        'start_time': -0.4,
    },
    'polynomial': {
        'type': 'polynomial',
        'times': [0.0, 1.0, 2.5, 4.0],
        'waypoints': [0.0, 0.0, 1.0, 0.5, 0.2, -0.3, 0.4, 0.4],
    },
    'spline': {'type': 'spline', 'times': [0.0, 1.0, 2.5, 4.0], 'waypoints': [0.0, 0.0, 1.0, 0.5, 0.2, -0.3, 0.4, 0.4]},
    'spline_natural': {
        'type': 'spline',
        'times': [0.0, 1.0, 2.5, 4.0],
        'waypoints': [0.0, 1.0, 0.2, 0.4],
        'bc_type': 'natural',
    },
    'hold': {'type': 'hold', 'value': [0.3, -0.2]},
}


@pytest.mark.parametrize('name', sorted(CONFIGS))
def test_derivatives_match_finite_differences(name):
    traj = trajectory(CONFIGS[name])
    h = 1e-5
    # avoid knots of the segment trajectories (derivatives are only C2 there)
    for t in np.linspace(0.13, 3.87, 23):
        p, v, a = traj(t)
        assert p.shape == v.shape == a.shape == (traj.dim,)
        pp, vp, _ = traj(t + h)
        pm, vm, _ = traj(t - h)
        np.testing.assert_allclose(v, (pp - pm) / (2 * h), atol=1e-8)
        np.testing.assert_allclose(a, (vp - vm) / (2 * h), atol=1e-7)


def test_helix_is_seed000_eq40():
    traj = trajectory(CONFIGS['helix'])
    for t in np.linspace(0.0, 10.0, 11):
        p, _, _ = traj(t)
        np.testing.assert_allclose(
            p, [0.05 * np.sin(0.4 * np.pi * t), 0.35 + 0.05 * np.cos(0.4 * np.pi * t), 0.02 * t], atol=1e-15
        )


def test_helix_pitch_means_rise_per_turn():
    cfg = dict(CONFIGS['helix_pitch'])
    traj = trajectory(cfg)
    period = 2 * np.pi / abs(cfg['omega'])
    t0 = 2.0
    p0, _, _ = traj(t0)
    p1, _, _ = traj(t0 + period)
    np.testing.assert_allclose(p1 - p0, [0.0, 0.0, -0.05], atol=1e-12)  # negative omega: z goes down
    with pytest.raises(ConfigError, match='pitch'):
        trajectory({**cfg, 'rate': 0.1})


def test_line_is_seed003_eq26():
    traj = trajectory({'type': 'line', 'centre': [0.3, 0.4], 'amplitude': 0.01})
    for t in np.linspace(0.0, 7.0, 8):
        p, _, _ = traj(t)
        np.testing.assert_allclose(p, [0.3 + 0.01 * np.cos(t), 0.4], atol=1e-15)


def test_object_motion_is_seed004_eq64():
    traj = trajectory({'type': 'object_motion', 'length': 1.0})
    for t in np.linspace(0.0, 7.0, 8):
        p, v, a = traj(t)
        np.testing.assert_allclose(p, [1.5, 0.5 * (1 - np.cos(t)), 0.0], atol=1e-15)
        np.testing.assert_allclose(v, [0.0, 0.5 * np.sin(t), 0.0], atol=1e-15)
        np.testing.assert_allclose(a, [0.0, 0.5 * np.cos(t), 0.0], atol=1e-15)


def test_start_time_shifts():
    base = trajectory(CONFIGS['circle'])
    shifted = trajectory({**CONFIGS['circle'], 'start_time': 2.0})
    for t in (2.0, 3.3, 5.0):
        for x, y in zip(shifted(t), base(t - 2.0)):
            np.testing.assert_allclose(x, y, atol=1e-15)


@pytest.mark.parametrize('name', ['polynomial', 'spline'])
def test_segments_pass_waypoints_and_hold_ends(name):
    cfg = CONFIGS[name]
    traj = trajectory(cfg)
    points = np.reshape(cfg['waypoints'], (len(cfg['times']), -1))
    for t, point in zip(cfg['times'], points):
        np.testing.assert_allclose(traj(t)[0], point, atol=1e-12)
    for t, point in ((-1.0, points[0]), (9.0, points[-1])):
        p, v, a = traj(t)
        np.testing.assert_allclose(p, point, atol=1e-12)
        assert not v.any() and not a.any()
    if name == 'polynomial':  # rest at every waypoint
        for t in cfg['times'][1:-1]:
            _, v, a = traj(t)
            np.testing.assert_allclose(v, 0.0, atol=1e-12)
            np.testing.assert_allclose(a, 0.0, atol=1e-12)


def test_circle_geometry():
    traj = trajectory(CONFIGS['circle3'])
    for t in np.linspace(0, 5, 9):
        p, v, a = traj(t)
        d = p - [0.5, 0.2, 0.1]
        assert d[0] == pytest.approx(0.0, abs=1e-15)
        assert np.linalg.norm(d) == pytest.approx(0.15)
        assert np.linalg.norm(v) == pytest.approx(0.15 * 0.7)
        np.testing.assert_allclose(a, -(0.7**2) * d, atol=1e-14)


@pytest.mark.parametrize(
    'cfg, key',
    [
        ({'type': 'spiral'}, 'trajectory.type'),
        ({'type': 'helix', 'omega': 1.0}, 'trajectory.radius'),
        ({'type': 'helix', 'radius': 'big', 'omega': 1.0}, 'trajectory.radius'),
        ({'type': 'polynomial', 'times': [0.0, 1.0], 'waypoints': [0.0, 1.0, 2.0]}, 'trajectory.waypoints'),
        ({'type': 'spline', 'times': [1.0, 0.0], 'waypoints': [0.0, 1.0]}, 'trajectory.times'),
        ({'type': 'hold', 'value': [1.0], 'components': [3]}, 'trajectory'),
        (
            {'type': 'line', 'centre': [0.0, 0.0], 'amplitude': 1.0, 'direction': [1.0, 0.0, 0.0]},
            'trajectory.direction',
        ),
    ],
)
def test_bad_configs_name_the_key(cfg, key):
    with pytest.raises(ConfigError) as err:
        trajectory(cfg, file='robot.yaml')
    assert err.value.file == 'robot.yaml'
    assert err.value.key == key
    assert str(err.value).startswith(f'robot.yaml: {key}: ')


@pytest.mark.slow
def test_a_trajectory_type_is_one_table_entry(tmp_path, monkeypatch):
    """docs/architecture.md, "How to add a trajectory type": a class and ONE entry of trajectories.TYPES (its
    builder and its config keys), nothing else. Before the entry the schema refuses the type; with it the
    schema checks its keys (and refuses another type's), docs/config.md lists it, `uk-controller simulate`
    runs a setup file using it, and the SCARA's controller (reference backend: the class has no compiled
    form) makes the tool follow it. Reference: the ramp's closed form ``p = origin + velocity tau``."""
    import copy
    import re
    from pathlib import Path

    from uk_controller import cli
    from uk_controller.constraints import trajectories as T
    from uk_controller.control.controller import ControllerCore
    from uk_controller.files.parameter_file import load_config
    from uk_controller.paths import resolve_config
    from uk_controller.robots import load_robot
    from uk_controller.settings import schema as S
    from uk_controller.sim.closed_loop import simulate

    class Ramp(T.Trajectory):
        """p = origin + velocity tau, v = velocity, a = 0."""

        def __init__(self, origin, velocity, start_time=0.0):
            super().__init__(start_time)
            self.origin, self.velocity = np.asarray(origin, float), np.asarray(velocity, float)
            self.dim = self.origin.size

        def _eval(self, tau):
            return self.origin + self.velocity * tau, self.velocity.copy(), np.zeros(self.dim)

    entry = T.TrajectoryType(
        lambda item: Ramp(item.origin, item.velocity, item.start_time),
        (
            T.Key('origin', 'floats', 'start point', 'm', (('length', 3),)),
            T.Key('velocity', 'floats', 'constant velocity', 'm/s', (('length', 3),)),
        ),
    )
    ROOT = Path(__file__).resolve().parents[1]
    origin, velocity = np.array([0.0, 0.4, 0.0]), np.array([0.03, -0.02, 0.01])
    params, path = load_config(resolve_config('scara'))
    params = copy.deepcopy(params)
    params['constraints']['tool_path']['trajectory'] = {
        'type': 'ramp',
        'origin': origin.tolist(),
        'velocity': velocity.tolist(),
    }
    with pytest.raises(ConfigError, match='trajectory.type'):
        S.check(params, path)

    monkeypatch.setitem(T.TYPES, 'ramp', entry)  # the recipe's one entry
    S.check(params, path)
    wrong = copy.deepcopy(params)
    wrong['constraints']['tool_path']['trajectory']['radius'] = 0.1
    with pytest.raises(ConfigError, match="not a key of type 'ramp'"):
        S.check(wrong, path)
    short = copy.deepcopy(params)
    short['constraints']['tool_path']['trajectory']['velocity'] = [1.0, 2.0]
    with pytest.raises(ConfigError, match='trajectory.velocity'):
        S.check(short, path)
    table = S.markdown_table().splitlines()
    assert 'ramp' in next(line for line in table if line.startswith('| `constraints.<name>.trajectory.type` |'))
    assert '(type ramp)' in next(
        line for line in table if line.startswith('| `constraints.<name>.trajectory.velocity` |')
    )

    text = (ROOT / 'config' / 'scara.yaml').read_text()  # the shipped file, its helix replaced
    helix = re.search(r'\n( +)type: helix.*\n(\1\w+: .*\n)+', text)
    indent = helix.group(1)
    setup_file = tmp_path / 'scara_ramp.yaml'
    setup_file.write_text(
        text[: helix.start()] + f'\n{indent}type: ramp\n{indent}origin: {origin.tolist()}\n'
        f'{indent}velocity: {velocity.tolist()}\n' + text[helix.end() :]
    )
    assert load_config(setup_file)[0]['constraints']['tool_path'] == params['constraints']['tool_path']
    assert (
        cli.main(['simulate', str(setup_file), '--duration', '0.05', '--no-plots', '--out', str(tmp_path / 'out')]) == 0
    )

    duration = 1.5
    setup = load_robot(setup_file, {'simulation.duration': duration})
    assert ControllerCore(setup).backend.name == 'reference'
    res = simulate(setup)
    assert np.all(res.ok)
    model = setup.model
    model.compute(res.q[-1], res.qd[-1])
    want = origin + velocity * res.t[-1]
    # 6 mm start error, critically damped at 15 rad/s: (1 + 15 t) e^{-15 t} of it is left after 1.5 s
    np.testing.assert_allclose(model.frame('tool').translation, want, atol=1e-5)
