"""The pool's keying and creation rules, without real agents: one creation per (harness, session_ref) even under
concurrent first calls, a failed creation retried, nothing created after close; adapters and supersession come from
each session's harness kind."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.base import AgentInfo, SessionIdentity
from crosstalk.harness.claude.adapter import ClaudeAdapter
from crosstalk.harness.codex.adapter import CodexAdapter
from crosstalk.harness.errors import PreSendFailure
from crosstalk.harness.fake import FakeHarness
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.pool import AgentPool, PoolClosed, kind_adapters


class FakeHost:
    def __init__(self, ident: SessionIdentity, name: str | None = None) -> None:
        self.ident = ident
        self.name = name or f"agent-{ident.session_ref}"
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class CountingPool(AgentPool):
    def __init__(self, fail_first: bool = False, environ: dict[str, str] | None = None) -> None:
        super().__init__(StatePaths(Path("/nonexistent")), environ or {})
        self.starts: list[tuple[str, str]] = []
        self.names: dict[tuple[str, str], str | None] = {}  # the preferred name each agent was started with
        self.fail_first = fail_first

    async def _start(self, ident: SessionIdentity, inherited: str | None = None) -> FakeHost:  # type: ignore[override]
        self.starts.append(ident.key)
        self.names[ident.key] = ident.preferred_name or inherited
        await asyncio.sleep(0.01)  # a start takes time: concurrent binds overlap in it (what the pool must handle)
        if self.fail_first and len(self.starts) == 1:
            raise RuntimeError("boom")
        return FakeHost(ident, ident.preferred_name or inherited)


def test_concurrent_first_calls_share_one_creation_and_keys_never_mix():
    async def main() -> None:
        pool = CountingPool()
        a, b = SessionIdentity("codex", "t1"), SessionIdentity("codex", "t2")
        got = await asyncio.wait_for(asyncio.gather(*(pool.get(x) for x in (a, b, a, a, b))), 5)
        assert sorted(pool.starts) == [("codex", "t1"), ("codex", "t2")]
        hosts = [h for h, _ in got]
        assert hosts[0] is hosts[2] is hosts[3] and hosts[1] is hosts[4] and hosts[0] is not hosts[1]
        assert [h.ident.key for h in hosts] == [a.key, b.key, a.key, a.key, b.key]
        assert sum(created for _, created in got) == 2
        assert SessionIdentity("claude", "t1").key != a.key  # the harness is part of the key
        await pool.close()
        assert all(h.closed for h in hosts)
        with pytest.raises(PoolClosed):
            await pool.get(a)

    asyncio.run(main())


def test_a_failed_creation_is_retried_by_the_next_call():
    async def main() -> None:
        pool = CountingPool(fail_first=True)
        a = SessionIdentity("fake", "s")
        with pytest.raises(RuntimeError):
            await pool.get(a)
        _host, created = await asyncio.wait_for(pool.get(a), 5)
        assert created and len(pool.starts) == 2
        await pool.close()

    asyncio.run(main())


def test_kind_adapters_never_fake_a_real_harness():
    make = kind_adapters({"CODEX_HOME": "/nonexistent/codex"})
    assert isinstance(make(SessionIdentity("claude", "x")), ClaudeAdapter)
    assert isinstance(make(SessionIdentity("codex", "x")), CodexAdapter)
    info = AgentInfo("0" * 16, "x", "x", "/nonexistent.sock", "/")

    async def inject() -> None:
        claude = make(SessionIdentity("claude", "x"))
        bound = await claude.bind(info)  # no Claude session started this "shim": it cannot write into one
        assert not bound.inbound_reachable and "not started by a Claude Code session" in (bound.reason or "")
        with pytest.raises(PreSendFailure, match="not started by a Claude Code session"):
            await claude.inject(None)  # type: ignore[arg-type]
        codex = make(SessionIdentity("codex", "x"))  # no app-server under this CODEX_HOME has the thread
        bound = await codex.bind(info)
        assert not bound.inbound_reachable and "no Codex app-server has this thread loaded" in (bound.reason or "")
        with pytest.raises(PreSendFailure, match="no Codex app-server"):
            await codex.inject(None)  # type: ignore[arg-type]

    asyncio.run(inject())
    assert isinstance(make(SessionIdentity("fake", "x")), FakeHarness)


def write_record(root: Path, pid: int, session: str) -> None:
    (root / "sessions").mkdir(parents=True, exist_ok=True)
    body = {"pid": pid, "sessionId": session, "procStart": proc_start_time(pid), "status": "idle"}
    (root / "sessions" / f"{pid}.json").write_text(json.dumps(body))


def test_supersession_needs_a_claude_process_and_its_records_proof(tmp_path: Path):
    """Only a Claude session of the same harness_pid whose process record now names another session is retired;
    Codex threads pooled in one process never evict each other; a missing record proves nothing."""
    pid = os.getpid()

    async def main() -> None:
        pool = CountingPool(environ={"CLAUDE_CONFIG_DIR": str(tmp_path)})
        c1, c2 = SessionIdentity("claude", "s1", harness_pid=pid), SessionIdentity("claude", "s2", harness_pid=pid)
        other = SessionIdentity("claude", "o1", harness_pid=pid + 1)
        t1, t2 = SessionIdentity("codex", "t1"), SessionIdentity("codex", "t2")
        h1, _ = await pool.get(c1)
        ho, _ = await pool.get(other)
        await pool.get(t1)
        await pool.get(t2)  # a second thread of one Codex process: never a supersession
        assert pool.retired == [] and len(pool.hosts()) == 4
        h2, created = await pool.get(c2)  # no record for the process: no proof, s1 stays
        assert created and not h1.closed and pool.retired == []
        write_record(tmp_path, pid, "s3")  # the process's record now names s3: s1 and s2 are over
        await pool.get(SessionIdentity("claude", "s3", harness_pid=pid))
        assert sorted(pool.retired) == [("claude", "s1"), ("claude", "s2")]
        assert pool.names[("claude", "s3")] == "agent-s1"  # no name of its own: it takes the retired agent's
        assert h1.closed and h2.closed and not ho.closed
        assert pool.existing(c1) is None and pool.existing(other) is ho
        await pool.close()

    asyncio.run(main())
