#!/usr/bin/env python3
"""Print a ``robot.initial_position`` that closes a setup's loops, with chosen joints at chosen values.

A closed chain can only start where its closures hold. Starting from the file's ``initial_position`` (or
zeros), the given joints move to their values in small steps; after each step the other joints (except
those named by ``--keep``) are corrected by Gauss-Newton on the passive rows (minimum-norm steps of the
closures' Jacobian, rank cut ``--rcond``), so the chain follows a continuous path of closed configurations.
``--guess`` joints move toward their values with the others but stay free: at a toggle position (a
four-bar stretched straight) they choose the branch. Cassie's start in config/examples/cassie_hung.yaml::

    PYTHONPATH=. python scripts/close_start.py config/examples/cassie_hung.yaml --keep=-op --keep knee-shin \\
        --set left-foot-op=-1.5 --set right-foot-op=-1.5 --guess left-tarsus-crank-joint=-1.5 \\
        --guess right-tarsus-crank-joint=-1.5 --guess left-crank-rod-joint=1.5 --guess right-crank-rod-joint=1.5

prints the residual of the closures, the joints outside their position limits and the ``initial_position``
line for the YAML.
"""

from __future__ import annotations

import argparse

import numpy as np

from uk_controller.robots.setup import load_robot


def close(setup, targets, keep=(), guesses=None, steps=60, rcond=1e-8, iterations=100, tol=1e-14):
    """(q, residual): the setup's start moved to `targets` {joint: value} along closed configurations;
    `guesses` {joint: value} move along as a first guess and stay free."""
    model, names, n = setup.model, setup.joint_names, setup.model.n
    q, zero = setup.q0.astype(float).copy(), np.zeros(n)
    fixed = {names.index(j) for j in targets} | {i for i, nm in enumerate(names) if any(k in nm for k in keep)}
    free = [i for i in range(n) if i not in fixed]
    guesses = guesses or {}
    start = {names.index(j): q[names.index(j)] for j in (*targets, *guesses)}
    residual = np.inf
    for k in range(1, steps + 1):
        for j, value in targets.items():
            i = names.index(j)
            q[i] = start[i] + (value - start[i]) * k / steps
        for j, value in guesses.items():
            i = names.index(j)
            q[i] += (value - start[i]) / steps
        for _ in range(iterations):
            model.compute(q, zero)
            rows = setup.passive.evaluate(model, q, zero, 0.0)
            residual = float(np.linalg.norm(rows.phi))
            if residual < tol:
                break
            q[free] -= np.linalg.lstsq(rows.A[:, free], rows.phi, rcond=rcond)[0]
    return q, residual


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('setup', help='robot name or setup YAML')
    parser.add_argument('--set', action='append', default=[], metavar='JOINT=VALUE', help='a joint and its value')
    parser.add_argument(
        '--keep',
        action='append',
        default=[],
        metavar='TEXT',
        help='joints whose name contains TEXT keep their start value',
    )
    parser.add_argument(
        '--guess',
        action='append',
        default=[],
        metavar='JOINT=VALUE',
        help='a free joint moved toward VALUE as the first guess (chooses a branch)',
    )
    parser.add_argument('--rcond', type=float, default=1e-8, help='rank cut of the Gauss-Newton steps')
    args = parser.parse_args(argv)
    setup = load_robot(args.setup)
    targets, guesses = {}, {}
    for flag, items, out in (('--set', args.set, targets), ('--guess', args.guess, guesses)):
        for item in items:
            joint, _, value = item.partition('=')
            if joint not in setup.joint_names:
                parser.error(f'{flag} {item}: no joint {joint!r} (joints: {", ".join(setup.joint_names)})')
            out[joint] = float(value)
    q, residual = close(setup, targets, args.keep, guesses, rcond=args.rcond)
    print(f'closure residual {residual:.3e}')
    lower, upper = setup.model.position_limits
    for i in np.flatnonzero((q < lower) | (q > upper)):
        print(f'outside its limits: {setup.joint_names[i]} = {q[i]:.4f} not in [{lower[i]}, {upper[i]}]')
    print('initial_position: [' + ', '.join(repr(round(float(x), 12)) for x in q) + ']')


if __name__ == '__main__':
    main()
