"""`crosstalk send NAME|AGENT_ID [TEXT|-]`: one message to where shim/routing.py routes it: a live agent over its
socket, a NAME@MACHINE address no live agent here has across the NATS relay this state root joined (a live agent of
that machine) else over the git bus, or a session without crosstalk natively."""

from __future__ import annotations

import sys

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.cli.send_output import exit_for, print_outcome
from crosstalk.core.errors import ErrorKind

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HELD_POLL_S = 0.5  # how often `--wait-held` asks a crosstalk agent for a held message's state
HELP = "Send a message to a live agent by name or agent_id."
DESCRIPTION = (
    "Send TEXT to the live agent TARGET (a name or an agent_id), or over the git bus to a NAME@MACHINE address no "
    "live agent here has. The body is read from stdin when TEXT is omitted or is '-' (a ping needs none); trailing "
    "whitespace is stripped. Options may come before or after TARGET and TEXT."
)


def add_parser(sub: Any) -> None:
    add_arguments(sub.add_parser("send", help=HELP, description=DESCRIPTION))


def add_arguments(p: Any) -> None:
    """`send`'s arguments: on its subparser in the whole parser, or on the parser `crosstalk send` builds alone."""
    from crosstalk.cli.argtypes import non_negative_int, positive_float
    from crosstalk.core.kinds import PI_MODES

    p.add_argument("target", metavar="TARGET")
    p.add_argument("text", metavar="TEXT", nargs="?")
    p.add_argument(
        "--kind",
        choices=["inform", "user", "meta", "ping", "ask", "command"],
        default="inform",
        help="inform (default; `user` is the same, as pi-crosstalk calls it): a message for the model; meta: "
        "context that never starts a turn; "
        "ping: liveness only, never injected; ask (--a2a): a question whose task completes with the "
        "reply; command (--a2a): work for a worker, from its parent only.",
    )
    p.add_argument(
        "--a2a",
        action="store_true",
        help="Send over A2A as the agent named by --as (its bearer token proves the sender) and print "
        "the task the receiver answers with.",
    )
    p.add_argument("--as", dest="as_agent", metavar="AGENT", help="With --a2a: the live agent to send as.")
    p.add_argument(
        "--deadline",
        type=non_negative_int(0),
        default=0,
        help="With --kind ask: seconds until the ask closes unanswered (0 = none).",
    )
    p.add_argument("--task", dest="task_id", metavar="TASK_ID", help="With --a2a: continue this task of yours.")
    p.add_argument(
        "--return-immediately",
        action="store_true",
        help="With --a2a: answer as soon as the task is journaled (submitted) instead of waiting.",
    )
    p.add_argument(
        "--delivery",
        choices=["auto", "steer", "next_turn"],
        help="auto (default): soonest without breaking a tool call; steer: into the running turn; "
        "next_turn: after the current turn.",
    )
    p.add_argument("--mode", choices=list(PI_MODES.values()), help="pi-style spelling of --delivery.")
    p.add_argument(
        "--from",
        dest="from_",
        metavar="@SCHEME:TOPIC",
        help="Who this is from, as the receiver will label it (default @cli:$USER).",
    )
    p.add_argument(
        "--timeout",
        type=positive_float(0.1, 600),
        default=60.0,
        help="Seconds to wait for the agent's answer (default 60).",
    )
    p.add_argument(
        "--wait-held",
        type=positive_float(0, 86400),
        default=0.0,
        metavar="SECONDS",
        help="When the receiving session holds the message for its user (exit 5), wait up to SECONDS for the "
        "user's decision and exit with its code.",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the answer as JSON.")
    p.add_argument(
        "--transport",
        metavar="NAME|DIR",
        help="For a NAME@MACHINE bus address: the transport to send on (default: $CROSSTALK_TRANSPORT, else the "
        "one containing the current directory, else the only one known).",
    )
    p.set_defaults(run="crosstalk.cli.send_cmd:run")


def _default_from() -> str:
    from crosstalk.fs.procinfo import login_name

    return f"@cli:{login_name() or 'unknown'}"


def run(args: Any) -> int:
    """`crosstalk send`: see add_arguments above for the options."""
    from crosstalk.core.errors import MessageError, MessageTooLarge
    from crosstalk.core.ids import is_external_tag
    from crosstalk.core.kinds import PI_MODE_ALIASES, parse_kind
    from crosstalk.core.message import new_message
    from crosstalk.policy.transport import UDS_TRANSPORT, check_transport, socket_kinds_text

    target, text, delivery, mode = args.target, args.text, args.delivery, args.mode
    parsed = parse_kind(args.kind)  # the parser's choices are kinds and their aliases
    kind = parsed.value
    from_, timeout, as_json = args.from_, args.timeout, args.as_json

    if args.a2a and not args.as_agent:
        fail("--a2a needs --as AGENT: the live agent whose bearer token names the sender", ErrorKind.USAGE)
    if not args.a2a:
        for flag, given in (
            ("--as", args.as_agent),
            ("--task", args.task_id),
            ("--return-immediately", args.return_immediately),
        ):
            if given:
                fail(f"{flag} needs --a2a", ErrorKind.USAGE)
        if check_transport(parsed, UDS_TRANSPORT):
            fail(f"--kind {kind} needs --a2a: over the socket only {socket_kinds_text()} travel", ErrorKind.USAGE)
    if args.deadline and kind != "ask":
        fail("--deadline applies only to --kind ask", ErrorKind.USAGE)
    if args.transport is not None and "@" not in target:
        fail("--transport applies only to a NAME@MACHINE address sent over the git bus", ErrorKind.USAGE)
    moded = PI_MODE_ALIASES[mode].value if mode else None  # the parser's choices are pi's modes
    if delivery and moded and moded != delivery:
        fail(f"--delivery {delivery} and --mode {mode} disagree; give one", ErrorKind.USAGE)
    chosen = delivery or moded or "auto"
    sender_tag = from_ if from_ is not None else _default_from()
    if not is_external_tag(sender_tag):
        fail(f"--from {sender_tag!r} must look like @scheme:topic (for example @ci:build)", ErrorKind.USAGE)

    if text is None and kind == "ping":
        text = ""  # a ping asks only whether the agent is there: it needs no body
    elif text is None or text == "-":
        if sys.stdin is None or sys.stdin.isatty():
            fail("no TEXT given and stdin is a terminal; pass TEXT or pipe the body in", ErrorKind.USAGE)
        from crosstalk.core.message import MAX_TEXT_BYTES

        cap = 4 * MAX_TEXT_BYTES  # characters: room for trailing whitespace, never a whole file in memory
        try:
            text = sys.stdin.read(cap + 1)
        except UnicodeDecodeError:
            fail("stdin is not valid UTF-8 text", ErrorKind.USAGE)
        if len(text) > cap:
            problem = f"stdin is over {cap} characters, far over the {MAX_TEXT_BYTES}-byte limit"
            fail(f"rejected: admission:text_too_large ({problem}); nothing was sent", ErrorKind.REJECTED)
    text = text.rstrip()
    if not text and kind != "ping":
        fail("the message is empty", ErrorKind.USAGE)

    try:
        msg = new_message(
            target,
            text,
            from_=None if args.a2a else sender_tag,
            kind=kind,
            delivery=chosen,
            deadline_seconds=args.deadline,
        )
    except MessageTooLarge as exc:  # what the receiver would refuse: rejected, as the exit codes say
        fail(f"rejected: {exc.reason} ({exc.problem}); nothing was sent", ErrorKind.REJECTED)
    except MessageError as exc:
        fail(f"invalid message: {exc}", ErrorKind.USAGE)
    if args.a2a:
        return _send_a2a(msg, args)

    import os

    from crosstalk.ingress.client import send_to
    from crosstalk.ingress.errors import DeliveryError
    from crosstalk.registry.errors import NoSuchAgent, RegistryError
    from crosstalk.shim.routing import RouteKind, route

    try:
        where = route(state_paths(), target, os.environ)
    except RegistryError as exc:
        fail(str(exc), ErrorKind.FAILED)
    if where.kind is RouteKind.BUS:  # NAME@MACHINE: across the relay this state root joined, else the git bus
        from crosstalk.cli.send_away import send_away

        return send_away(msg, text, sender_tag, as_json, timeout, args.transport)
    if where.kind is RouteKind.NATIVE:  # a session without crosstalk
        return _send_native(target, text, sender_tag, kind, as_json, args.wait_held, where.sessions)
    if where.agent is None:
        if "@" in target and isinstance(where.problem, NoSuchAgent):
            fail(f"no live agent is named {target!r}, and it is not a NAME@MACHINE bus address", ErrorKind.NO_AGENT)
        fail(str(where.problem), ErrorKind.NO_AGENT)
    try:
        result = send_to(state_paths(), where.agent, msg, timeout=timeout)
    except DeliveryError as exc:
        fail(str(exc), exc.code)
    except RegistryError as exc:
        fail(str(exc), ErrorKind.FAILED)

    outcome = result.outcome
    name = result.target.name
    print_outcome(outcome, name, result.target.agent_id, as_json)
    if outcome.state.value == "held" and args.wait_held > 0:
        outcome = _wait_held_agent(msg, timeout, args.wait_held, outcome)
        if outcome.state.value != "held":
            print_outcome(outcome, name, result.target.agent_id, as_json)
    return exit_for(outcome.state.value, name, outcome.reason)


def _wait_held_agent(msg: Any, timeout: float, wait_s: float, held: Any) -> Any:
    """A crosstalk agent's held message, asked again (the same message: the agent answers its current state from its
    journal, never delivering it twice) until it is no longer held or `wait_s` pass."""
    import time

    from crosstalk.ingress.client import send as send_message
    from crosstalk.ingress.errors import DeliveryError
    from crosstalk.registry.errors import RegistryError

    deadline = time.monotonic() + wait_s
    outcome = held
    while time.monotonic() < deadline:
        time.sleep(min(HELD_POLL_S, max(0.0, deadline - time.monotonic())))
        try:
            outcome = send_message(state_paths(), msg, timeout=timeout).outcome
        except (DeliveryError, RegistryError):
            continue  # the agent is restarting: ask again until the wait ends
        if outcome.state.value != "held":
            return outcome
    return outcome


def _send_native(
    target: str, text: str, sender_tag: str, kind: str, as_json: bool, wait_held: float, sessions: list[Any]
) -> int:
    """`crosstalk send NAME` to a live Claude session that runs without crosstalk (`sessions`: the route's): written
    as Claude's own peers write it (inform only; the CLI is not a Claude session, so it asserts no permission mode).
    The session's receipt says what it did; with `wait_held`, a held message's final word is waited for (it comes to
    this process only)."""
    import os
    import threading

    from crosstalk.core.states import State
    from crosstalk.ingress.client import deliver_native

    final: list[Any] = []
    settled = threading.Event()

    def on_settled(_mid: str, result: Any) -> None:
        if result.state is not State.HELD:
            final.append(result)
            settled.set()

    out = deliver_native(
        state_paths(), target, text, sessions, kind=kind, from_name=sender_tag, sender_pid=None,
        environ=dict(os.environ), on_settled=on_settled if wait_held > 0 else None,
    )  # fmt: skip
    _print_native(out, target, as_json)
    if out.state is State.HELD and wait_held > 0 and settled.wait(wait_held):
        out = out.with_(state=final[0].state, reason=final[0].reason)
        _print_native(out, target, as_json)
    if out.state is State.REJECTED:
        fail(f"rejected: {out.reason}; {out.evidence.get('hint', '')}".rstrip("; "), ErrorKind.REJECTED)
    return exit_for(out.state.value, target, out.reason)


def _print_native(out: Any, target: str, as_json: bool) -> None:
    state, reason = out.state.value, out.reason
    if as_json:
        print_json(out.answer(to=target))
    elif state == "held":
        echo(f"held {out.message_id} → {target}: {reason or 'held for its user'}")
    else:
        echo(f"{state} → {target} (a session without crosstalk)" + (f" ({reason})" if reason else ""))


def _send_a2a(msg: Any, args: Any) -> int:
    """`send --a2a`: the receiver answers with a task; print it and exit by its state (cli/send_a2a.py)."""
    from crosstalk.cli.send_a2a import send_a2a

    return send_a2a(msg, args)
