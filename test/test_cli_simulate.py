"""`uk-controller simulate` as a user runs it: files written, numbers consistent, errors readable."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, '-m', 'uk_controller.cli', *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_simulate_writes_log_figures_and_summary(tmp_path):
    out = tmp_path / 'run'
    proc = run_cli('simulate', 'scara', '--duration', '0.6', '--out', str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ('log.csv', 'summary.json', 'task_error.png', 'joint_error.png', 'efforts.png', 'path_tool_path.png'):
        assert (out / name).stat().st_size > 0, name
    with open(out / 'log.csv') as fh:
        rows = list(csv.reader(fh))
    assert rows[0][-1] == 'status' and {r[-1] for r in rows[1:]} <= {'ok', 'saturated'}
    header, data = rows[0][:-1], np.array([r[:-1] for r in rows[1:]], dtype=float)
    assert data.shape[0] == 600
    summary = json.loads((out / 'summary.json').read_text())
    # the summary's peak effort is the largest |u| in the log
    u_cols = [i for i, h in enumerate(header) if h.startswith('u_')]
    assert len(u_cols) == 4
    assert np.isclose(summary['effort_peak'], np.abs(data[:, u_cols]).max(), rtol=1e-6)
    # the final task error in the summary is the norm of the last logged task row
    task_cols = [i for i, h in enumerate(header) if h.startswith('task_')]
    assert np.isclose(summary['task_error_final'], np.linalg.norm(data[-1, task_cols]), rtol=1e-5, atol=1e-12)
    assert 'task error after' in proc.stdout and 'real-time factor' in proc.stdout


@pytest.mark.slow
def test_bad_config_names_file_and_key(tmp_path):
    bad = tmp_path / 'bad.yaml'
    text = (REPO / 'config' / 'scara.yaml').read_text().replace('rate: 1000.0', 'rate: fast')
    text = text.replace('urdf: package://uk_controller/urdf/scara.urdf', f'urdf: {REPO / "urdf" / "scara.urdf"}')
    bad.write_text(text)
    proc = run_cli('simulate', str(bad), '--duration', '0.01', '--out', str(tmp_path / 'o'), cwd=tmp_path)
    assert proc.returncode != 0
    message = proc.stderr
    assert 'bad.yaml' in message and 'control.rate' in message
    assert 'Traceback' not in message


@pytest.mark.slow
def test_unknown_robot_is_a_clear_error(tmp_path):
    proc = run_cli('simulate', 'no_such_robot', cwd=tmp_path)
    assert proc.returncode == 2
    assert 'no_such_robot' in proc.stderr and 'Traceback' not in proc.stderr
