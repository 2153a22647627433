"""The error every description reader raises (its own module, so the readers share it without importing
each other)."""


class DescriptionError(ValueError):
    """The description file cannot be used (message names the file and the problem)."""
