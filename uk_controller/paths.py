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

from .files.parameter_file import ConfigNotFoundError

PACKAGE = 'uk_controller'
_REPO_ROOT = Path(__file__).resolve().parents[1]


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
    from .files.parameter_file import ConfigError, load_config

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
    taken as a path; a bare name is a shipped robot name, and an error if a file
    of that name exists in the current directory too (ambiguous). Raises
    :class:`~uk_controller.files.parameter_file.ConfigNotFoundError`
    listing the shipped setups if nothing matches.
    """
    text = str(name_or_path)
    candidate = Path(text).expanduser()
    looks_like_path = isinstance(name_or_path, Path) or '/' in text or candidate.suffix in ('.yaml', '.yml')
    shipped = None if looks_like_path else share_dir() / 'config' / f'{text}.yaml'
    if shipped is not None and shipped.is_file():
        if candidate.is_file():
            raise ConfigNotFoundError(
                f'{text!r} is ambiguous: both the file {candidate.resolve()} and the shipped '
                f'setup {shipped} match; write ./{text} for the file',
                file=candidate,
            )
        return shipped.resolve()
    from .files.parameter_file import resolve_path

    resolved = resolve_path(candidate)  # a symlink loop: ConfigError naming the file
    if candidate.is_file():
        return resolved
    if candidate.exists():
        raise ConfigNotFoundError(f'{resolved} is not a file (a folder?); give a robot setup YAML', file=candidate)
    names = ', '.join(available_configs()) or '(none found)'
    looked = f'{resolved}' + ('' if shipped is None else f', {shipped}')
    raise ConfigNotFoundError(f'no robot setup {text!r} (looked in: {looked}); shipped setups: {names}', file=candidate)


def data_file_candidates(value, config_path=None):
    """The places :func:`resolve_data_file` looks for `value`, in order (see there)."""
    text = str(value)
    if text.startswith('package://'):
        package, _, rest = text[len('package://') :].partition('/')
        if package == PACKAGE:
            return [share_dir() / rest, _REPO_ROOT / rest]
        share = other_package_share(package)
        return [] if share is None else [share / rest]
    if text.startswith('file://'):
        return [Path(text[len('file://') :])]
    path = Path(text).expanduser()
    if path.is_absolute():
        return [path]
    folder = Path(config_path).resolve().parent if config_path is not None else Path.cwd()
    return [folder / path]


def other_package_share(package):
    """share/<package> of another ROS package, or None: through the ament index (a sourced ROS workspace),
    else in a prefix that Python packages install into (:func:`python_prefix_share`)."""
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(package))
    except Exception:  # not installed, not a ROS environment, broken AMENT_PREFIX_PATH
        return python_prefix_share(package)


def python_prefix_share(package):
    """``share/<package>`` (holding a package.xml) that a pip-installed wheel brought, or None.

    Looked for in ``<sys.prefix>/share`` and in the ``cmeel.prefix/share`` folder of every ``sys.path``
    entry (the layout of the cmeel wheels on PyPI: ``pin``, ``example-robot-data``, ...), so a setup may
    write ``package://example-robot-data/robots/...`` on any machine where that wheel is installed."""
    roots = [Path(sys.prefix) / 'share'] + [Path(entry) / 'cmeel.prefix' / 'share' for entry in sys.path if entry]
    for root in roots:
        candidate = root / package
        if (candidate / 'package.xml').is_file():
            return candidate
    return None


def resolve_data_file(value, config_path=None) -> Path | None:
    """Find a file named in a setup file (e.g. ``robot.urdf``); None if it does not exist.

    - ``package://uk_controller/...``: inside this package's share dir (the only
      way a setup names a file the package ships);
    - ``package://<other>/...``: another ROS package's share dir (ament index);
    - ``file:///abs/path`` or an absolute path: as given;
    - a relative path: relative to the folder of the setup file (`config_path`),
      or to the current directory for a setup that has no file. It is never
      looked up in the package's own folders: a user file that is missing is an
      error, not a silent fallback to a shipped file of the same name.
    """
    for candidate in data_file_candidates(value, config_path):
        if candidate.is_file():
            return candidate.resolve()
    return None


def extra_installing(distribution):
    """The extra of this package whose install brings `distribution` (a PyPI name such as
    ``example-robot-data``), read from the installed package's own metadata (setup.py's ``extras_require``);
    None when no extra but the test extra has it, or the package is not installed by pip."""
    import importlib.metadata
    import re

    def norm(name):
        return re.sub(r'[-_.]+', '-', name).lower()

    try:
        requirements = importlib.metadata.metadata('uk-controller').get_all('Requires-Dist') or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for requirement in requirements:
        found = re.match(r'\s*([A-Za-z0-9._-]+)[^;]*;\s*extra\s*==\s*"([^"]+)"', requirement)
        if found and norm(found.group(1)) == norm(distribution) and found.group(2) != 'test':
            return found.group(2)
    return None


def missing_file_message(value, config_path=None):
    """Why :func:`resolve_data_file` found nothing: the places it looked, and a hint if the
    package ships a file of that relative name."""
    text = str(value)
    looked = data_file_candidates(value, config_path)
    if text.startswith('package://') and not looked:
        package = text[len('package://') :].partition('/')[0]
        extra = extra_installing(package)
        wheel = f"pip install 'uk-controller[{extra}]'" if extra else 'pip-install the wheel that ships it'
        return (
            f'file {text!r} not found: ROS package {package!r} is neither in the ament index nor in a '
            f'Python prefix (source its workspace, {wheel}, or give a path relative to the setup file)'
        )
    message = f'file {text!r} not found; looked in: ' + ', '.join(str(p) for p in dict.fromkeys(looked))
    if not text.startswith(('package://', 'file://')) and not Path(text).is_absolute():
        if (share_dir() / text).is_file():
            message += (
                f'. The package ships {text}; to use that file write \'package://{PACKAGE}/{Path(text).as_posix()}\''
            )
        elif config_path is not None:
            message += ' (a relative path is relative to the folder of the setup file)'
    return message


def robot_description(name_or_path):
    """(config path, URDF text) of a robot setup, for launch files' ``robot_description``.

    The URDF is found exactly as the loader finds it (``robot.urdf`` relative to
    the config file, or ``package://``), a ``.xacro`` is expanded with
    ``robot.xacro_args``, and ``$(find uk_controller)`` in it (the
    gz_ros2_control ``<parameters>`` path) is replaced by the share dir, as
    xacro would.
    """
    from .files.parameter_file import ConfigError, load_config

    params, path = load_config(resolve_config(name_or_path))
    robot = params.get('robot') or {}
    value = robot.get('urdf')
    if value is None:
        from .files.description import description_key

        key = description_key(robot, path)
        value = robot.get(key)
        if key != 'urdf':
            raise ConfigError(
                f'robot_state_publisher needs a URDF; this setup describes the robot by '
                f'robot.{key} ({value}). Add robot.urdf (the same robot as URDF) for it',
                file=path,
                key=f'robot.{key}',
            )
    urdf = resolve_data_file(value, path) if value else None
    if urdf is None:
        raise ConfigError(missing_file_message(value, path), file=path, key='robot.urdf')
    from .files.description import urdf_text

    text = urdf_text(urdf, robot.get('xacro_args'), path)
    return path, text.replace('$(find uk_controller)', str(share_dir()))


def gazebo_robot_description(name_or_path, controllers=None):
    """(config path, URDF text) exactly as ``gazebo.launch.py`` hands it to robot_state_publisher and,
    through ``ros_gz_sim create -topic robot_description``, to libsdformat's URDF converter.

    `controllers` replaces the default controller_manager file (``config/controllers.yaml``) in the
    gz_ros2_control plugin's ``<parameters>``; None keeps the default.
    """
    path, text = robot_description(name_or_path)
    if controllers:
        text = text.replace(str(share_dir() / 'config' / 'controllers.yaml'), str(controllers))
    return path, text
