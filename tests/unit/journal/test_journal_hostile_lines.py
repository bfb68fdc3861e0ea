"""Journal lines of outside damage that nest deeply, read by every journal reader (replay's read_journal, watch's
JournalTail, tail's codec.parse_line): skipped and counted like any damaged line, never a RecursionError, and the
records around them are kept."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.journal.codec import MAX_RECORD_BYTES, MAX_RECORD_DEPTH, encode, parse_line, read_journal
from crosstalk.watch.journals import JournalTail

GOOD = encode({"type": "outcome", "ts": 1.0, "message_id": "m-1", "state": "accepted"})
DEEP = [
    b'{"type":"outcome","x":' + b"[" * 1000 + b"]" * 1000 + b"}",
    b'{"type":"outcome","x":' + b"[" * 100_000 + b"}",
    b'{"type":"outcome","x":' + b'{"a":' * (MAX_RECORD_DEPTH + 1) + b"0" + b"}" * (MAX_RECORD_DEPTH + 2),
]


def test_deep_lines_are_skipped_by_replay_and_watch(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(GOOD + b"".join(d + b"\n" for d in DEEP) + GOOD)
    result = read_journal(path)
    assert len(result.records) == 2 and result.bad_lines == len(DEEP)
    tail = JournalTail(path)
    assert tail.refresh()
    assert all(parse_line(d) is None for d in DEEP)


def test_a_record_at_the_depth_bound_is_kept() -> None:
    rec = b'{"type":"outcome","x":' + b"[" * (MAX_RECORD_DEPTH - 1) + b"]" * (MAX_RECORD_DEPTH - 1) + b"}"
    assert parse_line(rec) is not None


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200_000), st.sampled_from([b"[", b'{"a":']), st.booleans())
def test_generated_nesting_never_raises(depth: int, opener: bytes, closed: bool) -> None:
    closer = {b"[": b"]", b'{"a":': b"}"}[opener]
    line = opener * depth + (b"0" if opener != b"[" else b"") + (closer * depth if closed else b"")
    rec = parse_line(line[:MAX_RECORD_BYTES])
    assert rec is None or isinstance(rec, dict)
