"""Table ``step_ratio`` (issue 13): the control step beside Pinocchio on the same model and state.

In one run on the same model and state, ControllerCore.step (the packed compiled step and
the Python around it) against ``pinocchio.aba`` (SCARA, open tree; target <= 3x) and
``pinocchio.constraintDynamics`` (five-bar closures; target <= 1.5x), with the parts: the packed kernel
call alone, and the previous form (Pinocchio's pass from Python + the 12-argument fused_step).
"""
from __future__ import annotations

import numpy as np

from .common import moving_state, pin_closures, sample, table, verdict

TARGETS = {'scara': ('pin.aba', 3.0), 'five_bar': ('pin.constraintDynamics', 1.5),
           'five_bar_redundant': ('pin.constraintDynamics', 1.5), 'dual_arm': ('pin.aba', 3.0)}


def run(args):
    import pinocchio as pin
    from ..controller import ControllerCore
    count = 2000 if args.quick else 20000
    rows, parts = [], []
    for name in [r for r in args.robots if r in TARGETS]:
        ctrl = ControllerCore.from_config(name)
        model, setup = ctrl.model, ctrl.setup
        pm = model.model
        pdata = pm.createData()
        q, qd = moving_state(setup)
        tau = np.zeros(model.n)
        ref, target = TARGETS[name]
        if ref == 'pin.aba':
            def reference():
                pin.aba(pm, pdata, q, qd, tau)
        else:
            cms = pin_closures(setup)
            if cms is None:
                continue
            cds = [cm.createData() for cm in cms]
            pin.initConstraintDynamics(pm, pdata, cms, cds)
            prox = pin.ProximalSettings(1e-12, 1e-12, 20)

            def reference():
                pin.constraintDynamics(pm, pdata, q, qd, tau, cms, cds, prox)
        clock = [0.0]

        def step():
            clock[0] += 1e-3
            ctrl.step(q, qd, clock[0])
        backend = ctrl.backend
        fz, packed = (backend.program, backend.packed) if backend.name == 'compiled' else (None, None)
        # interleave the samples (ref, step, ref, step) so that a load change hits both alike
        t_ref, t_step = [], []
        for _ in range(4):
            t_ref.append(sample(reference, count // 4))
            t_step.append(sample(step, count // 4))
        t_ref, t_step = np.concatenate(t_ref), np.concatenate(t_step)
        ratio = np.median(t_step) / np.median(t_ref)
        rows.append((name, ref, f'{np.median(t_ref) * 1e6:.2f}', f'{np.median(t_step) * 1e6:.2f}',
                     f'{np.percentile(t_step, 99) * 1e6:.2f}', f'{ratio:.2f}x', f'{target:g}x', verdict(ratio <= target)))
        if packed is not None:
            run = packed.make_runner()
            t_packed = sample(lambda: run(q, qd, 0.5), count // 2)
            old = fz.make_runner()             # Pinocchio's pass + the 12-argument fused_step
            t_old = sample(lambda: old(q, qd, 0.5), count // 2)
            t_cat = sample(lambda: (pin.computeAllTerms(pm, pdata, q, qd), pin.updateFramePlacements(pm, pdata)),
                           count // 2)
            t_kernel = sample(lambda: fz.kernel(fz.M_lower, fz.h, fz.J, fz.trans, fz.rots, q, qd, 0.5, fz.ip,
                                                fz.fp, fz.ws, fz.saturated), count // 2)
            parts.append((name, f'{np.median(t_packed) * 1e6:.2f}',
                          f'{(np.median(t_step) - np.median(t_packed)) * 1e6:.2f}', f'{np.median(t_old) * 1e6:.2f}',
                          f'{np.median(t_cat) * 1e6:.2f}', f'{np.median(t_kernel) * 1e6:.2f}'))
    table('Control step beside Pinocchio on the same model and state (one run, interleaved samples) [us, medians]',
          ('robot', 'Pinocchio', 'Pinocchio us', 'ControllerCore.step', 'step p99', 'ratio', 'target', 'met'), rows,
          note='step: efforts, residuals, rank, condition and a StepResult from (q, qd, t); Pinocchio: forward '
               'dynamics only (aba on the tree; constraintDynamics with CONTACT_3D closures, corrector off).')
    table('Where the step goes [us, medians]',
          ('robot', 'packed kernel call', 'Python around it (step - call)', 'previous: Pinocchio pass + fused_step',
           '  of which computeAllTerms + updateFramePlacements', '  of which fused_step (12 args)'), parts,
          note='packed kernel call: uk_controller.kernels.packed (own RNEA/CRBA + frames + rows + servo solve, 6 args).')
