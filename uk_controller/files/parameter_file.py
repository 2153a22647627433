"""Robot setup files: ROS 2 parameter YAML read as a nested dictionary.

A setup file (docs/config.md) is a valid ROS 2 parameter file::

    /**:                      # or a node name such as uk_controller_node
      ros__parameters:
        robot: {...}
        constraints: {...}

:func:`load_config` returns the nested ``ros__parameters`` dictionary and the
resolved file path. :class:`ConfigView` reads keys out of it; every error it
raises is a :class:`ConfigError` that names the file and the dotted key
(``config/scara.yaml: robot.urdf: ...``), so a person can fix the file.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from .rcl_yaml import explain as explain_rcl
from .rcl_yaml import rcl_disagreements

_MISSING = object()


class ConfigError(ValueError):
    """A setup file is missing, malformed, or has a bad value.

    ``file`` and ``key`` (dotted, may be None) say where; ``str(err)`` reads
    ``<file>: <key>: <message>``.
    """

    def __init__(self, message, *, file=None, key=None):
        self.file = None if file is None else str(file)
        self.key = key
        self.message = message
        where = ': '.join(part for part in (self.file, key) if part)
        super().__init__(f'{where}: {message}' if where else message)


class ConfigNotFoundError(ConfigError, FileNotFoundError):
    """A named setup (or a file it refers to) does not exist."""


def _deep_merge(base, extra):
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


#: Largest setup file read (bytes); the shipped ones are below 10 kB.
MAX_FILE_BYTES = 1 << 20
#: Largest number of YAML nodes a setup file may expand to (aliases counted at every use).
MAX_NODES = 100_000


def resolve_path(path):
    """`path` made absolute with its symlinks resolved; a symlink loop is a ConfigError naming it."""
    raw = Path(path).expanduser()
    try:
        return raw.resolve()
    except (RuntimeError, OSError) as exc:  # Python < 3.13: RuntimeError('Symlink loop ...')
        raise ConfigError(f'cannot resolve the path ({exc}): a symlink loop?', file=raw) from None


def read_text(path, limit=MAX_FILE_BYTES):
    """The text of a setup file: at most `limit` bytes of UTF-8 (a binary file, another encoding or
    an oversized file is a ConfigError naming the file, where and what is accepted)."""
    try:
        with open(path, 'rb') as stream:
            data = stream.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f'cannot read: {exc.strerror or exc}', file=path) from None
    if len(data) > limit:
        raise ConfigError(
            f'larger than {limit} bytes, the most a setup file may have (the shipped ones are '
            f'below 10 kB): not a setup file?',
            file=path,
        )
    nul = data.find(bytes(1))
    if nul >= 0:
        raise ConfigError(f'a binary file (NUL byte at offset {nul}), not YAML text', file=path)
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        line = data.count(b'\n', 0, exc.start) + 1
        raise ConfigError(
            f'not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (offset {exc.start}); '
            'accepted: UTF-8 (save the file as UTF-8, e.g. iconv -f latin1 -t utf-8)',
            file=path,
        ) from None


def check_yaml_structure(text, path):
    """Refuse what YAML accepts silently but a setup file must not hold: duplicate keys in one map (YAML
    keeps the last one: a duplicated ``control:`` section would replace the first), and anchors/aliases
    or lists that expand to more than :data:`MAX_NODES` nodes (an alias bomb). Keys are named dotted,
    below ``ros__parameters``, with both lines."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return  # the loader reports invalid YAML itself
    except RecursionError:
        raise ConfigError('nested too deeply to be a setup file', file=path) from None
    if root is None:
        return
    sizes = {}
    stack = [(root, (), False)]
    order = []
    while stack:  # iterative post-order walk; an aliased node is sized once
        node, where, done = stack.pop()
        if done:
            children = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [v for pair in node.value for v in pair]
                if isinstance(node, yaml.MappingNode)
                else ()
            )
            size = 1 + sum(sizes[id(c)] for c in children)
            sizes[id(node)] = size
            if size > MAX_NODES:
                raise ConfigError(
                    f'{".".join(where) or "the document"} expands to more than {MAX_NODES} YAML nodes '
                    '(anchors and aliases are counted at every use): not a setup file (an alias '
                    'bomb?)',
                    file=path,
                )
            continue
        if id(node) in sizes:
            continue
        sizes[id(node)] = 0  # visiting (a recursive alias would count as 0, PyYAML refuses it anyway)
        order.append(node)
        stack.append((node, where, True))
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if name is not None and name != '<<':
                    if name in seen:
                        dotted = '.'.join(where + (name,))
                        raise ConfigError(
                            f'duplicate key at lines {seen[name]} and {key.start_mark.line + 1} '
                            '(YAML would keep only the last one); accepted: each key once per map',
                            file=path,
                            key=dotted,
                        )
                    seen[name] = key.start_mark.line + 1
                sub = (
                    where
                    if name == 'ros__parameters' or (not where and name is not None and name.startswith('/'))
                    else where + (str(name),)
                )
                stack.append((key, where, False))
                stack.append((value, sub, False))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                stack.append((item, where[:-1] + (f'{where[-1]}[{i}]',) if where else (f'[{i}]',), False))


def load_config(path, node=None):
    """Read a ROS-parameter-style setup file.

    Returns ``(params, path)``: the nested ``ros__parameters`` dictionary and
    the resolved :class:`~pathlib.Path`. The parameters are taken from the
    ``/**`` section; if `node` is given, that node's section (``node``,
    ``/node`` or ``/**/node``) is merged over it. Without ``/**`` and without
    `node`, the file must have exactly one section.
    """
    path = resolve_path(path)
    if not path.is_file():
        raise ConfigNotFoundError('file not found', file=path)
    text = read_text(path)
    check_yaml_structure(text, path)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f'not valid YAML: {exc}', file=path) from None
    except RecursionError:
        raise ConfigError('nested too deeply to be a setup file', file=path) from None
    misread = rcl_disagreements(text)  # y/n that ROS nodes would read as booleans
    if misread:
        raise ConfigError(explain_rcl(misread), file=path, key=misread[0][1])
    if not isinstance(raw, dict) or not raw:
        raise ConfigError("top level must be a map such as '/**: {ros__parameters: {...}}'", file=path)

    def section(name):
        body = raw[name]
        if not isinstance(body, dict) or 'ros__parameters' not in body:
            raise ConfigError('section has no ros__parameters map', file=path, key=str(name))
        params = body['ros__parameters']
        if params is None:
            return {}
        if not isinstance(params, dict):
            raise ConfigError('ros__parameters must be a map', file=path, key=f'{name}.ros__parameters')
        return params

    params = section('/**') if '/**' in raw else None
    if node is not None:
        node = str(node).strip('/')
        for name in (node, '/' + node, '/**/' + node):
            if name in raw:
                params = _deep_merge(params or {}, section(name))
    if params is None:
        if len(raw) != 1:
            raise ConfigError("several node sections and no '/**' section: choose one with node=", file=path)
        params = section(next(iter(raw)))
    return params, path


class ConfigView:
    """Read access to one map of a setup file with errors that name file and key.

    ``ConfigView(params, path)`` wraps the whole file; ``view.section('robot')``
    the ``robot`` map (prefix ``robot.``). Getters check types and shapes.
    """

    def __init__(self, data, file=None, prefix=''):
        if data is None:
            data = {}
        self.data = data
        self.file = file
        self.prefix = prefix

    # ----------------------------------------------------------------- basics
    def key(self, name):
        """Dotted key of `name` inside this view."""
        return f'{self.prefix}.{name}' if self.prefix else str(name)

    def error(self, name, message):
        """A :class:`ConfigError` about key `name` of this view (not raised)."""
        return ConfigError(message, file=self.file, key=self.key(name) if name is not None else (self.prefix or None))

    def __contains__(self, name):
        return name in self.data

    def keys(self):
        return self.data.keys()

    def raw(self, name, default=_MISSING):
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        if default is _MISSING:
            raise self.error(name, 'required key is missing')
        return default

    def section(self, name, required=True):
        """Sub-map `name` as a ConfigView (empty if optional and absent)."""
        if name not in self.data or self.data[name] is None:
            if required:
                raise self.error(name, 'required section is missing')
            return ConfigView({}, self.file, self.key(name))
        value = self.data[name]
        if not isinstance(value, dict):
            raise self.error(name, f'must be a map, got {type(value).__name__}')
        return ConfigView(value, self.file, self.key(name))

    # ----------------------------------------------------------------- typed
    def get_str(self, name, default=_MISSING, choices=None):
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str):
            raise self.error(name, f'must be a string, got {value!r}')
        if choices is not None and value not in choices:
            raise self.error(name, f'{value!r} is not one of {", ".join(choices)}')
        return value

    def get_float(self, name, default=_MISSING, *, positive=False, nonnegative=False):
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f'must be a number, got {value!r}')
        value = float(value)
        if not math.isfinite(value):
            raise self.error(name, f'must be finite, got {value!r}')
        if positive and value <= 0.0:
            raise self.error(name, f'must be > 0, got {value!r}')
        if nonnegative and value < 0.0:
            raise self.error(name, f'must be >= 0, got {value!r}')
        return value

    def get_int(self, name, default=_MISSING, *, nonnegative=False):
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name, f'must be an integer, got {value!r}')
        if nonnegative and value < 0:
            raise self.error(name, f'must be >= 0, got {value!r}')
        return value

    def get_bool(self, name, default=_MISSING):
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, bool):
            raise self.error(name, f'must be true or false, got {value!r}')
        return value

    def get_floats(self, name, default=_MISSING, *, length=None, min_length=None):
        """A list of numbers as a float array (a scalar is accepted as length 1)."""
        import numpy as np

        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) for v in value
        ):
            raise self.error(name, f'must be a list of numbers, got {value!r}')
        arr = np.asarray(value, dtype=float)
        if not np.all(np.isfinite(arr)):
            raise self.error(name, f'must be finite numbers, got {value!r}')
        if length is not None and arr.size != length:
            raise self.error(name, f'must have {length} entries, got {arr.size}')
        if min_length is not None and arr.size < min_length:
            raise self.error(name, f'must have at least {min_length} entries, got {arr.size}')
        return arr

    def get_strs(self, name, default=_MISSING, *, length=None, unique=False):
        value = self.raw(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self.error(name, f'must be a list of strings, got {value!r}')
        if length is not None and len(value) != length:
            raise self.error(name, f'must have {length} entries, got {len(value)}')
        if unique and len(set(value)) != len(value):
            raise self.error(name, f'entries must be unique, got {value!r}')
        return list(value)

    def named_items(self, names_key='names'):
        """The ``names`` list and one sub-view per name (docs/config.md: maps keyed by name)."""
        names = self.get_strs(names_key, [], unique=True)
        return [(name, self.section(name)) for name in names]


def view(params, path=None, prefix=''):
    """Shorthand for :class:`ConfigView`."""
    return ConfigView(params, path, prefix)
