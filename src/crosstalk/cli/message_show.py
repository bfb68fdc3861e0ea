"""`crosstalk message show PATH`: a message and its replies, each as a summary of its front matter and its body."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from crosstalk.cli.bus_common import bus_errors
from crosstalk.cli.common import Fail, echo, print_json
from crosstalk.cli.message_cmd import open_transport_of

WAIT_POLL_S = 0.25  # --wait: how often the replies are looked for (this machine's dispatcher commits them here)
PULL_EVERY = 8  # polls between pulls from the remote (2 s): a fetch is a round trip to it


def run_show(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.store import PENDING, normalize_message_path, read_message, replies_status, sync

    transport = open_transport_of(args, [args.path])
    with bus_errors():
        if args.pull:
            sync(transport)
        rel = normalize_message_path(transport, args.path, Path.cwd())
        (status,) = replies_status(transport, [rel])
        deadline = time.monotonic() + (args.wait or 0)
        remote = bool(args.wait) and transport.git().has_remote()
        polls = 0
        while status.state == PENDING and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            polls += 1
            if remote and polls % PULL_EVERY == 0:
                sync(transport)  # a reply another machine answered arrives by the remote
            (status,) = replies_status(transport, [rel])
        msg = read_message(transport.root, rel)
        if msg is None:
            raise Fail(f"{rel} is not a readable message (its front matter does not parse)")
        replies = [(r.path, read_message(transport.root, r.path)) for r in status.replies]
    if args.as_json:
        print_json(
            {
                **_message_json(rel, msg),
                "state": status.state,
                "replies": [_message_json(path, reply) for path, reply in replies if reply is not None],
            }
        )
        return 1 if args.wait and status.state == PENDING else 0
    _print_message(rel, msg)
    for path, reply in replies:
        if reply is not None:
            echo("")
            _print_message(path, reply, "reply")
    if not replies:
        echo("")
        echo(f"({status.state}: no reply yet)")
    return 1 if args.wait and status.state == PENDING else 0


def _summary(msg: Any) -> str:
    """One line of front matter: who, to whom, when, and whatever else is set."""
    parts = [f"from {msg.sender}", f"to {msg.to}", f"at {msg.timestamp}"]
    extras = (
        ("re", ", ".join(msg.re)),
        ("as", msg.as_),
        ("wake_as", msg.wake_as),
        ("fanout", msg.fanout),
        ("type", msg.type),
        ("workflow_step", msg.workflow_step),
        ("child_channel", msg.child_channel),
        ("dispatch_host", msg.dispatch_host),
    )
    parts += [f"{key} {value}" for key, value in extras if value]
    if msg.failed:
        parts.append(f"FAILED: {msg.error or 'no reason given'}")
    return " · ".join(parts)


def _print_message(rel: str, msg: Any, what: str = "message") -> None:
    echo(f"== {what} {rel}")
    echo(_summary(msg))
    echo("")
    echo(msg.body.rstrip("\n"))


def _message_json(rel: str, msg: Any) -> dict[str, object]:
    return {
        "path": rel,
        "from": msg.sender,
        "to": msg.to,
        "timestamp": msg.timestamp,
        "re": list(msg.re),
        "as": msg.as_,
        "fanout": msg.fanout,
        "type": msg.type,
        "failed": msg.failed,
        "error": msg.error,
        "body": msg.body,
    }
