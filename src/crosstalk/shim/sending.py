"""Sending as a bound agent over A2A, the answer as a model reads it, and the per-peer nudge (seed 000 §4)."""

from __future__ import annotations

import time
from typing import Any

from crosstalk.agent import AgentHost
from crosstalk.core.message import Message
from crosstalk.registry.credentials import read_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.errors import AmbiguousName, KeyFileError, NoSuchAgent
from crosstalk.registry.paths import StatePaths

NUDGE_FIRST = 30
UNCOUNTED = frozenset({"rejected", "unreachable"})  # sends that reached no peer are not counted (§4)
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
        return {
            "state": "unknown",
            "reason": "no_such_agent",
            "hint": f"no live agent is named {to!r}; call list_agents for the current names",
        }
    except AmbiguousName as exc:
        return {
            "state": "unknown",
            "reason": "ambiguous_name",
            "candidates": [{"agent_id": c[0], "name": c[1], "harness": c[2], "cwd": c[3]} for c in exc.candidates],
            "hint": f"several live agents are named {to!r}: pass one of their agent_ids as `to`",
        }


def _task_answer(view: Any) -> dict[str, Any]:
    """A TaskView as the sender sees it: delivery first, the task's progress second."""
    task_state, delivery = str(view.state), view.delivery
    if task_state == "completed":
        delivered = delivery if delivery in ("accepted", "queued") else "accepted"
        state = "replied" if view.kind == "ask" else delivered
    elif task_state == "failed":
        if delivery in ("rejected", "unreachable"):
            state = delivery
        elif view.reason == "deadline_passed":
            state = "expired"
        else:
            state = "rejected"
    elif task_state == "canceled":
        state = "canceled"
    elif task_state == "input_required":
        state = "input_required"
    elif delivery in ("accepted", "queued", "held", "unknown"):
        state = delivery
    else:
        state = "submitted"
    out: dict[str, Any] = {"state": state}
    if view.reason:
        out["reason"] = view.reason
    out["task_id"] = view.task_id
    if state == "replied":
        answers = [h.text for h in view.history if h.role == "agent"]
        if answers:
            out["reply"] = answers[-1]
    return out


class Sender:
    """One shim's outbound side: an A2A client per (sending agent, peer URL) and the nudge counts."""

    def __init__(self, paths: StatePaths, *, timeout: float = 60.0) -> None:
        self.paths = paths
        self.timeout = timeout
        self._clients: dict[tuple[str, str, str], Any] = {}
        self.counts: dict[tuple[str, str], int] = {}

    async def send(
        self, host: AgentHost, target: Descriptor, msg: Message, *, return_immediately: bool, op: str | None = None
    ) -> dict[str, Any]:
        """SendMessage as `host` to `target`: the model-facing answer (state, reason, message_id, task_id).
        `op` ("claim", "release"): a request about the target itself (shim/claiming.py), not a message."""
        from crosstalk.core.errors import TaskError
        from crosstalk.ingress.errors import A2AAuthError, A2AOutcomeUnknown, A2AProtocolError, A2AUnreachable

        base: dict[str, Any] = {"message_id": msg.message_id, "to": target.name}
        if not target.a2a_url:
            return {"state": "unreachable", "reason": "no_a2a_endpoint", **base}
        try:
            token = read_key(self.paths.token_path(host.agent_id))
        except KeyFileError as exc:
            return {"state": "unreachable", "reason": "no_sender_token", "detail": str(exc), **base}
        client = self._client(host.agent_id, target.a2a_url, token)
        try:
            extra = {"op": op} if op is not None else {}
            view = await client.send(msg, return_immediately=return_immediately, **extra)
        except TaskError as exc:
            if exc.code == TaskError.INTERNAL:
                return {"state": "unreachable", "reason": "receiver_journal_failed", **base}
            reason = exc.message.removeprefix("rejected: ")
            return {"state": "rejected", "reason": reason, **base}
        except A2AOutcomeUnknown:
            return {
                "state": "unknown",
                "reason": "no_answer",
                **base,
                "hint": "the message may have arrived; do not resend it blindly, ask the recipient instead",
            }
        except A2AUnreachable as exc:
            return {"state": "unreachable", "reason": "connection_failed", "detail": str(exc), **base}
        except A2AAuthError:
            return {"state": "rejected", "reason": "token_refused", **base}
        except A2AProtocolError as exc:
            return {"state": "rejected", "reason": "protocol_error", "detail": str(exc), **base}
        return {**_task_answer(view), **base}

    def client_for(self, host: AgentHost, url: str) -> Any:
        """`host`'s A2A client for the agent at `url` (None without its key)."""
        try:
            token = read_key(self.paths.token_path(host.agent_id))
        except KeyFileError:
            return None
        return self._client(host.agent_id, url, token)

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
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            try:
                await client.close()
            except Exception:
                pass


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
