"""The read-only containers of resolved settings: :class:`FrozenDict`, :func:`freeze`, :func:`thaw`,
:class:`Section`, the base of the typed section classes (uk_controller/settings/types.py), and :class:`Item`,
the base of the typed items (a constraint, a trajectory: one class per type).

A list in a resolved setting is a tuple and a map a :class:`FrozenDict` (a ``dict`` that refuses every
change), so nothing reachable from a :class:`~uk_controller.settings.types.Settings` can be changed in
place: a new value is a new ``Settings`` (:func:`uk_controller.settings.resolve.resolve` again, with the
change as one more override), which a running consumer takes through its ``apply_settings``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from ..files.parameter_file import ConfigError

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


class Item(Section):
    """Base of the typed items (``constraints.<name>`` and its ``trajectory``: one generated class per type).

    Besides its keys (the dataclass fields, defaults filled), an item knows where it was written, for the
    errors its builder raises: :meth:`error` names the file and the dotted key (``constraints.tool_path.
    trajectory.pitch``); and which keys the map gave (:attr:`given`: a closure of the robot description is
    refined by the keys a setup file writes, not by the defaults). Both stay out of comparisons."""

    __slots__ = ('_file', '_at', '_given')

    def placed(self, file: Any, at: str, given: frozenset[str]) -> Any:
        """This item, told where it was written (`file`, dotted key `at`) and which keys it gave; returns it."""
        object.__setattr__(self, '_file', file)
        object.__setattr__(self, '_at', at)
        object.__setattr__(self, '_given', frozenset(given))
        return self

    @property
    def at(self) -> str:
        """The dotted key of this item (``constraints.tool_path``)."""
        return getattr(self, '_at', '')

    @property
    def file(self) -> Any:
        """The setup file this item was written in (None: built in code)."""
        return getattr(self, '_file', None)

    @property
    def given(self) -> frozenset[str]:
        """The keys the map wrote (the rest are defaults)."""
        return getattr(self, '_given', frozenset())

    def error(self, key: str | None, message: str) -> ConfigError:
        """A :class:`ConfigError` (not raised) about `key` of this item (None: the item itself)."""
        return ConfigError(
            message, file=self.file, key=f'{self.at}.{key}' if key and self.at else key or self.at or None
        )

    def written(self) -> dict[str, Any]:
        """The keys as the map wrote them (plain values; a sub-item as its own written map)."""
        out = {}
        for key in sorted(self.given, key=[f.name for f in dataclasses.fields(self)].index):  # type: ignore[arg-type]
            value = getattr(self, key)
            out[key] = value.written() if isinstance(value, Item) else thaw(value)
        return out

    def __reduce__(self) -> Any:  # the place and the given keys travel with a pickled or copied item
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return _placed, (type(self), values, self.file, self.at, self.given)


def _placed(cls: Any, values: dict[str, Any], file: Any, at: str, given: frozenset[str]) -> Any:
    return cls(**values).placed(file, at, given)
