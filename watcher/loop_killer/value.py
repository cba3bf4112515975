"""``Value``: a small immutable record, for the types the tool-call hooks load.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``): about
10 ms, which a PostToolUse would pay on every tool call for three small records (the
settings, the thresholds, where a call stands). A ``Value`` gives them what they used
from a frozen dataclass: equality and hashing by their fields, a readable ``repr``,
``replace``, and no assignment after ``__init__``.

A subclass names its fields in ``__slots__`` (in order) and sets each in ``__init__``
with ``self._set``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook does not import typing
if TYPE_CHECKING:
    from typing import Any, TypeVar

    V = TypeVar("V", bound="Value")

__all__ = ["Value"]


class Value:
    """Equal by type and fields; read-only once made."""

    __slots__: tuple[str, ...] = ()

    def _set(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: use replace()")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Value)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def replace(self: V, **changes: Any) -> V:
        """A copy with ``changes`` made (an unknown name raises TypeError)."""
        unknown = changes.keys() - set(self.__slots__)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return _made(type(self), tuple(changes.get(name, getattr(self, name))
                                       for name in self.__slots__))

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (scan workers) and copied alike
        return _made, (type(self), self._fields())


def _made(kind: type[V], values: tuple[Any, ...]) -> V:
    made = object.__new__(kind)
    for name, value in zip(kind.__slots__, values, strict=True):
        object.__setattr__(made, name, value)
    return made
