"""Compiled trajectory evaluator (numba): desired p, v, a of a trajectory from its ``spec()``.

NumPy reference: the ``_eval`` methods of :mod:`uk_controller.trajectories` (``Hold``, ``Helix``,
``Line``, ``CosineRise``, ``Circle``), whose ``spec()`` writes the kind code (:mod:`.codes`, ``TRAJ_*``)
and the float parameters read here. Test: ``test/test_fused_step.py::test_compiled_trajectories_equal_python``.

Adding a trajectory kind: a ``TRAJ_*`` code in codes.py, its ``spec()`` in trajectories.py and one
branch here.
"""
from __future__ import annotations

import numpy as np

from .codes import TRAJ_HELIX, TRAJ_HOLD, TRAJ_LINE, TRAJ_COSINE_RISE
from .jit import njit


@njit(cache=True)
def trajectory_eval(kind, d, fp, o, t, P, V, Acc):
    """p, v, a (first d entries of P, V, Acc) of a trajectory spec (see trajectories.Trajectory.spec).

    Kinds (codes.TRAJ_*): hold, helix (seed 000 eq 40), line (seed 003 eq 26), cosine rise (seed 004 eq 64),
    circle; ``fp[o]`` is the start time."""
    tau = t - fp[o]
    if kind == TRAJ_HOLD:
        for i in range(d):
            P[i] = fp[o + 1 + i]
            V[i] = 0.0
            Acc[i] = 0.0
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
            else:                               # TRAJ_CIRCLE
                ui = fp[b + d + i]
                vi = fp[b + 2 * d + i]
                P[i] = fp[b + i] + amp * (c * ui + s * vi)
                V[i] = amp * w * (-s * ui + c * vi)
                Acc[i] = -amp * w * w * (c * ui + s * vi)

