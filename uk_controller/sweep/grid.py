"""Sweep specifications: ``KEY=VALUES`` grids, random samples, validated overrides, seeds.

A key is a dotted path into the robot YAML's ``ros__parameters`` (docs/config.md),
e.g. ``stabilization.omega``, ``control.rate``, ``simulation.mass_scale``,
``constraints.tool_path.trajectory.radius``. VALUES is one of

``a,b,c``             these values (YAML scalars: numbers, words, true/false)
``start:stop:count``  `count` values from `start` to `stop` inclusive, evenly spaced
``start:stop:count:log``  the same, geometrically spaced (start, stop > 0)
``start:stop``        a range; only with ``--random N`` (uniform; ``:log`` log-uniform)

With ``--random N`` every range (``start:stop`` or ``start:stop:count``, the
count then ignored) is sampled uniformly and every list uniformly among its
values, N times, from ``numpy.random.default_rng(sample_seed)``.

Validation (:func:`check_overrides`): a key must be a setting of the schema; its values
must have the schema's type;
and the robot must load with each value of a list and with both ends of a range (the loader's own checks). Errors are
:class:`ConfigError` naming the key and suggesting the closest known key.
A run's values are dotted-key overrides of :func:`uk_controller.settings.resolve.resolve`, which
checks them against the settings schema (uk_controller/settings/schema.py) with the file.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math

import numpy as np
import yaml

from ..files.parameter_file import ConfigError
from ..settings import schema as S
from ..settings.resolve import resolve

#: schema type -> the type one swept value has
_KIND = {'float': float, 'floats': float, 'int': int, 'str': str, 'strs': str, 'bool': bool, 'any': object}


# ----------------------------------------------------------------------------- parsing


def _scalar(text):
    text = text.strip()
    for kind in (int, float):  # numbers first: YAML 1.1 reads 1e-4 as a string
        try:
            return kind(text)
        except ValueError:
            pass
    value = yaml.safe_load(text) if text else ''
    if isinstance(value, (dict, list)) or value is None:
        raise ValueError(text)
    return value


def parse_spec(text, option='--grid'):
    """``'KEY=VALUES'`` -> ``(key, values)`` where values is a list or a :class:`Range`."""
    key, sep, values = text.partition('=')
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ConfigError(f"{option} {text!r}: expected KEY=VALUES, e.g. stabilization.omega=5:50:10")
    values = values.strip()
    if ':' in values:
        parts = [p.strip() for p in values.split(':')]
        log = parts[-1].lower() == 'log'
        if log:
            parts = parts[:-1]
        try:
            start, stop = float(parts[0]), float(parts[1])
            count = int(parts[2]) if len(parts) == 3 else None
            if len(parts) not in (2, 3):
                raise ValueError
        except (ValueError, IndexError):
            raise ConfigError(f'{key}: {values!r} is not start:stop[:count][:log]') from None
        if count is not None and count < 1:
            raise ConfigError(f'{key}: count must be >= 1, got {count}')
        if log and (start <= 0 or stop <= 0):
            raise ConfigError(f'{key}: a log range needs start, stop > 0')
        return key, Range(start, stop, count, log)
    try:
        return key, [_scalar(v) for v in values.split(',')]
    except (ValueError, yaml.YAMLError):
        raise ConfigError(f'{key}: cannot read {values!r} as a comma-separated list of values') from None


class Range:
    """``start:stop[:count][:log]``."""

    def __init__(self, start, stop, count=None, log=False):
        self.start, self.stop, self.count, self.log = start, stop, count, log

    def values(self):
        """The grid values (start..stop inclusive, `count` of them)."""
        if self.count is None:
            raise ConfigError('start:stop without a count is a range for --random; give start:stop:count')
        space = np.geomspace if self.log else np.linspace
        return [float(v) for v in space(self.start, self.stop, self.count)]

    def sample(self, rng):
        if self.log:
            return float(math.exp(rng.uniform(math.log(self.start), math.log(self.stop))))
        return float(rng.uniform(self.start, self.stop))

    def __repr__(self):
        return f'Range({self.start}, {self.stop}, {self.count}, log={self.log})'


# ----------------------------------------------------------------------------- keys


def leaf_keys(params, prefix=''):
    """Dotted paths of every scalar leaf of a nested dict."""
    keys = []
    for name, value in (params or {}).items():
        path = f'{prefix}{name}'
        if isinstance(value, dict):
            keys += leaf_keys(value, path + '.')
        else:
            keys.append(path)
    return keys


def _lookup(params, key):
    node = params
    for part in key.split('.'):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def key_type(params, key):
    """The type values of `key` must have: the schema's (uk_controller/settings/schema.py; one value of a
    list setting such as ``stabilization.omega``)."""
    found, current = _lookup(params, key)
    if found and isinstance(current, dict):
        raise ConfigError(
            f'{key}: is a section, not a setting; give one of its keys, e.g. '
            f'{", ".join(leaf_keys(current, key + ".")[:3])}'
        )
    if found and isinstance(current, list) and len(current) != 1:
        raise ConfigError(f'{key}: is a list; a sweep sets single values')
    setting = S.lookup(key)
    if setting is not None and setting.type == 'section':
        raise ConfigError(f'{key}: is a section, not a setting; give one of its keys')
    if setting is None or setting.type not in _KIND:
        known = sorted(set(leaf_keys(params)) | {s.key for s in S.all_settings() if '<name>' not in s.key})
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ''
        raise ConfigError(f"unknown setting '{key}'{hint}")
    return _KIND[setting.type]


def coerce(key, value, kind):
    """`value` as type `kind` (int from an integral float is fine, float from int too)."""
    if kind is bool:
        if isinstance(value, bool):
            return value
    elif kind is int:
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            return value
        elif isinstance(value, float) and value.is_integer():
            return int(value)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif kind is str:
        if isinstance(value, str):
            return value
    else:
        return value
    raise ConfigError(f'{key}: {value!r} is not {"an" if kind is int else "a"} {kind.__name__}')


def check_overrides(params, path, specs):
    """Type-check and load-check every value of every spec: ``{key: values}`` with coerced values.

    `specs` maps key -> list or Range. Every key's type is checked first; then each
    distinct value of each key is applied together with the first value of every other
    key (settings can depend on each other, e.g. ``stabilization.convention`` and
    ``alpha``) and the robot built from it (uk_controller.settings.resolve then
    :func:`~uk_controller.robots.setup_from_settings`), so a value the loader rejects fails here,
    before any run, naming the key.
    """
    checked, probes = _probes(params, specs)
    first = {key: values[0] for key, values in probes.items()}
    for key, values in probes.items():
        for v in values:
            _load_check(params, path, {**first, key: v}, key)
    return checked


def _probes(params, specs):
    """``(checked, probes)``: each spec's values coerced to its setting's type (a Range kept as it is),
    and the distinct values to load-check: a list's values, a Range's two ends. Every value of a range
    lies between its ends, and the schema bounds a numeric setting by an interval, so the ends carry its
    check; loading the robot for each point of a 10,000-point grid took minutes before the first run."""
    checked, probes = {}, {}
    for key, values in specs.items():
        kind = key_type(params, key)
        if isinstance(values, Range):
            if kind not in (float, int):
                raise ConfigError(f'{key}: a range needs a numeric setting (this one is a {kind.__name__})')
            ends = dict.fromkeys(round(v) if kind is int else float(v) for v in (values.start, values.stop))
            probes[key] = list(ends)
            checked[key] = values
        else:
            checked[key] = [coerce(key, v, kind) for v in values]
            probes[key] = list(dict.fromkeys(checked[key]))
    return checked, probes


def first_values(params, specs):
    """``{key: first value}`` of each spec, typed: with the fixed values, the settings of a sweep's first run.
    Settings that depend on each other (``stabilization.convention: seed000`` set, its ``alpha`` and ``beta``
    swept) resolve only together."""
    return {key: values[0] for key, values in _probes(params, specs)[1].items()}


def _load_check(params, path, override, key):
    from ..robots import setup_from_settings

    try:
        setup_from_settings(resolve(path, override, params=params))
    except ConfigError as exc:
        raise ConfigError(f'{key}={override[key]!r}: {exc}') from None


# ----------------------------------------------------------------------------- runs


def expand(specs, random=None, sample_seed=0, int_keys=()):
    """The runs' overrides, in order: the full grid (last key fastest), or `random` samples."""
    keys = list(specs)
    if random is None:
        axes = [v.values() if isinstance(v, Range) else list(v) for v in specs.values()]
        return [dict(zip(keys, combo)) for combo in itertools.product(*axes)]
    rng = np.random.default_rng(sample_seed)
    runs = []
    for _ in range(int(random)):
        run = {}
        for key, v in specs.items():
            if isinstance(v, Range):
                value = v.sample(rng)
                run[key] = int(round(value)) if key in int_keys else value
            else:
                run[key] = v[int(rng.integers(len(v)))]
        runs.append(run)
    return runs


def canonical(robot, plant, overrides):
    """The text a run's identity and seed are hashed from (sorted keys, shortest float repr)."""
    return json.dumps({'robot': robot, 'plant': plant, 'settings': overrides}, sort_keys=True, separators=(',', ':'))


def run_id(robot, plant, overrides):
    """Stable identity of a run: the first 16 hex digits of SHA-256 of :func:`canonical`."""
    return hashlib.sha256(canonical(robot, plant, overrides).encode()).hexdigest()[:16]


def run_seed(robot, plant, overrides):
    """The run's random seed (sensor noise): 32 bits of SHA-256 of :func:`canonical`.

    Derived from the settings alone, so a run gives the same result whatever the
    order, worker or machine it runs on, and when resumed.
    """
    digest = hashlib.sha256(('seed:' + canonical(robot, plant, overrides)).encode()).hexdigest()
    return int(digest[:8], 16)
