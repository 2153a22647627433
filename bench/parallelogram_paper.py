"""Seed 002's five-bar parallelogram against the paper's Tables 7-12: every pseudo-inverse method, with and without
Baumgarte.

    python -m bench.parallelogram_paper [--tol 1e-6 1e-8 1e-10] [--tf 20] [--rcond tol 1e-5]
                                                  [--integrator BDF-compiled|LSODA|BDF|...]
                                                  [--methods svd varga ...]

Runs `parallelogram.simulate` for every (rcond, Baumgarte, TOL, method) asked for and prints each
setting beside the paper's Table (Adams-Moulton, IMSL DIVPAG): result, sum Psi^2, NFUNC, CPU time.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from .parallelogram import COMPILED, NEWTON_TOL, simulate
from .parallelogram_model import METHODS, THETA0

# Seed 002 Tables 7–12 (Adams–Moulton, IMSL DIVPAG): result, sum Psi^2, NFUNC, CPU [s]
PAPER = {
    (False, 1e-10): {
        'svd': ('fails after 9.1 s', '3.7e-7', '-', '-'),
        'varga': ('fails after 8.0 s', '9.9e-2', '-', '-'),
        'greville': ('correct up to 17.5 s', '4.5e-5', '2,961,955', '0.93'),
        'householder': ('correct up to 16.5 s', '2.3e-4', '6,131,159', '11.57'),
        'mgs': ('correct up to 17.0 s', '1.1e-4', '3,749,766', '36.85'),
    },
    (False, 1e-8): {
        'svd': ('fails after 12.07 s', '3.4e-6', '-', '-'),
        'varga': ('fails after 8.06 s', '9.9e-2', '-', '-'),
        'greville': ('correct up to 17.5 s', '1.86e-4', '1,648,055', '0.53'),
        'householder': ('correct up to 18.0 s', '7.9e-4', '1,641,751', '1.28'),
        'mgs': ('correct up to 18.0 s', '5.2e-4', '1,644,341', '6.03'),
    },
    (False, 1e-6): {
        'svd': ('correct up to 17.5 s', '4.1e-4', '1,033,381', '0.28'),
        'varga': ('fails after 7.3 s', '9.9e-2', '-', '-'),
        'greville': ('correct up to 19.0 s', '9.7e-4', '1,017,558', '0.37'),
        'householder': ('correct', '7.9e-4', '1,641,751', '0.76'),
        'mgs': ('correct', '6.9e-4', '1,013,795', '3.40'),
    },
    (True, 1e-10): {
        'svd': ('fails after 1.17 s', '-', '-', '-'),
        'varga': ('correct', '4.5e-5', '78,491,398', '11.4'),
        'greville': ('correct', '2.1e-7', '74,043,990', '18.3'),
        'householder': ('correct', '3.3e-7', '73,707,588', '51.5'),
        'mgs': ('correct', '4.1e-7', '73,910,268', '241.0'),
    },
    (True, 1e-8): {
        'svd': ('fails after 0.17 s', '-', '-', '-'),
        'varga': ('fails after 14.97 s', '-', '-', '-'),
        'greville': ('correct', '4.90e-7', '80,109,155', '19.4'),
        'householder': ('correct', '3.5e-7', '80,197,458', '55.0'),
        'mgs': ('correct', '4.9e-7', '80,112,706', '290'),
    },
    (True, 1e-6): {
        'svd': ('fails after 0.46 s', '-', '-', '-'),
        'varga': ('fails after 9.7 s', '-', '-', '-'),
        'greville': ('correct', '1.9e-6', '80,483,163', '19.5'),
        'householder': ('correct', '1.14e-6', '80,689,071', '55'),
        'mgs': ('correct', '1.06e-6', '80,636,983', '291'),
    },
}
PAPER_TABLE = {
    (False, 1e-10): 7,
    (False, 1e-8): 8,
    (False, 1e-6): 9,
    (True, 1e-10): 10,
    (True, 1e-8): 11,
    (True, 1e-6): 12,
}


def format_table(results, tf):
    lines = []
    header = (
        f'{"method":<12} {"result":<30} {"sum Psi^2":>10} {"NFUNC":>9} {"wall [s]":>9} {"max dtheta":>10}'
        f' | paper: {"result":<21} {"sum Psi^2":>9} {"NFUNC":>11} {"CPU":>6}'
    )
    keys = sorted({(r.baumgarte, r.tol, r.rcond) for r in results}, key=lambda k: (k[0], -k[1], k[2]))
    for key in keys:
        baum, tol, rcond = key
        table = PAPER_TABLE.get((baum, tol))
        title = (
            f'TOL = {tol:g}, rcond = {rcond:g}{" (= TOL, as the paper)" if rcond == tol else ""}, '
            f'{"Baumgarte alpha = 1000, beta = 100" if baum else "no Baumgarte"}'
            + (f'   [paper: Table {table}]' if table else '')
        )
        lines += ['', title, header, '-' * len(header)]
        for r in results:
            if (r.baumgarte, r.tol, r.rcond) != key:
                continue
            if r.completed and r.correct_until >= tf:
                res = 'correct'
            elif r.completed:
                res = f'completed, correct to {r.correct_until:.1f} s'
            else:
                res = f'stopped at {r.t_end:.2f} s ({r.correct_until:.1f} s ok)'
            paper = PAPER.get((baum, tol), {}).get(r.method, ('', '', '', ''))
            lines.append(
                f'{r.method:<12} {res:<30} {r.residual:>10.2e} {r.nfev:>9d} {r.wall:>9.3f} '
                f'{r.angle_error:>10.1e} | {paper[0]:<27} {paper[1]:>9} {paper[2]:>11} {paper[3]:>6}'
            )
    return '\n'.join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument(
        '--tol',
        type=float,
        nargs='+',
        default=[1e-10],
        help='integrator rtol = atol (the paper: 1e-6, 1e-8, 1e-10; default 1e-10, Tables 7 and 10)',
    )
    ap.add_argument(
        '--rcond',
        nargs='+',
        default=['tol'],
        help="pseudo-inverse rank thresholds, relative; 'tol' = TOL as in the paper (default)",
    )
    ap.add_argument('--tf', type=float, default=20.0)
    ap.add_argument(
        '--integrator',
        default=COMPILED,
        help=f'{COMPILED} (default: Gear/BDF and the pseudo-inverse compiled) or a scipy solve_ivp '
        'method on the NumPy right-hand side (LSODA, BDF, Radau, DOP853, ...)',
    )
    ap.add_argument('--methods', nargs='+', default=METHODS)
    ap.add_argument(
        '--theta0',
        type=float,
        default=np.degrees(THETA0),
        help='initial link angle [deg] above the horizontal, at rest (default -30)',
    )
    ap.add_argument(
        '--max-wall',
        type=float,
        default=300.0,
        help='per-run wall-time budget [s] of the scipy integrators; a run that exceeds it is reported as stopped',
    )
    ap.add_argument(
        '--max-nfev',
        type=int,
        default=300_000,
        help=f'per-run budget of right-hand-side calls of {COMPILED} (default 300000); a run that '
        'exceeds it is reported as stopped',
    )
    ap.add_argument(
        '--baumgarte',
        nargs='+',
        choices=['on', 'off'],
        default=['on'],
        help="'on': alpha = 1000, beta = 100 (Tables 10-12, default); 'off': none (Tables 7-9, "
        "where the paper's runs fail or drift: expect stopped runs)",
    )
    args = ap.parse_args(argv)
    results = []
    for rc in args.rcond:
        for baum in sorted({b == 'on' for b in args.baumgarte}):
            for tol in args.tol:
                rcond = tol if rc == 'tol' else float(rc)
                for method in args.methods:
                    r = simulate(
                        method,
                        baumgarte=baum,
                        tol=tol,
                        tf=args.tf,
                        integrator=args.integrator,
                        rcond=rcond,
                        max_wall=args.max_wall,
                        theta0=np.radians(args.theta0),
                        max_nfev=args.max_nfev,
                    )
                    results.append(r)
                    print(
                        f'  {method:<12} baumgarte={baum!s:<5} tol={tol:g} rcond={rcond:g}: t_end {r.t_end:.2f} s, '
                        f'sum Psi^2 {r.residual:.2e}, nfev {r.nfev}, {r.wall:.1f} s  {r.message}',
                        file=sys.stderr,
                        flush=True,
                    )
    load = ' '.join(f'{x:.2f}' for x in os.getloadavg())
    print(
        f'Seed 002 five-bar parallelogram, {args.tf:g} s from rest at theta0 = {args.theta0:g} deg, '
        f'integrator {args.integrator} (rtol = atol = TOL'
        + (f', Newton test {NEWTON_TOL:g}' if args.integrator == COMPILED else '')
        + ')'
    )
    print(
        f'machine: {os.cpu_count()} CPUs, load average {load} at the end; wall = one run after an untimed '
        'warm-up (kernel compile/cache load)'
    )
    print(
        'sum Psi^2: squared constraint residuals at the end; NFUNC: right-hand-side evaluations;'
        ' max dtheta: largest link-angle error vs the 1-DOF reduced model [rad];'
        ' "correct": within 1e-2 rad of it throughout'
    )
    print(format_table(results, args.tf))
    return 0
