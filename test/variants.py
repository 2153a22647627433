"""A variant of a robot setup for a test: its file resolved again with dotted overrides.

Every value a run uses comes from one resolved Settings (uk_controller.settings.resolve): a test that
wants another rate, duration or plant builds its setup through ``resolve(file, overrides)`` (as
``load_robot(file, overrides)`` does), so every cross-key rule sees the values that will run.
"""

from uk_controller.robots import load_robot


def variant(setup, overrides):
    """The setup of `setup`'s file with `overrides` ({dotted key: value}) applied, resolved once.

    For a setup loaded from a file without overrides (its own overrides are not repeated here)."""
    if setup.settings.file is None:
        raise ValueError('variant(): the setup has no file; resolve its parameters with the overrides instead')
    return load_robot(setup.settings.file, overrides)
