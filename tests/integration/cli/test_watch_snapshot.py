"""The snapshot layer of `crosstalk watch` against a real state root: real fake-harness agents, real sends over
their sockets, a real transport with its dispatcher; and the `--once --json` shape a script reads."""

from __future__ import annotations

import json
import os

from crosstalk.watch.records import SNAPSHOT_VERSION
from crosstalk.watch.snapshot import Reader
from tests.support.procs import Procs, one_error_line
from tests.support.watch import dispatcher, init_transport

AGENT_KEYS = {
    "name", "agent_id", "harness", "role", "owner", "owner_name", "pid", "cwd", "reachable", "reason", "open_asks",
    "asks_waiting", "unread",
}  # fmt: skip
MESSAGE_KEYS = {
    "message_id", "at", "to", "to_agent_id", "from", "sender_class", "kind", "state", "reason", "latency_s",
    "transport", "text",
}  # fmt: skip
TRANSPORT_KEYS = {
    "name", "root", "alias", "problem", "running", "pid", "heartbeat_age_s", "last_tick_at", "interval", "halted",
    "cursor", "head", "unscanned_commits", "held", "dispatched", "failed", "errors",
}  # fmt: skip


def _reader(xt: Procs) -> Reader:
    return Reader(xt.paths, xt.env)


def test_agents_with_harness_role_owner_and_reachability(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    carol = xt.start_agent("carol", "--role", "worker", "--parent", "alice")
    snap = _reader(xt).take()
    assert [(a.name, a.agent_id, a.harness, a.role, a.pid) for a in snap.agents] == [
        ("alice", alice.agent_id, "fake", "primary", alice.pid),
        ("carol", carol.agent_id, "fake", "worker", carol.pid),
    ]
    assert [(a.owner, a.owner_name) for a in snap.agents] == [(None, None), (alice.agent_id, "alice")]
    assert [(a.reachable, a.reason) for a in snap.agents] == [(True, None), (True, None)]
    assert snap.state_root == str(xt.root)


def test_an_agent_whose_socket_is_gone_is_unreachable_with_the_reason_list_gives(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    os.unlink(xt.paths.uds_path(alice.agent_id))
    (row,) = _reader(xt).take().agents
    assert (row.reachable, row.reason) == (False, "its socket is gone")
    listed = json.loads(xt.cli("list", "--json").stdout)
    assert listed[0]["reachable"] is False


def test_traffic_has_each_message_with_its_state_and_latency(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    xt.start_agent("bob", "--default", "refuse")
    assert xt.cli("send", "alice", "hello alice").returncode == 0
    assert xt.cli("send", "bob", "hello bob").returncode == 4
    snap = _reader(xt).take()
    rows = [(m.to, m.sender_class, m.kind, m.state, m.text) for m in snap.messages]
    assert rows == [
        ("alice", "external", "inform", "accepted", "hello alice"),
        ("bob", "external", "inform", "unreachable", "hello bob"),
    ]
    assert all(m.sender.startswith("@cli:") for m in snap.messages)  # a plain send is from @cli:$USER
    first, second = snap.messages
    assert first.to_agent_id == alice.agent_id and first.reason is None
    assert second.reason == "fake: the session refused the input"
    assert all(m.latency_s is not None and m.latency_s >= 0 for m in snap.messages)
    # bob's undelivered message waits in its mailbox; alice's was delivered.
    assert [(a.name, a.unread) for a in snap.agents] == [("alice", 0), ("bob", 1)]


def test_an_ask_shows_as_owed_by_its_receiver(xt: Procs) -> None:
    xt.start_agent("alice")
    xt.start_agent("carol", "--role", "worker", "--parent", "alice")
    res = xt.cli("send", "carol", "what is 2+2?", "--kind", "ask", "--a2a", "--as", "alice", "--return-immediately")
    assert res.returncode == 0, res.stderr
    snap = _reader(xt).take()
    owed = {a.name: (a.open_asks, a.unread) for a in snap.agents}
    assert owed == {"alice": (0, 0), "carol": (1, 1)}
    (msg,) = snap.messages
    assert (msg.sender, msg.sender_class, msg.to, msg.kind) == ("alice", "verified", "carol", "ask")
    assert msg.transport == "a2a"


def test_a_reader_reads_only_what_each_journal_grew_by(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    reader = _reader(xt)
    assert xt.cli("send", "alice", "one").returncode == 0
    assert [m.text for m in reader.take().messages] == ["one"]
    tail = reader._tails[alice.agent_id]
    size = xt.paths.journal_file(alice.agent_id).stat().st_size
    assert tail._offset == size
    assert tail.refresh() is False  # nothing appended: nothing read
    assert xt.cli("send", "alice", "two").returncode == 0
    assert [m.text for m in reader.take().messages] == ["one", "two"]
    assert tail._offset > size
    assert reader._tails[alice.agent_id] is tail  # the same tail, carried on from where it was


def test_a_rejected_message_is_traffic_too(xt: Procs) -> None:
    xt.start_agent("alice", "--accept-from", "parent")
    res = xt.cli("send", "alice", "let me in")
    assert res.returncode == 3, res.stderr
    (msg,) = _reader(xt).take().messages
    assert msg.state == "rejected" and msg.reason and msg.latency_s is None


def test_a_transport_shows_its_dispatcher_heartbeat_and_pending_work(xt: Procs) -> None:
    init_transport(xt)
    (before,) = _reader(xt).take().transports
    assert (before.name, before.running, before.pid, before.heartbeat_age_s) == ("t1", False, None, None)
    assert before.root == str((xt.root / "t1").resolve()) and before.problem is None
    assert before.head is not None and before.unscanned_commits == 0  # init starts the cursor at HEAD
    with dispatcher(xt) as pid:
        (t,) = _reader(xt).take().transports
        assert (t.running, t.pid) == (True, pid)
        assert t.heartbeat_age_s is not None and t.heartbeat_age_s >= 0
        assert t.interval == 60 and t.cursor == t.head and t.unscanned_commits == 0
        assert (t.held, t.failed, t.errors, t.halted) == (0, 0, 0, None)
    (after,) = _reader(xt).take().transports
    assert after.running is False and after.heartbeat_age_s is not None  # the last heartbeat stays


def test_a_commit_after_the_cursor_is_pending_work(xt: Procs) -> None:
    init_transport(xt)
    reader = _reader(xt)
    (t,) = reader.take().transports
    assert t.unscanned_commits == 0
    res = xt.cli("channel", "create", "review", "--transport", "t1")
    assert res.returncode == 0, res.stderr
    (t,) = reader.take().transports
    assert t.unscanned_commits == 1 and t.head != t.cursor
    res = xt.cli("message", "send", "--transport", "t1", "--to", "nobody@t1", "hello")
    assert res.returncode == 0, res.stderr
    (t,) = reader.take().transports
    assert t.unscanned_commits == 2  # no dispatcher runs here: both commits wait for one


def test_once_json_has_the_documented_shape(xt: Procs) -> None:
    xt.start_agent("alice")
    init_transport(xt)
    assert xt.cli("send", "alice", "for the record").returncode == 0
    res = xt.cli("watch", "--once", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(data) == {"version", "taken_at", "state_root", "agents", "messages", "transports", "remote_agents"}
    assert data["version"] == SNAPSHOT_VERSION and data["state_root"] == str(xt.root)
    assert [set(a) for a in data["agents"]] == [AGENT_KEYS]
    assert [set(m) for m in data["messages"]] == [MESSAGE_KEYS]
    assert [set(t) for t in data["transports"]] == [TRANSPORT_KEYS]
    assert data["agents"][0]["name"] == "alice" and data["messages"][0]["text"] == "for the record"
    assert data["messages"][0]["state"] == "accepted" and data["transports"][0]["name"] == "t1"


def test_once_prints_the_three_tables(xt: Procs) -> None:
    xt.start_agent("alice")
    res = xt.cli("watch", "--once")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "agents (1 live)" in lines and "transports (0)" in lines
    assert any(ln.split()[:5] == ["alice", "fake", "primary", "-", "yes"] for ln in lines), res.stdout


def test_json_without_once_and_no_terminal_are_usage_errors(xt: Procs) -> None:
    res = xt.cli("watch", "--json")
    assert res.returncode == 2 and "--once" in one_error_line(res.stderr)
    res = xt.cli("watch")
    assert res.returncode == 2 and "needs a terminal" in one_error_line(res.stderr)
