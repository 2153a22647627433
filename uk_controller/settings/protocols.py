"""The motor protocols as the settings schema sees them, registered from below.

The protocol table lives with the protocols (uk_controller/hardware/registry.py, a layer above the
settings); the schema needs its names (``hardware.protocol``'s choices), each protocol's option section
(``hardware.<section>``) and the keys its codec declares (``SETTINGS``). Rather than the schema importing
the hardware layer, the registry registers its table here when it is imported (:func:`register`), and
the package imports the registry first thing (uk_controller/__init__.py), so the table is known before
any setup is read. The schema reads it through :func:`table` (and ``NAMES``, the names as the table holds
them now), never through an import of uk_controller.hardware.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: the registered table: a function returning {name: entry}; an entry has ``section_name``,
#: ``settings()`` (the schema keys of its codec) and ``defaults()`` (its options and their defaults)
_SOURCE: list[Callable[[], Mapping[str, Any]]] = []


def register(source: Callable[[], Mapping[str, Any]]) -> None:
    """Make `source` (a function returning the protocol table *as it is now*) the table of protocols."""
    _SOURCE[:] = [source]


def table() -> Mapping[str, Any]:
    """{name: entry} of the registered protocols (empty before the registry registered itself)."""
    return _SOURCE[0]() if _SOURCE else {}


def sections() -> tuple[str, ...]:
    """The option sections ``hardware.<section>`` of the protocols registered now."""
    return tuple(entry.section_name for entry in table().values())


def __getattr__(name: str) -> Any:
    if name == 'NAMES':  # the protocol names now (the schema's RegistryNames reads this)
        return tuple(table())
    raise AttributeError(name)
