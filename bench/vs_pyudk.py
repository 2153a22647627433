"""Table ``pyudk``: the UK constraint force against pyudk (PyPI), run in its own virtual environment.

pyudk pins old numpy/scipy, so it runs in another interpreter (``--pyudk-python``, default
``$UK_PYUDK_PYTHON`` or /tmp/pyudk_venv/bin/python) on the helper script ``pyudk_helper.py`` next to
this module, which never imports uk_controller; the same M, Q, A, b go both ways through an .npz file.
The helper runs isolated (``python -I``: this package's directory is not on its sys.path, where a module
named like one of pyudk's imports would shadow it; this module is not called pyudk.py for the same reason).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from uk_controller.core import uk

from .common import rel_diff, sample, table, verdict
from .reference import KernelForce, uk_inputs


def run(args):
    python = args.pyudk_python
    helper = Path(__file__).resolve().parent / 'pyudk_helper.py'
    reason = None
    if not python or not Path(python).exists():
        reason = (
            f'no pyudk virtual environment at {python!r} (create one: python3 -m venv /tmp/pyudk_venv && '
            '/tmp/pyudk_venv/bin/pip install pyudk; or pass --pyudk-python)'
        )
    elif not helper.is_file():
        reason = f'helper script {helper} not found'
    if reason:
        print(f'\n## vs pyudk\nnot available: {reason}')
        return
    count = 300 if args.quick else 3000
    cases = uk_inputs(args.robots)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / 'cases.npz'
        arrays = {}
        for k, (name, M, Q, A, b) in enumerate(cases):
            arrays.update({f'M{k}': M, f'Q{k}': Q, f'A{k}': A, f'b{k}': b})
        np.savez(path, count=len(cases), **arrays)
        proc = subprocess.run(
            [python, '-I', str(helper), str(path), str(count)], capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            print(f'\n## vs pyudk\nnot available: helper failed: {proc.stderr.strip()[-500:]}')
            return
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = []
    for k, (name, M, Q, A, b) in enumerate(cases):
        kern = KernelForce(M, Q, A, b)
        t_ours = np.median(sample(kern, count))
        t_gram = np.median(sample(lambda: uk.constraint_force(M, Q, A, b), count))
        t_p = res['median'][k]
        diff = rel_diff(kern().copy(), np.array(res['force'][k]))
        rows.append(
            (
                name,
                f'{t_p * 1e6:.1f}',
                f'{t_gram * 1e6:.1f}',
                f'{t_ours * 1e6:.1f}',
                f'{t_p / t_ours:.1f}x',
                f'{diff:.1e}',
                verdict(t_p / t_ours >= 10.0 and diff < 1e-8),
            )
        )
    table(
        f'UK constraint force vs pyudk {res["version"]} (numpy {res["numpy"]}, scipy {res["scipy"]}, own venv) '
        '[us, medians]',
        ('robot', 'pyudk', 'uk.constraint_force', 'hot path', 'speed-up', 'rel diff', '>= 10x, same'),
        rows,
        note='pyudk.ideal_Constraint_force(self, m, q, A, b) (its module functions take a dummy self): '
        'fractional_matrix_power twice, inv, numpy pinv. Same M, Q, A, b.',
    )
