"""The read-only containers of resolved settings: :class:`FrozenDict`, :func:`freeze`, :func:`thaw` and
:class:`Section`, the base of the typed section classes (uk_controller/settings/types.py).

A list in a resolved setting is a tuple and a map a :class:`FrozenDict` (a ``dict`` that refuses every
change), so nothing reachable from a :class:`~uk_controller.settings.types.Settings` can be changed in
place: a new value is a new ``Settings`` (:func:`uk_controller.settings.resolve.resolve` again, with the
change as one more override), which a running consumer takes through its ``apply_settings``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

K = TypeVar('K')
V = TypeVar('V')


class FrozenDict(dict[K, V]):
    """A read-only dict (still a ``dict`` for the readers that test ``isinstance(x, dict)``)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError('a resolved setting cannot be changed: resolve again with an override')

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: str(kv[0]))))

    def __copy__(self) -> FrozenDict[K, V]:
        return self

    def __reduce__(self) -> Any:  # pickled as its items (the default would call __setitem__)
        return FrozenDict, (dict(self),)

    def __deepcopy__(self, memo: Any) -> FrozenDict[K, V]:
        return self

    def thaw(self) -> Any:
        """A plain, mutable deep copy (for code that builds a new tree from this one)."""
        return thaw(self)


def freeze(value: Any) -> Any:
    """`value` with every dict made a :class:`FrozenDict` and every list a tuple (recursively)."""
    if isinstance(value, dict):
        return FrozenDict((k, freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Inverse of :func:`freeze`: plain dicts and lists."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


class Section:
    """Base of the typed section classes: frozen, with ``as_dict()`` for reports."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        """The section as a plain nested dict (for summaries and logs)."""
        return {
            f.name: (
                v.as_dict()
                if isinstance(v, Section)
                else {k: (x.as_dict() if isinstance(x, Section) else thaw(x)) for k, x in v.items()}
                if f.name == 'items'
                else thaw(v)
            )
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            for v in (getattr(self, f.name),)
        }
