"""Lint at pyflakes level: ``ruff check --select F`` (unused imports and variables, undefined names,
redefinitions, ...) over every Python file of the package, its tests, bench/, launch files and
scripts. ruff comes with the ``test`` extra (setup.py); without it the test skips, saying so (CI fails)."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ('uk_controller', 'test', 'bench', 'launch', 'scripts')


def ruff():
    if importlib.util.find_spec('ruff') is not None:
        return [sys.executable, '-m', 'ruff']
    if shutil.which('ruff'):
        return [shutil.which('ruff')]
    if os.environ.get('CI'):
        pytest.fail('ruff is not installed: CI installs the test extra (setup.py), which has it')
    pytest.skip('ruff is not installed (pip install ruff, or the test extra of setup.py)')


def check(*paths, cwd=ROOT):
    return subprocess.run([*ruff(), 'check', '--select', 'F', '--no-cache', '--output-format', 'concise',
                           *map(str, paths)], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_ruff_pyflakes_rules_find_nothing():
    done = check(*FOLDERS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_reports_what_pyflakes_forbids(tmp_path):
    """The same invocation on a file with an unused import and an undefined name: both reported."""
    (tmp_path / 'bad.py').write_text('import os\n\n\ndef f():\n    return undefined_name\n')
    done = check('bad.py', cwd=tmp_path)
    assert done.returncode == 1 and 'F401' in done.stdout and 'F821' in done.stdout, done.stdout + done.stderr
