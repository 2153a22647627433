"""Parameter sweeps: many closed-loop simulations of one robot, one table.

``uk-controller sweep ROBOT --grid KEY=VALUES ...`` (docs/sweep.md) runs every
combination of settings through :func:`uk_controller.sim.closed_loop.simulate`
-- the function ``uk-controller simulate`` calls -- on a local process pool or
a Ray cluster, and writes one table of summary metrics (CSV and Parquet), heat
maps and the best settings under a stated criterion.

- :mod:`.grid`    KEY=VALUES specs, random sampling, key validation, per-run seeds
- :mod:`.runner`  one run, the local pool and the Ray backend, resume
- :mod:`.table`   the table, heat maps and the best settings
- :mod:`.cli`     the ``sweep`` sub-command
"""
