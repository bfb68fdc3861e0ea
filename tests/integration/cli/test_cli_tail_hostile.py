"""`crosstalk tail` over a journal someone damaged: a line nesting a thousand levels, a record of the wrong shape, a
lone surrogate, a line that is not JSON. Each is skipped, in the backlog and while following, and tail goes on to the
next record."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.support.procs import Procs, read_line

pytestmark = pytest.mark.timeout(60)

AGENT = "0123456789abcdef"  # a stopped agent: tail follows its journal by agent_id
HOSTILE = [
    b'{"type":"outcome","x":' + b"[" * 1000 + b"]" * 1000 + b"}",
    b'{"type":"outcome","x":' + b"[" * 100_000 + b"}",
    b'{"type":"received","ts":1.5,"message":"not an object","sender":{}}',
    b'{"type":"outcome","ts":1.5,"message_id":"m-\\ud800","state":"accepted"}',
    b"not json at all",
    b"[1, 2]",
]


def outcome(mid: str) -> bytes:
    rec = {"type": "outcome", "ts": time.time(), "message_id": mid, "state": "accepted"}
    return json.dumps(rec).encode() + b"\n"


@pytest.mark.parametrize("as_json", [True, False])
def test_tail_skips_deep_and_damaged_lines(xt: Procs, as_json: bool) -> None:
    journal = xt.paths.journal_file(AGENT)
    journal.parent.mkdir(parents=True, exist_ok=True)
    odd = b'{"type":"received","ts":1.5,"message":{"message_id":"m-x","parts":7},"sender":{}}\n'  # shown, oddly
    journal.write_bytes(outcome("m-1") + b"".join(h + b"\n" for h in HOSTILE) + odd + outcome("m-2"))
    tail = xt.popen_cli("tail", AGENT, "-n", "20", "--count", "1", "--for", "30", *(["--json"] if as_json else []))
    buf = bytearray()
    backlog = [read_line(tail, 15, buf) for _ in range(3)]
    assert None not in backlog, (backlog, tail.poll())
    with journal.open("ab") as f:  # the same lines, appended while tail follows
        f.write(b"".join(h + b"\n" for h in HOSTILE) + outcome("m-3"))
    last = read_line(tail, 15, buf)
    assert last is not None, f"tail died: exit {tail.poll()}"
    assert tail.wait(15) == 0
    assert tail.stderr is not None and b"Traceback" not in tail.stderr.read()
    shown = [*backlog, last]
    if as_json:
        ids = [json.loads(line).get("message_id") or json.loads(line)["message"]["message_id"] for line in shown]
    else:
        ids = [re.search(r"\bm-\w\b", line.decode()).group() for line in shown]
    assert ids == ["m-1", "m-x", "m-2", "m-3"], shown
