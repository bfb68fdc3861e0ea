"""`crosstalk list`, `who`, `tail`, `demo`, `agent run` and the bare command, against real processes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tests.support.procs import Procs, one_error_line, read_line

LIST_FIELDS = {"name", "agent_id", "harness", "role", "owner", "pid", "uds_path"}


# ---------------------------------------------------------------------------------------------- bare command


def test_no_args_prints_help_exit_2(xt: Procs) -> None:
    """A command is missing: a usage error (exit 2), with the help on stderr saying what there is to run."""
    res = xt.cli()
    assert res.returncode == 2
    assert res.stdout == ""
    assert "usage: crosstalk" in res.stderr.lower()
    for cmd in ("send", "list", "who", "tail", "agent", "demo", "model"):
        assert re.search(rf"^\s+{cmd}\s", res.stderr, re.M), cmd


def test_agent_alone_prints_help_exit_2(xt: Procs) -> None:
    res = xt.cli("agent")
    assert res.returncode == 2
    assert "usage: crosstalk agent" in res.stderr and re.search(r"^\s+run\s", res.stderr, re.M), res.stderr


def test_agent_list_lists_the_live_agents_as_list_does(xt: Procs) -> None:
    xt.start_agent("alice")
    for args in (("list", "--json"), ("agent", "list", "--json")):
        res = xt.cli(*args)
        assert res.returncode == 0, res.stderr
        assert [d["name"] for d in json.loads(res.stdout)] == ["alice"], args
    assert xt.cli("agent", "list").stdout == xt.cli("list").stdout


def test_version(xt: Procs) -> None:
    res = xt.cli("--version")
    assert res.returncode == 0
    assert re.fullmatch(r"crosstalk \d+\.\d+\.\d+\S*\n", res.stdout), res.stdout


def test_unknown_command_is_one_line_usage_error(xt: Procs) -> None:
    res = xt.cli("frobnicate")
    assert res.returncode == 2
    assert "frobnicate" in one_error_line(res.stderr)


# ---------------------------------------------------------------------------------------------- list / who


def test_list_empty(xt: Procs) -> None:
    res = xt.cli("list")
    assert res.returncode == 0
    assert "no live agents" in res.stdout
    res = xt.cli("list", "--json")
    assert res.returncode == 0
    assert json.loads(res.stdout) == []


def test_list_and_list_json(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    carol = xt.start_agent("carol", "--role", "worker", "--parent", "alice")

    res = xt.cli("list")
    assert res.returncode == 0, res.stderr
    rows = res.stdout.splitlines()
    assert rows[0].split() == ["NAME", "AGENT_ID", "HARNESS", "ROLE", "OWNER", "PID", "REACHABLE", "CWD"]
    body = [r.split() for r in rows[1:]]
    assert [r[:7] for r in body] == [
        ["alice", alice.agent_id, "fake", "primary", "-", str(alice.pid), "yes"],
        ["carol", carol.agent_id, "fake", "worker", "alice", str(carol.pid), "yes"],
    ]

    res = xt.cli("list", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [d["name"] for d in data] == ["alice", "carol"]
    for d, agent in zip(data, (alice, carol), strict=True):
        assert set(d) >= LIST_FIELDS
        assert d["agent_id"] == agent.agent_id
        assert d["harness"] == "fake"
        assert d["pid"] == agent.pid
        assert d["uds_path"] == agent.ready["uds_path"]
        assert Path(d["uds_path"]).is_socket()
    assert data[0]["role"] == "primary" and data[0]["owner"] is None
    assert data[1]["role"] == "worker" and data[1]["owner"] == alice.agent_id
    assert data[1]["owner_name"] == "alice"
    assert all(d["crosstalk"] is True and d["reachable"] is True for d in data)


def test_killed_agent_absent_from_list_and_stale_in_list_all(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    bob = xt.start_agent("bob")
    xt.kill9(bob)

    res = xt.cli("list")
    assert res.returncode == 0
    names = [r.split()[0] for r in res.stdout.splitlines()[1:]]
    assert names == ["alice"]
    assert [d["name"] for d in json.loads(xt.cli("list", "--json").stdout)] == ["alice"]

    res = xt.cli("list", "--all", "--json")
    assert res.returncode == 0
    data = {d["name"]: d for d in json.loads(res.stdout)}
    assert set(data) == {"alice", "bob"}
    assert data["alice"]["live"] is True
    assert data["bob"]["live"] is False
    assert data["bob"]["agent_id"] == bob.agent_id
    assert data["alice"]["agent_id"] == alice.agent_id

    text = xt.cli("list", "--all").stdout.splitlines()
    bob_row = next(r for r in text if r.startswith("bob"))
    assert bob_row.endswith("(stale)")
    alice_row = next(r for r in text if r.startswith("alice"))
    assert "(stale)" not in alice_row


def test_who_text_and_json(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    res = xt.cli("who", "alice")
    assert res.returncode == 0, res.stderr
    fields = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in res.stdout.splitlines())
    assert fields["name"] == "alice"
    assert fields["agent_id"] == alice.agent_id
    assert fields["pid"] == str(alice.pid)
    assert fields["uds_path"] == alice.ready["uds_path"]

    for target in ("alice", alice.agent_id):
        res = xt.cli("who", target, "--json")
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert set(data) >= LIST_FIELDS
        assert data["name"] == "alice"
        assert data["agent_id"] == alice.agent_id
        assert data["pid"] == alice.pid
        assert data["uds_path"] == alice.ready["uds_path"]
        assert "token" not in json.dumps(data).lower()  # a descriptor never holds the secret


def test_who_nobody_exit_4(xt: Procs) -> None:
    res = xt.cli("who", "nobody")
    assert res.returncode == 4
    assert res.stdout == ""
    assert "nobody" in one_error_line(res.stderr)
    res = xt.cli("who", "nobody", "--json")
    assert res.returncode == 4
    one_error_line(res.stderr)


def test_who_killed_agent_exit_4(xt: Procs) -> None:
    bob = xt.start_agent("bob")
    xt.kill9(bob)
    res = xt.cli("who", "bob")
    assert res.returncode == 4
    one_error_line(res.stderr)


# ---------------------------------------------------------------------------------------------- tail


def test_tail_prints_new_records_while_sending(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    first = xt.cli("send", "alice", "before the tail", "--json")
    assert first.returncode == 0
    first_id = json.loads(first.stdout)["message_id"]

    # -n 1: one backlog line (the first message's outcome) proves tail has the journal open before we send.
    tail = xt.popen_cli("tail", "alice", "--count", "3", "--json", "-n", "1", "--for", "20")
    buf = bytearray()
    backlog = read_line(tail, 10, buf)
    assert backlog is not None, "tail printed no backlog"
    old = json.loads(backlog)
    assert old["type"] == "outcome" and old["message_id"] == first_id

    sent = xt.cli("send", "alice", "while tailing", "--json")
    assert sent.returncode == 0
    mid = json.loads(sent.stdout)["message_id"]

    new = []
    for _ in range(3):
        line = read_line(tail, 10, buf)
        assert line is not None, f"tail stopped after {new}"
        new.append(json.loads(line))
    assert tail.wait(10) == 0
    assert [r["type"] for r in new] == ["received", "dispatch", "outcome"]
    assert new[0]["message"]["message_id"] == mid
    assert new[0]["message"]["parts"][0]["text"] == "while tailing"
    assert new[1]["message_id"] == mid
    assert new[2]["message_id"] == mid and new[2]["state"] == "accepted"
    assert read_line(tail, 1, buf) is None  # exited after exactly 3 new records
    assert alice.inbox_ids() == [first_id, mid]


def test_tail_text_format(xt: Procs) -> None:
    xt.start_agent("alice")
    assert xt.cli("send", "alice", "first", "--from", "@ci:t").returncode == 0
    tail = xt.popen_cli("tail", "alice", "--count", "3", "-n", "1", "--for", "20")
    buf = bytearray()
    backlog = read_line(tail, 10, buf)  # the first message's outcome: tail is reading
    assert backlog is not None and backlog.decode().endswith("→ accepted")
    assert xt.cli("send", "alice", "hello tail", "--from", "@ci:t").returncode == 0
    lines = [read_line(tail, 10, buf) for _ in range(3)]
    assert tail.wait(10) == 0
    text = [ln.decode() for ln in lines if ln is not None]
    assert len(text) == 3, text
    assert "alice ← @ci:t (external) inform/auto" in text[0] and "'hello tail'" in text[0]
    assert text[1].endswith("dispatching")
    assert text[2].endswith("→ accepted")


def test_tail_nobody_exit_4(xt: Procs) -> None:
    res = xt.cli("tail", "nobody", "--for", "1")
    assert res.returncode == 4
    one_error_line(res.stderr)


# ---------------------------------------------------------------------------------------------- agent run


def test_agent_run_same_name_gets_fallback_with_notice(xt: Procs) -> None:
    first = xt.start_agent("alice")
    assert first.ready["name"] == "alice" and first.ready["notice"] is None
    second = xt.start_agent("alice", "--session", "other-session", inbox=xt.root / "alice2.inbox.jsonl")
    assert second.agent_id != first.agent_id
    assert second.registered_name != "alice"
    assert second.ready["notice"] and "alice" in second.ready["notice"]
    assert second.registered_name in second.ready["notice"]
    # Both are reachable: the name still means the first, the fallback name the second.
    assert xt.cli("send", "alice", "one").returncode == 0
    assert xt.cli("send", second.registered_name, "two").returncode == 0
    assert [x["text"] for x in first.inbox_lines()] == ["one"]
    assert [x["text"] for x in second.inbox_lines()] == ["two"]


def test_agent_run_same_session_is_a_clear_error(xt: Procs) -> None:
    first = xt.start_agent("alice")
    res = xt.cli("agent", "run", "--harness", "fake", "--name", "zed", "--session", "alice", "--json", timeout=15)
    assert res.returncode != 0
    assert res.stdout == ""
    line = one_error_line(res.stderr)
    assert first.agent_id in line and "already registered" in line
    # The first agent is untouched.
    assert xt.cli("send", "alice", "still here").returncode == 0
    assert [d["name"] for d in json.loads(xt.cli("list", "--json").stdout)] == ["alice"]


def test_agent_run_worker_with_unknown_parent_exit_4(xt: Procs) -> None:
    res = xt.cli(
        "agent", "run", "--harness", "fake", "--name", "w", "--role", "worker", "--parent", "ghost", timeout=15
    )
    assert res.returncode == 4
    assert "ghost" in one_error_line(res.stderr)


def test_agent_run_sigterm_cleans_up(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    uds = Path(alice.ready["uds_path"])
    assert uds.is_socket()
    xt.stop(alice.proc)
    assert alice.proc.returncode == 0
    assert not uds.exists()
    assert not xt.paths.descriptor(alice.agent_id).exists()
    assert not xt.paths.key_path(alice.agent_id).exists()
    assert xt.cli("send", "alice", "gone").returncode == 4


# ---------------------------------------------------------------------------------------------- demo


def test_demo_runs_and_cleans_up(xt: Procs) -> None:
    """The fake-agent demo (no harness CLIs in the directory it is pointed at; the real-session demo is
    tests/e2e/test_demo_live.py)."""
    empty = xt.root / "no-harnesses"
    empty.mkdir(exist_ok=True)
    res = xt.cli("demo", "--harness-bin", str(empty), timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert re.search(r"\baccepted\b", out)
    assert "none twice" in out
    assert "0 injected twice" in out
    assert not re.search(r"[1-9]\d* injected twice", out)
    m = re.search(r"(/tmp/xtdemo\.[^\s]+)", out)
    assert m, out
    root = Path(m.group(1))
    assert f"cleaned up {root}" in out
    assert not root.exists()
    # The demo used its own root, never $CROSSTALK_HOME.
    assert not (xt.root / "agents").exists() or not any((xt.root / "agents").iterdir())
    # The bus half: a model on the other machine answered both messages, re: linked, and a live agent got a bus
    # message in its session; its temp dir (remote, both machines) is gone too.
    assert out.count(": REPLIED") == 2, out
    assert "from: demo/reviewer@server" in out and "re:" in out
    assert "alice's session got it live: from @bus:team/op-server" in out
    m = re.search(r"cleaned up (/tmp/xtbus\.[^\s]+)", out)
    assert m and not Path(m.group(1)).exists(), out


def test_list_shows_native_sessions_its_harnesses_discover(xt: Procs) -> None:
    """A live Claude Code session without crosstalk (its registry record: this test process, with its real start
    time) is listed after the agents, as a session crosstalk does not serve; a stale record is not."""
    from crosstalk.fs.procinfo import proc_start_time

    sessions = xt.root / "claude" / "sessions"
    sessions.mkdir(parents=True)
    me = os.getpid()
    record = {"pid": me, "sessionId": "c0ffee00-1111", "procStart": proc_start_time(me), "status": "busy"}
    (sessions / f"{me}.json").write_text(json.dumps({**record, "name": "reviewer", "cwd": "/w"}))
    (sessions / "999999999.json").write_text(json.dumps({**record, "pid": 999999999, "sessionId": "stale"}))
    alice = xt.start_agent("alice")

    data = json.loads(xt.cli("list", "--json").stdout)
    assert [(d["name"], d["crosstalk"], d["reachable"]) for d in data] == [
        ("alice", True, True),
        ("reviewer", False, False),
    ]
    native = data[1]
    assert (native["harness"], native["session_ref"], native["status"], native["pid"]) == (
        "claude",
        "c0ffee00-1111",
        "busy",
        me,
    )
    assert native["reason"] == "its messaging socket is gone"  # the record names no live socket
    text = xt.cli("list").stdout.splitlines()
    assert text[1].split()[:2] == ["alice", alice.agent_id]
    assert text[2].split()[:7] == ["reviewer", "-", "claude", "-", "-", str(me), "no"]
    assert text[2].endswith("(no crosstalk)")
