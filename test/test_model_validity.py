"""Physical validity of a description at load.

The verdict of :func:`uk_controller.model.validity.inertia_problem` is compared with an independent
criterion: a rigid body is physical exactly when its mass is positive and the second moment of its
mass about the centre of mass, ``Sigma = int r r^T dm = (tr(I)/2) 1 - I``, is positive semi-definite
(Wensing, Kim, Slotine 2017: the pseudo-inertia is positive semi-definite); ``Sigma`` psd and ``I``
positive definite is the triangle inequality of the principal moments.
"""

import os
import subprocess
import sys

import mutated_robots as M
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from uk_controller.files.parameter_file import ConfigError
from uk_controller.model.validity import inertia_problem
from uk_controller.robots import load_robot

CLI = [sys.executable, '-m', 'uk_controller.cli']


def _cli(args, cwd, **env):
    environment = dict(os.environ, **env)
    environment['PYTHONPATH'] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(__file__)), environment.get('PYTHONPATH', '')]
    )
    return subprocess.run(
        CLI + [str(a) for a in args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )


def _rotation(angles):
    a, b, c = angles
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    rz = np.array([[np.cos(b), -np.sin(b), 0], [np.sin(b), np.cos(b), 0], [0, 0, 1]])
    ry = np.array([[np.cos(c), 0, np.sin(c)], [0, 1, 0], [-np.sin(c), 0, np.cos(c)]])
    return rz @ ry @ rx


moment = st.floats(-2.0, 2.0, allow_nan=False)
angle = st.floats(-3.2, 3.2, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    mass=st.floats(-1.0, 5.0, allow_nan=False),
    moments=st.tuples(moment, moment, moment),
    angles=st.tuples(angle, angle, angle),
)
def test_verdict_equals_the_second_moment_criterion(mass, moments, angles):
    R = _rotation(angles)
    inertia = R @ np.diag(moments) @ R.T
    sigma = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    eig_i, eig_s = np.linalg.eigvalsh(inertia), np.linalg.eigvalsh(sigma)
    # stay clear of the boundary, where the tolerance decides
    assume(abs(mass) > 1e-6 and np.min(np.abs(eig_i)) > 1e-6 and np.min(np.abs(eig_s)) > 1e-6)
    physical = mass > 0 and eig_i.min() > 0 and eig_s.min() > 0
    assert (inertia_problem(mass, inertia) is None) == physical, (mass, moments, inertia_problem(mass, inertia))


@settings(max_examples=100, deadline=None)
@given(
    points=st.lists(
        st.tuples(st.floats(0.01, 3.0), st.floats(-1, 1), st.floats(-1, 1), st.floats(-1, 1)), min_size=4, max_size=12
    )
)
def test_every_cloud_of_point_masses_is_physical(points):
    """Inertia of real point masses about their centre of mass: always accepted (no false alarm)."""
    m = np.array([p[0] for p in points])
    r = np.array([p[1:] for p in points])
    c = (m[:, None] * r).sum(0) / m.sum()
    d = r - c
    inertia = sum(mi * (di @ di * np.eye(3) - np.outer(di, di)) for mi, di in zip(m, d))
    assume(np.linalg.eigvalsh(inertia).min() > 1e-6 * np.abs(inertia).max())  # not all on one line
    assert inertia_problem(m.sum(), inertia) is None


@pytest.mark.parametrize(
    'edit, expect',
    [
        ({'masses': {'link2': -1.5}}, "link 'link2': mass -1.5 kg is negative"),
        ({'masses': {'link2': 0.0}}, "link 'link2': mass 0 kg with a rotational inertia"),
        ({'inertias': {'link2': (-0.0003, 0.0114, 0.0114, 0, 0, 0)}}, 'not positive semi-definite'),
        ({'inertias': {'link2': (0.05, 0.0114, 0.0114, 0, 0, 0)}}, 'triangle inequality'),
    ],
)
def test_nonphysical_body_is_an_error_naming_the_files(tmp_path, edit, expect):
    """Negative mass crashed simulate; zero mass, a negative principal moment and moments that
    break the triangle inequality were accepted without a word."""
    path = M.write_setup(tmp_path, M.urdf(**edit))
    with pytest.raises(ConfigError) as err:
        load_robot(path)
    text = str(err.value)
    assert expect in text and str(path) in text and str(tmp_path / 'mutated.urdf') in text, text
    assert 'robot.allow_nonphysical' in text


def test_allow_nonphysical_accepts_the_model_knowingly(tmp_path, caplog):
    """The same zero-mass link is accepted with robot.allow_nonphysical: true, and the warning says why;
    the model is the URDF's (the link's mass is 0 in Pinocchio's model, as written)."""
    path = M.write_setup(tmp_path, M.urdf(masses={'link2': 0.0}), extra='allow_nonphysical: true')
    with caplog.at_level('WARNING', logger='uk_controller.model.validity'):
        setup = load_robot(path)
    assert setup.model.model.inertias[2].mass == 0.0
    assert any("link 'link2': mass 0 kg with a rotational inertia" in r.getMessage() for r in caplog.records), (
        caplog.text
    )


@pytest.mark.parametrize(
    'frame, accepted',
    [
        ('<mass value="1e-9"/><inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/>', True),  # SO-101's
        ('<mass value="0"/><inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/>', True),
        ('<mass value="-0.1"/><inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/>', False),
        ('<mass value="0"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>', False),
    ],
)
def test_a_point_mass_frame_welded_to_a_body_is_physical(tmp_path, frame, accepted):
    """Public descriptions weld dummy frame links to a body with a point mass (SO-101's gripper_frame_link:
    1e-9 kg, zero inertia): a real mass distribution, judged with the body it is welded to. A negative mass
    or a massless link with inertia stays an error."""
    text = M.urdf().replace(
        '</robot>',
        f'''  <link name="frame"><inertial>{frame}</inertial></link>
  <joint name="frame_joint" type="fixed"><parent link="link2"/><child link="frame"/></joint>
</robot>''',
    )
    path = M.write_setup(tmp_path, text)
    if accepted:
        load_robot(path)
    else:
        with pytest.raises(ConfigError, match="link 'frame'"):
            load_robot(path)


def test_shipped_robots_are_physical():
    for name in (
        'scara',
        'five_bar',
        'five_bar_redundant',
        'five_bar_mjcf',
        'five_bar_redundant_mjcf',
        'dual_arm',
        'planar_3r',
    ):
        load_robot(name)


def test_no_movable_joint_is_an_error_naming_the_files(tmp_path):
    path = M.fixed_only(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_robot(path)
    assert 'no movable joint' in str(err.value) and str(path) in str(err.value)
    assert str(tmp_path / 'fixed.urdf') in str(err.value)


def _assert_exit_2_naming(proc, path, what):
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert str(path) in proc.stderr and what in proc.stderr, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_no_movable_joint_cli_exit_2(tmp_path):
    """A description without a movable joint: simulate (NumPy path) and bench segfaulted (rc 139), sweep
    recorded failed runs."""
    path = M.fixed_only(tmp_path)
    for args in (
        ['simulate', path, '--no-plots', '--out', tmp_path / 'out'],
        ['bench', '--quick', '--tables', 'step', '--robots', path],
        ['sweep', path, '--grid', 'stabilization.omega=5,10', '--jobs', '1', '--no-plots', '--out', tmp_path / 'sweep'],
    ):
        _assert_exit_2_naming(_cli(args, tmp_path, UK_CONTROLLER_NUMBA='0'), path, 'no movable joint')


@pytest.mark.slow
def test_negative_mass_cli_exit_2(tmp_path):
    """Negative mass: simulate (uk and mujoco plants) crashed with a traceback and wrote nothing."""
    path = M.write_setup(tmp_path, M.urdf(masses={'link2': -1.5}))
    for plant in ('uk', 'mujoco'):
        proc = _cli(
            ['simulate', path, '--plant', plant, '--no-plots', '--out', tmp_path / plant],
            tmp_path,
            UK_CONTROLLER_NUMBA='0',
        )
        _assert_exit_2_naming(proc, path, "link 'link2': mass -1.5 kg is negative")
