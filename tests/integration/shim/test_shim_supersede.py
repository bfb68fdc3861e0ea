"""Superseded sessions: after Claude's /clear the same process calls with a new session id; the agent
of the old session is retired only when the registry record proves it (parses and names another session)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crosstalk.harness.base import SessionIdentity
from crosstalk.registry.discovery import list_descriptors
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.router import CallContext
from crosstalk.shim.tools import ShimRouter
from tests.support.shim_tools import call, run

PID = os.getpid()  # the "Claude process": a live pid, so the descriptor's harness start time is real


def claude_router(root: Path) -> ShimRouter:
    (root / "claude" / "sessions").mkdir(parents=True, exist_ok=True)
    env = {"CLAUDE_CONFIG_DIR": str(root / "claude")}
    return ShimRouter("claude", StatePaths(root / "st"), environ=env, cwd=str(root))


def record(root: Path, session: str, name: str | None = "planner") -> None:
    body: dict[str, object] = {"pid": PID, "sessionId": session, "cwd": str(root), "status": "idle"}
    if name:
        body["name"] = name
    path = root / "claude" / "sessions" / f"{PID}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body))
    tmp.rename(path)


CLAUDE = CallContext(parent_pid=PID)


def test_clear_retires_the_old_session_and_the_new_one_takes_the_name():
    async def main(root: Path) -> None:
        r, peer = claude_router(root), ShimRouter("fake", StatePaths(root / "st"), environ={}, cwd=str(root))
        try:
            record(root, "sess-1")
            first, err = await call(r, "list_agents", CLAUDE)
            assert not err and "planner" in first["note"]
            old = r.pool.hosts()[0]
            old_id, old_uds = old.agent_id, old.descriptor.uds_path
            assert [d.name for d in list_descriptors(r.paths)] == ["planner"]

            record(root, "sess-2")  # /clear: same process, same name, a new session
            out, err = await call(r, "list_agents", CLAUDE)
            assert not err, out
            assert out["note"] == "you are registered as 'planner'; " + out["note"].split("; ", 1)[1]
            assert "held by a live agent" not in out["note"]  # no "live" notice: the holder was superseded
            rows = out["agents"]
            assert len(rows) == 1 and rows[0]["name"] == "planner" and rows[0]["self"]
            assert rows[0]["agent_id"] != old_id
            assert r.pool.retired == [("claude", "sess-1")] and len(r.pool.hosts()) == 1
            # Closed: descriptor, socket and keys gone, journal kept (a /resume replays it).
            paths = r.paths
            assert not paths.descriptor(old_id).exists() and not os.path.exists(old_uds)
            assert not paths.key_path(old_id).exists() and not paths.token_path(old_id).exists()
            assert paths.journal_file(old_id).exists()
            # Its agent_id answers no_such_agent; the name reaches the new session.
            peer_ctx = CallContext(meta={"crosstalk/session": "p"})
            sent, err = await call(peer, "send_message", peer_ctx, to=old_id, text="x")
            assert err and sent["reason"] == "no_such_agent", sent
            # The new session works as itself.
            box, err = await call(r, "receive_message", CLAUDE)
            assert not err and box["state"] == "ok"

            record(root, "sess-1")  # /resume of the old session: an ordinary registration, same agent_id
            out, err = await call(r, "list_agents", CLAUDE)
            mine = [row for row in out["agents"] if row["harness"] == "claude"]
            assert [row["agent_id"] for row in mine] == [old_id] and mine[0]["name"] == "planner" and mine[0]["self"]
            assert r.pool.retired == [("claude", "sess-1"), ("claude", "sess-2")]
        finally:
            await r.close()
            await peer.close()

    run(main)


def test_no_proof_retires_nothing():
    async def main(root: Path) -> None:
        r = claude_router(root)
        try:
            record(root, "sess-1")
            await call(r, "list_agents", CLAUDE)
            old = r.pool.hosts()[0]
            # The record vanishes (no evidence): the old agent stays, and calls are unbound meanwhile.
            (root / "claude" / "sessions" / f"{PID}.json").unlink()
            new = SessionIdentity("claude", "sess-2", harness_pid=PID)
            assert not r.pool.superseded(r.pool._idents[("claude", "sess-1")], new)
            out, err = await call(r, "receive_message", CLAUDE)
            assert err and out["state"] == "unbound"
            # An unreadable record is no evidence either.
            (root / "claude" / "sessions" / f"{PID}.json").write_text("{not json")
            assert not r.pool.superseded(r.pool._idents[("claude", "sess-1")], new)
            assert [d.agent_id for d in list_descriptors(r.paths)] == [old.agent_id]
            assert r.pool.retired == []
        finally:
            await r.close()

    run(main)
