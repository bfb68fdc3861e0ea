"""Retention on a running agent: compaction of the live journal, with the in-memory state pruned to match."""

from __future__ import annotations

import time

import pytest
from uds_support import HostThread

from crosstalk.core.message import new_message
from crosstalk.ingress.client import send
from crosstalk.journal.codec import read_journal

pytestmark = pytest.mark.integration

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
