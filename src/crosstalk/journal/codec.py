"""Encoding and reading journal lines. A journal is JSONL: one object per line, each ending in a newline."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from crosstalk.core import untrusted
from crosstalk.journal import shape
from crosstalk.journal.errors import JournalError

MAX_RECORD_BYTES = 512 * 1024  # the persisted-record cap equals the reader's limit, so every record stays readable
# A record carries input bounded at untrusted.MAX_DEPTH (a message, a task's artifacts) a few levels down: twice that
# keeps every record crosstalk writes readable while a line of outside damage nesting deeper is skipped.
MAX_RECORD_DEPTH = 2 * untrusted.MAX_DEPTH


def encode(record: dict[str, Any]) -> bytes:
    data = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"journal record is {len(data)} bytes, over the {MAX_RECORD_BYTES}-byte cap")
    return data


@dataclass(slots=True)
class ReadResult:
    records: list[dict[str, Any]] = field(default_factory=list)
    good_size: int = 0  # bytes up to the end of the last complete line
    torn_tail_bytes: int = 0  # a trailing partial line (a crash mid-append), dropped
    bad_lines: int = 0  # complete lines that did not parse (outside damage), skipped


def read_journal(path: str | os.PathLike[str]) -> ReadResult:
    """Read every complete record. A trailing line without its newline is a torn append and is dropped."""
    result = ReadResult()
    fd = _open_journal(path)
    if fd is None:
        return result
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1
    result.good_size = end
    result.torn_tail_bytes = len(data) - end
    for line in data[:end].splitlines():
        if not line.strip():
            continue
        record = parse_line(line)
        if record is None:
            result.bad_lines += 1
        else:
            result.records.append(record)
    return result


def scan_journal(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(offset, length, record) of every complete record, one line at a time: what `read_journal` reads, without
    the whole file and every record in memory at once (a live compaction, journal/writer.py)."""
    fd = _open_journal(path)
    if fd is None:
        return
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            offset = 0
            for line in f:
                start, offset = offset, offset + len(line)
                if not line.endswith(b"\n"):
                    return  # a torn append
                if not line.strip():
                    continue
                record = parse_line(line)
                if record is not None:
                    yield start, len(line), record
    finally:
        os.close(fd)


def _open_journal(path: str | os.PathLike[str]) -> int | None:
    try:
        # Never through a symlink, never blocking on a FIFO: the journal is a regular file or it is damage.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = exc.strerror or exc
        raise JournalError(f"journal {path} cannot be opened ({why}): move it away, then start again") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise JournalError(f"journal {path} is not a regular file: move it away, then start again")
    return fd


def parse_line(line: bytes) -> dict[str, Any] | None:
    """The record on one complete journal line, or None when the line is damage: not JSON, over the record cap,
    nested deeper than MAX_RECORD_DEPTH, not an object, or a record whose fields replay cannot read (shape.py).
    Every reader of journals (replay, tail, watch) skips such a line the same way."""
    try:
        record = untrusted.loads(line, what="journal line", max_bytes=MAX_RECORD_BYTES, max_depth=MAX_RECORD_DEPTH)
    except untrusted.UntrustedInput:
        return None
    if isinstance(record, dict) and shape.problem(record) is None:
        return record
    return None
