"""`crosstalk capture` of a real fake-harness agent (`crosstalk agent run --harness fake`) receiving real `crosstalk
send` lines on its socket: the file holds every line both ways, redacted; the capture ends by itself, on Ctrl-C, or
when the agent exits; bad input gets one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk import __version__
from tests.support.capture import capture_dir_is_empty, finish, read_capture, secrets_of, start_capture
from tests.support.procs import CROSSTALK, Procs
from tests.support.procs import procs as started_procs

pytestmark = pytest.mark.timeout(120)
SECRET = "hunter2-supersecret-0042"


@pytest.fixture
def procs() -> Iterator[Procs]:
    with started_procs() as p:
        yield p


def capture(procs: Procs, *args: str) -> subprocess.Popen[bytes]:
    proc = start_capture([str(CROSSTALK), "capture", *args], procs.env, procs.root)
    procs.procs.append(proc)
    return proc


def test_a_captured_agent_gets_real_sends_and_the_file_holds_each_line_redacted(procs: Procs):
    alice = procs.start_agent("alice", "--no-a2a")
    out = procs.root / "alice.capture.jsonl"
    cap = capture(procs, "alice", "--for", "6", "-o", str(out), "--json")
    sent = [procs.cli("send", "alice", f"hello {i} token={SECRET}") for i in range(2)]
    assert all(r.returncode == 0 for r in sent), [r.stderr for r in sent]
    code, stdout, stderr = finish(cap)  # --for 6: it ends by itself
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["file"] == str(out) and summary["ended"] == "time"

    header, records = read_capture(out)
    assert header["format"] == "crosstalk-capture/1" and header["crosstalk"] == __version__
    assert header["harness"] == "fake" and header["agent"]["name"] == "alice"
    assert header["agent"]["agent_id"] == alice.agent_id and header["agent"]["pid"] == alice.pid
    assert header["window"]["seconds"] == 6 and header["window"]["start"] < header["window"]["end"]
    assert header["channels"] == {"socket": 6}  # per send: the auth line and the user line in, the answer out
    by_conn: dict[int, list[dict]] = {}
    for r in records:
        assert r["channel"] == "socket" and r["agent_id"] == alice.agent_id and r["bytes"] > 0
        by_conn.setdefault(r["conn"], []).append(r)
    assert len(by_conn) == 2
    for i, (auth, user, answer) in enumerate(by_conn.values()):
        assert (auth["direction"], user["direction"], answer["direction"]) == ("in", "in", "out")
        assert auth["frame"] == {"type": "auth", "token": "[redacted]"}
        assert user["frame"]["message"]["content"] == f"hello {i} token=[redacted]"
        assert user["frame"]["crosstalk"]["to"] == "alice"
        assert answer["frame"]["state"] == "accepted"
        assert answer["frame"]["message_id"] == user["frame"]["crosstalk"]["message_id"]
    assert [line["text"] for line in alice.inbox_lines()] == [f"hello {i} token={SECRET}" for i in range(2)]
    text = out.read_text()
    assert SECRET not in text
    for secret in secrets_of(procs.root, alice.agent_id):
        assert secret not in text
    assert capture_dir_is_empty(procs.root)  # the request and the spool are gone


def test_ctrl_c_ends_the_capture_early_and_still_saves_it_never_through_a_symlink(procs: Procs):
    procs.start_agent("bob", "--no-a2a")
    elsewhere = procs.root / "elsewhere.txt"
    elsewhere.write_text("keep me\n")
    out = procs.root / "bob.jsonl"
    out.symlink_to(elsewhere)
    cap = capture(procs, "bob", "--for", "600", "-o", str(out))
    assert procs.cli("send", "bob", "one line").returncode == 0
    cap.send_signal(signal.SIGINT)
    code, stdout, stderr = finish(cap)
    assert code == 0, stderr
    assert stdout.startswith("captured 3 frames (socket 3) from bob (interrupted) into ")
    assert elsewhere.read_text() == "keep me\n"  # the link was replaced, not followed
    header, records = read_capture(out)
    assert header["ended"] == "interrupted" and header["window"]["seconds"] == 600
    assert [r["direction"] for r in records] == ["in", "in", "out"]
    assert capture_dir_is_empty(procs.root)


def test_the_capture_ends_when_the_agent_exits_and_a_second_capture_is_refused(procs: Procs):
    carol = procs.start_agent("carol", "--no-a2a")
    out = procs.root / "carol.jsonl"
    cap = capture(procs, "carol", "--for", "600", "-o", str(out))
    again = procs.cli("capture", "carol", "--for", "5", "-o", str(procs.root / "again.jsonl"))
    assert again.returncode == 1
    assert again.stderr.startswith("crosstalk: carol is already being captured (by process ")
    assert again.stderr.count("\n") == 1 and not (procs.root / "again.jsonl").exists()
    procs.stop(carol.proc)
    code, stdout, stderr = finish(cap)
    assert code == 0, stderr
    assert "(carol exited)" in stdout
    header, records = read_capture(out)
    assert header["ended"] == "agent exited" and records == []
    assert capture_dir_is_empty(procs.root)


def test_bad_input_gets_one_line_that_names_the_problem(procs: Procs):
    procs.start_agent("dave", "--no-a2a")
    missing = procs.root / "no" / "such" / "dir" / "x.jsonl"
    unwritable = Path("/proc") if os.geteuid() == 0 else procs.root / "ro"
    if unwritable != Path("/proc"):
        unwritable.mkdir(mode=0o500)
    cases = [
        (["capture", "nobody", "--for", "5"], 4, "crosstalk: no live agent is named or has agent_id 'nobody'"),
        (["capture", "dave", "--for", "0"], 2, "crosstalk: argument --for: 0.0 is not between 1.0 and 3600.0"),
        (["capture", "dave", "--for", "99999"], 2, "crosstalk: argument --for: 99999.0 is not between 1.0 and"),
        (["capture", "dave", "--for", "soon"], 2, "crosstalk: argument --for: 'soon' is not a number"),
        (["capture", "dave", "-o", str(missing)], 2, f"crosstalk: cannot write {missing}: its directory"),
        (["capture", "dave", "-o", str(procs.root)], 2, f"crosstalk: {procs.root} is a directory"),
        (["capture", "dave", "-o", str(unwritable / "x.jsonl")], 2, f"crosstalk: cannot write {unwritable}/x.jsonl"),
    ]
    for args, code, start in cases:
        res = procs.cli(*args)
        assert (res.returncode, res.stdout) == (code, ""), (args, res)
        assert res.stderr.startswith(start) and res.stderr.count("\n") == 1, (args, res.stderr)
    assert capture_dir_is_empty(procs.root)
    assert not [p for p in procs.root.iterdir() if p.name.endswith(".capture.tmp")]


def test_a_capture_killed_mid_way_leaves_nothing_the_next_one_trips_on(procs: Procs):
    erin = procs.start_agent("erin", "--no-a2a")
    cap = capture(procs, "erin", "--for", "600", "-o", str(procs.root / "lost.jsonl"))
    cap.kill()  # SIGKILL: no collection, the request and its spool stay behind
    cap.wait(10)
    assert {p.suffix for p in (procs.root / "capture").iterdir()} == {".json", ".spool"}
    assert procs.cli("send", "erin", "while nobody collects").returncode == 0  # still delivered
    out = procs.root / "next.jsonl"
    code, _, stderr = finish(capture(procs, "erin", "--for", "2", "-o", str(out)))
    assert code == 0, stderr
    header, records = read_capture(out)
    assert header["agent"]["agent_id"] == erin.agent_id and records == []  # the earlier line was not this window's
    assert capture_dir_is_empty(procs.root)
    assert not [p for p in procs.root.iterdir() if "lost.jsonl" in p.name]  # not even a temp file
