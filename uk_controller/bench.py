"""``uk-controller bench``: the benchmark tables of issue 7, all measured in one run.

    uk-controller bench [--quick] [--tables step reference pyudk pinocchio simulation parallelogram loop memory]

Every figure is a median (and p99) over many calls on this machine; all
comparisons are made in the same run on the same inputs, and each table says
whether the results agree (relative difference). Speed depends on the
machine and on its load: the header prints the CPU, the load average and the
package versions. Nothing here is a test; ``benchmarks/*.py`` print the same
tables one at a time.

Tables
  step           ControllerCore.step per robot (M, C, G, all rows, UK servo efforts, Baumgarte)
  reference      fast UK force / servo solve vs the square-root reference (M^{1/2}, SVD pinv)
  pyudk          vs pyudk (PyPI) run in its own virtual environment (``--pyudk-python``)
  pinocchio      five-bar closures: forward constrained dynamics vs pinocchio.constraintDynamics
  simulation     closed loop on the UK plant, real-time factor
  parallelogram  seed 002 parallelogram, every pseudo-inverse method (benchmarks/parallelogram.py)
  loop           fixed-rate loop without ROS (sleep + spin scheduler): period jitter, missed deadlines
  memory         a control step creates no Pinocchio Data; Python allocations per step; RSS
  step_ratio     ControllerCore.step beside pin.aba / pin.constraintDynamics on the same model (bench_rate.py)
  ros_rate       uk_controller_node over DDS at 250/500/1000 Hz, FIFO or not, quiet or loaded (ros/rate_bench.py)
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from . import settings as S
from . import uk
from .kernels import jit as kernels_jit

TABLES = ('step', 'reference', 'pyudk', 'pinocchio', 'simulation', 'parallelogram', 'loop', 'memory',
          'step_ratio', 'ros_rate')
STEP_ROBOTS = ('scara', 'five_bar', 'five_bar_redundant', 'dual_arm')
#: issue 7 targets
STEP_TARGET_US = {'scara': 25.0, 'five_bar': 40.0, 'five_bar_redundant': 40.0, 'dual_arm': 40.0}
RTF_TARGET = {'scara': 20.0, 'five_bar': 10.0}
PYUDK_PYTHON_DEFAULT = os.environ.get('UK_PYUDK_PYTHON', '/tmp/pyudk_venv/bin/python')


# ----------------------------------------------------------------------------- helpers


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
    try:
        load = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    except OSError:
        load = 'n/a'
    numba_version = 'not installed'
    if kernels_jit.AVAILABLE:
        import numba
        numba_version = numba.__version__
    print('# uk_controller benchmarks (issue 7)')
    print(f'machine: {cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}')
    print(f'load average (1, 5, 15 min): {load}')
    print(f'python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, '
          f'pinocchio {pinocchio.__version__}, numba {numba_version}')
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
    print(f'calibration (medians): empty Python call {t_call * 1e6:.2f} us, NumPy x + x (4,) {t_add * 1e6:.2f} us, '
          f'A @ x (4x4) {t_mv * 1e6:.2f} us  (rough figures for a recent desktop CPU: 0.05, 0.4, 0.8 us)')


def _state(setup, seed=0):
    """A state near the configured start (off the trajectory, moving), same for every method."""
    rng = np.random.default_rng(seed)
    q = setup.q0 + 1e-3 * rng.standard_normal(setup.q0.size)
    qd = setup.qd0 + 0.05 * rng.standard_normal(setup.q0.size)
    return q, qd


# ----------------------------------------------------------------------------- control step


def bench_step(args):
    from .controller import ControllerCore
    count = 2000 if args.quick else 20000
    rows, parts = [], []
    for name in args.robots:
        ctrl = ControllerCore.from_config(name)
        setup, model = ctrl.setup, ctrl.model
        q, qd = _state(setup)
        clock = [0.0]

        def step():
            clock[0] += 1e-3
            ctrl.step(q, qd, clock[0])

        fast = sample(step, count)
        general = ControllerCore.from_config(name, backend='general')
        slow = sample(lambda: general.step(q, qd, 0.5), max(200, count // 10))
        same = rel_diff(ctrl.step(q, qd, 0.5).effort, general.step(q, qd, 0.5).effort)
        m, p99 = med_p99(fast)
        target = STEP_TARGET_US.get(name)
        rows.append((name, f'{model.n}/{setup.passive.m}/{setup.servo.m}/{ctrl.p}', f'{m:.1f}', f'{p99:.1f}',
                     f'{np.median(slow) * 1e6:.1f}', f'{np.median(slow) / np.median(fast):.1f}x', f'{same:.1e}',
                     f'{target:g}' if target else '-', verdict(m <= target) if target else '-'))
        # where the time goes
        fz = ctrl.backend.program if ctrl.backend.name == 'compiled' else None
        if fz is not None:
            import pinocchio as pin
            pm, data = model.model, model.data
            t_compute = np.median(sample(lambda: (pin.computeAllTerms(pm, data, q, qd),
                                                  pin.updateFramePlacements(pm, data)), count // 2))
            t_kernel = np.median(sample(lambda: fz.kernel(fz.M_lower, fz.h, fz.J, fz.trans, fz.rots, q, qd, 0.5, fz.ip,
                                                          fz.fp, fz.ws, fz.saturated), count // 2))
            rest = np.median(fast) - t_compute - t_kernel
            parts.append((name, 'fused', f'{t_compute * 1e6:.1f}', f'{t_kernel * 1e6:.1f}', '-', f'{rest * 1e6:.1f}'))
            continue
        t_compute = np.median(sample(lambda: model.compute(q, qd), count // 2))
        t_rows = np.median(sample(lambda: (model.compute(q, qd), setup.passive.evaluate(model, q, qd, 0.5),
                                           setup.servo.evaluate(model, q, qd, 0.5)), count // 2)) - t_compute
        model.compute(q, qd)
        P, S = setup.passive.evaluate(model, q, qd, 0.5), setup.servo.evaluate(model, q, qd, 0.5)
        ref = ctrl.backend                  # ReferenceBackend: ConstraintStack rows + uk.ServoSolver
        B = ref.B if ref.B is not None else setup.actuators.matrix(model).copy()
        sol, zero_n = ref.solver, np.zeros(model.n)
        t_solve = np.median(sample(lambda: sol.solve_rows(model.M_lower, zero_n, model.h, B, S.A, S.b, S.phi,
                                                          S.phidot, P.A, P.b, P.phi, P.phidot, ref.gains,
                                                          ctrl.effort_limits), count // 2))
        rest = np.median(fast) - t_compute - t_rows - t_solve
        parts.append((name, 'rows + ServoSolver', f'{t_compute * 1e6:.1f}', f'{t_rows * 1e6:.1f}',
                      f'{t_solve * 1e6:.1f}', f'{rest * 1e6:.1f}'))
    table('Control step: ControllerCore.step (M, C, G, rows, UK servo efforts, Baumgarte) [us]',
          ('robot', 'n/mp/ms/p', 'median', 'p99', 'general path', 'speed-up', 'rel diff', 'target', 'met'), rows,
          note='general path: the same step through uk.servo_control (MassFactor, eigh, SVD pinv).')
    table('Control step breakdown (medians) [us]',
          ('robot', 'path', 'Pinocchio pass', 'rows (fused: rows + solve kernel)', 'servo solve',
           'step overhead + result'), parts,
          note='fused: one compiled call (constraints.CompiledRows) for frame kinematics, trajectories, rows, '
               'Baumgarte and the servo solve.')


# ----------------------------------------------------------------------------- inputs shared by comparisons


def uk_inputs(names):
    """(name, M, Q, A, b) per robot: all rows (closures and tasks) as UK constraints at a moving state."""
    from .robots import load_robot
    out = []
    for name in names:
        setup = load_robot(name)
        model = setup.model
        q, qd = _state(setup)
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


def bench_reference(args):
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
        rows.append((name, f'{A.shape[0]}x{A.shape[1]}', f'{t_ref * 1e6:.1f}', f'{t_gram * 1e6:.1f}',
                     f'{t_kern * 1e6:.1f}', f'{t_ref / t_kern:.1f}x', f'{d_gram:.1e}', f'{d_kern:.1e}',
                     verdict(t_ref / t_kern >= 5.0 and d_kern < 1e-9)))
    table('UK constraint force vs the reference form Qc = M^1/2 (A M^-1/2)^+ (b - A M^-1 Q) [us, medians]',
          ('robot', 'A', 'reference', 'Gram (uk.constraint_force)', 'hot path', 'speed-up', 'diff Gram',
           'diff hot', '>= 5x, same'), rows,
          note='All closures and tasks of the robot as UK rows at one moving state; diff = max relative difference.')
    # servo control: reference (uk.servo_control) vs ServoSolver
    rows = []
    from .robots import load_robot
    for name in args.robots:
        setup = load_robot(name)
        model = setup.model
        q, qd = _state(setup)
        model.compute(q, qd)
        P, S = setup.passive.evaluate(model, q, qd, 0.5), setup.servo.evaluate(model, q, qd, 0.5)
        B = setup.actuators.matrix(model).copy()
        Qv = -model.h
        bs, bp = setup.stabilization.stabilized_rhs(S), setup.stabilization.stabilized_rhs(P)
        Ap, bpp = (P.A, bp) if P.m else (None, None)
        ref = uk.servo_control(model.M, Qv, B, S.A, bs, A_passive=Ap, b_passive=bpp, on_infeasible='report')
        sol = uk.ServoSolver(model.n, B.shape[1], P.m, S.m)
        t_ref = np.median(sample(lambda: uk.servo_control(model.M, Qv, B, S.A, bs, A_passive=Ap, b_passive=bpp,
                                                          on_infeasible='report'), count))
        t_fast = np.median(sample(lambda: sol.solve(model.M, Qv, B, S.A, bs, Ap, bpp), count))
        numpy_sol = uk.ServoSolver(model.n, B.shape[1], P.m, S.m, backend='numpy')
        t_np = np.median(sample(lambda: numpy_sol.solve(model.M, Qv, B, S.A, bs, Ap, bpp), count))
        sol.solve(model.M, Qv, B, S.A, bs, Ap, bpp)
        rows.append((name, f'{t_ref * 1e6:.1f}', f'{t_np * 1e6:.1f}', f'{t_fast * 1e6:.1f}', f'{t_ref / t_fast:.1f}x',
                     f'{rel_diff(sol.u, ref.u):.1e}', f'{rel_diff(sol.qdd, ref.qdd):.1e}'))
    table('Servo control (seed 004 eq 35 with closures): uk.servo_control vs uk.ServoSolver [us, medians]',
          ('robot', 'servo_control', 'ServoSolver numpy', f'ServoSolver {sol.backend}', 'speed-up', 'diff u',
           'diff qdd'), rows)


# ----------------------------------------------------------------------------- pyudk


def bench_pyudk(args):
    python = args.pyudk_python
    helper = Path(__file__).resolve().parent.parent / 'benchmarks' / 'pyudk_helper.py'
    reason = None
    if not python or not Path(python).exists():
        reason = (f'no pyudk virtual environment at {python!r} (create one: python3 -m venv /tmp/pyudk_venv && '
                  '/tmp/pyudk_venv/bin/pip install pyudk; or pass --pyudk-python)')
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
        proc = subprocess.run([python, str(helper), str(path), str(count)], capture_output=True, text=True,
                              timeout=600)
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
        rows.append((name, f'{t_p * 1e6:.1f}', f'{t_gram * 1e6:.1f}', f'{t_ours * 1e6:.1f}', f'{t_p / t_ours:.1f}x',
                     f'{diff:.1e}', verdict(t_p / t_ours >= 10.0 and diff < 1e-8)))
    table(f'UK constraint force vs pyudk {res["version"]} (numpy {res["numpy"]}, scipy {res["scipy"]}, own venv) '
          '[us, medians]',
          ('robot', 'pyudk', 'uk.constraint_force', 'hot path', 'speed-up', 'rel diff', '>= 10x, same'), rows,
          note='pyudk.ideal_Constraint_force(self, m, q, A, b) (its module functions take a dummy self): '
               'fractional_matrix_power twice, inv, numpy pinv. Same M, Q, A, b.')


# ----------------------------------------------------------------------------- pinocchio constraintDynamics


def _pin_closures(setup):
    """pinocchio RigidConstraintModels (CONTACT_3D, point on point) for every loop_closure term."""
    import pinocchio as pin
    from .constraints import LoopClosure
    model = setup.model
    cms = []
    for term in setup.passive.terms:
        if not isinstance(term, LoopClosure) or term.mode != 'position' or term.planar is not None:
            return None
        frames = [model.model.frames[model.frame_id(f)] for f in term.frames]
        cms.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, model.model, frames[0].parentJoint,
                                            frames[0].placement, frames[1].parentJoint, frames[1].placement,
                                            pin.ReferenceFrame.LOCAL))
    return cms


def bench_pinocchio(args):
    import pinocchio as pin
    from .robots import load_robot
    count = 1000 if args.quick else 10000
    rows = []
    for name in ('five_bar', 'five_bar_redundant'):
        setup = load_robot(name)
        model = setup.model
        cms = _pin_closures(setup)
        if cms is None or not model.native_coordinates:
            continue
        pmodel = model.model
        pdata = pmodel.createData()
        cds = [cm.createData() for cm in cms]
        pin.initConstraintDynamics(pmodel, pdata, cms, cds)
        prox = pin.ProximalSettings(1e-12, 1e-12, 20)
        q, qd = _state(setup)
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
            return solver.solve_rows(model.M_lower, tau, model.h, noB, noA, none, none, none, rows.A, rows.b, rows.phi,
                                     rows.phidot, gains).qdd

        qdd_ours = ours().copy()
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
        rows.append((name, f'{closures.m} rows', f'{np.median(t_pin) * 1e6:.1f}', f'{np.median(t_ours) * 1e6:.1f}',
                     f'{np.median(t_fused) * 1e6:.1f}' if fz is not None else '-', f'{ratio:.2f}',
                     f'{max(rel_diff(qdd_ours, qdd_pin), rel_diff(qdd_fused, qdd_pin) if fz is not None else 0):.1e}',
                     f'{np.median(t_aba) * 1e6:.1f}', verdict(ratio <= 5.0)))
    table('Forward dynamics of the five-bar closures: ours vs pinocchio.constraintDynamics (C++) [us, medians]',
          ('robot', 'closures', 'constraintDynamics', 'ours (compute+rows+UK)', 'ours fused', 'ratio (best)',
           'rel diff qdd', 'pin.aba (open tree)', 'within 5x'), rows,
          note='Pinocchio: CONTACT_3D point-on-point per closure (the z row is redundant for the planar chain, '
               'handled by its proximal solver, mu = 1e-12), corrector off; ours: same closure rows without '
               'Baumgarte. Both from (q, qd, tau), Python call overhead included.')


# ----------------------------------------------------------------------------- closed-loop simulation


def bench_simulation(args):
    from .robots import load_robot
    from .sim.closed_loop import simulate
    duration = 2.0 if args.quick else 10.0
    names = ('scara', 'five_bar') if args.quick else ('scara', 'five_bar', 'five_bar_redundant', 'dual_arm')
    rows = []
    for name in names:
        setup = load_robot(name)
        sim_cfg = dict(setup.config.get('simulation', {}) or {})
        configured = int(sim_cfg.get('substeps', 4))
        # reference: 8 RK4 substeps per period (RK4 error 8^4 times smaller), then the configured count and 1
        reference = simulate(load_robot(name), duration=duration, substeps=8)
        for substeps in sorted({configured, 1}, reverse=True):
            res = simulate(load_robot(name), duration=duration, substeps=substeps)
            summary = res.summary()
            dq = f'{np.max(np.abs(res.q - reference.q)):.1e}'
            target = RTF_TARGET.get(name)
            rtf = summary['real_time_factor']
            rows.append((name, f'{duration:g}', substeps, 'yes' if substeps == configured else '',
                         f'{summary["wall_time_s"]:.2f}', f'{rtf:.1f}', f'{summary["step_time_median_us"]:.1f}',
                         f'{summary["task_error_max"]:.1e}', dq, f'{target:g}' if target else '-',
                         verdict(rtf >= target) if target else '-'))
    table('Closed loop on the UK plant (controller 1 kHz, RK4 plant), real-time factor',
          ('robot', 'sim s', 'RK4 substeps', 'configured', 'wall s', 'x real time', 'step median us', 'task err max',
           'max |dq| vs 8 substeps', 'target', 'met'), rows,
          note='substeps = RK4 steps per control period (config simulation.substeps, and 1). The loop runs as '
               'one compiled call per chunk of periods (uk_controller/sim/compiled_loop.py: the controller\'s fused '
               'program and the plant\'s RK4); "step median us" is then the controller\'s share of a period, '
               'read from the CPU cycle counter. simulate(..., compiled=False) runs the Python loop.')


# ----------------------------------------------------------------------------- seed 002 parallelogram


def bench_parallelogram(args):
    path = Path(__file__).resolve().parent.parent / 'benchmarks' / 'parallelogram.py'
    if not path.is_file():
        print('\n## Seed 002 parallelogram\nnot available: benchmarks/parallelogram.py not found')
        return
    import importlib.util
    spec = importlib.util.spec_from_file_location('parallelogram_benchmark', path)   # one name: one numba cache
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod              # dataclasses look their module up while the file executes
    spec.loader.exec_module(mod)
    tf = 5.0 if args.quick else 20.0
    rows = []
    for baum in (True, False):
        for method in mod.METHODS:
            r = mod.simulate(method, baumgarte=baum, tol=args.para_tol, tf=tf, rcond=args.para_rcond,
                             max_wall=min(args.para_max_wall, 3.0) if args.quick else args.para_max_wall,
                             max_nfev=args.para_max_nfev)
            ok = r.completed and r.residual <= 1e-10 and r.wall <= 1.0
            rows.append((method, 'alpha=1000, beta=100' if baum else 'none', f'{r.t_end:.2f}',
                         verdict(r.completed), f'{r.residual:.1e}', r.nfev, f'{r.wall:.2f}',
                         f'{r.angle_error:.1e}', verdict(ok) if baum else '-'))
    rcond = args.para_tol if args.para_rcond is None else args.para_rcond
    table(f'Seed 002 parallelogram, {tf:g} s, TOL = {args.para_tol:g}, rcond = {rcond:g} '
          '(benchmarks/parallelogram.py; compiled Gear/BDF, the stiff option of the paper\'s DIVPAG)',
          ('method', 'Baumgarte', 't end', 'completed', 'sum Psi^2', 'NFUNC', 'wall s', 'max dtheta',
           'done, <=1e-10, <=1 s'), rows,
          note=f'the target applies to the stabilized runs (the paper\'s Table 10 setting); without Baumgarte '
               f'a run stops at --para-max-nfev {args.para_max_nfev} right-hand-side calls (the paper\'s '
               f'unstabilized runs also mostly fail, Tables 7-9)')


# ----------------------------------------------------------------------------- fixed-rate loop


class FixedRateLoop:
    """A perf_counter scheduler: sleep until shortly before the deadline, then spin.

    ``run(work, rate, seconds)`` calls ``work(k, t)`` once per period at
    absolute deadlines ``t0 + k / rate`` (no drift) and records the start
    times. A period whose work ends after the next deadline is a missed
    deadline; the schedule then skips to the next future deadline.
    ``priority`` > 0 asks for SCHED_FIFO at that priority for the run (Linux;
    needs CAP_SYS_NICE) as a real-time control loop would; the old policy is
    restored afterwards.
    """

    def __init__(self, spin=300e-6, priority=0):
        self.spin = float(spin)
        self.priority = int(priority)
        self.policy = 'SCHED_OTHER'

    def _realtime(self):
        """Switch to the requested policy; return the old (policy, param) to restore, or None."""
        if not hasattr(os, 'sched_setscheduler'):
            return None
        try:
            old = (os.sched_getscheduler(0), os.sched_getparam(0))
            if self.priority > 0:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
                self.policy = f'SCHED_FIFO {self.priority}'
            else:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            return old
        except (OSError, PermissionError) as exc:
            if self.priority > 0:
                self.policy = f'SCHED_OTHER (SCHED_FIFO refused: {exc.strerror or exc})'
            return None

    def run(self, work, rate, seconds):
        period = 1.0 / rate
        count = int(round(seconds * rate))
        starts = np.zeros(count)
        ends = np.zeros(count)
        deadlines = np.zeros(count)
        clock = time.perf_counter
        sleep = time.sleep
        missed = 0
        k = 0
        old = self._realtime()
        gc_was = gc.isenabled()
        gc.disable()                 # a real-time loop collects outside its periods
        t0 = clock() + 0.01
        deadline = t0
        try:
            while k < count:
                remaining = deadline - clock()
                if remaining > self.spin:
                    sleep(remaining - self.spin)
                while clock() < deadline:
                    pass
                start = clock()
                work(k, start - t0)
                end = clock()
                starts[k], ends[k], deadlines[k] = start, end, deadline
                k += 1
                deadline += period
                if end > deadline:   # overran into the next period: skip the lost deadlines
                    late = math.floor((end - deadline) / period) + 1
                    missed += late
                    deadline += late * period
        finally:
            if gc_was:
                gc.enable()
            if old is not None:
                os.sched_setscheduler(0, old[0], old[1])
        return starts, ends, deadlines, missed


def bench_loop(args):
    from .controller import ControllerCore
    seconds = 2.0 if args.quick else args.loop_seconds
    rate = 1000.0
    rows = []
    priorities = [0] + ([args.rt_priority] if args.rt_priority > 0 else [])
    for priority in priorities:
        for name in ('scara', 'five_bar'):
            ctrl = ControllerCore.from_config(name)
            q, qd = _state(ctrl.setup)

            def work(k, t):
                ctrl.step(q, qd, t)

            loop = FixedRateLoop(priority=priority)
            starts, ends, deadlines, missed = loop.run(work, rate, seconds)
            periods = np.diff(starts)
            jitter = np.abs(periods - 1.0 / rate)
            lateness = starts - deadlines
            busy = ends - starts
            total = starts.size + missed
            rows.append((name, loop.policy, f'{rate:g}', f'{seconds:g}', starts.size,
                         f'{np.median(jitter) * 1e6:.1f}', f'{np.percentile(jitter, 99) * 1e6:.1f}',
                         f'{jitter.max() * 1e6:.0f}', f'{np.percentile(lateness, 99) * 1e6:.1f}',
                         f'{np.median(busy) * 1e6:.1f}', missed, f'{100.0 * missed / total:.3f}',
                         verdict(np.percentile(jitter, 99) <= 200e-6 and missed <= 0.001 * total)))
    table('Fixed-rate loop without ROS (perf_counter deadlines, sleep + 300 us spin, one control step per period)',
          ('robot', 'policy', 'Hz', 's', 'periods', 'jitter median us', 'jitter p99 us', 'jitter max us',
           'lateness p99 us', 'step median us', 'missed', 'missed %', 'p99<=200us, <=0.1%'), rows,
          note='jitter = |start-to-start period - 1 ms|; lateness = start - its deadline; missed = deadlines '
               'that passed while a step was still running.')


# ----------------------------------------------------------------------------- memory


def _rss_mb():
    try:
        with open('/proc/self/status') as handle:
            for line in handle:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float('nan')


def bench_memory(args):
    import pinocchio as pin
    from .controller import ControllerCore
    steps = 2000 if args.quick else 20000
    rows = []
    for name in args.robots:
        ctrl = ControllerCore.from_config(name)
        q, qd = _state(ctrl.setup)
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
        rows.append((name, steps, created[0], verdict(id(ctrl.model.data) == data_id),
                     f'{(current - peak0) / steps:.2f}', f'{growth / 1024:.1f}', f'{rss1:.0f}', f'{rss1 - rss0:+.1f}'))
    table('Memory: steady state of the control step',
          ('robot', 'steps', 'new pinocchio Data', 'same Data object', 'net bytes/step', 'traced growth KiB',
           'RSS MB', 'RSS change MB'), rows,
          note='new pinocchio Data = Model.createData calls during the steps (must be 0); the per-step result '
               '(efforts, residuals) is the only allocation and is released by the caller.')


# ----------------------------------------------------------------------------- CLI


RUNNERS = {'step': bench_step, 'reference': bench_reference, 'pyudk': bench_pyudk, 'pinocchio': bench_pinocchio,
           'simulation': bench_simulation, 'parallelogram': bench_parallelogram, 'loop': bench_loop,
           'memory': bench_memory,
           'step_ratio': lambda args: __import__('uk_controller.bench_rate', fromlist=['x']).bench_step_ratio(args),
           'ros_rate': lambda args: __import__('uk_controller.bench_rate', fromlist=['x']).bench_ros_rate(args)}


def add_bench_arguments(parser):
    parser.add_argument('--quick', action='store_true', help='fewer samples and shorter runs (about a minute)')
    parser.add_argument('--tables', nargs='+', choices=TABLES, default=list(TABLES), metavar='TABLE',
                        help=f'which tables (default all): {" ".join(TABLES)}')
    parser.add_argument('--robots', nargs='+', type=_robot_arg, default=list(STEP_ROBOTS),
                        help='robot setups for the step tables')
    parser.add_argument('--pyudk-python', default=PYUDK_PYTHON_DEFAULT,
                        help='python of a virtualenv with pyudk installed (default: $UK_PYUDK_PYTHON or '
                             '/tmp/pyudk_venv/bin/python)')
    parser.add_argument('--loop-seconds', type=S.arg_type('simulation.duration', '--loop-seconds'), default=10.0, help='fixed-rate loop duration [s]')
    parser.add_argument('--rt-priority', type=int, default=50,
                        help='run under SCHED_FIFO at this priority when permitted (0: default policy); the '
                             'loop table runs under both')
    parser.add_argument('--para-tol', type=float, default=1e-10,
                        help='parallelogram integrator tolerance (default: the paper\'s Table 10)')
    parser.add_argument('--para-rcond', type=float, default=None,
                        help='parallelogram pseudo-inverse rank threshold (default: = TOL, as in the paper)')
    parser.add_argument('--para-max-nfev', type=int, default=300_000,
                        help='parallelogram: right-hand-side evaluations before a run is called failed')
    parser.add_argument('--para-max-wall', type=float, default=10.0, help='parallelogram wall budget per run [s]')
    return parser


def _set_policy(priority):
    """Run the benchmark under SCHED_FIFO (no preemption by ordinary processes) when allowed."""
    if priority <= 0 or not hasattr(os, 'sched_setscheduler'):
        return 'SCHED_OTHER (default)'
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return f'SCHED_FIFO {priority} (other processes on this machine cannot preempt the measurements)'
    except (OSError, PermissionError) as exc:
        return f'SCHED_OTHER (SCHED_FIFO refused: {exc.strerror or exc})'


def _robot_arg(text):
    """argparse type of --robots: a shipped setup name or a setup file (message lists the shipped ones)."""
    from .config import ConfigError
    from .paths import resolve_config
    try:
        resolve_config(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
    return text


def run_bench(args):
    policy = _set_policy(args.rt_priority)
    machine_header()
    print(f'scheduling: {policy}')
    calibration()
    for name in args.tables:
        RUNNERS[name](args)
    print()
    return 0


def main(argv=None, tables=None):
    """Entry for ``benchmarks/*.py``: the same tables, optionally a fixed subset."""
    parser = add_bench_arguments(argparse.ArgumentParser(description=__doc__.split('\n\n')[0]))
    if tables is not None:
        parser.set_defaults(tables=list(tables))
    return run_bench(parser.parse_args(argv))


if __name__ == '__main__':
    sys.exit(main())
