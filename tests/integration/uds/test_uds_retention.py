"""Retention on a running agent: compaction of the live journal, with the in-memory state pruned to match."""

from __future__ import annotations

import time

from crosstalk.core.message import new_message
from crosstalk.ingress.client import send
from crosstalk.journal.codec import read_journal
from tests.support.uds import HostThread

SENDER = "@test:retention"


def test_live_compaction_forgets_old_delivered_messages_and_keeps_working(host: HostThread) -> None:
    sent = [send(host.paths, new_message(host.name, f"m{i}", from_=SENDER)).outcome for i in range(5)]
    assert {o.state.value for o in sent} == {"accepted"}
    assert len(host.host.state.messages) == 5

    # Pretend a day has passed: every message is resolved and older than the window.
    before, after = host.call(host.host.compact(now=time.time() + 25 * 3600))
    assert (before, after) == (15, 0)  # 5 messages × (received, dispatch, outcome), all dropped
    assert host.host.state.messages == {} and host.host.state.dedupe == {}

    again = send(host.paths, new_message(host.name, "after compaction", from_=SENDER)).outcome
    assert again.state.value == "accepted"
    records = read_journal(host.paths.journal_file(host.agent_id))
    assert records.torn_tail_bytes == 0
    assert [r["type"] for r in records.records] == ["received", "dispatch", "outcome"]
    assert host.fake.writes[-1]["text"] == "after compaction"


def test_live_compaction_keeps_recent_messages_and_their_dedupe(host: HostThread) -> None:
    first = send(host.paths, new_message(host.name, "recent", from_=SENDER)).outcome
    before, after = host.call(host.host.compact())
    assert (before, after) == (3, 3)  # received, dispatch, outcome: nothing is old enough to drop
    retry = send(host.paths, new_message(host.name, "recent", from_=SENDER, message_id=first.message_id)).outcome
    assert retry.evidence.get("duplicate") is True
    assert len(host.fake.writes) == 1


def test_a_busy_agent_compacts_on_growth_and_its_memory_and_journal_stay_bounded(start_host) -> None:
    """Many messages well inside the 24 h window: the journal is compacted each time it grew by
    `compact_after_bytes` (not only hourly), settled messages collapse into checkpoint records, and memory holds
    the newest `max_settled`. After a restart every one of them is still answered as a duplicate, never injected
    again."""
    bound, n = 20, 400
    host = start_host(config={"max_settled": bound, "compact_after_bytes": 64 * 1024})
    sent = [send(host.paths, new_message(host.name, f"m{i}", from_=SENDER)).outcome for i in range(n)]
    assert {o.state.value for o in sent} == {"accepted"}
    assert len(host.host.state.messages) <= bound + 16
    journal = host.journal_path
    records = host.records()
    assert any(r["type"] == "checkpoint" for r in records)  # a growth compaction ran
    assert journal.stat().st_size < 64 * 1024 + 3 * 1024 * (bound + 16) + 32 * 1024  # not n messages' records

    host.close()
    again = start_host(config={"max_settled": bound, "compact_after_bytes": 64 * 1024})
    assert again.agent_id == host.agent_id
    for o in (sent[0], sent[n // 2], sent[-1]):
        retry = send(again.paths, new_message(again.name, "again", from_=SENDER, message_id=o.message_id)).outcome
        assert retry.state.value == "accepted" and retry.evidence.get("duplicate") is True
    assert again.fake.writes == []  # nothing injected twice


def test_compaction_forgets_the_terminal_tasks_whose_records_it_dropped(host: HostThread) -> None:
    """A terminal task let go is remembered only until a compaction has dropped its records (docs/dev/shim-memory.md):
    the set no longer grows by a task per message up to the dedupe window's 20,000."""
    assert send(host.paths, new_message(host.name, "one", from_=SENDER)).outcome.state.value == "accepted"
    gone = host.host.state.gone_tasks
    gone.add("01a24000-0000-7000-8000-000000000001", None, "completed", None, time.time() - 60)  # idle host
    assert len(gone) == 1
    host.call(host.host.compact())
    assert len(gone) == 0
    again = send(host.paths, new_message(host.name, "two", from_=SENDER)).outcome
    assert again.state.value == "accepted"
