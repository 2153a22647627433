"""Output files that never destroy an input and never pass for complete when they are not.

Every command that writes files (``simulate``, ``sweep``, ``run --log``, MCAP recordings) goes
through these helpers; docs/guarantees.md is the user's side of the same rules:

- :func:`refuse_inputs_as_outputs`: an output path that resolves to one of the run's inputs (the
  setup YAML, the URDF/MJCF, a callable's ``.py`` file) is refused before anything runs, and so is
  an output that is an existing folder where a file is expected.
- :func:`atomic_write`: a file is written under a temporary name in its own folder and renamed
  over the final name only when complete (``os.replace``, atomic on POSIX), so a failure leaves the
  earlier file (if any) untouched and no half-written file under the final name.
- :class:`StreamingFile`: a long log written as it is produced, to ``<name>.part``, renamed when
  closed; a write error (disk full, I/O error) stops the writing, keeps what was written in
  ``<name>.part`` and says how much that is.
- :func:`strict_json` / :func:`dumps_strict`: JSON as the standard defines it (no ``NaN`` or
  ``Infinity`` tokens: non-finite numbers become ``null``).

Every refusal or write failure is a :class:`~uk_controller.files.parameter_file.ConfigError` naming the path
and the flag, which the CLI prints and exits with status 2.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .parameter_file import ConfigError

# ------------------------------------------------------------------------- JSON


def strict_json(value):
    """`value` with NaN and infinities replaced by None, recursively (JSON has neither)."""
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, 'item') and getattr(value, 'ndim', None) == 0:  # NumPy scalars
        return strict_json(value.item())
    return value


def dumps_strict(value, **kwargs):
    """``json.dumps`` of :func:`strict_json`\\ (value) with ``allow_nan=False``: always standard JSON."""
    return json.dumps(strict_json(value), allow_nan=False, **kwargs)


def _reject_constant(name):
    raise ValueError(f'not standard JSON: {name}')


def loads_strict(text):
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity`` (ValueError)."""
    return json.loads(text, parse_constant=_reject_constant)


# ------------------------------------------------------------------------- paths


def _same(a, b):
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.expanduser().resolve() == b.expanduser().resolve()


def setup_inputs(setup):
    """The files a :class:`~uk_controller.robots.setup.RobotSetup` was read from: the setup YAML, the
    robot description and the ``.py`` files of callable constraints."""
    files = [setup.config_path, getattr(setup, 'urdf_path', None)]
    base = Path(setup.config_path).parent if setup.config_path else Path.cwd()
    constraints = setup.constraints
    for spec in constraints.values() if isinstance(constraints, dict) else ():
        function = getattr(spec, 'function', None)  # a callable row's file.py:function
        if isinstance(function, str) and ':' in function:
            module = function.rpartition(':')[0]
            if module.endswith('.py'):
                path = Path(module).expanduser()
                files.append(path if path.is_absolute() else base / path)
    return [Path(f) for f in files if f]


def refuse_inputs_as_outputs(outputs, inputs, *, folder_ok=()):
    """Raise ConfigError when an output is an input or an existing folder.

    outputs   ``[(flag, path), ...]``: what the command will write (a flag such as ``--mcap``, or
              ``--out`` for the files inside the output folder)
    inputs    paths the run reads (:func:`setup_inputs`)
    folder_ok flags whose path is a folder by design (``--out``)
    """
    for flag, path in outputs:
        if path is None:
            continue
        path = Path(path)
        for source in inputs:
            if _same(path, source):
                raise ConfigError(
                    f'{path} is an input of this run ({Path(source).resolve()}); refusing to overwrite '
                    'it: give another path',
                    file=path,
                    key=flag,
                )
        if flag not in folder_ok and path.is_dir():
            raise ConfigError(
                f'{path} is a folder, where {flag} writes a file; accepted: a file path (remove or '
                'rename the folder, or choose another path)',
                file=path,
                key=flag,
            )


def _describe(exc):
    return exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc)


def atomic_write(path, write, *, flag='--out', binary=False):
    """Write `path` completely or not at all: ``write(stream)`` fills a temporary file in the same
    folder, which replaces `path` only when `write` returned and the data are flushed.

    On a write error the temporary file is removed, `path` keeps its earlier content (if any) and a
    ConfigError naming `path` and `flag` says so."""
    path = Path(path)
    part = path.with_name(f'.{path.name}.{os.getpid()}.part')
    try:
        with open(part, 'wb' if binary else 'w', **({} if binary else {'encoding': 'utf-8', 'newline': ''})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(part, path)
    except OSError as exc:
        try:
            part.unlink()
        except OSError:
            pass
        kept = 'its earlier content is unchanged' if path.exists() else 'nothing was written'
        raise ConfigError(f'cannot write: {_describe(exc)}; {kept}', file=path, key=flag) from None


def _count_lines(path):
    """Newlines in `path` (read in blocks; 0 when it cannot be read)."""
    count = 0
    try:
        with open(path, 'rb') as fh:
            for block in iter(lambda: fh.read(1 << 20), b''):
                count += block.count(b'\n')
    except OSError:
        return 0
    return count


class StreamingFile:
    """A text file written as it is produced (a long log), complete under its final name only.

    Lines go to ``<path>.part``; :meth:`close` renames it to `path`. After a write error
    (:attr:`error` set) further writes are dropped and :meth:`close` keeps ``<path>.part`` with
    what was written before the error, then raises a ConfigError saying what was lost
    (``lost`` is the caller's words, e.g. 'steps 1200 to 2000').
    """

    def __init__(self, path, *, flag='--out', binary=False):
        self.path = Path(path)
        self.flag = flag
        self.part = self.path.with_name(self.path.name + '.part')
        self.error = None
        self.binary = binary
        self.rows_written = 0
        try:
            self.stream = open(self.part, 'wb') if binary else open(self.part, 'w', encoding='utf-8', newline='')
        except OSError as exc:
            raise ConfigError(f'cannot write: {_describe(exc)}', file=self.path, key=flag) from None

    def write(self, text, rows=1):
        """Append `text` (`rows` logical rows); False once a write error happened (nothing more is written)."""
        if self.error is not None:
            return False
        try:
            self.stream.write(text)
        except OSError as exc:
            self.error = exc
            return False
        self.rows_written += rows
        return True

    def failed(self, exc):
        """Record a write error raised by a writer that writes to :attr:`stream` itself."""
        if self.error is None:
            self.error = exc

    def flush(self):
        if self.error is None:
            try:
                self.stream.flush()
            except OSError as exc:
                self.error = exc

    def close(self, lost=''):
        """Rename to the final name, or keep ``.part`` and raise ConfigError when a write failed."""
        if self.error is None:
            try:
                self.stream.flush()
                os.fsync(self.stream.fileno())
            except OSError as exc:
                self.error = exc
        try:
            self.stream.close()
        except OSError as exc:
            self.error = self.error or exc
        if self.error is None:
            os.replace(self.part, self.path)
            return
        self.discard_empty()
        if not self.part.exists():
            where = 'nothing was kept'
        elif self.binary:
            where = f'{self.part} keeps what was written before the error ({self.part.stat().st_size} bytes)'
        else:
            where = f'{self.part} keeps what was written before the error ({_count_lines(self.part)} complete lines)'

        raise ConfigError(
            f'write failed: {_describe(self.error)}; {where}' + (f'; lost: {lost}' if lost else ''),
            file=self.path,
            key=self.flag,
        )

    def discard_empty(self):
        try:
            if self.part.exists() and self.part.stat().st_size == 0:
                self.part.unlink()
        except OSError:
            pass

    def abandon(self):
        """Close without renaming (the run failed before anything worth keeping)."""
        try:
            self.stream.close()
        except OSError:
            pass
        self.discard_empty()


__all__ = [
    'strict_json',
    'dumps_strict',
    'loads_strict',
    'setup_inputs',
    'refuse_inputs_as_outputs',
    'atomic_write',
    'StreamingFile',
]
