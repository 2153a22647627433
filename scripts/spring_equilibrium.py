#!/usr/bin/env python3
"""Print a ``robot.initial_position`` where gravity and the joint springs balance along the motions that no
motor drives, and the static efforts that hold it.

Some closed chains keep, with every motor locked, a motion that their passive rows (closures, feet held)
allow: Cassie standing on both feet in its published SDF has one, a sagittal rocking of the pelvis on the
legs' springs (docs/limits.md). No motor effort does work along such a motion: a start is a static
equilibrium only where the generalized force along it, ``-V^T h(q, 0)`` (gravity and springs; V: the
right singular vectors of ``[B^T; A_passive]`` whose singular value is below ``--tol`` times the largest),
vanishes. From the setup's ``initial_position`` this script takes Newton steps along V (its stiffness by
finite differences), after each step closing the passive rows by Gauss-Newton with the actuated
coordinates fixed. Then it prints the smallest static effort that holds the start, ``min max_i
|u_i| / limit_i`` subject to ``B u + A^T lambda = h`` (a linear program, scipy's HiGHS), per motor. Cassie's
start in config/examples/cassie_standing.yaml::

    PYTHONPATH=. python scripts/spring_equilibrium.py config/examples/cassie_standing.yaml

(run on the start before balancing -- the start of config/examples/cassie_hung.yaml with both hip pitches
turned by +0.3 rad, the feet under the centre of mass -- it printed the line in that file; run on the
file, it leaves the start where it is).
"""

from __future__ import annotations

import argparse

import numpy as np

from uk_controller.robots.setup import load_robot


def _rows(setup, q):
    zero = np.zeros_like(q)
    setup.model.compute(q, zero)
    rows = setup.passive.evaluate(setup.model, q, zero, 0.0)
    return rows.phi.copy(), rows.A.copy(), setup.model.h.copy()


def _close(setup, q, actuated, rcond, iterations=50, tol=1e-13):
    free = np.setdiff1d(np.arange(q.size), actuated)
    for _ in range(iterations):
        phi, A, _ = _rows(setup, q)
        if np.abs(phi).max() < tol:
            break
        q[free] -= np.linalg.lstsq(A[:, free], phi, rcond=rcond)[0]
    return q, float(np.abs(phi).max())


def unactuated_modes(setup, q, tol):
    """(V, singular values): motions the passive rows allow with every motor locked, at q."""
    _, A, _ = _rows(setup, q)
    B = setup.actuators.matrix(setup.model)
    _, s, vt = np.linalg.svd(np.vstack([B.T, A]))
    s = np.r_[s, np.zeros(max(0, vt.shape[0] - s.size))]
    keep = s < tol * s[0]
    return vt[keep].T, s[keep]


def balance(setup, q, tol=1e-5, rcond=1e-8, steps=20, delta=1e-5):
    """(q, modal force): Newton along the unactuated modes until gravity and springs balance on them."""
    B = setup.actuators.matrix(setup.model)
    actuated = np.flatnonzero(np.abs(B).sum(axis=1))
    q = q.astype(float).copy()
    force = np.zeros(0)
    for _ in range(steps):
        V, _ = unactuated_modes(setup, q, tol)
        if V.shape[1] == 0:
            return q, force
        force = -V.T @ _rows(setup, q)[2]
        if np.abs(force).max() < 1e-9:
            break
        stiffness = np.empty((V.shape[1], V.shape[1]))
        for k in range(V.shape[1]):
            moved, _ = _close(setup, q + delta * V[:, k], actuated, rcond)
            stiffness[:, k] = (-V.T @ _rows(setup, moved)[2] - force) / delta
        q, _ = _close(setup, q - V @ np.linalg.solve(stiffness, force), actuated, rcond)
    return q, force


def static_effort(setup, q, rcond=1e-6):
    """(max_i |u_i| / limit_i, u): the smallest static effort holding q (linear program), or (inf, None)."""
    from scipy.optimize import linprog

    _, A, h = _rows(setup, q)
    _, s, vt = np.linalg.svd(A, full_matrices=False)
    rows = (s[:, None] * vt)[s > rcond * s[0]]  # the passive rows' row space, nearly dependent rows cut
    B = setup.actuators.matrix(setup.model)
    limit = setup.actuators.effort_limits
    p, m, n = B.shape[1], rows.shape[0], q.size
    cost = np.r_[np.zeros(p + m), 1.0]
    equal = np.hstack([B, rows.T, np.zeros((n, 1))])
    bound = np.block([[np.eye(p), np.zeros((p, m)), -limit[:, None]], [-np.eye(p), np.zeros((p, m)), -limit[:, None]]])
    res = linprog(cost, bound, np.zeros(2 * p), equal, h, bounds=[(None, None)] * (p + m) + [(0, None)], method='highs')
    return (float(res.x[-1]), res.x[:p]) if res.success else (np.inf, None)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('setup', help='robot name or setup YAML')
    parser.add_argument('--tol', type=float, default=1e-5, help='relative singular value of an unactuated mode')
    args = parser.parse_args(argv)
    setup = load_robot(args.setup)
    q, force = balance(setup, setup.q0, tol=args.tol)
    _, s = unactuated_modes(setup, q, args.tol)
    print(f'unactuated modes: {s.size} (singular values {np.array2string(s, precision=3)})')
    print(f'generalized force along them: {np.array2string(force, precision=3)}')
    print(f'passive rows residual: {np.abs(_rows(setup, q)[0]).max():.3e}')
    ratio, u = static_effort(setup, q)
    print(f'static effort / limit: {ratio:.4f}')
    if u is not None:
        for name, value in zip(setup.actuators.names, u):
            print(f'  {name}: {value:+.2f}')
    print('initial_position: [' + ', '.join(repr(round(float(x), 12)) for x in q) + ']')


if __name__ == '__main__':
    main()
