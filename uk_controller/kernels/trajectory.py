"""Compiled trajectory evaluator (numba): desired p, v, a of a trajectory from its ``spec()``.

NumPy reference: the ``_eval`` methods of :mod:`uk_controller.constraints.trajectories` (``Hold``, ``Helix``,
``Line``, ``CosineRise``, ``Circle``, ``Quintic``, ``Spline``), whose ``spec()`` writes the kind code (:mod:`.codes`,
``TRAJ_*``)
and the float parameters read here. Test: ``test/test_fused_step.py::test_compiled_trajectories_equal_python``.

Adding a trajectory kind: a ``TRAJ_*`` code in codes.py, its ``spec()`` in trajectories.py and one
branch here.
"""

from __future__ import annotations

import numpy as np

from .codes import TRAJ_COSINE_RISE, TRAJ_CUBIC_PIECES, TRAJ_HELIX, TRAJ_HOLD, TRAJ_LINE, TRAJ_QUINTIC
from .jit import njit


@njit(cache=True)
def _segment(fp, tk, K, tau):
    """Index k of the knot segment with ``t_k <= tau < t_{k+1}`` (0 <= k <= K - 2; the caller handles tau
    outside ``(t_0, t_{K-1})``); knot times at fp[tk:tk + K] (bisection, as numpy.searchsorted side='right')."""
    lo, hi = 0, K - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fp[tk + mid] <= tau:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True)
def _piecewise(kind, d, fp, o, tau, P, V, Acc):
    """Quintic rest-to-rest segments (trajectories.Quintic) or cubic pieces (trajectories.Spline, scipy's
    PPoly coefficients): floats start time, K, the K knot times, then the kind's data (trajectories' spec())."""
    K = int(fp[o + 1])
    tk = o + 2
    pts = tk + K
    if tau <= fp[tk] or tau >= fp[tk + K - 1]:
        if kind == TRAJ_QUINTIC:
            e = pts if tau <= fp[tk] else pts + (K - 1) * d
        else:
            e = pts if tau <= fp[tk] else pts + d
        for i in range(d):
            P[i] = fp[e + i]
            V[i] = 0.0
            Acc[i] = 0.0
        return
    k = _segment(fp, tk, K, tau)
    if kind == TRAJ_QUINTIC:
        # p = p_k + (p_{k+1} - p_k) (10 s^3 - 15 s^4 + 6 s^5), s = (tau - t_k) / T
        T = fp[tk + k + 1] - fp[tk + k]
        s = (tau - fp[tk + k]) / T
        f = s**3 * (10.0 - 15.0 * s + 6.0 * s * s)
        df = 30.0 * s * s * (1.0 - s) ** 2 / T
        ddf = 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s) / (T * T)
        a = pts + k * d
        for i in range(d):
            di = fp[a + d + i] - fp[a + i]
            P[i] = fp[a + i] + f * di
            V[i] = df * di
            Acc[i] = ddf * di
        return
    # cubic piece: p = ((c0 x + c1) x + c2) x + c3, x = tau - t_k
    x = tau - fp[tk + k]
    c = pts + 2 * d + k * d * 4
    for i in range(d):
        c0, c1, c2, c3 = fp[c + 4 * i], fp[c + 4 * i + 1], fp[c + 4 * i + 2], fp[c + 4 * i + 3]
        P[i] = ((c0 * x + c1) * x + c2) * x + c3
        V[i] = (3.0 * c0 * x + 2.0 * c1) * x + c2
        Acc[i] = 6.0 * c0 * x + 2.0 * c1


@njit(cache=True, inline='always')
def hold_eval(d, fp, o, P, V, Acc):
    """A hold trajectory (codes.TRAJ_HOLD): p = its target ``fp[o + 1 : o + 1 + d]``, v = a = 0. Inlined, so
    a caller with many hold rows (the posture term: one per joint) may test the kind and call this without
    a call of :func:`trajectory_eval` per row."""
    for i in range(d):
        P[i] = fp[o + 1 + i]
        V[i] = 0.0
        Acc[i] = 0.0


@njit(cache=True)
def trajectory_eval(kind, d, fp, o, t, P, V, Acc):
    """p, v, a (first d entries of P, V, Acc) of a trajectory spec (see trajectories.Trajectory.spec).

    Kinds (codes.TRAJ_*): hold, helix (seed 000 eq 40), line (seed 003 eq 26), cosine rise (seed 004 eq 64),
    circle, quintic segments, cubic pieces; ``fp[o]`` is the start time."""
    tau = t - fp[o]
    if kind == TRAJ_QUINTIC or kind == TRAJ_CUBIC_PIECES:
        _piecewise(kind, d, fp, o, tau, P, V, Acc)
    elif kind == TRAJ_HOLD:
        hold_eval(d, fp, o, P, V, Acc)
    elif kind == TRAJ_HELIX:
        r = fp[o + 1]
        w = fp[o + 2]
        s = np.sin(w * tau + fp[o + 3])
        c = np.cos(w * tau + fp[o + 3])
        rate = fp[o + 4]
        P[0] = fp[o + 5] + r * s
        P[1] = fp[o + 6] + r * c
        P[2] = fp[o + 7] + rate * tau
        V[0] = r * w * c
        V[1] = -r * w * s
        V[2] = rate
        Acc[0] = -r * w * w * s
        Acc[1] = -r * w * w * c
        Acc[2] = 0.0
    else:
        amp = fp[o + 1]
        w = fp[o + 2]
        c = np.cos(w * tau + fp[o + 3])
        s = np.sin(w * tau + fp[o + 3])
        b = o + 4
        for i in range(d):
            if kind == TRAJ_LINE:
                di = fp[b + d + i]
                P[i] = fp[b + i] + amp * c * di
                V[i] = -amp * w * s * di
                Acc[i] = -amp * w * w * c * di
            elif kind == TRAJ_COSINE_RISE:
                ai = fp[b + d + i]
                P[i] = fp[b + i] + ai * (1.0 - c)
                V[i] = ai * w * s
                Acc[i] = ai * w * w * c
            else:  # TRAJ_CIRCLE
                ui = fp[b + d + i]
                vi = fp[b + 2 * d + i]
                P[i] = fp[b + i] + amp * (c * ui + s * vi)
                V[i] = amp * w * (-s * ui + c * vi)
                Acc[i] = -amp * w * w * (c * ui + s * vi)
