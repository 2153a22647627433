"""libsdformat's own URDF -> SDF conversion, for the tests (what gz sim does to robot_description).

:func:`converter` compiles ``test/sdformat/urdf_report.cc`` against the newest ``sdformatN``
that pkg-config knows (Debian: ``apt-get install libsdformat-dev g++ pkg-config``; scripts/test.sh
installs them when it may) into a cache folder keyed by the source's hash; :func:`convert` runs it
on a URDF and parses its report. Without the library the tests skip, naming the install command;
in CI (``CI=true``) they fail instead: the converter is the judge of what Gazebo spawns.

Every report :func:`convert` produces is kept in :data:`REPORTS` and printed at the end of the
session by ``conftest.pytest_terminal_summary``, so the run shows what the converter said.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent / 'sdformat' / 'urdf_report.cc'
INSTALL = 'apt-get install -y libsdformat-dev g++ pkg-config'
REPORTS: list[tuple[str, str]] = []  # (label, converter output) of every conversion of the pytest run


@dataclass
class SdfReport:
    """What libsdformat made of one URDF: the converted model, fact by fact."""

    returncode: int
    text: str
    errors: list[str] = field(default_factory=list)
    model: str | None = None
    links: dict[str, float] = field(default_factory=dict)  # name -> mass
    joints: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # name -> (type, parent, child)
    plugins: list[dict[str, str]] = field(default_factory=list)  # filename, name, parameters


def _unavailable(why):
    message = f'libsdformat URDF converter unavailable: {why} (install: {INSTALL})'
    if os.environ.get('CI', '').lower() == 'true':
        pytest.fail(message + '; in CI the converter test must run, not skip', pytrace=False)
    pytest.skip(message)


def _sdformat_package():
    if shutil.which('pkg-config') is None:
        return None
    listed = subprocess.run(['pkg-config', '--list-all'], capture_output=True, text=True).stdout
    versions = sorted((int(m.group(1)), m.group(0)) for m in re.finditer(r'^sdformat(\d+)', listed, re.M))
    return versions[-1][1] if versions else None


def converter() -> Path:
    """Path of the compiled report program (built once per source hash and sdformat version)."""
    return compile_program(SOURCE)


def compile_program(source: Path) -> Path:
    """Path of `source` (a C++ program of test/sdformat/) compiled against the newest sdformatN, built once
    per source hash and sdformat version into a cache folder; skips (fails in CI) without the library."""
    package = _sdformat_package()
    if package is None:
        _unavailable('pkg-config finds no sdformatN')
    compiler = shutil.which('g++') or shutil.which('c++')
    if compiler is None:
        _unavailable('no C++ compiler')
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get('XDG_CACHE_HOME', Path.home() / '.cache')) / 'uk_controller'
    binary = cache / f'{source.stem}-{digest}-{package}'
    if not binary.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        flags = subprocess.run(
            ['pkg-config', '--cflags', '--libs', package], capture_output=True, text=True, check=True
        ).stdout.split()
        with tempfile.TemporaryDirectory(dir=cache) as scratch:
            built = Path(scratch) / binary.name
            result = subprocess.run(
                [compiler, '-std=c++17', '-O1', '-o', str(built), str(source), *flags],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if result.returncode != 0:
                pytest.fail(f'compiling {source.name} against {package} failed:\n{result.stderr[-2000:]}')
            os.replace(built, binary)  # atomic: a concurrent session sees the old or the whole file
    return binary


def parse(returncode, text) -> SdfReport:
    report = SdfReport(returncode, text)
    for line in text.splitlines():
        kind, _, rest = line.partition(': ')
        if kind == 'error':
            report.errors.append(rest)
        elif kind == 'model':
            report.model = rest
        elif kind == 'link':
            name, mass = rest.rsplit(' mass=', 1)
            report.links[name] = float(mass)
        elif kind == 'joint':
            name, *fields = rest.split(' ')
            values = dict(f.split('=', 1) for f in fields)
            report.joints[name] = (values['type'], values['parent'], values['child'])
        elif kind == 'plugin':
            match = re.fullmatch(r'filename=(\S*) name=(\S*) parameters=(.*)', rest)
            report.plugins.append(dict(filename=match[1], name=match[2], parameters=match[3].strip()))
    return report


def convert(urdf: Path, label: str | None = None) -> SdfReport:
    """Convert `urdf` with libsdformat; the report is also kept for the session summary."""
    result = subprocess.run([str(converter()), str(urdf)], capture_output=True, text=True, timeout=120)
    text = result.stdout + result.stderr
    REPORTS.append((label or Path(urdf).name, text))
    return parse(result.returncode, result.stdout)
