"""The held set (bus/live/held.py): kept across restarts, offered until the agent is back, given up after HOLD_S."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.bus.live import held as held_mod
from crosstalk.bus.live.held import Held, HeldMessages, release


def entry(rel: str, agent: str = "alice", *, since: float | None = None, reply: bool = False) -> Held:
    return Held("c1", rel, agent, "op", f"{agent}@a", reply, time.time() if since is None else since)


def test_held_messages_survive_a_restart_and_keep_their_first_time(tmp_path: Path) -> None:
    path = tmp_path / "held.json"
    first = HeldMessages(path)
    first.hold([entry("m1", since=100.0), entry("m2")])
    first.hold([entry("m1", since=200.0)])  # offered again by a re-scan: still the first hold
    again = HeldMessages(path)
    assert sorted(h.rel for h in again) == ["m1", "m2"]
    assert next(h for h in again if h.rel == "m1").since == 100.0
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_release_delivers_to_agents_that_are_back_and_keeps_the_rest(tmp_path: Path) -> None:
    held = HeldMessages(tmp_path / "held.json")
    held.hold([entry("m1", "alice"), entry("m2", "bob"), entry("m3", "carol")])
    live = {"alice": "alice", "carol": "carol"}
    offered: list[tuple[str, str]] = []

    def deliver(h: Held, agent: str) -> str:
        offered.append((h.rel, agent))
        return "accepted" if agent == "alice" else "unreachable"  # carol's socket does not answer yet

    assert release(held, live.get, deliver, lambda _: True) == 1
    assert sorted(offered) == [("m1", "alice"), ("m3", "carol")]
    assert sorted(h.rel for h in HeldMessages(tmp_path / "held.json")) == ["m2", "m3"]


def test_a_refused_delivery_is_not_offered_again(tmp_path: Path) -> None:
    held = HeldMessages(tmp_path / "held.json")
    held.hold([entry("m1")])
    assert release(held, lambda n: n, lambda h, a: "rejected", lambda _: True) == 0
    assert len(held) == 0


def test_expired_messages_are_given_up_once_the_answer_is_committed(tmp_path: Path) -> None:
    held = HeldMessages(tmp_path / "held.json")
    old = time.time() - held_mod.HOLD_S - 1
    held.hold([entry("task", since=old), entry("reply", since=old, reply=True), entry("fresh")])
    seen: list[list[str]] = []

    def give_up(expired: list[Held]) -> bool:
        seen.append(sorted(h.rel for h in expired))
        return len(seen) > 1  # the first failed reply's commit fails: try again next tick

    release(held, lambda n: None, lambda h, a: "accepted", give_up)
    assert len(held) == 3
    release(held, lambda n: None, lambda h, a: "accepted", give_up)
    assert seen == [["reply", "task"], ["reply", "task"]]
    assert [h.rel for h in held] == ["fresh"]


def test_a_full_held_set_refuses_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(held_mod, "MAX_HELD", 2)
    held = HeldMessages(tmp_path / "held.json")
    refused = held.hold([entry("m1"), entry("m2"), entry("m3")])
    assert [h.rel for h in refused] == ["m3"] and len(held) == 2


def test_a_damaged_held_file_keeps_its_good_entries(tmp_path: Path) -> None:
    path = tmp_path / "held.json"
    good = {"channel": "c", "rel": "r", "agent": "a", "sender": "s", "to": "a@x", "is_reply": False, "since": 1.0}
    bad = [None, 3, "x", {**good, "since": None}, {**good, "is_reply": "no"}, {**good, "agent": ""}, {"rel": "r"}]
    path.write_text(json.dumps({"held": [*bad, good]}))
    assert [h.rel for h in HeldMessages(path)] == ["r"]
    path.write_text("not json {")
    assert len(HeldMessages(path)) == 0


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=8),
    max_leaves=20,
)


@given(_json)
def test_any_json_record_is_an_entry_or_none(data: object) -> None:
    got = Held.from_dict(data)
    assert got is None or isinstance(got, Held)
