"""Each pip install line of README.md and docs/, in a virtual environment that has exactly that install
(pip itself resolves it, from the package index or pip's cache), runs the documented commands that follow it
as written; there a command that needs an extra the line does not install names it and stops before any work.

An install line in a ```bash block holds for the commands after it in that block; one in prose (docs/sweep.md:
"Needs the `sweep` extra: ...") for every command of the document. Commands that the main documented-command
test does not run (test_doc_commands.NOT_RUN: minutes-long sweeps, benchmarks) are not run here either.
"""

import fcntl
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_doc_commands import NOT_RUN

ROOT = Path(__file__).resolve().parents[1]
DOCS = ('README.md', *sorted(str(p.relative_to(ROOT)) for p in (ROOT / 'docs').glob('*.md')))
INSTALL = re.compile(r'pip install -e "\.\[([\w,-]+)\]"')
#: documented commands that need an extra, as a user without it types them; the line they must print
NEEDS_EXTRA = {
    'ros2 run uk_controller uk_controller_node --ros-args -p config:=five_bar': "'uk-controller[ros]'",
    'uk-controller sweep scara ... --ray local': "'uk-controller[sweep]'",
    'uk-controller sweep five_bar --set stabilization.convention=seed000 --grid stabilization.alpha=0.5:100:log '
    '--grid stabilization.beta=50:5000:log --random 40 --plant mujoco --mcap best': "'uk-controller[sweep]'",
}


def _commands(lines):
    """The commands of ```bash blocks as (block number, command): a trailing ``\\`` continues a line,
    comments go."""
    out, block, number, pending = [], False, 0, ''
    for line in lines:
        if line.startswith('```'):
            block, pending = line.strip() == '```bash', ''
            number += 1
            continue
        if block and line.strip():
            command = re.sub(r'\s+#.*$', '', line).strip()
            if command.endswith('\\'):
                pending += command[:-1].strip() + ' '
                continue
            out.append((number, pending + command))
            pending = ''
    return out


def install_lines():
    """``[(doc, extras, commands)]``: each install line of the docs and the ``uk-controller`` commands it
    holds for."""
    found = []
    for doc in DOCS:
        lines = (ROOT / doc).read_text().splitlines()
        commands = _commands(lines)
        in_block, number = False, 0
        for line in lines:
            if line.startswith('```'):
                in_block = line.strip() == '```bash'
                number += 1
                continue
            match = INSTALL.search(line)
            if not match:
                continue
            extras = tuple(sorted(match.group(1).split(',')))
            if in_block:
                command = re.sub(r'\s+#.*$', '', line).strip()
                after = [c for n, c in commands if n == number]
                held = after[after.index(command) + 1 :]
            else:
                held = [c for _, c in commands]
            held = [c for c in held if re.match(r'(\.venv/bin/)?uk-controller ', c)]
            found.append((doc, extras, held))
    return found


LINES = install_lines()


def test_the_docs_give_install_lines_with_real_extras():
    """Every extra an install line names is one of setup.py's (as pip reads them: the installed metadata)."""
    import importlib.metadata

    declared = set(importlib.metadata.metadata('uk-controller').get_all('Provides-Extra') or [])
    assert any(doc == 'README.md' and held for doc, _, held in LINES), LINES
    for doc, extras, _ in LINES:
        assert set(extras) <= declared, (doc, extras, declared)


def _pip_install(venv, extras):
    subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True, timeout=300)
    done = subprocess.run(
        [
            str(venv / 'bin' / 'pip'),
            'install',
            '-q',
            '--disable-pip-version-check',
            '--no-compile',  # what a command imports is byte-compiled when it runs; the rest never is
            '-e',
            f'{ROOT}[{",".join(extras)}]',
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        if os.environ.get('CI'):
            pytest.fail(f'pip install of uk-controller[{",".join(extras)}] failed:\n{done.stdout}{done.stderr}')
        pytest.skip(f'pip cannot install uk-controller[{",".join(extras)}] here (no package index?)')


def _venv_for_the_run(tmp_path_factory, extras):
    """The venv of `extras`, built once for the whole test run: the pytest-xdist workers share the run's base
    folder, and the first to get here builds it under a file lock while the others wait, then use it."""
    run = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'):
        run = run.parent  # the workers' base folders lie in the run's
    folder = run / f'install-{"-".join(extras)}'
    with open(run / 'install-venv.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / 'built').exists():
            folder.mkdir(exist_ok=True)
            _pip_install(folder / 'venv', extras)
            (folder / 'built').touch()
    return folder / 'venv'


@pytest.fixture(scope='module')
def readme_install(tmp_path_factory):
    """The README's install line in a fresh venv, and a checkout whose ``.venv`` is that venv: the repository's
    entries linked, ``results/`` empty, so a command writes where a user's would. The checkout is this worker's
    own (a test compares what ``results/`` holds before and after a command)."""
    (extras,) = [extras for doc, extras, held in LINES if doc == 'README.md' and held]
    venv = _venv_for_the_run(tmp_path_factory, extras)
    checkout = tmp_path_factory.mktemp('install') / 'checkout'
    checkout.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ('.venv', 'results', '.git'):
            (checkout / entry.name).symlink_to(entry)
    (checkout / '.venv').symlink_to(venv)
    return extras, checkout


def _run(command, checkout):
    """`command` as a user types it in `checkout` with only its `.venv` on PATH (``uk-controller`` and the
    nodes are that venv's; ``ros2 run uk_controller X`` runs X from it, as ros2 run does)."""
    if command.startswith('ros2 run uk_controller '):
        tokens = shlex.split(command)
        command = shlex.join([f'.venv/bin/{tokens[3]}', *tokens[4:]])
    command = re.sub(r'^uk-controller ', '.venv/bin/uk-controller ', command).replace(
        ' ... ', ' --grid control.rate=500 '
    )
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    env['PATH'] = f'{checkout / ".venv" / "bin"}{os.pathsep}/usr/bin{os.pathsep}/bin'
    env['OPENBLAS_NUM_THREADS'] = '1'
    return subprocess.run(command, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=900)


def _installed(checkout):
    done = subprocess.run(
        [str(checkout / '.venv' / 'bin' / 'python'), '-m', 'pip', 'list', '--format=freeze'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return {re.sub(r'[-_.]+', '-', line.split('==')[0]).lower() for line in done.stdout.splitlines()}


@pytest.mark.slow
def test_readme_install_line_runs_the_commands_after_it(readme_install):
    import importlib.metadata

    extras, checkout = readme_install
    # exactly that install: what only other extras bring is absent
    requirements = importlib.metadata.metadata('uk-controller').get_all('Requires-Dist')
    wanted, others = set(), set()
    for requirement in requirements:
        name = re.sub(r'[-_.]+', '-', re.match(r'[\w.-]+', requirement).group(0)).lower()
        extra = re.search(r'extra == "([^"]+)"', requirement)
        (wanted if extra is None or extra.group(1) in extras else others).add(name)
    installed = _installed(checkout)
    assert wanted <= installed, wanted - installed
    assert not (others - wanted) & installed, (others - wanted) & installed
    (held,) = [held for doc, _, held in LINES if doc == 'README.md' and held]
    ran = 0
    for command in held:
        if command in NOT_RUN:
            continue
        done = _run(command, checkout)
        text = done.stdout + done.stderr
        assert 'Traceback' not in text, (command, text)
        if '--port /dev/ttyUSB0' in command and not os.path.exists('/dev/ttyUSB0'):
            assert done.returncode == 2 and 'serial port /dev/ttyUSB0 does not exist' in text, (command, text)
        else:
            assert done.returncode == 0, (command, text)
            out = re.search(r'--out (\S+)', command)
            if out:
                assert (checkout / out.group(1) / 'summary.json').is_file(), (command, text)
        ran += 1
    assert ran >= 2, held


@pytest.mark.slow
def test_without_its_extra_a_documented_command_names_it_before_any_work(readme_install):
    extras, checkout = readme_install
    documented = {c for doc in DOCS for _, c in _commands((ROOT / doc).read_text().splitlines())}
    for command, message in NEEDS_EXTRA.items():
        assert command in documented, f'{command!r} is no longer documented'
        extra = re.search(r"\[(\w+)\]", message).group(1)
        assert extra not in extras, (command, extras)
        before = set((checkout / 'results').rglob('*')) if (checkout / 'results').exists() else set()
        done = _run(command, checkout)
        text = done.stdout + done.stderr
        assert done.returncode == 2 and message in text and 'Traceback' not in text, (command, text)
        after = set((checkout / 'results').rglob('*')) if (checkout / 'results').exists() else set()
        assert after == before, (command, sorted(after - before))
