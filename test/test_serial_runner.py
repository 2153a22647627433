"""`uk-controller run` as a user runs it (a subprocess) against an emulated uk_binary driver:
torque-off on SIGTERM and Ctrl-C (SIGINT), CSV rows written while running, clear message
and exit code 2 for a missing port."""

import csv
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from uk_controller.hardware.calibration import HardwareConfig
from uk_controller.hardware.registry import make_emulator
from uk_controller.robots import load_robot
from uk_controller.sim.uk_plant import UKPlant

CMD = [sys.executable, '-c', 'import sys; from uk_controller.cli import main; sys.exit(main())', 'run']


def wait_until(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


@pytest.mark.slow
def test_missing_port_message(tmp_path):
    r = subprocess.run(
        CMD + ['scara', '--port', str(tmp_path / 'ttyUSB7'), '--protocol', 'uk_binary'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert 'does not exist' in r.stderr and 'ttyUSB7' in r.stderr


@pytest.mark.serial
@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
@pytest.mark.slow
def test_signal_stops_with_torque_off(tmp_path, sig, robots):
    setup = load_robot(robots('scara'))
    hw = HardwareConfig.from_setup(setup)
    with make_emulator('uk_binary', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
        log = tmp_path / 'run.csv'
        proc = subprocess.Popen(
            CMD
            + ['scara', '--port', emu.port, '--protocol', 'uk_binary', '--rate', '100', '--log', str(log), '--quiet'],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            if not wait_until(lambda: emu.enabled and emu.counters['steps'] > 30, 60):
                proc.kill()
                out, err = proc.communicate(timeout=10)
                pytest.fail(
                    f'runner never armed the bus (exit {proc.returncode}, device {dict(emu.counters)}):\n{err[-3000:]}'
                )
            # rows are on disk while the run goes on (in run.csv.part, renamed when the run ends)
            part = log.with_name(log.name + '.part')
            assert wait_until(lambda: part.exists() and len(part.read_text().splitlines()) > 20, 10)
            assert np.any(emu.joint_effort() != 0)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 128 + sig, err  # 130 for Ctrl-C, 143 for SIGTERM, no traceback
        assert 'torque off' in err and 'interrupted' in err and 'Traceback' not in err
        assert wait_until(lambda: not emu.enabled, 2)
        assert not np.any(emu.joint_effort())
    rows = list(csv.reader(log.open()))
    header = rows[0]
    assert header[0] == 't' and 'q_joint1' in header and 'u_motor1' in header
    data = np.array([[float(x) for i, x in enumerate(r) if header[i] != 'state'] for r in rows[1:]])
    assert np.all(np.isfinite(data[:, :-1]))
    assert np.all(np.diff(data[:, 0]) >= 0)


@pytest.mark.serial
@pytest.mark.slow
def test_run_log_on_a_full_disk(tmp_path, robots, monkeypatch):
    """`run --log` on a full disk turned the torque off, then a traceback and the run summary
    was lost. Now: torque off, the summary (cycles, errors, loop timing), exit 2 naming the log, and
    the rows written before the disk filled kept in run.csv.part. A tmpfs of 16 kB where it can be
    mounted (root), else the log's writer fails after 16 kB (injected)."""
    from hostile import inject_full_disk, mount_tmpfs, run_cli, unmount

    setup = load_robot(robots('scara'))
    hw = HardwareConfig.from_setup(setup)
    disk = tmp_path / 'disk'
    mounted = mount_tmpfs(disk, 16 * 1024)
    if not mounted:
        inject_full_disk(monkeypatch, disk, 16 * 1024)
    try:
        with make_emulator('uk_binary', UKPlant.from_setup(setup), hw, dt=0.01) as emu:
            code, stdout, stderr = run_cli(
                'run',
                'scara',
                '--port',
                emu.port,
                '--protocol',
                'uk_binary',
                '--rate',
                '100',
                '--log',
                disk / 'run.csv',
                '--quiet',
                '--duration',
                '30',
            )
            assert wait_until(lambda: not emu.enabled, 2)
            assert not np.any(emu.joint_effort())
        assert code == 2, stderr
        assert 'Traceback' not in stderr and 'torque off' in stderr and 'cycles=' in stderr
        assert '--log' in stderr and 'No space left on device' in stderr and 'run.csv.part' in stderr
        assert not (disk / 'run.csv').exists()
        rows = list(csv.reader((disk / 'run.csv.part').open()))
        assert rows[0][0] == 't' and len(rows) > 20
        t = [float(r[0]) for r in rows[1:-1]]
        assert np.all(np.diff(t) >= 0) and t[-1] < 25  # the run stopped when the disk filled
    finally:
        if mounted:
            unmount(disk)
