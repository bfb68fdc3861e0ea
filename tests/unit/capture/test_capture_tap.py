"""The agent-process side of a capture, in this process over real files: a live request for this process turns the
taps on, anything else leaves them off; lines are recorded whole, redacted and capped; the spool is only ever
appended to, never created and never through a symlink."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from crosstalk.capture import request as rq
from crosstalk.capture import tap
from crosstalk.fs.procinfo import proc_start_time

AGENT = "0123456789abcdef"
OTHER = "fedcba9876543210"
KEY = "6514207f6de090e4fc29855d339deb4842bdedd5637c388d0cacd3a8fd601bde"


def request(
    root: Path, agent_id: str = AGENT, *, pid: int | None = None, seconds: float = 60.0, collector: str | None = None
) -> Path:
    """A capture request for this process (or `pid`) and its empty spool, as `crosstalk capture` writes them; this
    process is its collector too (`collector`: another start time, i.e. a collector that is gone)."""
    directory = rq.capture_dir(root)
    directory.mkdir(mode=0o700, exist_ok=True)
    me = os.getpid()
    pid = me if pid is None else pid
    now = time.time()
    started = proc_start_time(me) or ""
    req = rq.CaptureRequest(
        agent_id, pid, proc_start_time(pid) or "1", now - 1, now + seconds, me, collector or started
    )
    rq.request_path(directory, agent_id).write_bytes(req.to_bytes())
    spool = rq.spool_path(directory, agent_id)
    spool.touch(mode=0o600)
    return spool


def records(spool: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in spool.read_bytes().splitlines()]


def feed(root: Path, *chunks: bytes, agent_id: str | None = None) -> None:
    lines = tap._Lines(tap.Recorder(root), "mcp", "in", None, agent_id)
    for chunk in chunks:
        lines.feed(chunk)


def test_lines_are_recorded_whole_redacted_and_in_order(tmp_path: Path):
    spool = request(tmp_path)
    (tmp_path / "sock").mkdir()
    (tmp_path / "sock" / f"{AGENT}.key").write_text(KEY + "\n")
    first = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {"text": KEY}}})
    second = json.dumps({"type": "auth", "token": "abcdefghijklmnop"})
    data = (first + "\n" + second + "\n\nnot json, Bearer abcdefghijklmnop1234\n").encode()
    feed(tmp_path, data[:10], data[10:70], data[70:])
    got = records(spool)
    assert [r["direction"] for r in got] == ["in"] * 3 and all(r["channel"] == "mcp" for r in got)
    assert got[0]["frame"]["params"]["arguments"]["text"] == "[redacted]"  # the agent's key, known to the tap
    assert got[0]["bytes"] == len(first) and got[0]["frame"]["method"] == "tools/call"
    assert got[1]["frame"] == {"type": "auth", "token": "[redacted]"}
    assert got[2]["text"] == "not json, Bearer [redacted]"
    raw = spool.read_text()
    assert KEY not in raw and "abcdefghijklmnop" not in raw
    assert os.stat(spool).st_mode & 0o777 == 0o600


def test_nothing_is_recorded_without_a_live_request_for_this_process(tmp_path: Path, sleeper: Any):
    frame = b'{"id":1}\n'
    feed(tmp_path, frame)  # no capture dir at all
    assert not rq.capture_dir(tmp_path).exists()

    other = sleeper(ready=proc_start_time)
    spool = request(tmp_path, pid=other)  # another process is being captured
    feed(tmp_path, frame)
    assert spool.read_bytes() == b""

    request(tmp_path, seconds=-2)  # this process, but the capture is over
    feed(tmp_path, frame)
    assert spool.read_bytes() == b""

    request(tmp_path, collector="0")  # this process, but the `crosstalk capture` that asked is gone
    feed(tmp_path, frame)
    assert spool.read_bytes() == b""

    request(tmp_path, OTHER)  # a live request for this process, for another agent than the socket's
    feed(tmp_path, frame, agent_id=AGENT)
    assert rq.spool_path(rq.capture_dir(tmp_path), OTHER).read_bytes() == b""
    feed(tmp_path, frame)  # a frame of the whole process (MCP, app-server) is that agent's too
    assert len(records(rq.spool_path(rq.capture_dir(tmp_path), OTHER))) == 1


def test_a_capture_that_starts_inside_a_line_skips_that_line(tmp_path: Path):
    rec = tap.Recorder(tmp_path)
    lines = tap._Lines(rec, "socket", "out", 3, AGENT)
    lines.feed(b'{"partial": ')  # off: nothing kept
    spool = request(tmp_path)
    rec._checked = -rq.CHECK_INTERVAL_S  # as if a second had passed
    lines.feed(b'"rest"}\n{"whole":1}\n')
    assert [(r["frame"], r["conn"], r["agent_id"]) for r in records(spool)] == [({"whole": 1}, 3, AGENT)]


def test_a_huge_frame_is_cut_after_redaction_and_its_size_kept(tmp_path: Path):
    spool = request(tmp_path)
    secret = "s3cr3t-" + "x" * 40
    frame = json.dumps({"text": "y" * (3 * rq.MAX_FRAME_BYTES), "token": secret}).encode()
    feed(tmp_path, frame[:5000], frame[5000:] + b"\n")
    [got] = records(spool)
    assert got["bytes"] == len(frame) and got["truncated"] is True
    assert len(spool.read_bytes()) <= rq.MAX_RECORD_BYTES + 1
    medium = json.dumps({"text": "z" * (rq.MAX_RECORD_BYTES * 2), "api_key": secret}).encode()  # whole, then cut
    feed(tmp_path, medium + b"\n")
    assert records(spool)[1]["truncated"] is True and records(spool)[1]["bytes"] == len(medium)
    assert secret not in spool.read_text()


def test_the_spool_is_never_created_never_followed_and_stops_at_its_cap(tmp_path: Path, monkeypatch):
    spool = request(tmp_path)
    spool.unlink()  # collected: the process must not bring it back
    feed(tmp_path, b'{"id":1}\n')
    assert not spool.exists()

    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    spool.symlink_to(target)
    feed(tmp_path, b'{"id":2}\n')
    assert target.read_bytes() == b""

    spool.unlink()
    spool.touch(mode=0o600)
    monkeypatch.setattr(rq, "MAX_SPOOL_BYTES", 300)
    feed(tmp_path, *[b'{"id":%d}\n' % i for i in range(50)])
    assert 0 < len(spool.read_bytes()) <= 300


def test_a_symlinked_or_foreign_request_is_ignored(tmp_path: Path):
    spool = request(tmp_path)
    path = rq.request_path(rq.capture_dir(tmp_path), AGENT)
    real = tmp_path / "real.json"
    path.rename(real)
    path.symlink_to(real)
    feed(tmp_path, b'{"id":1}\n')
    assert spool.read_bytes() == b""
    path.unlink()
    path.write_bytes(b'{"agent_id": "../../etc", "pid": 1}')
    feed(tmp_path, b'{"id":1}\n')
    assert spool.read_bytes() == b""


def test_stream_taps_record_what_the_reader_is_fed_and_the_writer_writes(tmp_path: Path):
    spool = request(tmp_path)

    class Sink:
        def __init__(self) -> None:
            self.data = b""

        def write(self, data: bytes) -> None:
            self.data += data

    async def main() -> None:
        reader = tap.tap_reader(asyncio.StreamReader(), "mcp", root=tmp_path)
        reader.feed_data(b'{"id":1,"method":"ping"}\n')
        assert await reader.readline() == b'{"id":1,"method":"ping"}\n'  # the reader still gets every byte
        sink = tap.tap_writer(Sink(), "mcp", root=tmp_path)
        sink.write(b'{"id":1,"result":{}}\n')
        assert sink.data == b'{"id":1,"result":{}}\n'

    asyncio.run(main())
    assert [(r["direction"], r["frame"]["id"]) for r in records(spool)] == [("in", 1), ("out", 1)]


def test_a_symlink_in_place_of_the_capture_dir_turns_nothing_on(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    spool = request(real)
    rq.capture_dir(tmp_path).symlink_to(rq.capture_dir(real))
    feed(tmp_path, b'{"id":1}\n')
    assert spool.read_bytes() == b""


def test_the_ingress_hook_points_pass_streams_through_until_capture_installs_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from crosstalk.ingress import taps

    monkeypatch.setattr(taps, "_installed", None)
    stream = object()
    assert taps.tap_reader(stream, "mcp") is stream and taps.tap_writer(stream, "mcp") is stream
    tap.install()
    assert isinstance(taps._installed, tap._CaptureTaps)
