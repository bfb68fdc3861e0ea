"""The agents one shim serves: one AgentHost per (harness, session_ref), created on its first bound call.

Concurrent first calls for one session share one creation (one future per key), so they reuse one listener, journal
and lock; two sessions never share an agent. close() stops every agent: descriptor, sockets and keys go, journals
and lock files stay, so the next start replays the journal under the same locks.

What differs per harness comes from its kind (crosstalk/harness/): the agent's adapter (`kind.adapter`), whether a
session follows renames (`kind.follows_renames`), and supersession: before a new session gets its agent, an agent
of an earlier session is retired (closed the same way) when its kind proves it superseded (`kind.superseded`;
Claude's `/clear`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping

from crosstalk import harness as kinds
from crosstalk.agent import AgentConfig, AgentHost
from crosstalk.core.errors import CrosstalkError
from crosstalk.harness.base import HarnessAdapter, SessionIdentity
from crosstalk.registry.paths import StatePaths

log = logging.getLogger(__name__)

AdapterFactory = Callable[[SessionIdentity], HarnessAdapter]
AnswerFn = Callable[["AgentHost", str, str], Awaitable[object]]
SupersededCheck = Callable[[SessionIdentity, SessionIdentity], bool]  # (old, new): True only with the kind's proof
RETIRE_WAIT_S = 30.0


class PoolClosed(CrosstalkError, RuntimeError):
    """The shim is shutting down: no new agent is created."""


def kind_adapters(environ: Mapping[str, str]) -> AdapterFactory:
    """Each session's adapter from its harness kind."""
    env = dict(environ)
    return lambda ident: kinds.kind(ident.harness).adapter(ident, env)


def kind_supersession(environ: Mapping[str, str]) -> SupersededCheck:
    """The kind of the new session judges whether it superseded an old one (the pool asks of the same harness only)."""
    env = dict(environ)
    return lambda old, new: kinds.kind(new.harness).superseded(old, new, env)


class AgentPool:
    def __init__(
        self,
        paths: StatePaths,
        environ: Mapping[str, str],
        *,
        adapters: AdapterFactory | None = None,
        cwd: str | None = None,
        superseded: SupersededCheck | None = None,
        answer: AnswerFn | None = None,
    ) -> None:
        self.paths = paths
        self.answer = answer  # how a scripted (fake) answer is given: the router's reply path, forward included
        self.adapters = adapters or kind_adapters(environ)
        self.cwd = cwd or os.getcwd()
        self.superseded = superseded or kind_supersession(environ)
        self._agents: dict[tuple[str, str], asyncio.Future[AgentHost]] = {}
        self._idents: dict[tuple[str, str], SessionIdentity] = {}
        self._closed = False
        self.created = 0  # AgentHost.start calls that succeeded (tests: concurrent first calls create one)
        self.retired: list[tuple[str, str]] = []  # keys of agents retired as superseded, oldest first

    def hosts(self) -> list[AgentHost]:
        return [host for host in map(_started, self._agents.values()) if host is not None]

    def existing(self, ident: SessionIdentity) -> AgentHost | None:
        fut = self._agents.get(ident.key)
        return _started(fut) if fut is not None else None

    async def get(self, ident: SessionIdentity) -> tuple[AgentHost, bool]:
        """The agent of this session, started on first use: (host, created by this call)."""
        if self._closed:
            raise PoolClosed("the shim is closing")
        fut = self._agents.get(ident.key)
        if fut is not None:
            host = await asyncio.shield(fut)
            renamed = ident.preferred_name and ident.preferred_name != host.name
            # The session was renamed (Claude /rename): follow it, unless another live agent holds the name.
            if renamed and kinds.kind(ident.harness).follows_renames and host.rename(ident.preferred_name or ""):
                log.info("agent %s renamed to %s", host.agent_id, host.name)
            return host, False
        fut = asyncio.get_running_loop().create_future()
        self._agents[ident.key] = fut
        self._idents[ident.key] = ident
        try:
            # First: the new session takes the retired one's name (when it has none of its own).
            inherited = await self._retire_superseded(ident)
            host = await self._start(ident, inherited)
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

    async def _retire_superseded(self, new: SessionIdentity) -> str | None:
        """Close every agent of this pool that `new` supersedes, with its kind's proof that the old session is over
        (Claude: same process, another session, and the process's record names the new one). No proof: nothing.
        The name of the first agent retired, for the new session to take."""
        inherited = None
        for key, fut in list(self._agents.items()):
            old = self._idents.get(key)
            if old is None or old.key == new.key or old.harness != new.harness:
                continue
            if not fut.done():  # still starting: let it finish, then judge it like any other
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(fut), RETIRE_WAIT_S)
            if self._agents.get(key) is not fut or not self.superseded(old, new):
                continue
            self._agents.pop(key, None)
            self._idents.pop(key, None)
            host = _started(fut)
            if host is not None:
                inherited = inherited or host.name
                log.info("retiring the agent of %s session %s: superseded by %s", *key, new.session_ref)
                try:
                    await host.close()
                except Exception:
                    log.exception("retiring the agent of superseded session %s failed", old.session_ref)
            self.retired.append(key)
        return inherited

    async def _start(self, ident: SessionIdentity, inherited: str | None = None) -> AgentHost:
        config = AgentConfig(
            harness=self.adapters(ident),
            session_ref=ident.session_ref,
            preferred_name=ident.preferred_name or inherited,
            cwd=self.cwd,
            harness_pid=ident.harness_pid,
            a2a=True,
            session_reply=self.answer,
        )
        return await AgentHost.start(self.paths, config)

    async def close(self) -> None:
        """Stop every agent this pool started, all at once: one slow agent never holds up the others, and a shim
        serving many sessions closes them all within the time one close takes (the shim bounds close as a whole)."""
        self._closed = True
        futures = list(self._agents.values())
        self._agents.clear()
        self._idents.clear()
        await asyncio.gather(*(_close_one(fut) for fut in futures))


async def _close_one(fut: asyncio.Future[AgentHost]) -> None:
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
