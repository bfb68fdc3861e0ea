"""Sending as a bound agent (task frames on the peer's socket, or A2A), the answer as a model reads it, and the
per-peer nudge."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from crosstalk.agent import AgentHost
from crosstalk.core.message import Message
from crosstalk.core.states import Outcome, Reason, State
from crosstalk.registry.credentials import read_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.errors import AmbiguousName, KeyFileError, NoSuchAgent
from crosstalk.registry.paths import StatePaths

NUDGE_FIRST = 30
UNCOUNTED = frozenset({State.REJECTED, State.UNREACHABLE})  # sends that reached no peer are not counted
NUDGE_HINT = (
    "You have now sent {count} messages to {peer}. Check whether this exchange is still making progress; if it "
    "is not, you may stop, or tell your user."
)


def resolve_target(paths: StatePaths, to: str) -> Descriptor | dict[str, Any]:
    """The live agent `to` names, or the model-facing answer for an unknown or ambiguous name."""
    from crosstalk.registry.discovery import resolve

    try:
        return resolve(paths, to)
    except NoSuchAgent:
        return unknown_name(to)
    except AmbiguousName as exc:
        return ambiguous_name(to, exc.candidates)


def unknown_name(to: str) -> dict[str, Any]:
    hint = f"no live agent is named {to!r}; call list_agents for the current names"
    return Outcome("", State.UNKNOWN, Reason.NO_SUCH_AGENT).answer(hint=hint)


def ambiguous_name(to: str, candidates: Any) -> dict[str, Any]:
    rows = [{"agent_id": c[0], "name": c[1], "harness": c[2], "cwd": c[3]} for c in candidates]
    hint = f"several live agents are named {to!r}: pass one of their agent_ids as `to`"
    return Outcome("", State.UNKNOWN, Reason.AMBIGUOUS_NAME).answer(candidates=rows, hint=hint)


def _task_answer(view: Any, message_id: str, to: str) -> dict[str, Any]:
    """A task as its sender sees it: the answer record the receiver put on it, the reply with it once replied."""
    answer = view.answer or Outcome(message_id, State.UNKNOWN, Reason.NO_ANSWER, task_id=view.task_id or None)
    reply = None
    if answer.state is State.REPLIED:
        reply = next((h.text for h in reversed(view.history) if h.role == "agent"), None)
    return answer.answer(reply=reply, to=to)


class Sender:
    """One shim's outbound side: how each bound agent reaches its peers, and the nudge counts.

    A peer is sent its tasks over its unix socket (task frames, ingress/uds_tasks.py): the same TaskApi, answers,
    dedupe and journal records as an A2A SendMessage, without the A2A SDK in either process. A peer too old for task
    frames gets A2A (ingress/a2a/client.py) when it serves an endpoint."""

    def __init__(self, paths: StatePaths, *, timeout: float = 60.0) -> None:
        self.paths = paths
        self.timeout = timeout
        self._clients: dict[tuple[str, str, str], Any] = {}
        # (sender agent_id, peer agent_id) → (their instances, (socket, key, token), the client keeping connections)
        self._uds: dict[tuple[str, str], tuple[tuple[str, str, str], tuple[str, str, str], Any]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._a2a_only: set[str] = set()  # instance ids of peers that answered they take no task frames
        self.counts: dict[tuple[str, str], int] = {}

    async def send(
        self, host: AgentHost, target: Descriptor, msg: Message, *, return_immediately: bool, op: str | None = None
    ) -> dict[str, Any]:
        """SendMessage as `host` to `target`: the model-facing answer (state, reason, message_id, task_id).
        `op` ("claim", "release"): a request about the target itself (shim/claiming.py), not a message."""
        from crosstalk.core.errors import TaskError
        from crosstalk.ingress.errors import (
            A2AAuthError,
            A2AOutcomeUnknown,
            A2AProtocolError,
            A2AUnreachable,
            TaskFramesUnsupported,
        )

        mid, to = msg.message_id, target.name

        def failed(state: State, reason: str, **extra: Any) -> dict[str, Any]:
            return Outcome(mid, state, reason).answer(to=to, **extra)

        try:
            client = self.client_for(host, target, strict=True)
        except KeyFileError as exc:
            return failed(State.UNREACHABLE, Reason.NO_SENDER_TOKEN, detail=str(exc))
        if client is None:
            return failed(State.UNREACHABLE, Reason.NO_A2A_ENDPOINT)
        extra = {"op": op} if op is not None else {}
        try:
            try:
                view = await client.send(msg, return_immediately=return_immediately, **extra)
            except TaskFramesUnsupported:  # nothing was received: the same send over A2A
                self._a2a_only.add(target.instance_id)
                client = self.client_for(host, target, strict=True)
                if client is None:
                    return failed(State.UNREACHABLE, Reason.NO_A2A_ENDPOINT)
                view = await client.send(msg, return_immediately=return_immediately, **extra)
        except TaskError as exc:
            if exc.code == TaskError.INTERNAL:
                return failed(State.UNREACHABLE, Reason.RECEIVER_JOURNAL_FAILED)
            return failed(State.REJECTED, exc.message.removeprefix("rejected: "))
        except A2AOutcomeUnknown:
            hint = "the message may have arrived; do not resend it blindly, ask the recipient instead"
            return failed(State.UNKNOWN, Reason.NO_ANSWER, hint=hint)
        except A2AUnreachable as exc:
            return failed(State.UNREACHABLE, Reason.CONNECTION_FAILED, detail=str(exc))
        except A2AAuthError:
            return failed(State.REJECTED, Reason.TOKEN_REFUSED)
        except A2AProtocolError as exc:
            return failed(State.REJECTED, Reason.PROTOCOL_ERROR, detail=str(exc))
        return _task_answer(view, mid, to)

    def client_for(self, host: AgentHost, target: Descriptor, *, strict: bool = False) -> Any:
        """`host`'s client for the tasks at `target` (`send`, `get`): its socket's task frames, or A2A for a peer
        that takes none. None without `host`'s bearer token (strict: raise KeyFileError) or any way to reach it.
        The same two instances as the last send (neither restarted: each writes its key anew when it starts): the
        client kept for them, without reading the keys again."""
        known = self._uds.get((host.agent_id, target.agent_id))
        if known is not None and known[0] == _instances(host, target) and target.instance_id not in self._a2a_only:
            return known[2]
        try:
            token = read_key(self.paths.token_path(host.agent_id))
        except KeyFileError:
            if strict:
                raise
            return None
        if target.uds_path and target.instance_id not in self._a2a_only:
            try:
                key = read_key(self.paths.key_path(target.agent_id))
            except KeyFileError:
                key = None  # going, or gone: A2A says which
            if key is not None:
                return self._uds_client(host, target, key, token)
        if not target.a2a_url:
            return None  # neither its socket's task frames nor an A2A endpoint
        return self._client(host.agent_id, target.a2a_url, token)

    def _uds_client(self, host: AgentHost, target: Descriptor, key: str, token: str) -> Any:
        """`agent_id`'s client for `target`'s socket, its connections kept between sends (ingress/uds_kept.py).
        A peer that restarted has a new key: a new client; the old one's connections are closed."""
        from crosstalk.ingress.uds_task_client import UdsTaskClient

        pair, where = (host.agent_id, target.agent_id), (str(target.uds_path), key, token)
        known = self._uds.get(pair)
        if known is not None and known[1] == where:
            self._uds[pair] = (_instances(host, target), where, known[2])
            return known[2]
        if known is not None:
            self._closing.add(asyncio.get_running_loop().create_task(known[2].close()))
            self._closing = {t for t in self._closing if not t.done()}
        client = UdsTaskClient(where[0], key, token, timeout=self.timeout, keep=True)
        self._uds[pair] = (_instances(host, target), where, client)
        return client

    def _client(self, agent_id: str, url: str, token: str) -> Any:
        from crosstalk.ingress.a2a.client import A2AClient

        key = (agent_id, url, token)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = A2AClient(url, token, timeout=self.timeout)
        return client

    async def count(self, host: AgentHost, peer: str, peer_name: str, result: dict[str, Any]) -> None:
        """Count one send to `peer` (an agent_id) unless it reached no one; at 30, 60, 120, … add the nudge hint
        to `result` and journal one nudge record."""
        if result.get("state") in UNCOUNTED:
            return
        key = (host.agent_id, peer)
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        if not is_nudge_count(n):
            return
        nudge = NUDGE_HINT.format(count=n, peer=peer_name)
        result["hint"] = f"{result['hint']} {nudge}" if result.get("hint") else nudge
        from crosstalk.journal import records as R

        rec = {"type": R.NUDGE, "ts": round(time.time(), 6), "peer": peer, "peer_name": peer_name, "count": n}
        try:
            await host.record([rec])
        except Exception:  # the nudge is advice: a journal hiccup must not fail a delivered send
            result["nudge_journaled"] = False

    async def close(self) -> None:
        clients = list(self._clients.values()) + [known[2] for known in self._uds.values()]
        self._clients.clear()
        self._uds.clear()
        if self._closing:
            await asyncio.wait(self._closing, timeout=5)
        for client in clients:
            try:
                await client.close()
            except Exception:
                pass


def _instances(host: AgentHost, target: Descriptor) -> tuple[str, str, str]:
    return host.registration.instance_id, target.instance_id, str(target.uds_path)


async def journal_sent(host: AgentHost, msg: Message, to_agent: str) -> bool:
    """Journal an ask this agent is about to send (a `sent` record), so receive_message(state='replies') finds
    the answers to it, after a restart too. Written before the send: an ask that went out is never missing from
    the journal. Sends that are not asks are not journaled here. False when the journal refused the record."""
    if msg.kind.value != "ask":
        return True
    from crosstalk.journal import records as R

    try:
        await host.record([R.sent(msg, to_agent, "sending", None)])
    except Exception:
        return False
    return True


def is_nudge_count(n: int) -> bool:
    """30, 60, 120, 240, … (doubling from NUDGE_FIRST)."""
    if n < NUDGE_FIRST or n % NUDGE_FIRST:
        return False
    q = n // NUDGE_FIRST
    return q & (q - 1) == 0
