"""Runs INSIDE pyudk's own virtual environment (pyudk pins numpy 1.24 / scipy 1.10): never import
uk_controller here (it is a script beside bench/pyudk.py, run by path in that other
interpreter). Called by ``uk-controller bench`` (table 'pyudk')::

    /tmp/pyudk_venv/bin/python bench/pyudk_helper.py cases.npz COUNT [BUDGET_S]

Reads M{k}, Q{k}, A{k}, b{k}; times ``pyudk.ideal_Constraint_force`` COUNT times per case (fewer, at
least 20, if that would take longer than BUDGET_S seconds, default 3) and prints
one JSON line: versions, per-case median and p99 [s] and the force (for the equality check).
pyudk's module-level functions take a leading ``self`` argument (a packaging slip); None is passed.
"""

import json
import sys
import time
from importlib.metadata import version

import numpy as np


def main():
    import pyudk  # here, not at the top: importing this module (a package walk) needs no pyudk
    import scipy

    path, count = sys.argv[1], int(sys.argv[2])
    budget = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    data = np.load(path)
    medians, p99s, forces = [], [], []
    for k in range(int(data['count'])):
        M, Q, A, b = data[f'M{k}'], data[f'Q{k}'], data[f'A{k}'], data[f'b{k}']
        start = time.perf_counter()
        force = np.real(pyudk.ideal_Constraint_force(None, M, Q, A, b))
        first = time.perf_counter() - start
        for _ in range(5):
            pyudk.ideal_Constraint_force(None, M, Q, A, b)
        n = max(20, min(count, int(budget / max(first, 1e-9))))
        times = np.empty(n)
        for i in range(n):
            start = time.perf_counter()
            pyudk.ideal_Constraint_force(None, M, Q, A, b)
            times[i] = time.perf_counter() - start
        medians.append(float(np.median(times)))
        p99s.append(float(np.percentile(times, 99)))
        forces.append(np.asarray(force, dtype=float).ravel().tolist())
    print(
        json.dumps(
            {
                'version': version('pyudk'),
                'numpy': np.__version__,
                'scipy': scipy.__version__,
                'median': medians,
                'p99': p99s,
                'force': forces,
            }
        )
    )


if __name__ == '__main__':
    main()
