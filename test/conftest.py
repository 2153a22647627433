"""Session set-up shared by all tests."""
import sys

import pytest


@pytest.fixture(scope='session', autouse=True)
def compiled_kernels_cached():
    """Compile (or load) the optional numba kernels of every shipped robot once, up front.

    The kernels are cached next to the sources; on a fresh machine the first
    construction compiles for tens of seconds. Doing it here keeps that cost
    out of node subprocesses whose tests run against a clock (ROS over DDS,
    serial HIL), which would otherwise start while their peer still compiles.
    """
    import numpy as np

    from uk_controller.controller import ControllerCore
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate
    from uk_controller.sim.uk_plant import UKPlant

    for robot in ('scara', 'five_bar', 'five_bar_redundant', 'dual_arm', 'planar_3r'):
        setup = load_robot(robot)
        ControllerCore(setup)          # construction runs one warm-up step
        UKPlant.from_setup(setup).step(np.zeros(setup.actuators.p), 1e-3)
        simulate(load_robot(robot), duration=0.003)    # the compiled closed loop (sim/compiled_loop.py)


@pytest.fixture
def fast_gil_switch():
    """A short GIL switch interval while a test runs.

    The Dynamixel SDK polls the port in a Python loop; with the default 5 ms
    interval an in-process device emulator thread answers late.
    """
    old = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)
    yield
    sys.setswitchinterval(old)
