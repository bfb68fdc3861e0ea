"""The pool's keying and creation rules, without real agents: one creation per (harness, session_ref) even under
concurrent first calls, a failed creation retried, nothing created after close."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crosstalk.harness.unavailable import UnavailableHarness
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.identity import Identity
from crosstalk.shim.pool import AgentPool, PoolClosed, default_harness_factory

pytestmark = pytest.mark.unit


class FakeHost:
    def __init__(self, ident: Identity) -> None:
        self.ident = ident
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class CountingPool(AgentPool):
    def __init__(self, fail_first: bool = False) -> None:
        super().__init__(StatePaths(Path("/nonexistent")), default_harness_factory({}))
        self.starts: list[tuple[str, str]] = []
        self.fail_first = fail_first

    async def _start(self, ident: Identity) -> FakeHost:  # type: ignore[override]
        self.starts.append(ident.key)
        await asyncio.sleep(0.01)
        if self.fail_first and len(self.starts) == 1:
            raise RuntimeError("boom")
        return FakeHost(ident)


def test_concurrent_first_calls_share_one_creation_and_keys_never_mix():
    async def main() -> None:
        pool = CountingPool()
        a, b = Identity("codex", "t1"), Identity("codex", "t2")
        got = await asyncio.wait_for(asyncio.gather(*(pool.get(x) for x in (a, b, a, a, b))), 5)
        assert sorted(pool.starts) == [("codex", "t1"), ("codex", "t2")]
        hosts = [h for h, _ in got]
        assert hosts[0] is hosts[2] is hosts[3] and hosts[1] is hosts[4] and hosts[0] is not hosts[1]
        assert [h.ident.key for h in hosts] == [a.key, b.key, a.key, a.key, b.key]
        assert sum(created for _, created in got) == 2
        assert Identity("claude", "t1").key != a.key  # the harness is part of the key
        await pool.close()
        assert all(h.closed for h in hosts)
        with pytest.raises(PoolClosed):
            await pool.get(a)

    asyncio.run(main())


def test_a_failed_creation_is_retried_by_the_next_call():
    async def main() -> None:
        pool = CountingPool(fail_first=True)
        a = Identity("fake", "s")
        with pytest.raises(RuntimeError):
            await pool.get(a)
        _host, created = await asyncio.wait_for(pool.get(a), 5)
        assert created and len(pool.starts) == 2
        await pool.close()

    asyncio.run(main())


def test_default_factory_never_fakes_a_real_harness():
    make = default_harness_factory({})
    for name in ("claude", "codex"):
        h = make(Identity(name, "x"))
        assert isinstance(h, UnavailableHarness) and h.name == name

    async def inject() -> None:
        from crosstalk.harness.base import PreSendFailure

        with pytest.raises(PreSendFailure, match="the claude adapter is not available yet"):
            await make(Identity("claude", "x")).inject(None)  # type: ignore[arg-type]

    asyncio.run(inject())
    assert make(Identity("fake", "x")).name == "fake"


def test_supersession_needs_a_claude_process_and_proof():
    """Only a Claude session of the same harness_pid, with the check's proof, is retired; Codex threads pooled in
    one process never evict each other, and a check that finds no proof retires nothing."""

    async def main() -> None:
        proof: dict[str, bool] = {}
        pool = CountingPool()
        pool.superseded = lambda old: proof.get(old.session_ref, False)
        c1, c2 = Identity("claude", "s1", harness_pid=7), Identity("claude", "s2", harness_pid=7)
        other = Identity("claude", "o1", harness_pid=8)
        t1, t2 = Identity("codex", "t1"), Identity("codex", "t2")
        h1, _ = await pool.get(c1)
        ho, _ = await pool.get(other)
        await pool.get(t1)
        proof["t1"] = True  # even "proof" for a Codex thread is ignored: Codex never supersedes
        await pool.get(t2)
        assert pool.retired == [] and len(pool.hosts()) == 4
        h2, created = await pool.get(c2)  # no proof for s1 (missing record): s1 stays
        assert created and not h1.closed and pool.retired == []
        await pool.get(Identity("claude", "s3", harness_pid=7))
        proof["s1"] = proof["s2"] = True
        await pool.get(Identity("claude", "s4", harness_pid=7))
        assert sorted(pool.retired) == [("claude", "s1"), ("claude", "s2")]  # s3: no proof yet
        assert h1.closed and h2.closed and not ho.closed
        assert pool.existing(c1) is None and pool.existing(other) is ho
        await pool.close()

    asyncio.run(main())
