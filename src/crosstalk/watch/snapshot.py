"""A snapshot of this machine's crosstalk: every live agent, the traffic in their journals, each bus transport.

`Reader` keeps what it read between snapshots: each journal is read only as far as it grew (journals.py) and each
transport's git state only when its files changed (bus.py), so taking a snapshot on every file event costs a few
stat calls and the bytes that are new. It imports no terminal library; `crosstalk watch --once --json` and the
textual app (app.py) both print what it returns.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import list_descriptors
from crosstalk.registry.paths import StatePaths
from crosstalk.watch.bus import BusReader
from crosstalk.watch.journals import JournalTail
from crosstalk.watch.records import AgentView, MessageView, RemoteAgentView, Snapshot

MAX_MESSAGES = 200  # the newest messages a snapshot holds, across every agent
PREVIEW_CHARS = 80


class Reader:
    def __init__(self, paths: StatePaths, environ: Mapping[str, str] = os.environ) -> None:
        self.paths = paths
        self.bus = BusReader(environ)
        self._tails: dict[str, JournalTail] = {}

    def watch_dirs(self) -> list[Path]:
        """Every directory whose changes change the next snapshot (some may not exist yet)."""
        p = self.paths
        return [p.root, p.agents, p.journal, p.sock, p.root / "relay", *self.bus.watch_dirs()]

    def take(self) -> Snapshot:
        descs = list_descriptors(self.paths)
        names = {d.agent_id: d.name for d in descs}
        live = {d.agent_id for d in descs}
        self._tails = {aid: t for aid, t in self._tails.items() if aid in live}
        agents = []
        messages: list[MessageView] = []
        for d in descs:
            tail = self._tails.get(d.agent_id)
            if tail is None:
                tail = self._tails[d.agent_id] = JournalTail(self.paths.journal_file(d.agent_id))
            tail.refresh()
            agents.append(_agent(d, tail, names))
            messages += _messages(d, tail)
        messages.sort(key=lambda m: (m.at, m.message_id))
        return Snapshot(
            taken_at=round(time.time(), 3),
            state_root=str(self.paths.root),
            agents=tuple(agents),
            messages=tuple(messages[-MAX_MESSAGES:]),
            transports=self.bus.read(),
            remote_agents=_remote(self.paths),
        )


def _remote(paths: StatePaths) -> tuple[RemoteAgentView, ...]:
    from crosstalk.relay.presence import remote_rows  # one stat when this machine joined no relay

    return tuple(
        RemoteAgentView(
            name=r["name"], machine=r["machine"], harness=r["harness"], reachable=r["reachable"], reason=r.get("reason")
        )
        for r in remote_rows(paths)
    )


def _agent(d: Descriptor, tail: JournalTail, names: dict[str, str]) -> AgentView:
    reachable = d.reachable()
    return AgentView(
        name=d.name,
        agent_id=d.agent_id,
        harness=d.harness,
        role=d.role,
        owner=d.owner,
        owner_name=names.get(d.owner) if d.owner else None,
        pid=d.pid,
        cwd=d.cwd,
        reachable=reachable,
        reason=None if reachable else d.unreachable_reason(),
        open_asks=tail.open_asks(),
        asks_waiting=tail.asks_waiting(),
        unread=tail.unread(),
    )


def _sender(sender: object) -> tuple[str, str]:
    s = sender if isinstance(sender, dict) else {}
    who = s.get("name") or s.get("agent_id") or s.get("handle") or "?"
    return str(who), str(s.get("class") or "unverified")


def _preview(parts: object) -> str:
    texts = [p.get("text", "") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    line = " ".join(str(t) for t in texts).strip().split("\n", 1)[0]
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def _ts(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _messages(d: Descriptor, tail: JournalTail) -> list[MessageView]:
    out = []
    for e in tail.state.messages.values():
        who, cls = _sender(e.sender)
        latency = None if e.outcome_ts is None else round(max(0.0, e.outcome_ts - e.ts), 6)
        out.append(
            MessageView(
                message_id=e.message_id,
                at=e.ts,
                to=d.name,
                to_agent_id=d.agent_id,
                sender=who,
                sender_class=cls,
                kind=str(e.message.get("kind") or "inform"),
                state=e.state.value,
                reason=e.reason,
                latency_s=latency,
                transport=e.transport,
                text=_preview(e.message.get("parts")),
            )
        )
    for rec in tail.rejected:
        who, cls = _sender(rec.get("sender"))
        out.append(
            MessageView(
                message_id=str(rec.get("message_id") or "-"),
                at=_ts(rec.get("ts")),
                to=d.name,
                to_agent_id=d.agent_id,
                sender=who,
                sender_class=cls,
                kind=str(rec.get("kind") or "?"),
                state="rejected",
                reason=rec.get("reason") if isinstance(rec.get("reason"), str) else None,
                latency_s=None,
                transport=str(rec.get("transport") or "?"),
                text="",
            )
        )
    return out
