"""Lint and format: ``ruff check`` with the rules of ruff.toml (pycodestyle E/W, pyflakes F, import order I,
pyupgrade UP) and ``ruff format --check`` over every Python file of the package, its tests, bench/, launch files
and scripts. ruff comes with the ``test`` extra (setup.py); without it the test skips, saying so (CI fails)."""

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


CONFIG = ROOT / 'ruff.toml'


def ruff_run(*args, cwd=ROOT):
    return subprocess.run(
        [*ruff(), *args, '--config', str(CONFIG), '--no-cache'], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def check(*paths, cwd=ROOT):
    return ruff_run('check', '--output-format', 'concise', *map(str, paths), cwd=cwd)


def format_check(*paths, cwd=ROOT):
    return ruff_run('format', '--check', *map(str, paths), cwd=cwd)


@pytest.mark.slow
def test_ruff_rules_find_nothing():
    done = check(*FOLDERS)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_every_file_is_formatted():
    done = format_check(*FOLDERS)
    assert done.returncode == 0, done.stdout + done.stderr


BAD = (
    'import sys\nimport os\n\n\ndef f():\n    return undefined_name + "%d" % 3  # '
    + 'a comment that runs on and on ' * 4
    + '\n'
)


@pytest.mark.slow
def test_the_check_reports_each_rule_family(tmp_path):
    """The same invocation on a file with an unused and unsorted import, an undefined name, a %-format and a
    long line: pyflakes, isort, pyupgrade and pycodestyle each report theirs."""
    (tmp_path / 'bad.py').write_text(BAD)
    done = check('bad.py', cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    for code in ('F401', 'F821', 'I001', 'UP031', 'E501'):
        assert code in done.stdout, (code, done.stdout)


@pytest.mark.slow
def test_the_format_check_reports_an_unformatted_file(tmp_path):
    (tmp_path / 'ugly.py').write_text('x = [ 1,2 ]\n')
    done = format_check('ugly.py', cwd=tmp_path)
    assert done.returncode == 1 and 'ugly.py' in done.stdout + done.stderr, done.stdout + done.stderr
