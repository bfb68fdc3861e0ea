"""`StrEnum`, without the `enum` module: crosstalk's string enums (State, Kind, ErrorKind, ...) are built on this.

`crosstalk send` has a start-up budget of twice the bare interpreter (docs/performance.md, "Lean send path"), and
`enum` is most of a bare start by itself: it imports functools, collections, operator and types, and each enum class
it builds runs its metaclass's long set-up. Type checkers see `enum.StrEnum` (the `TYPE_CHECKING` branch), so every
use is checked as an enum; at run time this class gives what crosstalk uses of one, as `enum.StrEnum` gives it:

- members are instances of their class and of `str`, equal to (and hashing as) their value; `str()`, `format()`
  and f-strings give the value, `repr()` `<Cls.NAME: 'value'>`; `.name`, `.value`;
- `Cls(value)` is the member with that value (a member is itself), else ValueError "'x' is not a valid Cls";
  `Cls['NAME']` the member by name, else KeyError; iteration and `len` in definition order; `Cls.__members__`;
- members cannot be reassigned or deleted; copying gives the member itself; pickling goes by value.

A class attribute is a member when its name has no leading underscore and it is not a function, property or other
descriptor; a member's value must be a string (TypeError otherwise). Not supported (unused here, refused or absent):
`auto()`, aliases (two names, one value: TypeError), `_missing_`, subclassing a class that has members, and
`isinstance(x, enum.Enum)`. tests/unit/core/test_core_strenum.py holds it to `enum.StrEnum` member by member.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from enum import StrEnum as StrEnum
    from typing import Any
else:

    def _is_member(name: str, value: object) -> bool:
        return not name.startswith("_") and not callable(value) and not hasattr(value, "__get__")

    class _StrEnumType(type):
        def __new__(mcs, cls_name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
            members = [(k, v) for k, v in namespace.items() if _is_member(k, v)]
            if members and any(getattr(b, "_member_map_", None) for b in bases):
                raise TypeError(f"{cls_name!r}: cannot extend an enum that has members")
            for key, _value in members:
                del namespace[key]
            cls = super().__new__(mcs, cls_name, bases, namespace)
            by_name, by_value = {}, {}
            for key, value in members:
                if not isinstance(value, str):
                    raise TypeError(f"{cls_name}.{key}: {value!r} is not a string")
                if value in by_value:
                    raise TypeError(f"{cls_name}.{key}: the value {value!r} is {by_value[value]._name_}'s already")
                member = str.__new__(cls, value)
                member._name_, member._value_ = key, str(value)
                by_name[key] = by_value[value] = member
                type.__setattr__(cls, key, member)
            type.__setattr__(cls, "_member_map_", by_name)
            type.__setattr__(cls, "_value2member_map_", by_value)
            return cls

        def __call__(cls, value: object) -> Any:
            if isinstance(value, cls):
                return value
            try:
                return cls._value2member_map_[value]
            except (KeyError, TypeError):
                raise ValueError(f"{value!r} is not a valid {cls.__qualname__}") from None

        def __getitem__(cls, name: str) -> Any:
            return cls._member_map_[name]

        def __iter__(cls) -> Any:
            return iter(cls._member_map_.values())

        def __reversed__(cls) -> Any:
            return reversed(cls._member_map_.values())

        def __len__(cls) -> int:
            return len(cls._member_map_)

        def __contains__(cls, value: object) -> bool:
            return isinstance(value, cls) and value._name_ in cls._member_map_

        def __bool__(cls) -> bool:
            return True

        @property
        def __members__(cls) -> dict[str, Any]:
            return dict(cls._member_map_)

        def __setattr__(cls, name: str, value: object) -> None:
            if name in cls.__dict__.get("_member_map_", ()):
                raise AttributeError(f"cannot reassign member {name!r}")
            super().__setattr__(name, value)

        def __delattr__(cls, name: str) -> None:
            if name in cls.__dict__.get("_member_map_", ()):
                raise AttributeError(f"cannot delete member {name!r}")
            super().__delattr__(name)

        def __repr__(cls) -> str:
            return f"<enum {cls.__name__!r}>"

    class StrEnum(str, metaclass=_StrEnumType):
        """The base of a string enum (see the module's docstring)."""

        @property
        def name(self) -> str:
            return self._name_

        @property
        def value(self) -> str:
            return self._value_

        def __repr__(self) -> str:
            return f"<{type(self).__name__}.{self._name_}: {self._value_!r}>"

        def __str__(self) -> str:
            return self._value_

        def __format__(self, spec: str) -> str:
            return self._value_.__format__(spec)

        __hash__ = str.__hash__

        def __reduce_ex__(self, protocol: object) -> Any:
            return type(self), (self._value_,)

        def __copy__(self) -> Any:
            return self

        def __deepcopy__(self, memo: object) -> Any:
            return self

        def __setattr__(self, name: str, value: object) -> None:
            if name in ("_name_", "_value_") and name in self.__dict__:
                raise AttributeError(f"cannot change {name} of {self!r}")
            super().__setattr__(name, value)
