"""Where the package's data (config/, urdf/) lives.

Three layouts are supported, tried in this order:

1. installed by colcon: ``ament_index_python`` finds ``share/uk_controller``;
2. a source checkout: the folder holding ``config/`` and ``urdf/`` next to the
   ``uk_controller`` package (the repository root);
3. a pip install: ``<sys.prefix>/share/uk_controller`` (setup.py data_files).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .config import ConfigNotFoundError

PACKAGE = 'uk_controller'
_REPO_ROOT = Path(__file__).resolve().parent.parent


def _ament_share():
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        path = Path(get_package_share_directory(PACKAGE))
    except Exception:  # PackageNotFoundError, or a broken AMENT_PREFIX_PATH
        return None
    return path if (path / 'config').is_dir() else None


def _checkout_root():
    root = _REPO_ROOT
    return root if (root / 'config').is_dir() and (root / 'urdf').is_dir() else None


def share_dir() -> Path:
    """The package share directory (see module docstring for the search order)."""
    return _ament_share() or _checkout_root() or Path(sys.prefix) / 'share' / PACKAGE


def available_configs():
    """Names of the robot setups shipped in ``<share>/config`` (files with a ``robot`` section)."""
    from .config import ConfigError, load_config

    folder = share_dir() / 'config'
    names = []
    for path in sorted(folder.glob('*.yaml')) if folder.is_dir() else []:
        try:
            params, _ = load_config(path)
        except ConfigError:
            continue
        if isinstance(params.get('robot'), dict):
            names.append(path.stem)
    return names


def resolve_config(name_or_path) -> Path:
    """``'scara'`` -> ``<share>/config/scara.yaml``; an existing file path is returned resolved.

    A value that looks like a path (has a separator or a .yaml/.yml suffix) is
    taken as a path. Raises :class:`~uk_controller.config.ConfigNotFoundError`
    listing the shipped setups if nothing matches.
    """
    text = str(name_or_path)
    candidate = Path(text).expanduser()
    looks_like_path = isinstance(name_or_path, Path) or '/' in text or candidate.suffix in ('.yaml', '.yml')
    if candidate.is_file():
        return candidate.resolve()
    if not looks_like_path:
        shipped = share_dir() / 'config' / f'{text}.yaml'
        if shipped.is_file():
            return shipped.resolve()
    names = ', '.join(available_configs()) or '(none found)'
    raise ConfigNotFoundError(f'no robot setup {text!r}; shipped setups: {names}', file=candidate)


def resolve_data_file(value, config_path=None) -> Path | None:
    """Find a file named in a setup file (e.g. ``robot.urdf``).

    Absolute paths and ``package://uk_controller/...`` URIs are taken as given
    (the latter inside the share dir). Relative paths are tried against the
    share dir, then the setup file's folder, then that folder's parent (so a
    setup kept in ``<dir>/config/`` may say ``urdf/robot.urdf``).
    Returns None if nothing exists.
    """
    text = str(value)
    prefix = f'package://{PACKAGE}/'
    if text.startswith(prefix):
        text = text[len(prefix):]
        candidates = [share_dir() / text, _REPO_ROOT / text]
    elif text.startswith('file://'):
        candidates = [Path(text[len('file://'):])]
    else:
        path = Path(text).expanduser()
        if path.is_absolute():
            candidates = [path]
        else:
            candidates = [share_dir() / path]
            if config_path is not None:
                folder = Path(config_path).resolve().parent
                candidates += [folder / path, folder.parent / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return None


def robot_description(name_or_path):
    """(config path, URDF text) of a robot setup, for launch files' ``robot_description``.

    The URDF is found exactly as the loader finds it (``robot.urdf`` relative to
    the package share dir or the config file), and ``$(find uk_controller)`` in
    it (the gz_ros2_control ``<parameters>`` path) is replaced by the share dir,
    as xacro would.
    """
    from .config import ConfigError, load_config

    params, path = load_config(resolve_config(name_or_path))
    value = (params.get('robot') or {}).get('urdf')
    urdf = resolve_data_file(value, path) if value else None
    if urdf is None:
        raise ConfigError(f'file {value!r} not found', file=path, key='robot.urdf')
    text = Path(urdf).read_text(encoding='utf-8')
    return path, text.replace('$(find uk_controller)', str(share_dir()))
