"""What each watch row says: the screen's cells and `crosstalk watch --once`'s tables."""

from __future__ import annotations

from crosstalk.watch.records import AgentView, MessageView, Snapshot, TransportView
from crosstalk.watch.rows import agent_row, format_age, format_latency, text_tables, traffic_row, transport_row

AGENT = AgentView(
    name="bob", agent_id="b" * 16, harness="codex", role="worker", owner="a" * 16, owner_name=None, pid=42,
    cwd="/w", reachable=False, reason="its socket is gone", open_asks=1, asks_waiting=2, unread=3,
)  # fmt: skip
MESSAGE = MessageView(
    message_id="m", at=0.0, to="bob", to_agent_id="b" * 16, sender="@ci:build", sender_class="unverified",
    kind="inform", state="unreachable", reason="busy", latency_s=0.0123, transport="uds", text="hi",
)  # fmt: skip
TRANSPORT = TransportView(
    name="t1", root="/t1", alias=None, problem=None, running=True, pid=7, heartbeat_age_s=75.0, last_tick_at=None,
    interval=5.0, halted=None, cursor="c", head="h", unscanned_commits=2, held=1, dispatched=3, failed=0, errors=4,
)  # fmt: skip


def test_cells() -> None:
    assert agent_row(AGENT) == ("bob", "codex", "worker", "aaaaaaaa", "no: its socket is gone", "1", "2", "3", "42")
    cells = traffic_row(MESSAGE)
    assert cells[1:] == ("@ci:build (unverified)", "bob", "inform", "unreachable (busy)", "12 ms", "hi")
    assert transport_row(TRANSPORT) == ("t1", "running (pid 7)", "1m ago", "2 commits", "1", "3", "0", "4", "")


def test_formats() -> None:
    assert (format_latency(0.0004), format_latency(12.0)) == ("0 ms", "12.0 s")
    assert (format_age(5), format_age(120), format_age(7200)) == ("5s", "2m", "2.0h")


def test_text_tables() -> None:
    snap = Snapshot(taken_at=0.0, state_root="/s", agents=(AGENT,), messages=(MESSAGE,), transports=())
    out = text_tables(snap).splitlines()
    assert out[0] == "state root /s"
    assert "transports (0)" in out and "  (none)" in out
    header = next(ln for ln in out if ln.lstrip().startswith("NAME"))
    assert header.split() == ["NAME", "HARNESS", "ROLE", "OWNER", "REACHABLE", "OWES", "WAITING", "UNREAD", "PID"]


def test_other_machines_agents_follow_this_machines() -> None:
    from crosstalk.watch.records import RemoteAgentView
    from crosstalk.watch.rows import agent_rows, agents_title

    far = RemoteAgentView(name="carol@gpu", machine="gpu", harness="claude", reachable=False, reason=None)
    snap = Snapshot(taken_at=0.0, state_root="/s", agents=(AGENT,), messages=(), transports=(), remote_agents=(far,))
    assert agent_rows(snap)[1] == ("carol@gpu", "claude", "-", "-", "no: unreachable", "-", "-", "-", "-")
    assert agents_title(snap) == "1 live, 1 on other machines"
    assert "agents (1 live, 1 on other machines)" in text_tables(snap)
    alone = Snapshot(taken_at=0.0, state_root="/s", agents=(AGENT,), messages=(), transports=())
    assert agents_title(alone) == "1 live" and alone.to_json()["remote_agents"] == []
