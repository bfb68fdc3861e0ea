"""`crosstalk tail NAME`: follow one agent's traffic live, by reading its journal as it grows."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crosstalk.cli.common import echo, fail, state_paths
from crosstalk.core import untrusted
from crosstalk.core.errors import ErrorKind

POLL_S = 0.05


def run(args: Any) -> int:
    """Follow TARGET's traffic (a live agent's name or agent_id, or the agent_id of a stopped one)."""
    target, backlog, as_json, count, duration = args.target, args.backlog, args.as_json, args.count, args.duration
    from crosstalk.core.ids import is_agent_id
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import RegistryError

    paths = state_paths()
    try:
        agent_id, name = _target(resolve, paths, target)
    except RegistryError as exc:
        if not (is_agent_id(target) and paths.journal_file(target).exists()):
            fail(str(exc), ErrorKind.NO_AGENT)
        agent_id, name = target, target
    path = paths.journal_file(agent_id)
    deadline = None if duration is None else time.monotonic() + duration
    seen = 0
    try:
        for rec, is_new in _follow(path, backlog, deadline):
            shown = json.dumps(rec, ensure_ascii=False) if as_json else format_record(rec, name)
            try:  # a lone surrogate (JSON's "\ud800") cannot be printed: damage crosstalk never writes
                untrusted.text(shown, what="journal record")
            except untrusted.UntrustedInput:
                continue
            echo(shown)
            sys.stdout.flush()
            if is_new:
                seen += 1
                if count is not None and seen >= count:
                    return 0
    except KeyboardInterrupt:
        return 0
    return 0


def _target(resolve: Any, paths: Any, target: str) -> tuple[str, str]:
    desc = resolve(paths, target)
    return desc.agent_id, desc.name


def _follow(path: Path, backlog: int, deadline: float | None) -> Iterator[tuple[dict[str, Any], bool]]:
    """Yield the last `backlog` records, then each new one as it is appended. A rewrite (retention) replaces the
    file: we notice the new inode and continue from its end."""
    while not path.exists():
        if deadline is not None and time.monotonic() > deadline:
            return
        time.sleep(POLL_S)
    f = open(path, "rb")  # noqa: SIM115 - reopened on rewrite, closed in finally
    try:
        lines = f.read().splitlines(keepends=True)
        complete = [ln for ln in lines if ln.endswith(b"\n")]
        for ln in complete[-backlog:] if backlog else []:
            rec = _parse(ln)
            if rec is not None:
                yield rec, False
        pending = lines[-1] if lines and not lines[-1].endswith(b"\n") else b""
        inode = os.fstat(f.fileno()).st_ino
        while deadline is None or time.monotonic() < deadline:
            chunk = f.read()
            if chunk:
                pending += chunk
                *done, pending = pending.split(b"\n")
                for ln in done:
                    rec = _parse(ln)
                    if rec is not None:
                        yield rec, True
                continue
            try:
                if os.stat(path).st_ino != inode:
                    f.close()
                    f = open(path, "rb")  # noqa: SIM115
                    f.seek(0, os.SEEK_END)
                    inode, pending = os.fstat(f.fileno()).st_ino, b""
            except FileNotFoundError:
                pass
            time.sleep(POLL_S)
    finally:
        f.close()


def _parse(line: bytes) -> dict[str, Any] | None:
    """The record on one journal line, or None for a damaged one (not JSON, too large or too deep, or not of the
    shape replay reads): skipped here as the agent's own replay skips it."""
    from crosstalk.journal.codec import parse_line

    return parse_line(line)


def format_record(rec: dict[str, Any], name: str) -> str:
    """One readable line per journal record."""
    ts = rec.get("ts")
    when = time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int((ts % 1) * 1000):03d}" if ts else "--:--:--"
    rtype = rec.get("type", "?")
    if rtype == "received":
        msg = rec.get("message") or {}
        sender = rec.get("sender") or {}
        who = sender.get("name") or sender.get("agent_id") or "?"
        parts = msg.get("parts")
        text = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict)) if isinstance(parts, list) else ""
        preview = text if len(text) <= 60 else text[:57] + "..."
        return (
            f"{when} {name} ← {who} ({sender.get('class', '?')}) {msg.get('kind', '?')}/"
            f"{msg.get('delivery', '?')} {msg.get('message_id', '')}: {preview!r}"
        )
    if rtype == "outcome":
        reason = f" ({rec['reason']})" if rec.get("reason") else ""
        again = " [after restart]" if rec.get("reconciled") else ""
        return f"{when} {name}   {rec.get('message_id', '')} → {rec.get('state', '?')}{reason}{again}"
    if rtype == "rejected":
        sender = rec.get("sender") or {}
        who = sender.get("name") or sender.get("agent_id") or "?"
        return (
            f"{when} {name} ✗ {who} ({sender.get('class', '?')}) {rec.get('kind') or '?'} "
            f"{rec.get('message_id') or ''} → rejected ({rec.get('reason')})"
        )
    if rtype == "task":
        extra = f" reply {rec['text']!r}" if rec.get("entry") == "agent" and rec.get("text") else ""
        reason = f" ({rec['reason']})" if rec.get("reason") else ""
        who = f" from {rec['creator_name']}" if rec.get("creator_name") else ""
        task = f"task {rec.get('task_id', '')}{who} {rec.get('kind', '')}"
        return f"{when} {name}   {task} → {rec.get('state')}{reason}{extra}"
    if rtype == "obligation":
        return f"{when} {name}   reply owed for {rec.get('message_id', '')}: {rec.get('state')}" + (
            f" ({rec['reason']})" if rec.get("reason") else ""
        )
    if rtype == "dispatch":
        return f"{when} {name}   {rec.get('message_id', '')} dispatching"
    detail = {k: v for k, v in rec.items() if k not in ("type", "ts", "binding")}
    return f"{when} {name}   {rtype} {json.dumps(detail, ensure_ascii=False)}"
