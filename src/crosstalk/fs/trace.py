"""Timestamps for the benchmarks: where one live delivery spends crosstalk's own time, across processes.

Off unless the file `$CROSSTALK_HOME/bench-trace.jsonl` exists when a process first marks something (a benchmark
creates it before it starts the sessions; nothing else does). Then each `mark` appends one JSON line,
`{"t": <CLOCK_REALTIME ns>, "pid": …, "ev": <event>, …fields}`, with one O_APPEND write (whole lines never
interleave). Off, a mark costs one global read. bench/own_part.py reads the file: the sending shim's `tool_call`
and the receiving adapter's `harness_write` bound crosstalk's own part of a delivery.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

FILE_NAME = "bench-trace.jsonl"

_fd: int | None = None
_checked = False


def enabled() -> bool:
    global _fd, _checked
    if not _checked:
        _checked = True
        home = os.environ.get("CROSSTALK_HOME")
        path = os.path.join(home, FILE_NAME) if home else None
        if path and os.path.isfile(path):
            try:
                _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            except OSError:
                _fd = None
    return _fd is not None


def mark(event: str, **fields: Any) -> None:
    """One timestamped line, when tracing is on."""
    if not _checked:
        enabled()
    fd = _fd
    if fd is None:
        return
    # Written out by hand: json.dumps(..., default=str) builds an encoder per call (~10 us, inside the span a mark
    # measures); the plain json.dumps of one scalar reuses json's own.
    extra = "".join([f", {json.dumps(k)}: {_value(v)}" for k, v in fields.items()]) if fields else ""
    line = f'{{"t": {time.time_ns()}, "pid": {os.getpid()}, "ev": {json.dumps(event)}{extra}}}\n'
    with contextlib.suppress(OSError):
        os.write(fd, line.encode())


def _value(v: Any) -> str:
    return json.dumps(v) if v is None or isinstance(v, str | int | float) else json.dumps(v, default=str)


def path_for(crosstalk_home: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(crosstalk_home), FILE_NAME)
