"""One RK4 step per control period is enough for the shipped robots (config ``simulation.substeps: 1``).

Over each robot's configured closed-loop run (its ``simulation.duration`` at its control rate),
the simulation with 1 RK4 substep per period equals the one with 8 substeps (a step eight times
finer, whose RK4 error is 8^4 = 4096 times smaller) to |dq| <= 1e-9 rad (or m) and |dq'| <= 1e-7:
the plant is smooth between control instants and the zero-order-hold effort is the same. Measured
on the reference machine: |dq| <= 2e-12, |dq'| <= 2e-11. (dual_arm keeps 4 substeps: its 8-substep
run is too slow for this file.)
"""

import numpy as np
import pytest

from uk_controller.robots import load_robot
from uk_controller.sim.closed_loop import simulate

TOL_Q, TOL_QD = 1e-9, 1e-7


@pytest.mark.slow
@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'five_bar_redundant', 'planar_3r'])
def test_one_substep_matches_eight_over_the_configured_run(robot):
    setup = load_robot(robot)
    assert setup.settings.simulation.substeps == 1
    one = simulate(load_robot(robot, {'simulation.substeps': 1}))
    eight = simulate(load_robot(robot, {'simulation.substeps': 8}))
    assert one.ok.all() and eight.ok.all()
    assert one.t.size == eight.t.size and one.t[-1] >= setup.settings.simulation.duration - 2e-3
    assert np.abs(one.q - eight.q).max() <= TOL_Q
    assert np.abs(one.qd - eight.qd).max() <= TOL_QD
