"""What every benchmark table shares: timing samples, the fixed-width table, verdicts, the machine header.

Every figure of ``uk-controller bench`` is a median (and p99) of per-call wall times taken by
`sample` (``time.perf_counter`` around each call, garbage collector off); `table` prints one table
(``## title``, a header, right-aligned columns, an optional note); `machine_header` and
`calibration` print what is needed to read the figures on another machine (CPU, load, versions,
the cost of the smallest NumPy operations). `moving_state` is the state all tables of a robot use;
`pin_closures` builds Pinocchio's own closure models for the comparisons with Pinocchio.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
import time

import numpy as np

STEP_ROBOTS = ('scara', 'five_bar', 'five_bar_redundant', 'dual_arm')
PYUDK_PYTHON_DEFAULT = os.environ.get('UK_PYUDK_PYTHON', '/tmp/pyudk_venv/bin/python')


def sample(func, count, warmup=50):
    """Per-call wall times [s] of ``func()`` (perf_counter around each call)."""
    for _ in range(warmup):
        func()
    out = np.empty(count)
    clock = time.perf_counter
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for i in range(count):
            start = clock()
            func()
            out[i] = clock() - start
    finally:
        if gc_was:
            gc.enable()
    return out


def med_p99(times):
    return float(np.median(times) * 1e6), float(np.percentile(times, 99) * 1e6)


def rel_diff(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b))))) if b.size else 0.0


def table(title, header, rows, note=None):
    """Print a fixed-width table."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    line = '  '.join(f'{h:>{w}}' for h, w in zip(header, widths))
    print(f'\n## {title}')
    print(line)
    print('-' * len(line))
    for r in rows:
        print('  '.join(f'{str(c):>{w}}' for c, w in zip(r, widths)))
    if note:
        print(note)
    sys.stdout.flush()


def verdict(ok):
    return 'yes' if ok else 'NO'


def machine_header():
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as handle:
            for line in handle:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    import pinocchio
    import scipy

    from uk_controller.kernels import jit as kernels_jit

    try:
        load = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    except OSError:
        load = 'n/a'
    numba_version = 'not installed'
    if kernels_jit.AVAILABLE:
        import numba

        numba_version = numba.__version__
    print('# uk_controller benchmarks')
    print(f'machine: {cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}')
    print(f'load average (1, 5, 15 min): {load}')
    print(
        f'python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, '
        f'pinocchio {pinocchio.__version__}, numba {numba_version}'
    )
    print(f'hot-path backend: {"numba kernel" if kernels_jit.AVAILABLE else "NumPy/LAPACK"} (uk.ServoSolver)')


def calibration():
    """Cost of the smallest Python/NumPy operations here, to scale the tables to another machine."""
    x = np.zeros(4)
    A = np.eye(4)

    def nothing():
        return None

    t_call = np.median(sample(nothing, 20000))
    t_add = np.median(sample(lambda: x + x, 20000))
    t_mv = np.median(sample(lambda: A @ x, 20000))
    print(
        f'calibration (medians): empty Python call {t_call * 1e6:.2f} us, NumPy x + x (4,) {t_add * 1e6:.2f} us, '
        f'A @ x (4x4) {t_mv * 1e6:.2f} us  (rough figures for a recent desktop CPU: 0.05, 0.4, 0.8 us)'
    )


def moving_state(setup, seed=0):
    """A state near the configured start (off the trajectory, moving), same for every method."""
    rng = np.random.default_rng(seed)
    q = setup.q0 + 1e-3 * rng.standard_normal(setup.q0.size)
    qd = setup.qd0 + 0.05 * rng.standard_normal(setup.q0.size)
    return q, qd


def pin_closures(setup):
    """pinocchio RigidConstraintModels (CONTACT_3D, point on point) for every loop_closure term."""
    import pinocchio as pin

    from uk_controller.constraints import LoopClosure

    model = setup.model
    cms = []
    for term in setup.passive.terms:
        if not isinstance(term, LoopClosure) or term.mode != 'position' or term.planar is not None:
            return None
        frames = [model.model.frames[model.frame_id(f)] for f in term.frames]
        cms.append(
            pin.RigidConstraintModel(
                pin.ContactType.CONTACT_3D,
                model.model,
                frames[0].parentJoint,
                frames[0].placement,
                frames[1].parentJoint,
                frames[1].placement,
                pin.ReferenceFrame.LOCAL,
            )
        )
    return cms
