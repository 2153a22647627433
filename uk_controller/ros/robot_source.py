"""Where a node's robot setup comes from: the `config` file, ROS parameter overrides, robot_description.

Precedence (last wins): the YAML named by the ``config`` parameter (robot name
or path, the same file the CLI reads), then every ROS parameter given to the
node (``--params-file``, launch ``parameters=[...]``, ``-p key:=value``), then
a non-empty ``robot_description`` as the URDF. The merged dictionary goes
through the same resolution as the CLI's (:func:`uk_controller.settings.resolve.resolve`, in
uk_controller.ros.node_setup), so a bad value is reported with its dotted key.
"""

from __future__ import annotations

from pathlib import Path

from ..files.parameter_file import ConfigError, load_config
from ..paths import resolve_config


def file_parameters(config):
    """(nested dict, path) of the robot YAML named by `config`, or ({}, None) when empty."""
    if not config:
        return {}, None
    try:
        params, path = load_config(resolve_config(config))
    except ConfigError:
        raise
    except (OSError, RuntimeError, UnicodeError) as exc:
        # a symlink loop (pathlib: RuntimeError), an unreadable file or folder, bytes that are not UTF-8:
        # exit code 2 naming the file (node_runner), not a traceback
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f'cannot read the robot setup: {why}', file=config, key='config') from None
    return params, Path(path)
