"""core/strenum.py's StrEnum behaves as `enum.StrEnum` in everything crosstalk uses of one, member by member."""

from __future__ import annotations

import copy
import enum
import pickle

import pytest

from crosstalk.core import strenum
from crosstalk.core.errors import ErrorKind
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.states import Reason, State


class Lean(strenum.StrEnum):
    A = "a"
    B_C = "b_c"  # a comment

    def shout(self) -> str:
        return self.value.upper()


class Real(enum.StrEnum):
    A = "a"
    B_C = "b_c"

    def shout(self) -> str:
        return self.value.upper()


@pytest.mark.parametrize(
    "probe",
    [
        lambda c: [(m.name, m.value, type(m.value)) for m in c],
        lambda c: (len(c), [str(m) for m in reversed(c)], list(c.__members__)),
        lambda c: (
            str(c.A),
            f"{c.A}",
            format(c.A, ">4"),
            "%s" % c.A,  # noqa: UP031 (the %-format too)
            c.A + "!",
            c.A.upper(),
            c.A.shout(),
        ),
        lambda c: (c.A == "a", c.A == "a", c.A != "b_c", hash(c.A) == hash("a"), {"a": 1}[c.A], c.A < c.B_C),
        lambda c: (c("a") is c.A, c(c.A) is c.A, c["B_C"] is c.B_C, c.A in c, isinstance(c.A, str)),
        lambda c: (isinstance(c.A, c), bool(c.A), sorted([c.B_C, c.A]) == [c.A, c.B_C]),
        lambda c: (pickle.loads(pickle.dumps(c.A)) is c.A, copy.copy(c.A) is c.A, copy.deepcopy([c.A])[0] is c.A),
    ],
)
def test_behaves_as_enum_strenum(probe: object) -> None:
    assert probe(Lean) == probe(Real)  # type: ignore[operator]


def test_repr_and_refusals_as_enum_strenum() -> None:
    assert repr(Lean.A) == repr(Real.A).replace("Real", "Lean")
    assert repr(Lean) == "<enum 'Lean'>"
    for cls in (Lean, Real):
        with pytest.raises(ValueError, match=f"^'z' is not a valid {cls.__name__}$"):
            cls("z")
        with pytest.raises(ValueError, match="is not a valid"):
            cls(["a"])  # unhashable: still a ValueError
        with pytest.raises(KeyError):
            cls["a"]
        with pytest.raises(AttributeError, match="cannot reassign member 'A'"):
            cls.A = "q"  # type: ignore[misc]


def test_definition_errors() -> None:
    with pytest.raises(TypeError, match="is not a string"):

        class NotStr(strenum.StrEnum):
            X = 1

    with pytest.raises(TypeError, match="already"):

        class Alias(strenum.StrEnum):
            X = "x"
            Y = "x"

    with pytest.raises(TypeError, match="cannot extend"):

        class More(Lean):  # type: ignore[misc]
            Z = "z"


def test_crosstalks_enums_are_the_lean_ones() -> None:
    for cls in (State, Reason, Kind, Delivery, ErrorKind):
        assert type(cls) is not enum.EnumType  # no `enum` on `crosstalk send`'s path
        assert all(cls(m.value) is m for m in cls)
    assert [k.value for k in Kind] == ["inform", "ask", "command", "meta", "ping"]
