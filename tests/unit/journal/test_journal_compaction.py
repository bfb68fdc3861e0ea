"""Live compaction: retention applied to a journal that is being appended to, on the flusher thread."""

from __future__ import annotations

import threading
import time
import weakref
from pathlib import Path

import pytest

from crosstalk.journal import Journal
from crosstalk.journal.codec import read_journal
from crosstalk.journal.records import message_id_of
from crosstalk.journal.retention import select_retained
from tests.support.waiting import until

OLD = time.time() - 30 * 3600


def _msg(mid: str, ts: float, rtype: str = "received") -> dict[str, object]:
    if rtype == "received":
        return {"type": "received", "ts": ts, "message": {"message_id": mid, "parts": []}}
    return {"type": rtype, "ts": ts, "message_id": mid, "state": "accepted"}


def test_compaction_drops_old_resolved_work_keeps_unresolved_and_every_concurrent_append(tmp_path: Path) -> None:
    journal, _ = Journal.open(tmp_path / "a.jsonl", tmp_path / "a.lock")
    try:
        journal.append_many(
            [_msg("old-done", OLD), _msg("old-done", OLD, "dispatch"), _msg("old-done", OLD, "outcome")]
        )
        journal.append_many([_msg("old-open", OLD), _msg("old-open", OLD, "dispatch")])  # no outcome: unresolved
        journal.append(_msg("recent", time.time()))

        written: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def writer(k: int) -> None:
            i = 0
            while not stop.is_set() and i < 400:
                mid = f"live-{k}-{i}"
                journal.append(_msg(mid, time.time()))
                with lock:
                    written.append(mid)
                i += 1

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        until(lambda: len(written) >= 12, "the writers appending before the compaction")
        before, after = journal.compact(lambda recs: select_retained(recs, {"old-open"})).result(timeout=30)
        mark = len(written)
        until(lambda: len(written) >= min(mark + 12, 6 * 400), "the writers appending after the compaction")
        stop.set()
        for t in threads:
            t.join(timeout=30)
            assert not t.is_alive()
        assert after == before - 3  # exactly the three records of the old, resolved message
    finally:
        journal.close()

    result = read_journal(tmp_path / "a.jsonl")
    assert result.torn_tail_bytes == 0 and result.bad_lines == 0
    ids = [message_id_of(r) for r in result.records]
    assert "old-done" not in ids
    assert ids.count("old-open") == 2 and ids.count("recent") == 1
    live = [i for i in ids if isinstance(i, str) and i.startswith("live-")]
    assert sorted(live) == sorted(written)  # every append, before or after the compaction, exactly once


def test_compaction_that_keeps_everything_leaves_the_file_alone(tmp_path: Path) -> None:
    journal, _ = Journal.open(tmp_path / "b.jsonl", tmp_path / "b.lock")
    try:
        journal.append(_msg("recent", time.time()))
        inode = (tmp_path / "b.jsonl").stat().st_ino
        assert journal.compact(lambda recs: recs).result(timeout=10) == (1, 1)
        assert (tmp_path / "b.jsonl").stat().st_ino == inode
    finally:
        journal.close()


def test_a_failing_selector_fails_the_compaction_not_the_journal(tmp_path: Path) -> None:
    journal, _ = Journal.open(tmp_path / "c.jsonl", tmp_path / "c.lock")
    try:
        journal.append(_msg("one", time.time()))

        def broken(records: list[dict[str, object]]) -> list[dict[str, object]]:
            raise RuntimeError("selector bug")

        with pytest.raises(Exception, match="selector bug"):
            journal.compact(broken).result(timeout=10)
        journal.append(_msg("two", time.time()))  # the flusher is alive and appends still land
    finally:
        journal.close()
    assert [r["message"]["message_id"] for r in read_journal(tmp_path / "c.jsonl").records] == ["one", "two"]


def test_a_line_by_line_compaction_keeps_exactly_what_compact_records_keeps(tmp_path: Path) -> None:
    """compact_lines + retention.select_lines (the agent's compactor) read each record once and copy kept lines as
    written; the journal they leave holds exactly the records compact + compact_records leave."""
    import json

    from crosstalk.journal import records as R
    from crosstalk.journal.retention import Plan, compact_records, select_lines

    now = time.time()
    recs: list[dict[str, object]] = [
        {"type": "checkpoint", "ts": OLD, "entries": []},
        _msg("old-done", OLD),
        _msg("old-done", OLD, "dispatch"),
        _msg("old-done", OLD, "outcome"),
        {"type": R.CLAIM, "ts": OLD, "action": "claimed", "role": "worker", "owner": "o"},
        _msg("old-open", OLD),
        {"type": "task", "ts": OLD, "task_id": "t-old", "message_id": "old-open", "state": "working"},
        {"type": "received", "ts": now, "message": {"message_id": "reply", "in_reply_to": "old-done", "parts": []}},
        _msg("recent", now),
        _msg("recent", now, "outcome"),
        _msg("collapsed", now),
        _msg("forgotten", now - 3600),
        {"type": "task", "ts": now - 3600, "task_id": "t-gone", "message_id": "forgotten", "state": "completed"},
        {"type": R.CLAIM, "ts": now, "action": "released", "role": "primary"},
        {"type": "nudge", "ts": OLD, "peer": "p", "count": 30},
        {"type": "nudge", "ts": now, "peer": "p", "count": 60},
    ]
    plan = Plan(
        unresolved={"old-open"},
        collapsed={"collapsed"},
        present={"old-open", "recent", "reply", "collapsed", "t-old"},
        window_entries=["w-1", "agent:x", "accepted", None, now - 10, "w-2", "agent:x", "accepted", None, OLD],
        taken_at=now,
    )
    kept_ids: set[str] = set()

    def choose(records):  # type: ignore[no-untyped-def]
        head, kept, ids = select_lines(records, plan, now=now)
        kept_ids.update(ids)
        return head, kept

    out = []
    for mode in ("records", "lines"):
        path = tmp_path / f"{mode}.jsonl"
        journal, _ = Journal.open(path, tmp_path / f"{mode}.lock")
        try:
            journal.append_many(recs)
            with path.open("ab") as f:
                f.write(b"not json\n")  # damage: skipped by both
            if mode == "records":
                counts = journal.compact(lambda rs: compact_records(rs, plan, now=now)).result(timeout=10)
            else:
                counts = journal.compact_lines(choose).result(timeout=10)
            journal.append(_msg("after", now))
        finally:
            journal.close()
        records = read_journal(path).records
        for rec in records:
            if rec["type"] == "checkpoint":
                rec.pop("ts")  # stamped when made
        out.append((counts, json.dumps(records)))
    assert out[0] == out[1]
    (before, after), _ = out[0]
    assert after < before
    from crosstalk.journal.retention import ids_in

    left = read_journal(tmp_path / "lines.jsonl").records
    kept = [message_id_of(r) for r in left]
    assert "collapsed" not in kept and "forgotten" not in kept and "old-open" in kept and "recent" in kept
    assert "old-done" in kept  # a recent reply to it keeps its group
    assert kept_ids == ids_in([r for r in left if message_id_of(r) != "after"]) - {"after"}


def test_a_done_compaction_is_not_held_by_the_flusher(tmp_path: Path) -> None:
    """What a compaction's chooser holds (its plan: the dedupe window's entries, the id sets) goes when the
    compaction is done, not when the next one starts: held, it grew with the window (docs/dev/shim-memory.md)."""

    class Plan:  # stands in for retention.Plan (slotted, so not weak-referenceable)
        pass

    journal, _ = Journal.open(tmp_path / "a.jsonl", tmp_path / "a.lock")
    try:
        journal.append_many([_msg("old-done", OLD), _msg("old-done", OLD, "outcome"), _msg("new", time.time())])
        plan = Plan()
        held = weakref.ref(plan)

        def choose(records, plan=plan):  # type: ignore[no-untyped-def]
            rows = list(records)
            return [], [k for k, r in enumerate(rows) if message_id_of(r) == "new"]

        assert journal.compact_lines(choose).result(timeout=10) == (3, 1)
        del plan, choose
        journal.append(_msg("after", time.time()))  # durable: the flusher has gone round its loop since
        assert held() is None
    finally:
        journal.close()
