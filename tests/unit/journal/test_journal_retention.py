"""Retention: 24 h window, whole dependency sets of unresolved work, the latest claim, order preserved."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.message import Message, new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.journal import JournalState
from crosstalk.journal import records as R
from crosstalk.journal.retention import RETENTION_SECONDS, select_retained

NOW = 1_800_000_000.0
OLD = NOW - RETENTION_SECONDS - 3600  # well past the window
RECENT = NOW - 60
BIND = R.binding("inst", "sess")
ALICE = Sender(SenderClass.VERIFIED, "a" * 16, "alice")


def at(ts: float, rec: dict[str, Any]) -> dict[str, Any]:
    rec["ts"] = ts
    return rec


def received(m: Message, ts: float) -> dict[str, Any]:
    return at(ts, R.received(m, ALICE, dedupe_key=ALICE.dedupe_key, transport="uds", bind=BIND))


def lifecycle(m: Message, ts: float, state: State) -> list[dict[str, Any]]:
    return [received(m, ts), at(ts, R.dispatch(m.message_id, BIND)), at(ts, R.outcome(m.message_id, state, None, BIND))]


def retain(records: list[dict[str, Any]], unresolved: set[str] | None = None) -> list[dict[str, Any]]:
    if unresolved is None:
        unresolved = JournalState.replay(records).unresolved_ids()
    return select_retained(records, unresolved, now=NOW)


def same(kept: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    return [id(r) for r in kept] == [id(r) for r in expected]


def test_window_is_24_hours() -> None:
    assert RETENTION_SECONDS == 24 * 3600


def test_recent_records_are_kept() -> None:
    recs = [
        *lifecycle(new_message("bob", "x"), RECENT, State.ACCEPTED),
        at(RECENT, R.claim("claim", "o", "o", "w")),
        at(RECENT, {"type": R.NUDGE, "peer": "x"}),
    ]
    assert same(retain(recs), recs)


def test_the_boundary_is_inclusive() -> None:
    m = new_message("bob", "x")
    edge = lifecycle(m, NOW - RETENTION_SECONDS, State.ACCEPTED)
    assert same(retain(edge), edge)
    past = lifecycle(new_message("bob", "y"), NOW - RETENTION_SECONDS - 0.001, State.ACCEPTED)
    assert retain(past) == []


def test_old_resolved_work_is_dropped() -> None:
    old = lifecycle(new_message("bob", "old"), OLD, State.ACCEPTED)
    new = lifecycle(new_message("bob", "new"), RECENT, State.QUEUED)
    recs = [*old, *new]
    assert same(retain(recs), new)


def test_old_records_without_ids_are_dropped() -> None:
    recs = [
        at(OLD, {"type": R.NUDGE, "peer": "x"}),
        at(OLD, R.rejected(None, ALICE, "auth", transport="uds")),
        at(RECENT, {"type": R.NUDGE, "peer": "y"}),
    ]
    assert same(retain(recs), recs[2:])


def test_missing_ts_counts_as_old() -> None:
    rec = {"type": R.NUDGE, "peer": "x"}
    assert retain([rec]) == []


def test_old_unresolved_ask_keeps_its_whole_dependency_set() -> None:
    ask = new_message("bob", "what is 2+2?", kind="ask", deadline_seconds=600)
    reply = new_message("alice", "4", in_reply_to=ask.message_id)
    noise = lifecycle(new_message("bob", "old noise"), OLD, State.ACCEPTED)
    group = [
        *lifecycle(ask, OLD, State.ACCEPTED),
        at(OLD, {"type": R.OBLIGATION, "message_id": ask.message_id, "state": "open"}),
        at(OLD, R.sent(reply, "a" * 16, "unknown", "timeout")),  # linked only through in_reply_to
    ]
    recs = [noise[0], group[0], noise[1], group[1], group[2], noise[2], group[3], group[4]]
    state = JournalState.replay(recs)
    assert state.unresolved_ids() == {ask.message_id}  # the message itself is delivered; the obligation is open
    assert same(retain(recs), group)


def test_old_unknown_message_keeps_its_records_until_resolved() -> None:
    m = new_message("bob", "lost?")
    recs = lifecycle(m, OLD, State.UNKNOWN)
    assert same(retain(recs), recs)
    recs.append(at(OLD, R.resolved(m.message_id, "read")))
    assert retain(recs) == []


def test_a_recent_record_keeps_its_old_group() -> None:
    m = new_message("bob", "x")
    old = lifecycle(m, OLD, State.ACCEPTED)
    late = at(RECENT, R.resolved(m.message_id, "read"))
    recs = [*old, late]
    assert same(retain(recs), recs)


def test_reply_chains_are_transitive() -> None:
    a = new_message("bob", "a", kind="ask")
    b = new_message("bob", "b", in_reply_to=a.message_id)
    c = new_message("bob", "c", in_reply_to=b.message_id)
    unrelated = new_message("bob", "z")
    recs = [received(a, OLD), received(unrelated, OLD), received(b, OLD), received(c, OLD)]
    assert same(retain(recs, {c.message_id}), [recs[0], recs[2], recs[3]])
    assert same(retain(recs, {a.message_id}), [recs[0], recs[2], recs[3]])


def test_tasks_link_through_task_id() -> None:
    m = Message.from_dict({**new_message("bob", "x").to_dict(), "task_id": "task-1"})
    recs = [
        received(m, OLD),
        at(OLD, R.outcome(m.message_id, State.ACCEPTED, None, BIND)),
        at(OLD, {"type": R.TASK, "task_id": "task-1", "state": "working"}),
        at(OLD, {"type": R.TASK, "task_id": "task-2", "state": "completed"}),
    ]
    assert JournalState.replay(recs).unresolved_ids() == {"task-1"}
    assert same(retain(recs), recs[:3])


def test_reply_id_links_an_obligation_to_its_reply() -> None:
    reply = new_message("dave", "done")
    recs = [
        at(OLD, {"type": R.OBLIGATION, "message_id": "in-1", "state": "open", "reply_id": reply.message_id}),
        at(OLD, R.sent(reply, None, "unknown", None)),
    ]
    assert same(retain(recs), recs)


def test_open_route_keeps_the_outbound_ask() -> None:
    ask = new_message("carol", "?", kind="ask")
    recs = [
        at(OLD, R.sent(ask, "c" * 16, "accepted", None)),
        at(OLD, {"type": R.ROUTE, "message_id": ask.message_id, "state": "open"}),
    ]
    assert same(retain(recs), recs)
    recs.append(at(OLD, {"type": R.ROUTE, "message_id": ask.message_id, "state": "answered"}))
    assert retain(recs) == []


def test_latest_claim_is_always_kept() -> None:
    c1 = at(OLD - 10, R.claim("claim", "o1", "one", "worker"))
    c2 = at(OLD, R.claim("claim", "o2", "two", "worker"))
    recs = [c1, *lifecycle(new_message("bob", "x"), OLD, State.ACCEPTED), c2]
    assert same(retain(recs), [c2])
    c3 = at(RECENT, R.claim("release", None, None, "primary"))
    assert same(retain([c1, c2, c3]), [c3])
    recent_both = [at(RECENT, R.claim("claim", "o", "o", "worker")), c3]
    assert same(retain(recent_both), recent_both)


def test_unresolved_ids_not_in_the_journal_are_harmless() -> None:
    recs = lifecycle(new_message("bob", "x"), OLD, State.ACCEPTED)
    assert retain(recs, {"nowhere", "else"}) == []
    assert select_retained([], {"x"}, now=NOW) == []


def test_default_now_is_the_clock() -> None:
    import time

    recent = lifecycle(new_message("bob", "x"), time.time(), State.ACCEPTED)
    old = lifecycle(new_message("bob", "y"), time.time() - RETENTION_SECONDS - 10, State.ACCEPTED)
    assert same(select_retained([*old, *recent], set()), recent)


def test_custom_window() -> None:
    recs = lifecycle(new_message("bob", "x"), NOW - 100, State.ACCEPTED)
    assert select_retained(recs, set(), now=NOW, window_s=50) == []
    assert same(select_retained(recs, set(), now=NOW, window_s=200), recs)


# ----------------------------------------------------------------- properties
POOL = [f"id-{i}" for i in range(8)]
ID_KEYS = ("message_id", "task_id", "in_reply_to", "reply_id")
_maybe_id = st.none() | st.sampled_from(POOL)


@st.composite
def journal_records(draw: st.DrawFn) -> dict[str, Any]:
    rtype = draw(
        st.sampled_from(
            [
                R.RECEIVED,
                R.DISPATCH,
                R.OUTCOME,
                R.RESOLVED,
                R.CLAIM,
                R.SENT,
                R.TASK,
                R.ROUTE,
                R.OBLIGATION,
                R.NUDGE,
                R.REJECTED,
            ]
        )
    )
    rec: dict[str, Any] = {"type": rtype}
    if draw(st.booleans()):
        rec["ts"] = draw(st.sampled_from([OLD - 5, OLD, NOW - RETENTION_SECONDS, RECENT, NOW]))
    if rtype == R.CLAIM:
        rec["owner"] = draw(_maybe_id)  # claims name an owner, not a message: no ids
        return rec
    for key in ID_KEYS:
        value = draw(_maybe_id)
        if value is not None:
            rec[key] = value
    if draw(st.booleans()):
        rec["message"] = {k: v for k in ("message_id", "in_reply_to", "task_id") if (v := draw(_maybe_id))}
    return rec


def oracle_ids(rec: dict[str, Any]) -> set[str]:
    ids = {rec[k] for k in ID_KEYS if isinstance(rec.get(k), str)}
    msg = rec.get("message")
    if isinstance(msg, dict):
        ids |= {msg[k] for k in ("message_id", "in_reply_to", "task_id") if isinstance(msg.get(k), str)}
    return ids


def components(records: list[dict[str, Any]]) -> dict[str, frozenset[str]]:
    """Each id → the set of ids connected to it by co-occurring in a record (naive closure)."""
    groups: list[set[str]] = []
    for rec in records:
        ids = oracle_ids(rec)
        if not ids:
            continue
        touching = [g for g in groups if g & ids]
        merged = set(ids).union(*touching)
        groups = [g for g in groups if not (g & ids)] + [merged]
    return {i: frozenset(g) for g in groups for i in g}


def is_subsequence(sub: list[Any], seq: list[Any]) -> bool:
    it = iter(id(x) for x in seq)
    return all(any(y == id(x) for y in it) for x in sub)


@given(st.lists(journal_records(), max_size=30), st.sets(st.sampled_from([*POOL, "absent"])))
def test_retention_properties(records: list[dict[str, Any]], unresolved: set[str]) -> None:
    cutoff = NOW - RETENTION_SECONDS
    kept = select_retained(records, unresolved, now=NOW)
    kept_ids = {id(r) for r in kept}

    # 1. an order-preserving subsequence of the input, no duplicates
    assert is_subsequence(kept, records)
    assert len(kept_ids) == len(kept)

    groups = components(records)
    recent_groups = {groups[i] for r in records if float(r.get("ts", 0)) >= cutoff for i in oracle_ids(r)}
    unresolved_groups = {groups[i] for i in unresolved if i in groups}
    claims = [i for i, r in enumerate(records) if r["type"] == R.CLAIM]
    for i, r in enumerate(records):
        ids = oracle_ids(r)
        group = groups[next(iter(ids))] if ids else None
        expected = (
            (claims and i == claims[-1])
            or float(r.get("ts", 0)) >= cutoff
            or group in unresolved_groups
            or group in recent_groups
        )
        assert (id(r) in kept_ids) == bool(expected), (i, r)

    # 2. every record of an unresolved id's group is kept
    for uid in unresolved & set(groups):
        for r in records:
            if oracle_ids(r) & groups[uid]:
                assert id(r) in kept_ids


@given(st.lists(journal_records(), max_size=30))
def test_retention_is_idempotent(records: list[dict[str, Any]]) -> None:
    unresolved = JournalState.replay(records).unresolved_ids()
    once = select_retained(records, unresolved, now=NOW)
    twice = select_retained(once, JournalState.replay(once).unresolved_ids(), now=NOW)
    assert same(twice, once)
