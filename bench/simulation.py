"""Table ``simulation``: the closed loop on the UK plant (controller 1 kHz, RK4 plant), real-time factor.

Per robot the configured RK4 substeps and 1, against a reference run with 8 substeps (RK4 error
8^4 times smaller): wall time, real-time factor, the controller's share of a period, task error.
"""

from __future__ import annotations

import numpy as np

from .common import table, verdict

RTF_TARGET = {'scara': 20.0, 'five_bar': 10.0}


def run(args):
    from uk_controller.robots import load_robot
    from uk_controller.sim.closed_loop import simulate

    duration = 2.0 if args.quick else 10.0
    names = ('scara', 'five_bar') if args.quick else ('scara', 'five_bar', 'five_bar_redundant', 'dual_arm')
    rows = []
    for name in names:
        setup = load_robot(name)
        configured = setup.settings.simulation.substeps
        # reference: 8 RK4 substeps per period (RK4 error 8^4 times smaller), then the configured count and 1
        reference = simulate(load_robot(name, {'simulation.duration': duration, 'simulation.substeps': 8}))
        for substeps in sorted({configured, 1}, reverse=True):
            res = simulate(load_robot(name, {'simulation.duration': duration, 'simulation.substeps': substeps}))
            summary = res.summary()
            dq = f'{np.max(np.abs(res.q - reference.q)):.1e}'
            target = RTF_TARGET.get(name)
            rtf = summary['real_time_factor']
            rows.append(
                (
                    name,
                    f'{duration:g}',
                    substeps,
                    'yes' if substeps == configured else '',
                    f'{summary["wall_time_s"]:.2f}',
                    f'{rtf:.1f}',
                    f'{summary["step_time_median_us"]:.1f}',
                    f'{summary["task_error_max"]:.1e}',
                    dq,
                    f'{target:g}' if target else '-',
                    verdict(rtf >= target) if target else '-',
                )
            )
    table(
        'Closed loop on the UK plant (controller 1 kHz, RK4 plant), real-time factor',
        (
            'robot',
            'sim s',
            'RK4 substeps',
            'configured',
            'wall s',
            'x real time',
            'step median us',
            'task err max',
            'max |dq| vs 8 substeps',
            'target',
            'met',
        ),
        rows,
        note='substeps = RK4 steps per control period (config simulation.substeps, and 1). The loop runs as '
        'one compiled call per chunk of periods (uk_controller/sim/compiled_loop.py: the controller\'s fused '
        'program and the plant\'s RK4); "step median us" is then the controller\'s share of a period, '
        'read from the CPU cycle counter. simulate(..., compiled=False) runs the Python loop.',
    )
