"""Fuzzing harness: mutated robot descriptions and malformed joint states.

Properties:

- a URDF with mutated masses, inertias, joint types and joint graph, loaded through our loader, is a
  valid model or a :class:`~uk_controller.files.parameter_file.ConfigError` naming the setup file -- never another
  exception; a model that loads (without ``robot.allow_nonphysical``) has a positive-definite mass matrix
  at its start configuration (Cholesky, independent of the check that accepted it);
- the CLI on a few such files (a subprocess, so a segfault is seen): exit code 0 or 2 (naming the file,
  or a run that FAILED), never a signal or a traceback, and the input files byte-identical afterwards;
- a JointState with duplicated, missing or extra names, arrays of other lengths, or non-finite values
  never changes the merged state when its verdict (computed here from the rules) is "reject", and every
  rejection is counted; the serial assembler never turns a reading of the wrong size into a state.

Bounded: Hypothesis ``max_examples`` small, ``deadline=None``; the subprocess part is marked slow.
"""

import math
import os
import subprocess
import sys
from pathlib import Path

import mutated_robots as M
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uk_controller.files.parameter_file import ConfigError
from uk_controller.robots import load_robot
from uk_controller.ros.joint_state_merger import JointStateMerger

ROOT = Path(__file__).resolve().parents[1]
LINK_NAMES = ('world', 'base_link', *M.LINKS, 'tool', 'no_such_link')
JOINT_TYPES = ('revolute', 'continuous', 'prismatic', 'fixed', 'floating', 'planar', 'spherical')
odd = st.sampled_from([0.0, -0.0, -1.0, 1e-300, 1e300, math.nan, math.inf, -math.inf])
mass = st.one_of(st.floats(0.05, 5.0), st.floats(-2.0, 5.0), odd)  # a third physical
moment = st.one_of(st.floats(-0.05, 0.05), odd)


@st.composite
def mutations(draw):
    """Edits of the planar 3R URDF: some masses, inertias, joint types and one joint's parent link."""
    edits = {
        'masses': draw(st.dictionaries(st.sampled_from(M.LINKS), mass, max_size=3)),
        'inertias': draw(st.dictionaries(st.sampled_from(M.LINKS), st.tuples(*[moment] * 6), max_size=1)),
        'joint_types': draw(st.dictionaries(st.sampled_from(M.JOINTS), st.sampled_from(JOINT_TYPES), max_size=3)),
    }
    reparent = draw(st.one_of(st.none(), st.none(), st.tuples(st.sampled_from(M.JOINTS), st.sampled_from(LINK_NAMES))))
    return edits, reparent


def mutated_text(edits, reparent):
    text = M.urdf(**edits)
    if reparent is not None:
        joint, parent = reparent
        start = text.index(f'<joint name="{joint}"')
        head, tail = text[:start], text[start:]
        tail = tail.replace(
            tail[tail.index('<parent link="') : tail.index('/>', tail.index('<parent link="')) + 2],
            f'<parent link="{parent}"/>',
            1,
        )
        text = head + tail
    return text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=mutations(), allow=st.booleans())
def test_mutated_urdf_loads_or_is_an_error_naming_the_file(tmp_path, case, allow):
    path = M.write_setup(tmp_path, mutated_text(*case), joints=False, extra='allow_nonphysical: true' if allow else '')
    try:
        setup = load_robot(path)
    except ConfigError as exc:
        assert str(path) in str(exc), exc
        return
    model = setup.model
    assert model.n >= 1
    if not allow:
        model.compute(setup.q0, setup.qd0)
        np.linalg.cholesky(model.M)  # raises if the accepted model's M(q0) is not positive definite


def _cli(args, cwd):
    env = dict(
        os.environ, UK_CONTROLLER_NUMBA='0', PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')])
    )
    return subprocess.run(
        [sys.executable, '-m', 'uk_controller.cli', *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=mutations(), allow=st.booleans())
def test_cli_on_mutated_urdf_exits_0_or_2_without_traceback(tmp_path, case, allow):
    path = M.write_setup(tmp_path, mutated_text(*case), joints=False, extra='allow_nonphysical: true' if allow else '')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    proc = _cli(['simulate', path, '--duration', '0.02', '--no-plots', '--out', tmp_path / 'out'], tmp_path)
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr[-3000:])
    assert 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    if proc.returncode == 2 and 'FAILED' not in proc.stdout + proc.stderr:  # a run that failed says FAILED
        assert str(path) in proc.stderr, proc.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and p.name in before} == before


# ----------------------------------------------------------------------------- joint states

NAMES = ['j1', 'j2', 'j3']
value = st.one_of(st.floats(-3.0, 3.0), st.sampled_from([math.nan, math.inf]))


@st.composite
def joint_states(draw):
    names = draw(st.lists(st.sampled_from(NAMES + ['extra', 'other']), min_size=0, max_size=6))
    n = len(names)
    positions = draw(st.lists(value, min_size=n, max_size=n) | st.lists(value, max_size=7))
    velocities = draw(st.just([]) | st.lists(value, min_size=n, max_size=n) | st.lists(value, max_size=7))
    return names, positions, velocities


def expected_verdict(names, positions, velocities):
    """The merger's rules written out: None (used) or the counter a rejection goes to."""
    if len(positions) != len(names) or len(velocities) not in (0, len(names)):
        return 'malformed'
    if len(set(names)) != len(names):
        return 'duplicate_names'
    known = [k for k, name in enumerate(names) if name in NAMES]
    if not known:
        return 'no_known_joint'
    if any(not math.isfinite(positions[k]) or (velocities and not math.isfinite(velocities[k])) for k in known):
        return 'nonfinite'
    return None


@settings(max_examples=400, deadline=None)
@given(messages=st.lists(joint_states(), min_size=1, max_size=8))
def test_malformed_joint_state_never_changes_the_state_and_is_counted(messages):
    merger = JointStateMerger(NAMES, state_timeout=1.0)
    now = 1_000_000_000
    for names, positions, velocities in messages:
        now += 1_000_000
        q, qd, counts = merger.q.copy(), merger.qd.copy(), dict(merger.counts)
        used = merger.update(names, positions, velocities, 0, now)
        verdict = expected_verdict(names, positions, velocities)
        assert used == (verdict is None), (names, positions, velocities, merger.last_rejection)
        if verdict is None:
            for name, p in zip(names, positions):
                if name in NAMES:
                    assert merger.q[NAMES.index(name)] == p
        else:
            np.testing.assert_array_equal(merger.q, q)
            np.testing.assert_array_equal(merger.qd, qd)
            assert merger.counts[verdict] == counts[verdict] + 1
            assert merger.rejected() == sum(counts[k] for k in counts if k not in ('accepted', 'unknown_names')) + 1


class _Bus:
    joints = ['shoulder', 'elbow', 'wrist']


@settings(max_examples=100, deadline=None)
@given(size=st.integers(0, 6), vsize=st.integers(0, 6))
def test_assembler_never_turns_a_reading_of_the_wrong_size_into_a_state(size, vsize):
    from uk_controller.hardware.joint_state_assembler import JointStateAssembler

    setup = load_robot('planar_3r')
    assembler = JointStateAssembler(setup, _Bus())
    q, qd = assembler(np.full(size, 0.1), np.zeros(vsize))
    if size == vsize == 3:
        np.testing.assert_array_equal(q, np.full(3, 0.1))
        assert assembler.rejected == 0
    else:
        assert np.isnan(q).all() and np.isnan(qd).all() and assembler.rejected == 1


def test_assembler_refuses_two_motors_on_one_joint():
    from uk_controller.hardware.joint_state_assembler import JointStateAssembler

    class Twice:
        joints = ['shoulder', 'shoulder', 'wrist']

    with pytest.raises(ValueError, match="'shoulder' is measured by two motors"):
        JointStateAssembler(load_robot('planar_3r'), Twice())
