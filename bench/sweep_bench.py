"""Sweep throughput: runs/s in one process, on the local pool and on Ray; speed-up; per-run overhead.

    python -m bench.sweep_bench [--runs 24] [--rounds 3] [--duration 5] [--jobs N] [--no-ray]

Runs: SCARA, `--duration` simulated seconds each, stabilization.omega spread over 10..40 rad/s,
through the same functions as `uk-controller sweep` (runner.run_one in the pool's worker
initializer/run pair and in the Ray actor). Start-up (spawning the pool's workers and loading
their kernels; starting Ray actors) is timed once and reported on its own. Then, with the workers
warm, batches of N runs go to each backend in turn -- one process, the pool, Ray with one actor,
Ray with `--jobs` actors -- for `--rounds` rounds, interleaved so that a change of the machine's load
hits every backend alike; the tables give the median over rounds.

- runs/s        N / batch time
- speed-up      runs/s of the backend / runs/s in one process (same round, then median)
- sim s/run     the simulation loop (wall_time_s of the rows); run s/run: the whole run_one in the
                worker (run_time_s: building the robot from the settings, simulating, summarizing)
- overhead/run  batch time x workers / N - run s/run (same round, then median): what moving a run
                to a worker and its row back costs (scheduling, pickling, idle workers at the end
                of a batch); Ray's own cost per run is also given as
                batch(Ray, 1 actor) - batch(1 process), per run, against a run in one process.

Ray runs on a head started here on 127.0.0.1 (include_dashboard=False) and shut down at the end.
Load averages are printed first and last: on a shared machine the figures move with them.
"""

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import os
import statistics
import sys
import time

from uk_controller.files.parameter_file import load_config
from uk_controller.paths import resolve_config
from uk_controller.sweep import grid as G
from uk_controller.sweep import runner as R


def specs(n, duration, offset):
    out = []
    for i in range(n):
        overrides = {'stabilization.omega': 10.0 + 30.0 * ((i + offset) % 97) / 96.0, 'simulation.duration': duration}
        out.append(
            {
                'index': i,
                'overrides': overrides,
                'run_id': G.run_id('scara', 'uk', overrides),
                'seed': G.run_seed('scara', 'uk', overrides),
            }
        )
    return out


def loads():
    return ' '.join(f'{v:.2f}' for v in os.getloadavg())


class Sequential:
    name, workers = '1 process', 1

    def __init__(self, context):
        self.context = context
        R.warm_up(context)

    def batch(self, batch):
        return [R.run_one(self.context, spec) for spec in batch]


class Pool:
    name = 'local pool'

    def __init__(self, context, jobs):
        self.workers = jobs
        os.environ.update({k: '1' for k in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')})
        self.pool = cf.ProcessPoolExecutor(
            jobs, mp_context=mp.get_context('spawn'), initializer=R._pool_init, initargs=(context,)
        )
        list(self.pool.map(_noop, range(jobs)))  # every worker started and warmed up

    def batch(self, batch):
        return list(self.pool.map(R._pool_run, batch))

    def close(self):
        self.pool.shutdown()


def _noop(_):
    time.sleep(0.2)  # long enough that each worker takes one


class Ray:
    def __init__(self, context, jobs):
        import ray

        self.ray, self.workers = ray, jobs
        self.name = f'Ray, {jobs} actor' + ('s' if jobs > 1 else '')
        cls = ray.remote(num_cpus=1)(R._RayWorker)
        self.actors = [cls.remote(context) for _ in range(jobs)]
        ray.get([a.run.remote(s) for a, s in zip(self.actors, specs(jobs, 0.01, 500))])

    def batch(self, batch):
        refs = [self.actors[i % self.workers].run.remote(spec) for i, spec in enumerate(batch)]
        return self.ray.get(refs)

    def close(self):
        for a in self.actors:
            self.ray.kill(a)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=24, help='runs per batch')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--duration', type=float, default=5.0, help='simulated seconds per run')
    parser.add_argument('--jobs', type=int, default=os.cpu_count(), help='local pool workers / Ray actors')
    parser.add_argument('--no-ray', action='store_true')
    args = parser.parse_args(argv)
    print(f'cores {os.cpu_count()}; load averages {loads()} (1, 5, 15 min)')
    params, path = load_config(resolve_config('scara'))
    context = R.make_context('scara', params, path)
    startup = {}
    start = time.perf_counter()
    backends = [Sequential(context)]
    startup['1 process'] = time.perf_counter() - start
    start = time.perf_counter()
    backends.append(Pool(context, args.jobs))
    startup['local pool'] = time.perf_counter() - start
    ray = None
    if not args.no_ray:
        import ray

        start = time.perf_counter()
        # head on 127.0.0.1 only, with CPUs for both actor sets (1 and --jobs actors; they run their
        # batches in turn, never together)
        R.start_ray('local', num_cpus=1 + args.jobs, object_store_memory=100 * 1024 * 1024)
        startup['Ray head'] = time.perf_counter() - start
        for jobs in sorted({1, args.jobs}):
            start = time.perf_counter()
            backends.append(Ray(context, jobs))
            startup[backends[-1].name] = time.perf_counter() - start
    times = {b.name: [] for b in backends}
    rows = {b.name: [] for b in backends}
    try:
        for k in range(args.rounds):
            for b in backends:
                batch = specs(args.runs, args.duration, 100 * k)
                start = time.perf_counter()
                out = b.batch(batch)
                times[b.name].append(time.perf_counter() - start)
                assert all(r['status'] == 'ok' for r in out), [r['reason'] for r in out if r['reason']]
                rows[b.name].append(out)
    finally:
        for b in backends:
            if hasattr(b, 'close'):
                b.close()
        if ray is not None:
            ray.shutdown()
    seq = times['1 process']
    print(
        f'\nSCARA, {args.duration:g} s simulated per run, batches of {args.runs} runs, median of {args.rounds} rounds'
    )
    print('start-up: ' + ', '.join(f'{name} {t:.2f} s' for name, t in startup.items()))
    print(
        f"{'backend':<16}{'workers':>8}{'runs/s':>9}{'speed-up':>10}{'sim s/run':>11}{'run s/run':>11}"
        f"{'overhead/run':>14}"
    )
    for b in backends:
        t = statistics.median(times[b.name])
        speed = statistics.median(s / x for s, x in zip(seq, times[b.name]))
        runs = [statistics.mean(r['run_time_s'] for r in out) for out in rows[b.name]]
        run = statistics.median(runs)
        sim = statistics.median(statistics.mean(r['wall_time_s'] for r in out) for out in rows[b.name])
        over = statistics.median(x * b.workers / args.runs - r for x, r in zip(times[b.name], runs))
        print(
            f"{b.name:<16}{b.workers:>8}{args.runs / t:>9.2f}{speed:>9.2f}x{sim:>11.4f}{run:>11.4f}"
            f"{1e3 * over:>11.1f} ms"
        )
    if 'Ray, 1 actor' in times:
        own = statistics.median((x - s) / args.runs for s, x in zip(seq, times['Ray, 1 actor']))
        per_run = statistics.median(seq) / args.runs
        print(
            f"\nRay's own cost per run (1 actor vs 1 process, same round, median): {1e3 * own:.1f} ms = "
            f"{100 * own / per_run:.1f}% of a {args.duration:g} s SCARA run ({per_run:.3f} s in one process)"
        )
    print(f'load averages at the end {loads()}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
