"""`crosstalk workflow run|status`: hand a workflow document to the runtime, and see where each workflow stands.

A workflow document is markdown whose front matter says `type: workflow`; its body is prose ("Fan out 3 drafts of
the proposal using sonnet; have opus synthesize the strongest one."). `run` writes it as a marker in the channel,
with a new child channel for its traffic and this machine as its owner (`dispatch_host`); this machine's
dispatcher compiles, fans out, synthesizes and replies to the marker (crosstalk.bus.workflow.engine).
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path
from typing import Any

from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.common import Fail, echo, print_json
from crosstalk.core.errors import ErrorKind

MAX_DOCUMENT_BYTES = 64 * 1024


def add_parser(sub: Any) -> None:
    p = sub.add_parser("workflow", help="Run a workflow (fan out to models, synthesize), and see its progress.")
    verbs = p.add_subparsers(dest="workflow_command", metavar="COMMAND", parser_class=type(p))
    run = verbs.add_parser(
        "run",
        help="Hand a workflow document (front matter `type: workflow`, prose body) to this machine's dispatcher.",
    )
    run.add_argument("file", metavar="FILE")
    run.add_argument(
        "--channel", metavar="HANDLE", help="Channel of the marker (default: $CROSSTALK_CHANNEL, else the only one)."
    )
    run.add_argument(
        "--from", dest="from_", metavar="NAME", help="Who the result goes to (default: $CROSSTALK_FROM, else $USER)."
    )
    run.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(run)
    run.set_defaults(run="crosstalk.cli.workflow_cmd:run_run")
    comp = verbs.add_parser(
        "compose",
        help="Compile prose into a workflow plan here, show it for [y]es / [e]dit / [n]o, then submit it.",
    )
    comp.add_argument("prose", metavar="PROSE", help="What the workflow should do ('-': read it from stdin).")
    comp.add_argument("--model", metavar="MODEL", help="The model that compiles (default: the first one claimed here).")
    comp.add_argument("--channel", metavar="HANDLE", help="Channel of the marker (default: the only one).")
    comp.add_argument("--from", dest="from_", metavar="NAME", help="Who the result goes to (default: $USER).")
    comp.add_argument("--yes", action="store_true", help="Submit the compiled plan without asking.")
    add_transport_option(comp)
    comp.set_defaults(run="crosstalk.cli.workflow_compose:run_compose")
    st = verbs.add_parser("status", help="Each workflow's stage, replies in, and failures.")
    st.add_argument("marker", metavar="MARKER", nargs="?", help="One marker's path (default: every workflow).")
    st.add_argument("--pull", action="store_true", help="Fetch the remote's new messages first.")
    st.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(st)
    st.set_defaults(run="crosstalk.cli.workflow_cmd:run_status")


def _document(path: str) -> str:
    """The prose of a workflow document; Fail naming what is wrong with it."""
    from crosstalk.bus.protocol.safefs import load_yaml

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise Fail(f"cannot read {path}: {exc.strerror}", ErrorKind.USAGE) from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise Fail(f"{path} is over the {MAX_DOCUMENT_BYTES // 1024} KiB limit of a workflow document", ErrorKind.USAGE)
    try:
        text = data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        raise Fail(f"{path} is not UTF-8 text", ErrorKind.USAGE) from None
    lines = text.split("\n")
    end = None
    if lines[0].rstrip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        why = "it must start with front matter saying `type: workflow`"
        raise Fail(f"{path} is not a workflow document: {why}", ErrorKind.USAGE)
    try:
        meta = load_yaml("\n".join(lines[1:end]), "front matter")
    except Exception as exc:
        raise Fail(
            f"{path}: the front matter is not valid YAML ({str(exc).splitlines()[0]})", ErrorKind.USAGE
        ) from None
    if not isinstance(meta, dict) or meta.get("type") != "workflow":
        raise Fail(f"{path} is not a workflow document: its front matter must say `type: workflow`", ErrorKind.USAGE)
    prose = "\n".join(lines[end + 1 :]).strip()
    if not prose:
        raise Fail(f"{path}: the workflow has no prose after its front matter", ErrorKind.USAGE)
    return prose


def run_run(args: argparse.Namespace) -> int:

    prose = _document(args.file)
    transport = open_transport(args)
    rel, child, pushed = submit(transport, prose, args.channel, args.from_)
    if args.as_json:
        print_json({"marker": rel, "child_channel": child, "owner": transport.alias, "pushed": pushed})
    else:
        echo(rel)
    return 0


def submit(transport: Any, prose: str, channel_handle: str | None, from_: str | None, plan: Any = None) -> tuple:
    """Write the marker (with a new child channel, this machine its owner); with `plan` (compose), its PLAN.json in
    the same commit, so the owner does not compile again. (marker path, child channel uuid, pushed)."""
    import json

    from crosstalk.bus.protocol import layout
    from crosstalk.bus.protocol.addressing import WORKFLOW_ADDRESS
    from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
    from crosstalk.bus.protocol.models import NAME_RE as PERSONA_RE
    from crosstalk.bus.transport.channels import create_channel
    from crosstalk.bus.transport.store import publish
    from crosstalk.cli.message_cmd import pick_channel, sender_name

    sender = sender_name(from_)
    wake_as = os.environ.get("CROSSTALK_AS") or None  # run from a dispatched turn wearing a persona
    if wake_as is not None and not PERSONA_RE.match(wake_as):
        raise Fail(f"CROSSTALK_AS holds an invalid persona name {wake_as[:40]!r}", ErrorKind.USAGE)
    with bus_errors():
        channel = pick_channel(transport, channel_handle)
        child, _ = create_channel(transport, f"wf-{secrets.token_hex(4)}", parent=channel.uuid)
        marker = BusMessage(
            sender=sender, to=WORKFLOW_ADDRESS, timestamp=utc_timestamp(), type="workflow", child_channel=child.uuid,
            dispatch_host=transport.alias, wake_as=wake_as, body=prose,
        )  # fmt: skip
        rel = f"{channel.rel_dir}/{new_message_name()}"
        files = {rel: render_message(marker)}
        if plan is not None:
            files[f"{child.rel_dir}/{layout.PLAN_FILE}"] = json.dumps(plan.to_dict(), indent=1) + "\n"
        result = publish(transport, files, f"crosstalk: workflow from {sender} in {channel.name}")
    return rel, child.uuid, result.pushed


def _failures(p: Any) -> list[str]:
    """What failed, one line each: the copies and the synthesis, an unreadable plan, and the reason the owner
    recorded when it ended the workflow (COMPLETE), each once."""
    out = [*p.failures(), *([p.plan_error] if p.plan_error else [])]
    if p.reason and p.reason not in out and p.reason != "; ".join(out):
        out.append(p.reason)
    return [" ".join(line.split()) for line in out]


def run_status(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.store import normalize_message_path, read_message, sync
    from crosstalk.bus.workflow.progress import engine_name, find_markers, read_progress

    transport = open_transport(args)
    with bus_errors():
        if args.pull:
            sync(transport)
        if args.marker:
            rels = [normalize_message_path(transport, args.marker, Path.cwd())]
        else:
            rels = find_markers(transport.root)
        rows: list[dict[str, Any]] = []
        for rel in rels:
            marker = read_message(transport.root, rel)
            if marker is None or marker.type != "workflow":
                raise Fail(f"{rel} is not a workflow marker", ErrorKind.USAGE)
            p = read_progress(transport.root, rel, marker, engine_name(marker.dispatch_host or ""))
            rows.append({
                "marker": rel, "owner": marker.dispatch_host, "stage": p.stage,
                "fanout": {"sent": len(p.subs), "answered": len(p.sub_replies),
                           "planned": p.plan.fanout.count if p.plan else None},
                "failures": _failures(p),
            })  # fmt: skip
    if args.as_json:
        print_json(rows)
        return 0
    if not rows:
        echo("no workflows in this transport")
    for r in rows:
        fan = r["fanout"]
        replies = f"{fan['answered']}/{fan['planned'] or fan['sent'] or '?'} replies in"
        echo(f"{r['marker']}  {r['stage']:<12} owner {r['owner']}  {replies}")
        for failure in r["failures"]:
            echo(f"    failed: {failure}")
    return 0
