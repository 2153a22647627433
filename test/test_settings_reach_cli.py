"""Every key of the schema, set in a setup file, reaches what ``uk-controller`` runs with it.

The keys are batched into a few setup files (test/reach_entry.py); each file runs through
``uk_controller.cli.main`` in this process: ``simulate FILE --mcap`` and, for a file that sets
``hardware.*``, ``run FILE``. The command is stopped once it has built what it runs (the ControllerCore
and the plant of ``simulate`` and its MCAP recorder; the controller, the hardware calibration and the
bus of ``run``, the port never opened), and each key is read back off those objects
(reach_entry.check_batch; the recorder's topics, effort order, message type and timing window are the
keys of the ros section that simulate runs, reach_entry.MCAP_READS). The keys that do not matter to the
CLI are listed with the reason in ``reach_entry.NOT_APPLICABLE``.
"""

from __future__ import annotations

import fnmatch

import pytest
import reach_entry as R
from test_settings_reach import PROBES, schema_keys


class Captured(Exception):
    """Raised by the spies once the command has built what it runs: the rest of the run is not needed."""


def run_cli(argv, monkeypatch):
    """``uk_controller.cli.main(argv)`` stopped once it has built its objects; a View of them."""
    from uk_controller import cli
    from uk_controller.control import controller
    from uk_controller.hardware import registry
    from uk_controller.sim import closed_loop, mcap_log

    got = {}
    core_class, plant_of, bus_of = closed_loop.ControllerCore, closed_loop.make_plant, registry.make_bus
    log_class = mcap_log.McapLog

    def log(*args, **kwargs):
        got['mcap'] = log_class(*args, **kwargs)
        return got['mcap']

    def core(setup, *args, **kwargs):
        got['ctrl'] = core_class(setup, *args, **kwargs)
        got['setup'] = setup
        return got['ctrl']

    def plant(setup):
        got['plant'] = plant_of(setup)
        raise Captured

    def bus(hw):
        got['hw'], got['bus'] = hw, bus_of(hw)
        raise Captured

    with monkeypatch.context() as patch:
        patch.setattr(closed_loop, 'ControllerCore', core)
        patch.setattr(closed_loop, 'make_plant', plant)
        patch.setattr(controller, 'ControllerCore', core)
        patch.setattr(registry, 'make_bus', bus)
        patch.setattr(mcap_log, 'McapLog', log)
        # a probe that changes a closure (its frames, axes) opens the shipped start pose, which simulate
        # refuses before it builds anything; the check reads the same setup and is not what is tested here
        patch.setattr(cli, '_closure_at_start', lambda setup: None)
        with pytest.raises(Captured):
            cli.main(argv)
    if 'mcap' in got:
        got['mcap'].abandon()  # the recording the stopped run leaves unfinished
    setup = got['setup']
    # the timing window of the recording (MCAP_READS) is the one a probe of ros.loop.window reads
    return R.View(settings=setup.settings, loop=(setup.settings.ros.loop, None), **got)


def cli_runs(key):
    """The command that runs `key`: ``run`` the motor bus's, ``simulate`` the rest."""
    return ['run'] if key.startswith('hardware.') else ['simulate']


def test_entry_tables_cover_the_schema():
    """Each key is proven at each entry point or listed as not applicable there, never both; a pattern of
    the table that matches no key (a key renamed or removed) fails too."""
    keys = schema_keys()
    assert set(PROBES) == set(keys)  # every key has its probe (test_settings_reach.py)
    for entry in R.ENTRY_POINTS:
        for pattern, why in R.NOT_APPLICABLE[entry].items():
            assert why.strip(), (entry, pattern)
            assert fnmatch.filter(keys, pattern), (entry, pattern, 'matches no key of the schema')
        listed = {k for k in keys if R.not_applicable(entry, k)}
        proven = set(keys) - listed
        assert proven and listed < set(keys), entry


@pytest.mark.slow  # some 30 setup files, each built twice (the command's objects and resolve(file)'s)
def test_every_key_reaches_what_the_cli_runs(tmp_path, monkeypatch):
    """``uk-controller simulate FILE`` (and ``run FILE`` for the hardware keys) builds its objects from
    the value of every key in the file (reach_entry.check_batch)."""
    proven = {}
    for batch in R.batches(tmp_path, 'cli'):
        views = {}
        out = tmp_path / 'out'
        views['simulate'] = run_cli(
            ['simulate', str(batch.path), '--no-plots', '--out', str(out), '--mcap', str(out / 'run.mcap')],
            monkeypatch,
        )
        if any(key.startswith('hardware.') for key in batch.keys):
            views['run'] = run_cli(['run', str(batch.path)], monkeypatch)
        proven.update(R.check_batch(batch, views, tmp_path, cli_runs))
        R.check_node_reads(batch, {'simulate': views['simulate'].mcap}, tmp_path, R.MCAP_READS)
        R.removed_keys_absent(batch, views['simulate'], tmp_path)
    assert set(proven) == {k for k in schema_keys() if not R.not_applicable('cli', k)}
