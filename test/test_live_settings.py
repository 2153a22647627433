"""Live parameters without ROS: a changed setup is resolved again (the schema and its cross-key rules) and
each consumer takes it through ``apply_settings`` (ControllerCore, ReArm, JointStateMerger; the controller
node calls them in turn, test_ros_faults.py runs that node)."""

import types

import numpy as np
import pytest

from uk_controller.control.controller import ControllerCore
from uk_controller.control.rearm import ReArm
from uk_controller.files.parameter_file import ConfigError
from uk_controller.robots.setup import setup_from_settings
from uk_controller.ros.joint_state_merger import JointStateMerger
from uk_controller.settings.resolve import changed_keys, resolve

ROBOT = 'scara'


@pytest.fixture(scope='module')
def base():
    return resolve(ROBOT)


def core_of(settings):
    return ControllerCore(setup_from_settings(settings), backend='reference')


def state(setup):
    """A state off the task (so the stabilization gains matter), and a time on the trajectory."""
    q = np.asarray(setup.q0, dtype=float) + 0.05 * np.arange(1, setup.n + 1)
    return q, np.asarray(setup.qd0, dtype=float) + 0.1, 0.3


@pytest.mark.slow
def test_live_gains_reach_the_controller_as_if_it_had_started_with_them(base):
    core = core_of(base)
    q, qd, t = state(core.setup)
    before = core.step(q, qd, t).effort
    changed = resolve(ROBOT, {'stabilization.omega': 4.0})
    assert core.apply_settings(changed) == ['stabilization.omega']
    assert core.settings is changed
    np.testing.assert_allclose(np.asarray(core.stabilization.kp), 16.0)
    after = core.step(q, qd, t).effort
    fresh = core_of(changed).step(q, qd, t).effort  # a controller that started with omega 4
    np.testing.assert_array_equal(after, fresh)
    assert not np.allclose(after, before)


@pytest.mark.slow
def test_live_safe_effort_reaches_the_controller(base):
    core = core_of(base)
    q, qd, t = state(core.setup)
    core.step(q, qd, t)
    np.testing.assert_array_equal(core.safe('stale').effort, np.zeros(core.p))  # control.safe_effort: zero
    core.apply_settings(resolve(ROBOT, {'control.safe_effort': 'hold'}))
    assert core.safe_effort == 'hold'
    good = core.step(q, qd, t).effort.copy()
    assert np.abs(good).max() > 1.0
    np.testing.assert_array_equal(core.safe('stale').effort, good)  # the last good effort, held


@pytest.mark.slow
def test_a_bad_live_value_is_refused_naming_the_key_and_nothing_changes(base):
    with pytest.raises(ConfigError, match=r'stabilization\.omega.*rate/4'):
        resolve(ROBOT, {'stabilization.omega': 900.0})  # the cross-key rule: omega <= control.rate / 4
    with pytest.raises(ConfigError, match=r'control\.safe_effort: .*one of zero, hold'):
        resolve(ROBOT, {'control.safe_effort': 'brake'})
    core = core_of(base)
    gains = core.stabilization
    with pytest.raises(ConfigError, match=r'control\.rate: cannot change while running'):
        core.apply_settings(resolve(ROBOT, {'control.rate': 500.0, 'control.safe_effort': 'hold'}))
    # one gain per row, but not as many as the controller has rows: refused before anything changed
    rows = core.passive.m + core.servo.m
    with pytest.raises(ValueError):
        core.apply_settings(resolve(ROBOT, {'stabilization.omega': [5.0] * (rows + 1)}))
    assert core.stabilization is gains and core.safe_effort == 'zero' and core.settings is base


def test_changed_keys_name_what_differs(base):
    other = resolve(ROBOT, {'control.safe_effort': 'hold', 'ros.loop.window': 2.0, 'hardware.motors': ['m1']})
    assert changed_keys(base, base) == []
    assert changed_keys(base, other)[:3] == ['control.safe_effort', 'hardware.motors', 'hardware.motor1']
    assert 'ros.loop.window' in changed_keys(base, other)


@pytest.mark.slow
def test_rearm_and_merger_take_their_live_values(base):
    core = core_of(base)
    rearm = ReArm(core, base.control.soft_start)
    merger = JointStateMerger(core.joint_names, base.control.state_timeout, base.control.clock_skew)
    changed = resolve(
        ROBOT,
        {
            'control.soft_start': 0.25,
            'control.state_timeout': 0.3,
            'control.clock_skew': 0.2,
            'stabilization.omega': 3.0,
        },
    )
    core.apply_settings(changed)
    rearm.apply_settings(changed)
    merger.apply_settings(changed)
    assert rearm.soft_start == 0.25 and merger.state_timeout == 0.3 and merger.clock_skew == 0.2
    np.testing.assert_allclose(np.asarray(rearm.base.kp), 9.0)  # the ramp's target: the new gains
    rearm.interrupt(1.0)
    rearm.time(1.0)  # re-armed: the soft start begins
    rearm.time(1.0 + 0.125)  # half way through the new 0.25 s soft start: gains at s = 0.5
    np.testing.assert_allclose(np.asarray(core.stabilization.kp), 9.0 * 0.25)


@pytest.mark.slow
def test_the_controller_node_hands_the_settings_to_each_consumer(base):
    pytest.importorskip('rclpy')
    from uk_controller.ros.controller_node import ControllerNode

    core = core_of(base)
    node = types.SimpleNamespace(
        core=core,
        rearm=ReArm(core, base.control.soft_start),
        merger=JointStateMerger(core.joint_names, base.control.state_timeout),
        settings=base,
    )
    changed = resolve(ROBOT, {'control.state_timeout': 0.5, 'control.safe_effort': 'hold', 'ros.trajectory_start': 2.0})
    ControllerNode.apply_settings(node, changed)
    assert node.settings is changed and node.settings.ros.trajectory_start == 2.0
    assert node.merger.state_timeout == 0.5 and core.safe_effort == 'hold'
