"""Table ``pinocchio``: forward dynamics of closed chains, ours against pinocchio.constraintDynamics (C++): the
five-bars and, with the example-robot-data wheel, Cassie hung by its pelvis (config/examples/cassie_hung.yaml:
four ball-joint closures, 12 rows of rank 10).

Pinocchio: CONTACT_3D point-on-point per closure (`common.pin_closures`), proximal solver, corrector
off; ours: one model pass, the closure rows without Baumgarte and the UK solve (uk.ServoSolver), and the
same through the fused compiled rows (constraints.CompiledRows); pin.aba on the open tree for scale.
"""

from __future__ import annotations

import numpy as np

from uk_controller.core import uk

from .common import moving_state, pin_closures, rel_diff, sample, table, verdict


def closed_moving_state(setup, seed=0):
    """The configured start (closed) moving with velocities the closures allow (moving_state's velocities
    projected on the null space of A_p): with dependent closure rows (Cassie's planar foot four-bars) the
    rows are then consistent and both solvers have the same unique q''."""
    _, qd = moving_state(setup, seed)
    q, model = setup.q0.copy(), setup.model
    model.compute(q, np.zeros_like(q))
    A = setup.passive.evaluate(model, q, np.zeros_like(q), 0.0).A
    _, sv, vt = np.linalg.svd(A)
    rank = int(np.sum(sv > 1e-9 * sv[0]))
    null = vt[rank:]
    return q, null.T @ (null @ qd)


def run(args):
    import pinocchio as pin

    from uk_controller.robots import load_robot

    count = 1000 if args.quick else 10000
    rows = []
    from uk_controller.paths import share_dir
    from uk_controller.robots.example_robot_data import robots_dir

    names = ['five_bar', 'five_bar_redundant']
    if robots_dir() is not None:
        names.append(str(share_dir() / 'config' / 'examples' / 'cassie_hung.yaml'))
    for name in names:
        setup = load_robot(name)
        model = setup.model
        cms = pin_closures(setup)
        if cms is None or not model.native_coordinates:
            continue
        pmodel = model.model
        pdata = pmodel.createData()
        cds = [cm.createData() for cm in cms]
        pin.initConstraintDynamics(pmodel, pdata, cms, cds)
        prox = pin.ProximalSettings(1e-12, 1e-12, 20)
        q, qd = closed_moving_state(setup)
        tau = np.linspace(-0.5, 0.5, model.n)
        qdd_pin = np.array(pin.constraintDynamics(pmodel, pdata, q, qd, tau, cms, cds, prox))
        # ours: one model pass, the closure rows (no Baumgarte, as Pinocchio's corrector is off), the kernel
        closures = setup.passive
        solver = uk.ServoSolver(model.n, 0, closures.m, 0)
        gains = np.zeros((2, closures.m))
        noB, noA, none = np.zeros((model.n, 0)), np.zeros((0, model.n)), np.zeros(0)

        def ours():
            model.compute(q, qd)
            rows = closures.evaluate(model, q, qd, 0.0)
            return solver.solve_rows(
                model.M_lower, tau, model.h, noB, noA, none, none, none, rows.A, rows.b, rows.phi, rows.phidot, gains
            ).qdd

        qdd_ours = ours().copy()
        # the KKT system [M A^T; A 0] by least squares: what both should give
        model.compute(q, qd)
        rows_now = closures.evaluate(model, q, qd, 0.0)
        kkt = np.block([[model.M, rows_now.A.T], [rows_now.A, np.zeros((closures.m, closures.m))]])
        qdd_kkt = np.linalg.lstsq(kkt, np.concatenate([tau - model.h, rows_now.b]), rcond=1e-14)[0][: model.n]
        # the same equations through the fused compiled rows (one Pinocchio pass + one kernel call)
        fz = closures.create_data(model, gains=gains)
        if fz is not None:
            fz.tau[:] = tau
            run = fz.make_runner()

            def fused():
                run(q, qd, 0.0)
                return fz.qdd

            qdd_fused = fused().copy()
            t_fused = sample(fused, count)
        t_pin = sample(lambda: pin.constraintDynamics(pmodel, pdata, q, qd, tau, cms, cds, prox), count)
        t_ours = sample(ours, count)
        t_aba = sample(lambda: pin.aba(pmodel, pdata, q, qd, tau), count)
        best = min(np.median(t_ours), np.median(t_fused)) if fz is not None else np.median(t_ours)
        ratio = best / np.median(t_pin)
        rows.append(
            (
                setup.name,
                f'{closures.m} rows',
                f'{np.median(t_pin) * 1e6:.1f}',
                f'{np.median(t_ours) * 1e6:.1f}',
                f'{np.median(t_fused) * 1e6:.1f}' if fz is not None else '-',
                f'{ratio:.2f}',
                f'{max(rel_diff(qdd_ours, qdd_kkt), rel_diff(qdd_fused, qdd_kkt) if fz is not None else 0):.1e}',
                f'{rel_diff(qdd_pin, qdd_kkt):.1e}',
                f'{np.median(t_aba) * 1e6:.1f}',
                verdict(ratio <= 5.0),
            )
        )
    table(
        'Forward dynamics of closed chains: ours vs pinocchio.constraintDynamics (C++) [us, medians]',
        (
            'robot',
            'closures',
            'constraintDynamics',
            'ours (compute+rows+UK)',
            'ours fused',
            'ratio (best)',
            'ours vs KKT',
            'pin vs KKT',
            'pin.aba (open tree)',
            'within 5x',
        ),
        rows,
        note='Pinocchio: CONTACT_3D point-on-point per closure (the z row is redundant for the planar chain, '
        'handled by its proximal solver, mu = 1e-12), corrector off; ours: same closure rows without '
        'Baumgarte. Both from (q, qd, tau), Python call overhead included; the start with velocities the '
        'closures allow. KKT: [M A^T; A 0] solved by least squares. Cassie\'s right foot four-bar is '
        'planar to 1e-8 only, so one closure direction has a singular value of 1e-8 and q\'\' is '
        'ill-conditioned there (the example drops it: control.rcond 1e-6).',
    )
