"""Identifiers (uuidv7 ids, agent ids, hop entries) and the kind/delivery parsers with their aliases."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.errors import MessageError
from crosstalk.core.ids import (
    agent_id_for,
    hop_entry,
    is_agent_id,
    is_hop_entry,
    is_message_id,
    new_message_id,
)
from crosstalk.core.kinds import DELIVERY_ALIASES, KIND_ALIASES, Delivery, Kind, parse_delivery, parse_kind


# ----------------------------------------------------------------- ids
def test_agent_id_is_16_hex_of_sha256() -> None:
    aid = agent_id_for("claude", "sess-1")
    assert aid == hashlib.sha256(b"claude:sess-1").hexdigest()[:16]
    assert is_agent_id(aid)
    assert len(aid) == 16 and all(c in "0123456789abcdef" for c in aid)


def test_agent_id_is_stable_and_distinguishes_inputs() -> None:
    assert agent_id_for("codex", "thread-9") == agent_id_for("codex", "thread-9")
    assert agent_id_for("codex", "thread-9") != agent_id_for("claude", "thread-9")
    assert agent_id_for("codex", "thread-9") != agent_id_for("codex", "thread-8")
    # a known value guards against the formula drifting (other machines derive the same ids)
    assert agent_id_for("pi", "abc") == hashlib.sha256(b"pi:abc").hexdigest()[:16]


@given(st.text(min_size=1), st.text(min_size=1))
def test_agent_id_property(harness: str, ref: str) -> None:
    aid = agent_id_for(harness, ref)
    assert is_agent_id(aid)
    assert aid == agent_id_for(harness, ref)


@pytest.mark.parametrize(("harness", "ref"), [("", "x"), ("claude", ""), ("", "")])
def test_agent_id_needs_both_parts(harness: str, ref: str) -> None:
    with pytest.raises(ValueError):
        agent_id_for(harness, ref)


@pytest.mark.parametrize(
    "value", ["", "0123456789abcde", "0123456789abcdef0", "0123456789ABCDEF", "0123456789abcdef\n", 12, None]
)
def test_is_agent_id_rejects(value: object) -> None:
    assert not is_agent_id(value)


def test_new_message_id_is_a_uuidv7() -> None:
    mid = new_message_id()
    assert is_message_id(mid)
    assert mid == mid.lower()
    assert mid[14] == "7"


def test_new_message_ids_are_unique_and_ordered() -> None:
    ids = [new_message_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


@pytest.mark.parametrize(
    "value",
    [
        "0192f3a4-5b6c-7d8e-9f01-23456789abcd",
        "550e8400-e29b-41d4-a716-446655440000",  # a uuid4 from a peer is fine
    ],
)
def test_is_message_id_accepts(value: str) -> None:
    assert is_message_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "0192F3A4-5B6C-7D8E-9F01-23456789ABCD",  # not canonical lowercase
        "0192f3a45b6c7d8e9f0123456789abcd",
        "0192f3a4-5b6c-7d8e-9f01-23456789abc",
        "0192f3a4-5b6c-7d8e-9f01-23456789abcd\n",
        "",
        None,
        42,
    ],
)
def test_is_message_id_rejects(value: object) -> None:
    assert not is_message_id(value)


def test_hop_entry() -> None:
    e = hop_entry("0123456789abcdef")
    assert is_hop_entry(e) and len(e) == 24
    assert e == hashlib.sha256(b"hop:0123456789abcdef").hexdigest()[:24]
    assert hop_entry("0123456789abcdef") == e
    assert hop_entry("0123456789abcdee") != e


@pytest.mark.parametrize("value", ["", "a" * 23, "a" * 25, "A" * 24, "g" * 24, "a" * 24 + "\n", None, 1])
def test_is_hop_entry_rejects(value: object) -> None:
    assert not is_hop_entry(value)


# ----------------------------------------------------------------- kinds and deliveries
def test_kind_values() -> None:
    assert [k.value for k in Kind] == ["inform", "ask", "command", "meta", "ping"]
    assert [d.value for d in Delivery] == ["auto", "steer", "next_turn"]


def test_aliases() -> None:
    assert KIND_ALIASES == {"user": Kind.INFORM}
    assert parse_kind("user") is Kind.INFORM
    assert parse_delivery("immediate") is Delivery.AUTO
    assert parse_delivery("followUp") is Delivery.NEXT_TURN
    assert parse_delivery("follow_up") is Delivery.NEXT_TURN
    assert set(DELIVERY_ALIASES) == {"immediate", "followUp", "follow_up"}


@pytest.mark.parametrize("kind", list(Kind))
def test_parse_kind_identity(kind: Kind) -> None:
    assert parse_kind(kind) is kind
    assert parse_kind(kind.value) is kind


@pytest.mark.parametrize("delivery", list(Delivery))
def test_parse_delivery_identity(delivery: Delivery) -> None:
    assert parse_delivery(delivery) is delivery
    assert parse_delivery(delivery.value) is delivery


@pytest.mark.parametrize("value", ["", "Inform", "reply", None, 0, ["ask"]])
def test_parse_kind_errors(value: object) -> None:
    with pytest.raises(MessageError) as info:
        parse_kind(value)
    assert info.value.field == "kind"
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("value", ["", "Auto", "later", "followup", None, 1.0])
def test_parse_delivery_errors(value: object) -> None:
    with pytest.raises(MessageError) as info:
        parse_delivery(value)
    assert info.value.field == "delivery"
    assert "\n" not in str(info.value)


@given(st.text())
def test_parse_kind_total(value: str) -> None:
    """Any string either parses to a Kind or raises MessageError naming 'kind'."""
    try:
        assert isinstance(parse_kind(value), Kind)
    except MessageError as exc:
        assert exc.field == "kind"
        assert value not in {k.value for k in Kind} | set(KIND_ALIASES)


# ----------------------------------------------------------------- uuidv7 layout, monotonic counter, threads
def _ms_of(mid: str) -> int:
    return int(mid.replace("-", "")[:12], 16)


def test_uuidv7_layout_over_many_ids() -> None:
    for mid in (new_message_id() for _ in range(500)):
        v = int(mid.replace("-", ""), 16)
        assert (v >> 76) & 0xF == 7  # version
        assert (v >> 62) & 0b11 == 0b10  # RFC 9562 variant


class _FrozenClock:
    def __init__(self, ns: int) -> None:
        self.ns = ns

    def time_ns(self) -> int:
        return self.ns


def test_ids_stay_ordered_when_the_counter_runs_out_within_one_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    import crosstalk.core.ids as ids_mod

    frozen_ms = 1_900_000_000_000
    monkeypatch.setattr(ids_mod, "time", _FrozenClock(frozen_ms * 1_000_000))
    monkeypatch.setattr(ids_mod, "_last_ms", 0)
    monkeypatch.setattr(ids_mod, "_counter", 0)
    batch = [new_message_id() for _ in range(10_000)]  # far more than the 12-bit counter holds
    assert len(set(batch)) == len(batch)
    assert batch == sorted(batch)
    assert _ms_of(batch[0]) == frozen_ms
    assert _ms_of(batch[-1]) > frozen_ms  # borrowed later milliseconds instead of wrapping
    assert all(is_message_id(m) for m in batch)


def test_ids_from_a_clock_that_steps_back_stay_ordered(monkeypatch: pytest.MonkeyPatch) -> None:
    import crosstalk.core.ids as ids_mod

    clock = _FrozenClock(1_900_000_000_000 * 1_000_000)
    monkeypatch.setattr(ids_mod, "time", clock)
    monkeypatch.setattr(ids_mod, "_last_ms", 0)
    monkeypatch.setattr(ids_mod, "_counter", 0)
    first = new_message_id()
    clock.ns -= 5_000 * 1_000_000  # the wall clock jumps back 5 s
    second = new_message_id()
    assert second > first


def test_ids_are_unique_across_threads() -> None:
    import threading

    results: dict[int, list[str]] = {}

    def work(n: int) -> None:
        results[n] = [new_message_id() for _ in range(3000)]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    everything = [m for ids in results.values() for m in ids]
    assert len(everything) == 8 * 3000 and len(set(everything)) == len(everything)
    for ids in results.values():
        assert ids == sorted(ids)
