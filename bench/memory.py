"""Table ``memory``: the control step's steady state, no new Pinocchio Data, Python allocations per step, RSS."""

from __future__ import annotations

import tracemalloc

from .common import moving_state, table, verdict


def _rss_mb():
    try:
        with open('/proc/self/status') as handle:
            for line in handle:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float('nan')


def run(args):
    import pinocchio as pin

    from uk_controller.control.controller import ControllerCore

    steps = 2000 if args.quick else 20000
    rows = []
    for name in args.robots:
        ctrl = ControllerCore.from_config(name)
        q, qd = moving_state(ctrl.setup)
        data_id = id(ctrl.model.data)
        created = [0]
        original = pin.Model.createData

        def counting(self):
            created[0] += 1
            return original(self)

        pin.Model.createData = counting
        try:
            for k in range(200):
                ctrl.step(q, qd, 1e-3 * k)
            rss0 = _rss_mb()
            tracemalloc.start()
            snap0 = tracemalloc.take_snapshot()
            peak0 = tracemalloc.get_traced_memory()[0]
            for k in range(steps):
                ctrl.step(q, qd, 1e-3 * k)
            current = tracemalloc.get_traced_memory()[0]
            snap1 = tracemalloc.take_snapshot()
            tracemalloc.stop()
            rss1 = _rss_mb()
        finally:
            pin.Model.createData = original
        growth = sum(s.size_diff for s in snap1.compare_to(snap0, 'filename'))
        rows.append(
            (
                name,
                steps,
                created[0],
                verdict(id(ctrl.model.data) == data_id),
                f'{(current - peak0) / steps:.2f}',
                f'{growth / 1024:.1f}',
                f'{rss1:.0f}',
                f'{rss1 - rss0:+.1f}',
            )
        )
    table(
        'Memory: steady state of the control step',
        (
            'robot',
            'steps',
            'new pinocchio Data',
            'same Data object',
            'net bytes/step',
            'traced growth KiB',
            'RSS MB',
            'RSS change MB',
        ),
        rows,
        note='new pinocchio Data = Model.createData calls during the steps (must be 0); the per-step result '
        '(efforts, residuals) is the only allocation and is released by the caller.',
    )
