"""`Record`: the base of the frozen value records on `crosstalk send`'s start-up path, written without `dataclasses`.

`crosstalk send` has a start-up budget of twice the bare interpreter (docs/performance.md, "Lean send path"). Importing
`dataclasses` costs ~16 ms there (it imports inspect, and with it ast, dis and tokenize), and every frozen slotted
dataclass ~1 ms more at import (its methods are generated and compiled then). So the records that path builds
(Outcome, Message, TextPart, StatePaths, Descriptor, and the ingress and routing results) are plain slotted classes:
each writes its `__init__` (storing its fields with `_set`, in `_fields` order) and inherits from here what a frozen
dataclass has: equality and hashing over the fields, a repr, refusal to be changed, copying and pickling, and
`with_(**changes)`, the copy with some fields changed (dataclasses.replace). Records deeper in crosstalk, off that
path, stay dataclasses.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from typing import Any, Self


class Record:
    """A frozen record whose fields are its class's `_fields`, in order, and its `__slots__` (one level: a record is
    not subclassed)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _set(self, *values: object) -> None:
        """Store the fields, in `_fields` order: only a record's own `__init__` calls this."""
        for name, value in zip(self._fields, values, strict=True):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes` applied; the class's `__init__` checks them (an unknown field is a TypeError)."""
        return type(self)(**{**dict(zip(self._fields, self._values(), strict=True)), **changes})

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({inner})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")  # as dataclasses' FrozenInstanceError is

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:  # copy, deepcopy and pickle rebuild it without __setattr__
        return (_restore, (type(self), self._values()))


def _restore(cls: type[Record], values: tuple[Any, ...]) -> Record:
    record = object.__new__(cls)
    record._set(*values)
    return record
