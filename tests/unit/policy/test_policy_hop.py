"""Hop guard: loops and chains longer than 32."""

from __future__ import annotations

import pytest

from crosstalk.core.ids import hop_entry, is_hop_entry
from crosstalk.policy import MAX_HOPS, check_hops

SELF = hop_entry("0" * 16)


def chain(n: int) -> list[str]:
    return [hop_entry(f"{i + 1:016x}") for i in range(n)]


def test_entries_are_hop_entries() -> None:
    assert MAX_HOPS == 32
    assert is_hop_entry(SELF) and all(is_hop_entry(e) for e in chain(40))
    assert SELF not in chain(40) and len(set(chain(40))) == 40


@pytest.mark.parametrize(
    ("hops", "expected"),
    [(0, None), (1, None), (31, None), (32, None), (33, "hop:too_long"), (100, "hop:too_long")],
)
def test_length(hops: int, expected: str | None) -> None:
    assert check_hops(chain(hops), SELF) == expected
    assert check_hops(tuple(chain(hops)), SELF) == expected


@pytest.mark.parametrize("at", [0, 5, 31])
def test_self_in_chain_is_loop(at: int) -> None:
    entries = chain(32)
    entries[at] = SELF
    assert check_hops(entries, SELF) == "hop:loop"


def test_self_alone() -> None:
    assert check_hops([SELF], SELF) == "hop:loop"


@pytest.mark.parametrize(("first", "second"), [(0, 1), (0, 31), (10, 20)])
def test_repeat_is_loop(first: int, second: int) -> None:
    entries = chain(32)
    entries[second] = entries[first]
    assert check_hops(entries, SELF) == "hop:loop"


def test_adjacent_repeat_short_chain() -> None:
    a = chain(1)[0]
    assert check_hops([a, a], SELF) == "hop:loop"


def test_loop_wins_over_length() -> None:
    long_with_repeat = [*chain(40), chain(1)[0]]
    assert check_hops(long_with_repeat, SELF) == "hop:loop"
    assert check_hops([*chain(40), SELF], SELF) == "hop:loop"
