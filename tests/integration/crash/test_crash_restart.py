"""THE crash test: SIGKILL a receiving agent mid-stream, restart it, and prove that

  (a) every acknowledged message is durable: a `received` and an `accepted` `outcome` record in the journal;
  (b) nothing reached the session twice, across both lives;
  (c) re-sending any journaled message (same message_id, same sender) after the restart answers its prior state
      as a duplicate and injects nothing;
  (d) a message caught between its dispatch claim and its outcome comes back `unknown` (reconciled), never
      re-injected;
  (e) the restart reports what it reconciled and leaves no torn line in the journal.

Plus: a torn tail appended by hand after the kill is dropped on restart.
"""

from __future__ import annotations

import json
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.message import new_message
from crosstalk.ingress.client import send
from crosstalk.journal.codec import read_journal
from crosstalk.registry.paths import StatePaths
from tests.support.crash import SEND_TIMEOUT_S, SENDER, Stream, by_type
from tests.support.procs import Procs, wait_for


def resend_all(paths: StatePaths, to: str, ids: list[str], threads: int = 4) -> dict[str, tuple[str, dict]]:
    """Send each id again (same message_id, same sender tag); message_id → (state, evidence)."""
    out: dict[str, tuple[str, dict]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(chunk: list[str]) -> None:
        try:
            for mid in chunk:
                msg = new_message(to, "resent after the restart", from_=SENDER, message_id=mid)
                outcome = send(paths, msg, timeout=SEND_TIMEOUT_S).outcome
                with lock:
                    out[mid] = (outcome.state.value, dict(outcome.evidence))
        except BaseException as exc:
            with lock:
                errors.append(exc)

    ts = [threading.Thread(target=work, args=(ids[n::threads],), daemon=True) for n in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors[:3]
    assert len(out) == len(ids)
    return out


def assert_clean_journal(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "torn line at the end of the journal"
    lines = raw.split(b"\n")[:-1]
    records = [json.loads(line) for line in lines]  # every line is a whole record
    assert all(isinstance(r, dict) and isinstance(r.get("type"), str) for r in records)
    result = read_journal(path)
    assert result.torn_tail_bytes == 0 and result.bad_lines == 0
    return records


# With hang_at, that injection of the first life hangs in the harness: at least one message is surely caught
# between its dispatch claim and its outcome when the kill lands. The other senders are caught wherever the kill
# finds them (in the journal batch, in the harness write, after it: some in-flight ones are already in the inbox).
@pytest.mark.parametrize(("kill_after", "hang_at"), [(60, 20), (300, None), (500, 450)], ids=["early", "mid", "late"])
def test_crash_mid_stream_restart_never_loses_or_duplicates(xt: Procs, kill_after: int, hang_at: int | None) -> None:
    script = ("--script", ",".join(["accept"] * hang_at + ["hang"])) if hang_at is not None else ()
    first = xt.start_agent("crashy", *script)
    agent_id = first.agent_id
    journal = xt.paths.journal_file(agent_id)
    stream = Stream(xt.paths, "crashy").start()
    try:
        wait_for(lambda: stream.n_acked() >= kill_after, timeout=30, what=f"{kill_after} acknowledgements")
        xt.kill9(first)
        assert first.proc.returncode == -signal.SIGKILL
        errors_at_kill = stream.n_errors()
        # The senders keep going against the dead agent: every one of those gets an error, never an ack.
        wait_for(lambda: stream.n_errors() >= errors_at_kill + 20, timeout=10, what="errors after the kill")
    finally:
        stream.join()
    acked = dict(stream.acked)
    assert len(acked) >= kill_after
    assert set(acked) & set(stream.errors) == set()
    assert set(acked.values()) == {"accepted"}

    # --- the journal as the kill left it.
    before = read_journal(journal)
    types_before = by_type(before.records)
    received_before = set(types_before.get("received", {}))
    dispatched_before = set(types_before.get("dispatch", {}))
    outcome_before = set(types_before.get("outcome", {}))
    in_flight = (received_before & dispatched_before) - outcome_before
    never_claimed = received_before - dispatched_before - outcome_before
    if hang_at is not None:
        assert in_flight, "the hung injection must be in flight at the kill"
    inbox_before = first.inbox_ids()  # what the first life injected
    assert len(inbox_before) == len(set(inbox_before))
    if hang_at is not None:
        # The hung injection wrote nothing: it is in flight, not in the inbox, not acknowledged.
        assert in_flight - set(inbox_before)
    assert not (in_flight & set(acked))
    assert len(inbox_before) >= kill_after

    # --- restart: same name, same session, same inbox → same agent_id, same journal.
    second = xt.start_agent("crashy")
    assert second.agent_id == agent_id
    assert second.registered_name == "crashy"
    assert second.ready["notice"] is None
    replay = second.ready["replay"]
    assert replay["records"] == len(before.records)
    assert replay["torn_tail_bytes"] == before.torn_tail_bytes
    assert replay["bad_lines"] == 0
    assert replay["reconciled"] == len(in_flight) + len(never_claimed)

    after = assert_clean_journal(journal)  # (e)
    types_after = by_type(after)

    # (a) every acknowledged message has its received record and an accepted outcome, written before the ack.
    for mid in acked:
        assert len(types_after["received"].get(mid, [])) == 1, mid
        outs = types_after["outcome"].get(mid, [])
        assert [o["state"] for o in outs] == ["accepted"], (mid, outs)
        assert not outs[0].get("reconciled")

    # (d) the in-flight ones were reconciled to unknown, once, with a reason.
    for mid in in_flight:
        outs = types_after["outcome"][mid]
        assert len(outs) == 1
        assert outs[0]["state"] == "unknown"
        assert outs[0]["reconciled"] is True
        assert outs[0]["reason"] == "crashed_during_dispatch"

    # (b) nothing injected twice across both lives (both write the same inbox file).
    inbox_after_restart = second.inbox_ids()
    assert inbox_after_restart == inbox_before  # the restart itself injected nothing
    assert not [m for m, c in Counter(inbox_after_restart).items() if c > 1]
    assert set(acked) <= set(inbox_after_restart)
    assert set(inbox_after_restart) <= received_before  # nothing reached the session without being journaled

    # (c) + (d): every journaled message, sent again with its message_id, answers its prior state as a duplicate.
    journaled = sorted(received_before)
    again = resend_all(xt.paths, "crashy", journaled)
    prior = {mid: types_after["outcome"][mid][-1]["state"] for mid in journaled}
    # recovered (journaled, never claimed) is mailbox-only: a sender is told unknown.
    prior = {mid: "unknown" if state == "recovered" else state for mid, state in prior.items()}
    for mid in journaled:
        state, evidence = again[mid]
        assert state == prior[mid], (mid, state, prior[mid])
        assert evidence.get("duplicate") is True, (mid, evidence)
    for mid in acked:
        assert again[mid][0] == "accepted"
    for mid in in_flight:
        assert again[mid][0] == "unknown"
    assert second.inbox_ids() == inbox_before, "a resend after the restart reached the session"

    # Messages that errored at the sender but had been journaled (the answer was lost with the process) were
    # covered above; the rest never reached the agent at all: not in the journal, not in the inbox.
    lost = set(stream.errors) - received_before
    assert not (lost & set(second.inbox_ids()))

    # The restarted agent still delivers: a fresh message is injected exactly once.
    fresh = new_message("crashy", "after the restart", from_=SENDER)
    assert send(xt.paths, fresh, timeout=SEND_TIMEOUT_S).outcome.state.value == "accepted"
    final = second.inbox_ids()
    assert final == [*inbox_before, fresh.message_id]
    records = assert_clean_journal(journal)
    received = Counter(r["message"]["message_id"] for r in records if r["type"] == "received")
    assert max(received.values()) == 1  # a resend never journals the message a second time


def test_crash_torn_tail_is_dropped_on_restart(xt: Procs) -> None:
    first = xt.start_agent("torn")
    ids = []
    for i in range(5):
        msg = new_message("torn", f"m{i}", from_=SENDER)
        assert send(xt.paths, msg, timeout=SEND_TIMEOUT_S).outcome.state.value == "accepted"
        ids.append(msg.message_id)
    xt.kill9(first)
    journal = xt.paths.journal_file(first.agent_id)
    good = journal.read_bytes()
    assert good.endswith(b"\n")
    # What a kill in the middle of a write(2) leaves: the start of a record, no newline.
    partial = b'{"type":"outcome","ts":1795987586.5,"message_id":"' + ids[-1].encode() + b'","state":"unkn'
    with open(journal, "ab") as f:
        f.write(partial)

    second = xt.start_agent("torn")
    assert second.agent_id == first.agent_id
    replay = second.ready["replay"]
    assert replay["torn_tail_bytes"] == len(partial)
    assert replay["records"] == good.count(b"\n")
    assert replay["bad_lines"] == 0
    assert replay["reconciled"] == 0
    assert journal.read_bytes() == good  # the partial line is gone, the rest untouched
    assert_clean_journal(journal)

    # Deduplication survived; a new record starts on a fresh line (nothing glued onto the old partial).
    again = new_message("torn", "again", from_=SENDER, message_id=ids[0])
    out = send(xt.paths, again, timeout=SEND_TIMEOUT_S).outcome
    assert out.state.value == "accepted" and out.evidence.get("duplicate") is True
    fresh = new_message("torn", "fresh", from_=SENDER)
    assert send(xt.paths, fresh, timeout=SEND_TIMEOUT_S).outcome.state.value == "accepted"
    records = assert_clean_journal(journal)
    assert records[-1]["type"] == "outcome" and records[-1]["message_id"] == fresh.message_id
    assert second.inbox_ids() == [*ids, fresh.message_id]


def test_crash_torn_tail_mid_batch_recovers_and_is_reported(xt: Procs) -> None:
    """A kill that tore a received+dispatch batch after the received line: the message was never claimed, so the
    restart reconciles it (recovered, shown in the mailbox) and never injects it."""
    first = xt.start_agent("halfway")
    msg = new_message("halfway", "m0", from_=SENDER)
    assert send(xt.paths, msg, timeout=SEND_TIMEOUT_S).outcome.state.value == "accepted"
    xt.kill9(first)
    journal = xt.paths.journal_file(first.agent_id)
    records = read_journal(journal).records
    received = next(r for r in records if r["type"] == "received")
    # Forge the batch of a second message: its received line whole, its dispatch line cut short.
    ghost = new_message("halfway", "never claimed", from_=SENDER)
    rec = {**received, "message": ghost.to_dict()}
    whole = json.dumps(rec, separators=(",", ":")).encode() + b"\n"
    cut = b'{"type":"dispatch","ts":1.0,"message_id":"' + ghost.message_id.encode()
    with open(journal, "ab") as f:
        f.write(whole + cut)

    second = xt.start_agent("halfway")
    replay = second.ready["replay"]
    assert replay["torn_tail_bytes"] == len(cut)
    assert replay["reconciled"] == 1
    after = assert_clean_journal(journal)
    outs = [r for r in after if r["type"] == "outcome" and r["message_id"] == ghost.message_id]
    assert [(o["state"], o.get("reconciled")) for o in outs] == [("recovered", True)]
    assert second.inbox_ids() == [msg.message_id]  # never injected
    answer = send(xt.paths, new_message("halfway", "x", from_=SENDER, message_id=ghost.message_id)).outcome
    assert answer.evidence.get("duplicate") is True
    # recovered is a mailbox-only state: the retry learns only that delivery is not proven.
    assert (answer.state.value, answer.reason) == ("unknown", "recovered_to_mailbox")
    assert second.inbox_ids() == [msg.message_id]
