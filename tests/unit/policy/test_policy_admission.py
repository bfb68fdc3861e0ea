"""Admission limits at N-1, N and N+1; a limit of N admits N."""

from __future__ import annotations

import pytest

from crosstalk.core.kinds import Kind
from crosstalk.policy import Limits, Load, check_admission
from crosstalk.policy.errors import PolicyError

SMALL = Limits(max_text_bytes=100, max_pending_tasks=4, max_open_asks=3, max_default_waits=2)


def test_defaults_match_the_design() -> None:
    limits = Limits()
    assert (
        limits.max_text_bytes,
        limits.max_pending_tasks,
        limits.max_open_asks,
        limits.max_default_waits,
    ) == (
        65536,
        256,
        32,
        64,
    )
    assert Load() == Load(pending_tasks=0, open_asks=0, default_waits=0)


@pytest.mark.parametrize("limits", [Limits(), SMALL], ids=["default", "small"])
@pytest.mark.parametrize(("delta", "expected"), [(-1, None), (0, None), (1, "admission:text_too_large")])
@pytest.mark.parametrize("kind", list(Kind), ids=str)
def test_text_bytes(limits: Limits, delta: int, expected: str | None, kind: Kind) -> None:
    got = check_admission(kind, limits.max_text_bytes + delta, Load(), limits, new_task=True, default_wait=True)
    assert got == expected


@pytest.mark.parametrize("limits", [Limits(), SMALL], ids=["default", "small"])
@pytest.mark.parametrize(
    ("delta", "expected"), [(-1, None), (0, "admission:pending_tasks"), (1, "admission:pending_tasks")]
)
def test_pending_tasks(limits: Limits, delta: int, expected: str | None) -> None:
    load = Load(pending_tasks=limits.max_pending_tasks + delta)
    assert check_admission(Kind.INFORM, 1, load, limits, new_task=True, default_wait=False) == expected
    # A continuation of an open task occupies no new task, so a full table does not refuse it.
    assert check_admission(Kind.INFORM, 1, load, limits, new_task=False, default_wait=False) is None


@pytest.mark.parametrize("limits", [Limits(), SMALL], ids=["default", "small"])
@pytest.mark.parametrize(("delta", "expected"), [(-1, None), (0, "admission:open_asks"), (1, "admission:open_asks")])
@pytest.mark.parametrize("kind", list(Kind), ids=str)
def test_open_asks(limits: Limits, delta: int, expected: str | None, kind: Kind) -> None:
    load = Load(open_asks=limits.max_open_asks + delta)
    got = check_admission(kind, 1, load, limits, new_task=False, default_wait=False)
    # Only an ask opens an obligation; other kinds pass however many asks are open.
    assert got == (expected if kind is Kind.ASK else None)


@pytest.mark.parametrize("limits", [Limits(), SMALL], ids=["default", "small"])
@pytest.mark.parametrize(
    ("delta", "expected"), [(-1, None), (0, "admission:default_waits"), (1, "admission:default_waits")]
)
def test_default_waits(limits: Limits, delta: int, expected: str | None) -> None:
    load = Load(default_waits=limits.max_default_waits + delta)
    assert check_admission(Kind.INFORM, 1, load, limits, new_task=False, default_wait=True) == expected
    assert check_admission(Kind.INFORM, 1, load, limits, new_task=False, default_wait=False) is None


def test_first_failure_order() -> None:
    full = Load(pending_tasks=4, open_asks=3, default_waits=2)
    args = {"new_task": True, "default_wait": True}
    assert check_admission(Kind.ASK, 101, full, SMALL, **args) == "admission:text_too_large"
    assert check_admission(Kind.ASK, 100, full, SMALL, **args) == "admission:pending_tasks"
    assert check_admission(Kind.ASK, 100, full, SMALL, new_task=False, default_wait=True) == "admission:open_asks"
    assert (
        check_admission(Kind.INFORM, 100, full, SMALL, new_task=False, default_wait=True) == "admission:default_waits"
    )
    assert check_admission(Kind.INFORM, 100, full, SMALL, new_task=False, default_wait=False) is None


def test_zero_limits_admit_nothing_countable() -> None:
    zero = Limits(0, 0, 0, 0)
    assert check_admission(Kind.PING, 0, Load(), zero, new_task=False, default_wait=False) is None
    assert check_admission(Kind.PING, 1, Load(), zero, new_task=False, default_wait=False) == (
        "admission:text_too_large"
    )
    assert check_admission(Kind.INFORM, 0, Load(), zero, new_task=True, default_wait=False) == (
        "admission:pending_tasks"
    )
    assert check_admission(Kind.ASK, 0, Load(), zero, new_task=False, default_wait=False) == "admission:open_asks"


def test_answer_does_not_change_load() -> None:
    load = Load(pending_tasks=4, open_asks=3, default_waits=2)
    for _ in range(3):
        assert check_admission(Kind.ASK, 1, load, SMALL, new_task=True, default_wait=True) is not None
    assert load == Load(pending_tasks=4, open_asks=3, default_waits=2)


@pytest.mark.parametrize("bad", [-1, True, 1.5, "3", None])
def test_limits_and_load_reject_bad_numbers(bad: object) -> None:
    with pytest.raises(PolicyError, match="max_open_asks"):
        Limits(max_open_asks=bad)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="open_asks"):
        Load(open_asks=bad)  # type: ignore[arg-type]
