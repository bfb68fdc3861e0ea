"""`crosstalk message send|replies|show`: put a message on the bus, see which messages have been answered, and read a
message with its replies."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crosstalk.cli.argtypes import non_negative_int, positive_float
from crosstalk.cli.bus_common import add_transport_option, bus_errors, open_transport
from crosstalk.cli.common import Fail, echo, print_json
from crosstalk.core.errors import ErrorKind, exit_code

MAX_FANOUT = 64


def add_parser(sub: Any) -> None:
    p = sub.add_parser("message", help="Send a message on the bus, and see which have replies.")
    verbs = p.add_subparsers(dest="message_command", metavar="COMMAND", parser_class=type(p))

    send = verbs.add_parser(
        "send",
        help="Send a message to a model; prints its path.",
        description="Commit a message to a channel and push it. BODY is the text, a path to a file to read, or "
        "'-' for stdin. Prints the message's transport-relative path (one per line with --fanout).",
    )
    send.add_argument("body", metavar="BODY|FILE|-")
    send.add_argument("--to", metavar="ADDR", help="The addressee: MODEL, PROVIDER/MODEL, optionally @MACHINE.")
    send.add_argument("--as", dest="as_", metavar="PERSONA", help="Wear local/actors/PERSONA.md when dispatched.")
    send.add_argument(
        "--fanout", type=non_negative_int(1, MAX_FANOUT), metavar="N", help="Send N independent copies (1-64)."
    )
    send.add_argument(
        "--channel",
        metavar="HANDLE",
        help="Channel name or UUID (default: $CROSSTALK_CHANNEL, else the only channel).",
    )
    send.add_argument(
        "--new", action="store_true", help="From a dispatched turn: start new work (do not link to its messages)."
    )
    send.add_argument("--from", dest="from_", metavar="NAME", help="Sender (default: $CROSSTALK_FROM, else $USER).")
    send.add_argument(
        "--strict",
        action="store_true",
        help="Refuse (exit 2) an address no known machine claims, instead of sending it with a warning.",
    )
    send.add_argument("--json", dest="as_json", action="store_true", help="Print JSON.")
    add_transport_option(send)
    send.set_defaults(run="crosstalk.cli.message_cmd:run_send")

    replies = verbs.add_parser(
        "replies",
        help="Show REPLIED / FAILED / PENDING per message; exit 0 when none is PENDING, 2 otherwise.",
    )
    replies.add_argument(
        "paths",
        metavar="PATH",
        nargs="+",
        help="Message paths as 'message send' printed them, or absolute paths (then from any directory).",
    )
    replies.add_argument("--pull", action="store_true", help="Fetch the remote's new messages first.")
    replies.add_argument("--json", dest="as_json", action="store_true", help="Print JSON with the reply paths.")
    add_transport_option(replies)
    replies.set_defaults(run="crosstalk.cli.message_cmd:run_replies")

    show = verbs.add_parser(
        "show",
        help="Print a message and its replies: who, to whom and when, then each body in full.",
        description="Print the message at PATH (as 'message send' printed it, or an absolute path) and every reply "
        "to it, oldest first: a summary line of each one's front matter, then its body in full.",
    )
    show.add_argument("path", metavar="PATH")
    show.add_argument("--pull", action="store_true", help="Fetch the remote's new messages first.")
    show.add_argument(
        "--wait",
        metavar="S",
        type=positive_float(0.1, 86400),
        help="Wait up to S seconds for the first reply (pulling meanwhile); exit 1 if none came.",
    )
    show.add_argument("--json", dest="as_json", action="store_true", help="Print JSON (front matter and bodies).")
    add_transport_option(show)
    show.set_defaults(run="crosstalk.cli.message_show:run_show")


def _read_body(arg: str) -> str:
    from crosstalk.bus.protocol.message import MAX_BODY_BYTES

    if arg == "-":
        data = sys.stdin.buffer.read(MAX_BODY_BYTES + 1)
        source = "stdin"
    elif os.path.isfile(arg):
        try:
            with open(arg, "rb") as f:
                data = f.read(MAX_BODY_BYTES + 1)
        except OSError as exc:
            raise Fail(f"cannot read {arg}: {exc.strerror}") from None
        source = arg
    else:
        data = arg.encode("utf-8", errors="surrogateescape")
        source = "the body"
    if len(data) > MAX_BODY_BYTES:
        raise Fail(f"{source} is over the {MAX_BODY_BYTES // 1024} KiB message limit", ErrorKind.USAGE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Fail(f"{source} is not UTF-8 text", ErrorKind.USAGE) from None
    text = text.rstrip()
    if not text.strip():
        raise Fail(f"{source} is empty; a message needs a body", ErrorKind.USAGE)
    return text


def pick_channel(transport: Any, handle: str | None) -> Any:
    """--channel, else $CROSSTALK_CHANNEL, else the only channel people made (the ones crosstalk makes for chats,
    workflows and the bridge are never a default); ChannelError naming the choices."""
    from crosstalk.bus.errors import ChannelError
    from crosstalk.bus.transport.channels import find_channel, list_channels

    handle = handle or os.environ.get("CROSSTALK_CHANNEL") or None
    if handle:
        return find_channel(transport.root, handle)
    channels = [c for c in list_channels(transport.root) if not c.made_by_crosstalk]
    if len(channels) == 1:
        return channels[0]
    if not channels:
        raise ChannelError("no channels yet: create one with 'crosstalk channel create NAME'")
    names = ", ".join(c.name for c in channels)
    raise ChannelError(f"{len(channels)} channels ({names}): pick one with --channel")


def sender_name(given: str | None) -> str:
    """The `from:` of what this command writes: --from, else $CROSSTALK_FROM, else the user."""
    sender = given or os.environ.get("CROSSTALK_FROM") or os.environ.get("USER") or ""
    if not sender:
        try:
            sender = getpass.getuser()
        except (KeyError, OSError):
            sender = "operator"
    if any(ch.isspace() for ch in sender) or len(sender) > 200:
        raise Fail(f"sender {sender[:40]!r} must be one word of at most 200 characters", ErrorKind.USAGE)
    return sender


def _re_from_env(channel_dir: Path, channel_uuid: str, to: str) -> tuple[str, ...]:
    """The dispatched turn's triggering messages that `to` sent, when sending into that turn's channel (re: is
    channel-relative). Only those: the activation rule wakes an addressee for a message with re: only when it sent
    a target, so linking a send to somebody else's message would silently never wake its addressee. A send to
    anyone else is new work, and wakes them."""
    from crosstalk.bus.errors import BusError
    from crosstalk.bus.protocol.addressing import same_actor
    from crosstalk.bus.protocol.layout import is_safe_relpath
    from crosstalk.bus.protocol.message import parse_message
    from crosstalk.bus.protocol.safefs import MESSAGE_LIMIT, read_transport_text

    raw = os.environ.get("CROSSTALK_RE", "")
    if not raw or os.environ.get("CROSSTALK_CHANNEL", channel_uuid) != channel_uuid:
        return ()
    paths = tuple(p.strip() for p in raw.split(",") if p.strip())
    bad = [p for p in paths if not is_safe_relpath(p)]
    if bad:
        raise Fail(f"CROSSTALK_RE holds an unsafe path {bad[0]!r}", ErrorKind.USAGE)
    linked = []
    for rel in paths:
        try:
            # Read as the bus reads what others commit: no symlink, capped, parsed under the untrusted-input rule.
            sender = parse_message(read_transport_text(channel_dir, rel, MESSAGE_LIMIT), where=rel).sender
        except (OSError, ValueError, BusError):  # ValueError: UnicodeDecodeError
            continue
        if same_actor(sender, to):
            linked.append(rel)
    return tuple(linked)


def run_send(args: argparse.Namespace) -> int:
    from crosstalk.bus.errors import BusError
    from crosstalk.bus.protocol import layout
    from crosstalk.bus.protocol.addressing import validate_address
    from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
    from crosstalk.bus.protocol.models import NAME_RE as PERSONA_RE
    from crosstalk.bus.transport.store import publish

    if not args.to:
        raise Fail(
            "message send needs --to ADDR (a model: MODEL, PROVIDER/MODEL, optionally @MACHINE)", ErrorKind.USAGE
        )
    try:
        validate_address(args.to)
    except BusError as exc:
        raise Fail(exc.message, ErrorKind.USAGE) from None
    sender = sender_name(args.from_)
    body = _read_body(args.body)
    transport = open_transport(args)
    with bus_errors():
        if args.as_ is not None and (
            not PERSONA_RE.match(args.as_) or not layout.actor_file(transport.root, args.as_).is_file()
        ):
            raise Fail(
                f"no actor {args.as_!r}: expected a persona file {layout.ACTORS_DIR}/{args.as_}.md in the transport",
                ErrorKind.USAGE,
            )
        channel = pick_channel(transport, args.channel)
        re_paths = () if args.new else _re_from_env(transport.root / channel.rel_dir, channel.uuid, args.to)
        # From a dispatched turn that wore a persona: the replies to this message wake us in that persona again.
        wake_as = os.environ.get("CROSSTALK_AS") or None
        if wake_as is not None and not PERSONA_RE.match(wake_as):
            raise Fail(f"CROSSTALK_AS holds an invalid persona name {wake_as[:40]!r}", ErrorKind.USAGE)
        count = args.fanout or 1
        timestamp = utc_timestamp()
        files: dict[str, str] = {}
        for k in range(1, count + 1):
            msg = BusMessage(
                sender=sender,
                to=args.to,
                timestamp=timestamp,
                re=re_paths,
                as_=args.as_,
                wake_as=wake_as,
                fanout=f"{k}/{count}" if args.fanout else None,
                body=body,
            )
            files[f"{channel.rel_dir}/{new_message_name()}"] = render_message(msg)
        here = _check_claimed(transport, args.to, strict=args.strict)
        what = f"{count} messages" if count > 1 else "message"
        result = publish(transport, files, f"crosstalk: {what} from {sender} to {args.to} in {channel.name}")
    if here:
        _check_dispatcher(transport)
    if result.push_error:
        sys.stderr.write(
            f"crosstalk: warning: the message is committed locally but the push failed ({result.push_error}); "
            "the dispatcher pushes it later\n"
        )
    if args.as_json:
        print_json({"paths": list(files), "channel": channel.uuid, "commit": result.commit, "pushed": result.pushed})
    else:
        for rel in files:
            echo(rel)
    return 0


def _check_dispatcher(transport: Any) -> None:
    """A message this machine serves is answered by this machine's dispatcher: say so when none runs."""
    from crosstalk.bus.transport.state import dispatcher_pid

    if dispatcher_pid(transport.state()) is None:
        sys.stderr.write(
            f"crosstalk: warning: no dispatcher runs for transport {transport.name} on this machine, so the message "
            "stays PENDING until one does: crosstalk server start\n"
        )


def _check_claimed(transport: Any, to: str, *, strict: bool) -> bool:
    """Warn (or with --strict refuse) when no known machine claims `to`: such a message stays PENDING until one
    does. Known: this machine's claimed models, the machines whose replies its dispatcher has seen (what workflows
    place copies by), the machine whose `model add` said it claims it, and a live agent here for
    NAME@<this machine>. An address not known from this clone is looked for again after a pull: another machine's
    `model add` a moment ago is on the remote, not here yet. True when this machine may serve it."""
    from crosstalk.bus.errors import BusError
    from crosstalk.bus.runs.claimers import HOW_MACHINES_CLAIM
    from crosstalk.bus.transport.store import sync

    here = _claimed_by(transport, to)
    if here is None and transport.git().has_remote():
        try:
            sync(transport)
        except BusError:
            pass  # the remote cannot be reached now: what this clone knows is all there is to go by
        here = _claimed_by(transport, to)
    if here is not None:
        return here
    problem = f"no known machine claims {to!r}"
    if strict:
        raise Fail(f"{problem}; nothing was sent: {HOW_MACHINES_CLAIM}", ErrorKind.USAGE)
    sys.stderr.write(f"crosstalk: warning: {problem}, so it stays PENDING until one does: {HOW_MACHINES_CLAIM}\n")
    return False


def _claimed_by(transport: Any, to: str) -> bool | None:
    """None when no known machine claims `to`; else whether this machine may serve it."""
    from crosstalk.bus.errors import ModelError
    from crosstalk.bus.live.bridge import live_agent_name
    from crosstalk.bus.protocol.addressing import WORKFLOW_ADDRESS, split_address
    from crosstalk.bus.protocol.models import claim, load_registry, resolve
    from crosstalk.bus.runs.claimers import known_claimer, known_claimers
    from crosstalk.cli.common import state_paths

    actor, machine = split_address(to)
    if actor == WORKFLOW_ADDRESS:
        return True  # this machine's dispatcher runs the workflow
    try:
        claimed, _ = claim(load_registry(transport.root), os.environ.get("PATH"))
    except ModelError:
        claimed = []
    if known_claimer(to, claimed, known_claimers(transport), transport.alias):
        try:
            resolve(claimed, actor)
        except ModelError:
            return False  # known on another machine only: that machine's dispatcher answers
        return machine in (None, transport.alias)
    if machine == transport.alias and live_agent_name(state_paths(), actor) is not None:
        return True
    return None


def open_transport_of(args: argparse.Namespace, given: Sequence[str]) -> Any:
    """The transport of the message paths given: --transport / $CROSSTALK_TRANSPORT when set, else the transport an
    absolute path lies in (so it works from any directory), else the usual choice (the current directory's, else
    the only one known)."""
    from crosstalk.bus.protocol import layout

    if getattr(args, "transport", None) or os.environ.get("CROSSTALK_TRANSPORT"):
        return open_transport(args)
    roots = {layout.find_root(Path(p).parent) for p in given if Path(p).is_absolute()} - {None}
    if len(roots) > 1:
        raise Fail(
            f"the paths lie in {len(roots)} transports ({', '.join(sorted(map(str, roots)))}): give one",
            ErrorKind.USAGE,
        )
    if roots:
        args.transport = str(roots.pop())
    return open_transport(args)


def run_replies(args: argparse.Namespace) -> int:
    from crosstalk.bus.transport.store import PENDING, normalize_message_path, replies_status, sync

    transport = open_transport_of(args, args.paths)
    with bus_errors():
        if args.pull:
            sync(transport)
        rels = [normalize_message_path(transport, given, Path.cwd()) for given in args.paths]
        statuses = replies_status(transport, rels)
    if args.as_json:
        print_json([s.to_json() for s in statuses])
    else:
        for s in statuses:
            echo(f"{s.path} {s.state}")
    # A PENDING message's outcome is not known yet: exit 1, as the exit-code table has it for an unknown outcome.
    return exit_code(ErrorKind.FAILED) if any(s.state == PENDING for s in statuses) else 0
