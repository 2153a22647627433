"""ControllerCore.step's Python around the backend call: what its shortcuts must keep.

The compiled step calls the packed kernel's compiled entry point, which trusts the types it was compiled for,
and fills the StepResult slot by slot instead of through its ``__init__``. Checked here against independent
answers: the same state as a plain float64 vector (every other form of the input must give the same bits, or
be refused with its shape), the reference backend's result (every field present, of the same type), and
copies taken before later steps (the arrays of a result are its own).
"""

import dataclasses

import numpy as np
import pytest
from test_redundancy import _planar_hold_params

from uk_controller.control.controller import ControllerCore, StepResult
from uk_controller.control.status import Status, reason
from uk_controller.kernels import jit
from uk_controller.robots.setup import setup_from_settings
from uk_controller.settings.resolve import resolve

BACKENDS = ('compiled', 'reference', 'general')
ARRAYS = ('effort', 'phi', 'phidot', 'task_error', 'saturated')


def _posture_setup():
    """planar_3r with its tool position held: the posture term of the null space runs."""
    params, path, _, _ = _planar_hold_params({'omega': 5.0})
    return setup_from_settings(resolve(path, params=params))


def _same(a, b):
    """Every field of two StepResults equal bit for bit (NaN equal to NaN), compute_time aside."""
    for f in dataclasses.fields(StepResult):
        if f.name == 'compute_time':
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True), f.name
        else:
            assert type(x) is type(y) and (x == y or (x != x and y != y)), (f.name, x, y)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.slow
def test_every_form_of_the_state_gives_the_same_step_or_is_refused(backend):
    """Lists, float32 (values exact in float32), int arrays, strided and byte-swapped views, an ndarray
    subclass: converted, the same result as the float64 vector; a wrong length or a column is refused with
    its shape. (Passed through unconverted, float32 or strided data would be read as other numbers.)"""
    ctrl = ControllerCore.from_config('five_bar', backend=backend)
    n = ctrl.n
    rng = np.random.default_rng(3)
    q = (ctrl.setup.q0 + 0.05 * rng.normal(size=n)).astype(np.float32).astype(float)
    qd = np.round(rng.normal(size=n) * 8) / 8  # small integers / 8: exact everywhere
    want = ctrl.step(q, qd, 0.25)
    assert want.ok
    wide = np.zeros(2 * n)
    wide[::2], wide[1::2] = q, -1.0
    forms = [
        (list(q), tuple(qd)),
        (q.astype(np.float32), qd.astype(np.float32)),
        (wide[::2], qd),
        (q.astype('>f8'), qd.astype('>f8')),
        (q.view(type('Sub', (np.ndarray,), {})), qd),
    ]
    for fq, fqd in forms:
        _same(ctrl.step(fq, fqd, 0.25), want)
    ints = ctrl.step(np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int32), 0.25)
    _same(ints, ctrl.step(np.zeros(n), np.ones(n), 0.25))
    for t in (np.float32(0.25), 1, np.int64(1)):  # t exact in float32: same bits
        _same(ctrl.step(q, qd, t), ctrl.step(q, qd, float(t)))
    for fq, fqd, shapes in (
        (q[:-1], qd, ((n - 1,), (n,))),
        (q, qd[:, None], ((n,), (n, 1))),
        (q[None, :], qd, ((1, n), (n,))),
        (q[0], qd, ((1,), (n,))),
    ):  # a scalar: (1,)
        res = ctrl.step(fq, fqd, 0.25)
        assert res.status is Status.BAD_STATE_SHAPE and not res.ok
        assert res.reason == reason(Status.BAD_STATE_SHAPE, q=shapes[0], qd=shapes[1], n=n)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'posture'])
@pytest.mark.slow
def test_compiled_step_result_sets_every_field_like_the_reference(robot):
    """Every field of the compiled step's StepResult (filled slot by slot) is set, of the reference backend's
    type, with its value (round-off apart: the packed step's own RNEA/CRBA); with and without passive rows
    and with the posture term."""
    setup = _posture_setup() if robot == 'posture' else None
    make = (
        (lambda b: ControllerCore(setup, backend=b))
        if setup
        else (lambda b: ControllerCore.from_config(robot, backend=b))
    )
    fast, ref = make('compiled'), make('reference')
    assert fast.backend.packed is not None
    rng = np.random.default_rng(11)
    for k in range(8):
        q = fast.setup.q0 + rng.normal(size=fast.n) * (0.05 if k < 4 else 0.5)
        qd = rng.normal(size=fast.n) * 0.3
        a, b = fast.step(q, qd, 0.01 * k), ref.step(q, qd, 0.01 * k)
        assert type(a) is StepResult
        for f in dataclasses.fields(StepResult):
            x, y = getattr(a, f.name), getattr(b, f.name)  # AttributeError: a slot left empty
            assert type(x) is type(y), f.name
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and x.shape == y.shape, f.name
                np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9, err_msg=f.name)
            elif f.name == 'compute_time':
                assert 0.0 < x < 1.0
            elif isinstance(x, float):
                assert x == pytest.approx(y, rel=1e-6, abs=1e-9, nan_ok=True), f.name
            else:
                assert x == y, f.name
        assert a.ok and a.reason == b.reason
        np.testing.assert_array_equal(a.task_error, a.phi[fast.passive.m :])
        if robot == 'posture':
            assert np.isfinite(a.posture_error) and a.null_motion == 1
        else:
            assert np.isnan(a.posture_error)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'posture'])
@pytest.mark.slow
def test_a_results_arrays_stay_its_own_after_later_steps(robot, backend):
    """The arrays of a result keep their values through later steps at other states (which change every one
    of them), share no memory with the next result, and writing into them changes no later step."""
    setup = _posture_setup() if robot == 'posture' else None
    ctrl = ControllerCore(setup, backend=backend) if setup else ControllerCore.from_config(robot, backend=backend)
    twin = ControllerCore(ctrl.setup, backend=backend)
    q0, qd0 = ctrl.setup.q0, ctrl.setup.qd0
    first = ctrl.step(q0, qd0, 0.0)
    kept = {name: getattr(first, name).copy() for name in ARRAYS}
    later = [ctrl.step(q0 + 0.3 * (k + 1), qd0 + k + 1, 0.1 * (k + 1)) for k in range(3)]
    for name in ARRAYS:
        assert np.array_equal(getattr(first, name), kept[name]), name
        if name != 'saturated':  # (no effort saturates at the start)
            assert not np.array_equal(getattr(later[0], name), kept[name]), name
        for other in later:
            assert not np.shares_memory(getattr(first, name), getattr(other, name)), name
    assert ctrl.step(q0 + 9.0, qd0 + 20.0, 0.5).saturated.any()  # the flags are copied too
    assert np.array_equal(first.saturated, kept['saturated'])
    for name in ARRAYS:  # scribbling on a result changes no later step
        getattr(first, name)[:] = 1
    _same(ctrl.step(q0 + 0.1, qd0, 0.2), twin.step(q0 + 0.1, qd0, 0.2))


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('robot', ['scara', 'five_bar', 'posture', 'dual_arm'])
@pytest.mark.slow
def test_step_view_reads_what_step_returns(robot, backend):
    """step_view's StepView gives, field by field, the StepResult that step() returns for the same call on a
    twin controller (same bits: the same backend call; the scalars computed from the info when read), at
    random states, a saturated one among them; view.copy() is that StepResult and keeps it through later steps,
    while the view itself shows the next step's numbers."""
    from uk_controller.control.controller import StepView

    setup = _posture_setup() if robot == 'posture' else None
    make = (
        (lambda: ControllerCore(setup, backend=backend))
        if setup
        else (lambda: ControllerCore.from_config(robot, backend=backend))
    )
    viewer, stepper = make(), make()
    rng = np.random.default_rng(23)
    kept = []
    for k in range(8):
        q = viewer.setup.q0 + rng.normal(size=viewer.n) * (0.05 if k < 4 else 0.5)
        qd = rng.normal(size=viewer.n) * (0.3 if k != 6 else 40.0)
        view, want = viewer.step_view(q, qd, 0.01 * k), stepper.step(q, qd, 0.01 * k)
        assert type(view) is StepView and view is viewer.step_view(q, qd, 0.01 * k)  # one object, reused
        assert 0.0 < view.compute_time < 1.0
        _same(view, want)
        copy = view.copy()
        assert type(copy) is StepResult
        _same(copy, want)
        kept.append((copy, want))
    assert any(w.saturated.any() for _, w in kept)
    for copy, want in kept:
        _same(copy, want)
        for name in ARRAYS:
            assert not np.shares_memory(getattr(copy, name), getattr(viewer.view, name)), name


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.slow
def test_step_view_refusals_are_the_callers_and_hold_the_last_view(backend):
    """A refused step_view returns a StepResult of its own (ok False, its reason), and safe_effort 'hold'
    returns the effort of the last view that solved, as step() would."""
    ctrl = ControllerCore.from_config('five_bar', {'control.safe_effort': 'hold'}, backend=backend)
    q0, qd0 = ctrl.setup.q0, ctrl.setup.qd0
    good = ctrl.step_view(q0 + 0.1, qd0, 0.1)
    held = good.effort.copy()
    assert good.ok and np.any(held != 0.0)
    bad = ctrl.step_view(q0[:-1], qd0, 0.2)
    assert type(bad) is StepResult and not bad.ok and bad.status is Status.BAD_STATE_SHAPE
    np.testing.assert_array_equal(bad.effort, held)
    nan = ctrl.step_view(np.full(ctrl.n, np.nan), qd0, 0.3)
    assert not nan.ok and nan.status is Status.NON_FINITE_STATE
    np.testing.assert_array_equal(nan.effort, held)
    assert not np.shares_memory(nan.effort, good.effort)


@pytest.mark.skipif(not jit.AVAILABLE, reason='numba not installed')
@pytest.mark.parametrize('robot', ['five_bar', 'posture'])
@pytest.mark.slow
def test_step_view_allocates_no_array(robot):
    """Per call, step_view leaves no memory behind and allocates none of step()'s arrays: tracemalloc's peak
    over 200 calls stays below one array of the result, while 200 steps of step() kept alive need them all."""
    import tracemalloc

    setup = _posture_setup() if robot == 'posture' else None
    ctrl = ControllerCore(setup) if setup else ControllerCore.from_config(robot)
    q, qd = ctrl.setup.q0 + 0.01, ctrl.setup.qd0 + 0.1
    for _ in range(5):
        ctrl.step_view(q, qd, 0.0)
        ctrl.step(q, qd, 0.0)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for k in range(200):
            ctrl.step_view(q, qd, 0.001 * k)
        viewed_now, viewed_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        kept = [ctrl.step(q, qd, 0.001 * k) for k in range(200)]
        stepped = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    one_array = 8 * ctrl.p
    assert viewed_now - base < one_array and viewed_peak - base < 4 * one_array + 512
    assert stepped - viewed_now > 200 * 2 * one_array and len(kept) == 200
