"""The error every description reader raises, and the UTF-8 read they share (their own module, so the
readers share them without importing each other)."""

from pathlib import Path


class DescriptionError(ValueError):
    """The description file cannot be used (message names the file and the problem)."""


def read_utf8(path):
    """The text of a description file, refused with the byte and line when it is not UTF-8
    (URDF, MJCF and SDF are XML; their readers here and in Pinocchio assume UTF-8)."""
    data = Path(path).read_bytes()
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b'\n') + 1
        raise DescriptionError(
            f'{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}; save the file as UTF-8'
        ) from None
