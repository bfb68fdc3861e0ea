"""`crosstalk capture NAME [--for SECONDS] [-o FILE]`: record one agent's raw traffic with its harness (MCP frames,
socket lines, Codex app-server calls), redacted, into one file for a bug report (docs/capture.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.core.errors import ErrorKind

DEFAULT_SECONDS = 60.0
MAX_SECONDS = 3600.0  # crosstalk.capture.request.MAX_SECONDS (kept here so `--help` imports nothing more)
POLL_S = 0.2


def add_parser(sub: Any) -> None:
    from crosstalk.cli.argtypes import positive_float

    p = sub.add_parser(
        "capture",
        help="Record one agent's raw traffic with its harness, redacted, into a file for a bug report.",
        description="Record, for SECONDS, the raw traffic between NAME's harness and crosstalk: MCP frames, socket "
        "lines and Codex app-server calls, with every token and key redacted, into one JSON-lines file (0600). "
        "Ctrl-C stops early and still saves it.",
    )
    p.add_argument("target", metavar="NAME", help="The live agent (a name or an agent_id).")
    p.add_argument(
        "--for",
        dest="seconds",
        type=positive_float(1.0, MAX_SECONDS),
        default=DEFAULT_SECONDS,
        help=f"Seconds to record, 1 to {MAX_SECONDS:.0f} (default {DEFAULT_SECONDS:.0f}).",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="Where to save it (default: crosstalk-capture-NAME-TIME.jsonl in the current directory).",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the capture's header as JSON.")
    p.set_defaults(run="crosstalk.cli.capture_cmd:run")


def run(args: Any) -> int:
    import json
    import signal

    from crosstalk.capture import collect
    from crosstalk.capture.request import CHECK_INTERVAL_S
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import AmbiguousName, NoSuchAgent, RegistryError

    paths = state_paths()
    try:
        desc = resolve(paths, args.target)
    except (NoSuchAgent, AmbiguousName) as exc:
        fail(str(exc), ErrorKind.NO_AGENT)
    except RegistryError as exc:
        fail(str(exc), ErrorKind.FAILED)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = Path(args.output or f"crosstalk-capture-{desc.name}-{stamp}.jsonl").absolute()
    try:
        out = collect.Output(target)
    except collect.CaptureError as exc:
        fail(str(exc), ErrorKind.USAGE)
    try:
        running = collect.start(paths.root, desc, args.seconds)
    except (collect.CaptureError, OSError) as exc:
        fail(str(exc), ErrorKind.FAILED)

    def stop(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    # SIGINT too, not left to Python's default: a capture started in the background by a non-interactive shell
    # inherits SIGINT ignored, and Ctrl-C (or `kill -INT`) is how a capture is stopped early.
    previous = signal.signal(signal.SIGTERM, stop)
    previous_int = signal.signal(signal.SIGINT, stop)
    ended = "time"
    try:
        deadline = time.monotonic() + args.seconds
        time.sleep(min(CHECK_INTERVAL_S + 0.1, args.seconds))  # every process of the agent has seen the request
        echo(f"capturing {desc.name} ({desc.harness}, pid {desc.pid}) for {args.seconds:g} s; Ctrl-C stops", err=True)
        while (left := deadline - time.monotonic()) > 0:
            if not running.agent_alive():
                ended = "agent exited"
                break
            time.sleep(min(POLL_S, left))
    except KeyboardInterrupt:
        ended = "interrupted"
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        records, notes = running.collect()
    data = collect.document(running, records, notes, ended)
    try:
        out.commit(data)
    except collect.CaptureError as exc:
        fail(str(exc), ErrorKind.FAILED)
    header = json.loads(data.split(b"\n", 1)[0])
    if args.as_json:
        print_json({**header, "file": str(target)})
    else:
        counts = ", ".join(f"{k} {v}" for k, v in header["channels"].items()) or "none"
        why = {"time": "", "interrupted": " (interrupted)", "agent exited": f" ({desc.name} exited)"}[ended]
        echo(f"captured {len(records)} frames ({counts}) from {desc.name}{why} into {target}")
    return 0
