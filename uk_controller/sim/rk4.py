"""The classical RK4 of the embedded plant, one stage at a time (Python stage sequence, NumPy reference).

For x = (q, q') and x' = (q', q'') with the efforts held over a control period of ``substeps`` steps
of size h::

    k0 = f(t, x),  k1 = f(t + h/2, x + h/2 k0),  k2 = f(t + h/2, x + h/2 k1),  k3 = f(t + h, x + h k2)
    x <- x + h/6 (k0 + 2 k1 + 2 k2 + k3)

The compiled twin is :func:`uk_controller.kernels.plant.rk4_accept` with its stage sequence
:func:`uk_controller.kernels.plant.plant_period` (the project's one compiled RK4: UKPlant's one-call
period and the compiled closed loop). :func:`rk4_period` runs the same stage sequence from Python with
either stage update: the compiled ``rk4_accept`` (accelerations from a Python callable) or
:func:`rk4_accept` below (no numba). The two stage updates agree to round-off, not bit for bit: the final
sum is formed as ``(k0 + k3) + 2 (k1 + k2)`` here and ``(k0 + 2 (k1 + k2)) + k3`` in the kernel.
Tests: ``test/test_uk_fast.py::test_plant_rk4_kernel_equals_numpy_rk4`` (compiled vs NumPy) and
``test/test_fused_step.py::test_compiled_plant_period_equals_reference_rk4`` (one compiled call vs the
Python stage sequence).
"""

from __future__ import annotations

import numpy as np


def rk4_accept(x, k, i, h, xt, qdd):
    """NumPy twin of :func:`uk_controller.kernels.plant.rk4_accept` (same arguments and effects): store
    ``k[i][n:] = qdd``; for i < 3 the next stage's state ``xt = x + h k[i]`` and ``k[i+1][:n] = xt[n:]``
    (h = dt/2, dt/2, dt); for i = 3 ``x += h/6 (k0 + 2 k1 + 2 k2 + k3)`` (k1 and k0 overwritten) and
    ``k[0][:n] = x[n:]`` for the next step (h = dt)."""
    n = qdd.shape[0]
    k[i, n:] = qdd
    if i < 3:
        np.multiply(k[i], h, out=xt)
        xt += x
        k[i + 1, :n] = xt[n:]
    else:
        k[1] += k[2]
        k[0] += k[3]
        k[0] += 2.0 * k[1]
        k[0] *= h / 6.0
        x += k[0]
        k[0, :n] = x[n:]


def rk4_period(x, k, xt, t, dt, substeps, accel, accept=rk4_accept):
    """``substeps`` RK4 steps of x (advanced in place) over dt from time t; ``accel(q, qd, t) -> q''``
    evaluated on views of x and xt; ``accept``: :func:`rk4_accept` or its compiled twin. ``k``: a (4, 2n)
    work array. Returns the time reached (t + substeps h, summed step by step)."""
    n = x.shape[0] // 2
    h = dt / substeps
    half = 0.5 * h
    xq, xv, tq, tv = x[:n], x[n:], xt[:n], xt[n:]
    k[0, :n] = x[n:]
    for _ in range(substeps):
        accept(x, k, 0, half, xt, accel(xq, xv, t))
        accept(x, k, 1, half, xt, accel(tq, tv, t + half))
        accept(x, k, 2, h, xt, accel(tq, tv, t + half))
        accept(x, k, 3, h, xt, accel(tq, tv, t + h))
        t += h
    return t
