"""The packed control step (uk_controller.kernels.packed) against CompiledRows.run (Pinocchio's pass).

Same program, same workspace layout: only the dynamics source differs (kernels.dynamics.tree_terms vs
Pinocchio's crba + rnea), so every output agrees to round-off; M and h are checked against Pinocchio's.
"""

import numpy as np
import pytest

from uk_controller.control.controller import ControllerCore
from uk_controller.core import uk
from uk_controller.kernels import codes
from uk_controller.kernels.jit import AVAILABLE

pytestmark = pytest.mark.skipif(not AVAILABLE, reason='numba not installed')


@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'five_bar_redundant', 'dual_arm', 'planar_3r'])
@pytest.mark.slow
def test_packed_step_matches_the_pinocchio_pass(robot):
    ctrl = ControllerCore.from_config(robot)
    if ctrl.backend.dynamics != 'kernels':
        pytest.skip(f'{robot}: no compiled tree')
    fz, packed = ctrl.backend.program, ctrl.backend.packed
    pinocchio_run = fz.make_runner()  # Pinocchio's pass (crba + rnea) + fused_step
    packed_run = packed.make_runner()
    model = ctrl.model
    rng = np.random.default_rng(11)
    for k in range(8):
        q = ctrl.setup.q0 + 0.2 * rng.standard_normal(model.n)
        qd = 0.5 * rng.standard_normal(model.n)
        t = 0.1 * k
        pinocchio_run(q, qd, t)
        ref = {
            key: getattr(fz, key).copy() for key in ('effort', 'phi', 'phidot', 'A', 'b', 'qdd', 'saturated', 'info')
        }
        M_ref, h_ref = model.data.M.copy(), model.data.nle.copy()
        packed_run(q, qd, t)
        # the joint-limit stage starts from the previous call's effort (here the same state's solution), so
        # its iteration count may drop; the result does not depend on the start
        it_ref, it = ref['info'][codes.INFO_LIMIT_ITERATIONS], fz.info[codes.INFO_LIMIT_ITERATIONS]
        assert it <= it_ref
        ref['info'][codes.INFO_LIMIT_ITERATIONS] = it
        for key, value in ref.items():
            np.testing.assert_allclose(getattr(fz, key), value, rtol=1e-11, atol=1e-11, err_msg=key)
        M = packed.M
        np.testing.assert_allclose(np.tril(M), np.tril(M_ref.T), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(packed.h, h_ref, rtol=1e-12, atol=1e-12)
        # the step's result is the packed workspace's (copied out)
        res = ctrl.step(q, qd, t + ctrl.t0)
        np.testing.assert_array_equal(res.effort, fz.effort)
        np.testing.assert_array_equal(np.concatenate((res.phi, res.phidot)), np.concatenate((fz.phi, fz.phidot)))
    # live gain changes reach the packed program (CompiledRows.set_gains writes the packed floats)
    gains = uk.row_gains(ctrl.stabilization, ctrl.passive.rows.order, ctrl.servo.rows.order)
    fz.set_gains(2.0 * gains)
    assert np.shares_memory(fz.fp, packed.F)


@pytest.mark.slow
def test_packed_step_with_continuous_joints_matches_the_pinocchio_pass(tmp_path):
    """A continuous joint: Pinocchio gets (cos q, sin q) through CompiledRows' runner, the packed step the angle."""
    from test_continuous_joints import write_arm

    from uk_controller.robots import load_robot

    ctrl = ControllerCore(load_robot(write_arm(tmp_path, 'continuous')))
    if ctrl.backend.dynamics != 'kernels':
        pytest.skip('no compiled tree for this arm')
    fz = ctrl.backend.program
    pinocchio_run, packed_run = fz.make_runner(), ctrl.backend.packed.make_runner()
    rng = np.random.default_rng(5)
    for k in range(6):
        q = ctrl.setup.q0 + 4.0 * rng.standard_normal(ctrl.model.n)  # several turns
        qd = rng.standard_normal(ctrl.model.n)
        pinocchio_run(q, qd, 0.05 * k)
        ref = fz.effort.copy(), fz.phi.copy(), fz.phidot.copy()
        packed_run(q, qd, 0.05 * k)
        for got, want in zip((fz.effort, fz.phi, fz.phidot), ref):
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


@pytest.mark.slow
def test_borrowed_views_read_and_write_the_callers_array():
    """kernels.jit.borrowed: same data, shape and strides, writes reach the caller's array, slices and calls on
    it work, and the caller's array keeps its own reference count (nothing leaked or freed by the kernel)."""
    import sys

    from uk_controller.kernels.jit import borrowed, njit

    @njit
    def inner(v, out):
        out[0] = v.sum()

    @njit
    def kernel(a, out):
        b = borrowed(a)
        o = borrowed(out)
        col = b[1:, 2]
        inner(col, o[1:])
        o[0] = b[2, 1] * 2.0
        b[0, 0] = -1.0
        pair = borrowed((a, out))  # not an array: passed through
        o[2] = pair[0][1, 1] + pair[1].shape[0]
        return b.shape[0] * 10 + b.shape[1]

    a = np.arange(12.0).reshape(3, 4)
    out = np.zeros(3)
    before = sys.getrefcount(a), sys.getrefcount(out)
    for _ in range(3):
        shape = kernel(a, out)
    assert shape == 34
    assert out[0] == 18.0 and out[1] == 6.0 + 10.0 and out[2] == 5.0 + 3 and a[0, 0] == -1.0
    assert (sys.getrefcount(a), sys.getrefcount(out)) == before
