"""Table ``reference``: the fast UK force and servo solve against the square-root reference forms.

UK constraint force: the hot path (uk.ServoSolver with no servo rows) and the Gram form
(uk.constraint_force) against ``Qc = M^1/2 (A M^-1/2)^+ (b - A M^-1 Q)`` (seed 004 / uk.constraint_force_reference,
SVD pseudo-inverse); servo control: uk.ServoSolver (NumPy and compiled) against uk.servo_control
(seed 004 eq 35 with closures). `uk_inputs` and `KernelForce` are shared with the pyudk table.
"""

from __future__ import annotations

import numpy as np

from uk_controller.core import uk

from .common import moving_state, rel_diff, sample, table, verdict


def uk_inputs(names):
    """(name, M, Q, A, b) per robot: all rows (closures and tasks) as UK constraints at a moving state."""
    from uk_controller.robots import load_robot

    out = []
    for name in names:
        setup = load_robot(name)
        model = setup.model
        q, qd = moving_state(setup)
        model.compute(q, qd)
        parts = [setup.passive.evaluate(model, q, qd, 0.5), setup.servo.evaluate(model, q, qd, 0.5)]
        A = np.vstack([p.A for p in parts if p.m])
        b = np.concatenate([setup.stabilization.stabilized_rhs(p) for p in parts if p.m])
        B = setup.actuators.matrix(model)
        u = np.linspace(-1.0, 1.0, B.shape[1])
        out.append((name, model.M.copy(), B @ u - model.h, A.copy(), b.copy()))
    return out


class KernelForce:
    """The hot path's UK force: ServoSolver with no servo rows, ``Qc = M q'' - Q``."""

    def __init__(self, M, Q, A, b):
        n, m = M.shape[0], A.shape[0]
        self.args = (M, Q, A, b)
        self.solver = uk.ServoSolver(n, 0, m, 0)
        self.noB, self.noA, self.none = np.zeros((n, 0)), np.zeros((0, n)), np.zeros(0)

    def __call__(self):
        M, Q, A, b = self.args
        return self.solver.solve(M, Q, self.noB, self.noA, self.none, A, b).passive_force


def run(args):
    count = 500 if args.quick else 5000
    rows = []
    for name, M, Q, A, b in uk_inputs(args.robots):
        ref_f = uk.constraint_force_reference(M, Q, A, b)
        kern = KernelForce(M, Q, A, b)
        t_ref = np.median(sample(lambda: uk.constraint_force_reference(M, Q, A, b), count))
        t_gram = np.median(sample(lambda: uk.constraint_force(M, Q, A, b), count))
        t_kern = np.median(sample(kern, count))
        d_gram = rel_diff(uk.constraint_force(M, Q, A, b), ref_f)
        d_kern = rel_diff(kern().copy(), ref_f)
        rows.append(
            (
                name,
                f'{A.shape[0]}x{A.shape[1]}',
                f'{t_ref * 1e6:.1f}',
                f'{t_gram * 1e6:.1f}',
                f'{t_kern * 1e6:.1f}',
                f'{t_ref / t_kern:.1f}x',
                f'{d_gram:.1e}',
                f'{d_kern:.1e}',
                verdict(t_ref / t_kern >= 5.0 and d_kern < 1e-9),
            )
        )
    table(
        'UK constraint force vs the reference form Qc = M^1/2 (A M^-1/2)^+ (b - A M^-1 Q) [us, medians]',
        (
            'robot',
            'A',
            'reference',
            'Gram (uk.constraint_force)',
            'hot path',
            'speed-up',
            'diff Gram',
            'diff hot',
            '>= 5x, same',
        ),
        rows,
        note='All closures and tasks of the robot as UK rows at one moving state; diff = max relative difference.',
    )
    # servo control: reference (uk.servo_control) vs ServoSolver
    rows = []
    from uk_controller.robots import load_robot

    for name in args.robots:
        setup = load_robot(name)
        model = setup.model
        q, qd = moving_state(setup)
        model.compute(q, qd)
        P, S = setup.passive.evaluate(model, q, qd, 0.5), setup.servo.evaluate(model, q, qd, 0.5)
        B = setup.actuators.matrix(model).copy()
        Qv = -model.h
        bs, bp = setup.stabilization.stabilized_rhs(S), setup.stabilization.stabilized_rhs(P)
        Ap, bpp = (P.A, bp) if P.m else (None, None)
        ref = uk.servo_control(model.M, Qv, B, S.A, bs, A_passive=Ap, b_passive=bpp, on_infeasible='report')
        sol = uk.ServoSolver(model.n, B.shape[1], P.m, S.m)
        t_ref = np.median(
            sample(
                lambda: uk.servo_control(model.M, Qv, B, S.A, bs, A_passive=Ap, b_passive=bpp, on_infeasible='report'),
                count,
            )
        )
        t_fast = np.median(sample(lambda: sol.solve(model.M, Qv, B, S.A, bs, Ap, bpp), count))
        numpy_sol = uk.ServoSolver(model.n, B.shape[1], P.m, S.m, backend='numpy')
        t_np = np.median(sample(lambda: numpy_sol.solve(model.M, Qv, B, S.A, bs, Ap, bpp), count))
        sol.solve(model.M, Qv, B, S.A, bs, Ap, bpp)
        rows.append(
            (
                name,
                f'{t_ref * 1e6:.1f}',
                f'{t_np * 1e6:.1f}',
                f'{t_fast * 1e6:.1f}',
                f'{t_ref / t_fast:.1f}x',
                f'{rel_diff(sol.u, ref.u):.1e}',
                f'{rel_diff(sol.qdd, ref.qdd):.1e}',
            )
        )
    table(
        'Servo control (seed 004 eq 35 with closures): uk.servo_control vs uk.ServoSolver [us, medians]',
        ('robot', 'servo_control', 'ServoSolver numpy', f'ServoSolver {sol.backend}', 'speed-up', 'diff u', 'diff qdd'),
        rows,
    )
