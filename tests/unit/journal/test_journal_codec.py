"""Journal line encoding and the tolerant reader (torn tail dropped, bad lines skipped and counted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.journal import records as R
from crosstalk.journal import shape
from crosstalk.journal.codec import MAX_RECORD_BYTES, encode, read_journal


def test_encode_is_one_compact_utf8_line() -> None:
    data = encode({"type": "t", "text": "héllo\nworld 😀", "n": [1, 2]})
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert b", " not in data and b": " not in data
    assert "héllo".encode() in data  # not \\u-escaped
    assert json.loads(data) == {"type": "t", "text": "héllo\nworld 😀", "n": [1, 2]}


def test_encode_cap() -> None:
    overhead = len(encode({"type": "t", "p": ""}))
    assert len(encode({"type": "t", "p": "x" * (MAX_RECORD_BYTES - overhead)})) == MAX_RECORD_BYTES
    with pytest.raises(ValueError) as info:
        encode({"type": "t", "p": "x" * (MAX_RECORD_BYTES - overhead + 1)})
    assert str(MAX_RECORD_BYTES) in str(info.value) and str(MAX_RECORD_BYTES + 1) in str(info.value)


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    result = read_journal(tmp_path / "nope.jsonl")
    assert result.records == [] and result.good_size == 0 and result.torn_tail_bytes == 0 and result.bad_lines == 0


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    p.write_bytes(b"")
    result = read_journal(p)
    assert result.records == [] and result.good_size == 0


def test_reader_classifies_lines(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    good = [{"type": "a", "i": 1}, {"type": "b", "i": 2}]
    body = (
        encode(good[0])
        + b"\n"  # blank lines are skipped, not counted
        + b"   \n"
        + b"{broken\n"
        + b"[1,2]\n"
        + b"null\n"
        + b'{"i": 3}\n'
        + b'{"type": null}\n'
        + b"\xff\xfe not utf-8\n"
        + b"[" * 5000
        + b"\n"  # deeper than the recursion limit? at least never a crash
        + encode(good[1])
    )
    torn = b'{"type":"c","i":'
    p.write_bytes(body + torn)
    result = read_journal(p)
    assert result.records == good
    assert result.bad_lines == 7
    assert result.good_size == len(body)
    assert result.torn_tail_bytes == len(torn)


def test_deeply_nested_line_is_a_bad_line(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    p.write_bytes(encode({"type": "a"}) + b"[" * 200_000 + b"\n" + encode({"type": "b"}))
    result = read_journal(p)
    assert [r["type"] for r in result.records] == ["a", "b"]
    assert result.bad_lines == 1


def test_crlf_lines_still_parse(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    p.write_bytes(b'{"type":"a"}\r\n{"type":"b"}\n')
    assert [r["type"] for r in read_journal(p).records] == ["a", "b"]


# The codec's round trip, for records of no type the reader checks the shape of (journal/shape.py): a generated
# `{"type": "received"}` is rightly dropped as malformed (it has no message), which is shape's test, not this one's.
SHAPED = frozenset({R.RECEIVED, R.OUTCOME, R.DISPATCH, R.TASK, *shape._STR_OR_NONE, *shape._DICT_OR_NONE})
records_st = st.lists(
    st.fixed_dictionaries(
        {"type": st.text(max_size=8).filter(lambda t: t not in SHAPED)},
        optional={"text": st.text(), "n": st.integers() | st.floats(allow_nan=False, allow_infinity=False)},
    ),
    max_size=20,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records_st, st.binary(max_size=64).filter(lambda b: b"\n" not in b))
def test_encode_read_round_trip_with_any_torn_tail(
    tmp_path: Path, records: list[dict[str, object]], tail: bytes
) -> None:
    p = tmp_path / "rt.jsonl"
    good = b"".join(encode(r) for r in records)
    p.write_bytes(good + tail)
    result = read_journal(p)
    assert result.records == records
    assert result.good_size == len(good) and result.torn_tail_bytes == len(tail) and result.bad_lines == 0
