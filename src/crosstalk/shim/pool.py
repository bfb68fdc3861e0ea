"""The agents one shim serves: one AgentHost per (harness, session_ref), created on its first bound call.

Concurrent first calls for one session share one creation (one future per key), so they reuse one listener, journal
and lock; two sessions never share an agent. close() stops every agent: descriptor, sockets and keys go, journals
and lock files stay (seed 000 §9).

Supersession (seed 000 §3, shim/supersede.py): before a new Claude session of the same process gets its agent, an
agent of that process's earlier session is retired (closed the same way) when the harness proves it superseded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from crosstalk.agent import AgentConfig, AgentHost
from crosstalk.harness.base import AgentInfo, BindResult, Harness
from crosstalk.harness.fake import FakeHarness
from crosstalk.harness.unavailable import UnavailableHarness
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.identity import FAKE, Identity
from crosstalk.shim.supersede import may_supersede

log = logging.getLogger(__name__)

HarnessFactory = Callable[[Identity], Harness]
AnswerFn = Callable[["AgentHost", str, str], Awaitable[object]]
SupersededCheck = Callable[[Identity], bool]  # True only with proof that this (older) session is superseded
RETIRE_WAIT_S = 30.0


class PoolClosed(RuntimeError):
    """The shim is shutting down: no new agent is created."""


class ShimFakeHarness(FakeHarness):
    """The fake harness as the shim runs it: its inbox file is named after the agent, known only at bind."""

    def __init__(self, inbox_dir: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inbox_dir = inbox_dir

    async def bind(self, agent: AgentInfo) -> BindResult:
        if self._inbox_dir:
            self._inbox = Path(self._inbox_dir) / f"{agent.name}.jsonl"
        return await super().bind(agent)


def default_harness_factory(environ: Mapping[str, str] | None = None) -> HarnessFactory:
    """fake → the scriptable fake (answer from CROSSTALK_FAKE_ANSWER, inbox CROSSTALK_FAKE_INBOX_DIR/<name>.jsonl);
    claude/codex → an adapter that honestly refuses every injection until their harness issues land."""
    env = dict(os.environ if environ is None else environ)

    def make(ident: Identity) -> Harness:
        if ident.harness == FAKE:
            return ShimFakeHarness(env.get("CROSSTALK_FAKE_INBOX_DIR") or None, answer=env.get("CROSSTALK_FAKE_ANSWER"))
        return UnavailableHarness(ident.harness)

    return make


class AgentPool:
    def __init__(
        self,
        paths: StatePaths,
        harness_factory: HarnessFactory,
        *,
        cwd: str | None = None,
        superseded: SupersededCheck | None = None,
        answer: AnswerFn | None = None,
    ) -> None:
        self.paths = paths
        self.answer = answer  # how a scripted (fake) answer is given: the router's reply path, forward included
        self.harness_factory = harness_factory
        self.cwd = cwd or os.getcwd()
        self.superseded = superseded
        self._agents: dict[tuple[str, str], asyncio.Future[AgentHost]] = {}
        self._idents: dict[tuple[str, str], Identity] = {}
        self._closed = False
        self.created = 0  # AgentHost.start calls that succeeded (tests: concurrent first calls create one)
        self.retired: list[tuple[str, str]] = []  # keys of agents retired as superseded, oldest first

    def hosts(self) -> list[AgentHost]:
        return [host for host in map(_started, self._agents.values()) if host is not None]

    def existing(self, ident: Identity) -> AgentHost | None:
        fut = self._agents.get(ident.key)
        return _started(fut) if fut is not None else None

    async def get(self, ident: Identity) -> tuple[AgentHost, bool]:
        """The agent of this session, started on first use: (host, created by this call)."""
        if self._closed:
            raise PoolClosed("the shim is closing")
        fut = self._agents.get(ident.key)
        if fut is not None:
            host = await asyncio.shield(fut)
            renamed = ident.harness == "claude" and ident.preferred_name and ident.preferred_name != host.name
            # The session was renamed (/rename): follow it, unless another live agent holds the name.
            if renamed and host.rename(ident.preferred_name or ""):
                log.info("agent %s renamed to %s", host.agent_id, host.name)
            return host, False
        fut = asyncio.get_running_loop().create_future()
        self._agents[ident.key] = fut
        self._idents[ident.key] = ident
        try:
            await self._retire_superseded(ident)  # first: the new session may take the retired one's name
            host = await self._start(ident)
        except BaseException as exc:
            self._agents.pop(ident.key, None)  # a later call may try again
            self._idents.pop(ident.key, None)
            if isinstance(exc, Exception):
                fut.set_exception(exc)
                fut.exception()  # retrieved: no "never retrieved" warning when no one else waited
            else:
                fut.cancel()
            raise
        if self._closed:  # close() ran while this agent was starting: it must not outlive the shim
            self._agents.pop(ident.key, None)
            self._idents.pop(ident.key, None)
            await host.close()
            fut.cancel()
            raise PoolClosed("the shim is closing")
        fut.set_result(host)
        self.created += 1
        return host, True

    async def _retire_superseded(self, new: Identity) -> None:
        """Close every agent of this pool that `new` supersedes: same Claude process, another session, and the
        harness's proof (the `superseded` check) that the old session is over. No check, no proof: nothing."""
        if self.superseded is None:
            return
        for key, fut in list(self._agents.items()):
            old = self._idents.get(key)
            if old is None or not may_supersede(new, old):
                continue
            if not fut.done():  # still starting: let it finish, then judge it like any other
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(fut), RETIRE_WAIT_S)
            if self._agents.get(key) is not fut or not self.superseded(old):
                continue
            self._agents.pop(key, None)
            self._idents.pop(key, None)
            host = _started(fut)
            if host is not None:
                log.info("retiring the agent of %s session %s: superseded by %s", *key, new.session_ref)
                try:
                    await host.close()
                except Exception:
                    log.exception("retiring the agent of superseded session %s failed", old.session_ref)
            self.retired.append(key)

    async def _start(self, ident: Identity) -> AgentHost:
        harness = self.harness_factory(ident)
        config = AgentConfig(
            harness=harness,
            session_ref=ident.session_ref,
            preferred_name=ident.preferred_name,
            cwd=self.cwd,
            harness_pid=ident.harness_pid,
            a2a=True,
        )
        host = await AgentHost.start(self.paths, config)
        _wire_answer(host, self.answer)
        return host

    async def close(self) -> None:
        self._closed = True
        futures = list(self._agents.values())
        self._agents.clear()
        self._idents.clear()
        for fut in futures:
            if not fut.done():
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(fut), 30)
            host = _started(fut)
            if host is not None:
                try:
                    await host.close()
                except Exception:
                    log.exception("closing agent failed")


def _started(fut: asyncio.Future[AgentHost]) -> AgentHost | None:
    """The agent a finished start produced; None while it is starting, or when it failed or was cancelled."""
    return fut.result() if fut.done() and not fut.cancelled() and fut.exception() is None else None


def _wire_answer(host: AgentHost, via: AnswerFn | None) -> None:
    """A fake with a scripted answer replies to every injected ask as the reply tool would: through `via` (the
    router's reply path, which also carries the answer into the asker's session), else the task service alone."""
    harness = host.config.harness
    tasks = host.tasks
    if getattr(harness, "answer", None) is None or tasks is None:
        return
    from crosstalk.core.errors import CrosstalkError

    async def answer(message_id: str, text: str) -> object:
        try:
            if via is not None:
                return await via(host, message_id, text)
            return await tasks.reply(message_id, text)
        except CrosstalkError as exc:
            log.warning("scripted answer to %s refused: %s", message_id, exc)
            return None

    harness.on_answer = answer  # type: ignore[attr-defined]
