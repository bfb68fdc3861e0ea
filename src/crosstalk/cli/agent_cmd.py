"""`crosstalk agent run`: a standalone agent in the foreground until SIGTERM or SIGINT (`agent start` and `stop`,
the same in the background: cli/agent_start.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

from crosstalk import harness as harness_kinds
from crosstalk.cli.argtypes import positive_float
from crosstalk.cli.common import fail, state_paths
from crosstalk.core.errors import ErrorKind

FAKE_KEEP_WRITES = 1000  # the writes a fake agent process keeps in memory (its --inbox file has every one)


def add_parser(sub: Any) -> None:
    agent = sub.add_parser("agent", help="Run a standalone agent.")
    agent_sub = agent.add_subparsers(dest="agent_command", metavar="COMMAND", parser_class=type(agent))
    p = agent_sub.add_parser("run", help="Register an agent and deliver into its harness until SIGTERM/SIGINT.")
    _run_options(p)
    p.set_defaults(run="crosstalk.cli.agent_cmd:run")

    sp = agent_sub.add_parser(
        "start", help="Start an agent in the background (as `agent run`); returns once it is ready for messages."
    )
    _run_options(sp)
    sp.add_argument("--log", help="Where its output goes (default: $CROSSTALK_HOME/logs/agent-NAME.log).")
    sp.set_defaults(run="crosstalk.cli.agent_start:run_start")
    stop = agent_sub.add_parser("stop", help="Stop an agent `agent start` or `agent run` started (SIGTERM).")
    stop.add_argument("name", metavar="NAME", help="The agent's name or agent_id.")
    stop.set_defaults(run="crosstalk.cli.agent_start:run_stop")

    lp = agent_sub.add_parser("list", help="List the live agents on this machine (as `crosstalk list`).")
    lp.add_argument("--json", dest="as_json", action="store_true", help="Print a JSON array of descriptors.")
    lp.add_argument(
        "--all", dest="include_stale", action="store_true", help="Include descriptors whose process is gone."
    )
    lp.set_defaults(run="crosstalk.cli.list_cmd:run_list")


def _run_options(p: Any) -> None:
    p.add_argument(
        "--harness",
        choices=harness_kinds.standalone(),
        required=True,
        help="The harness adapter. 'fake' writes each injected message to --inbox.",
    )
    p.add_argument("--name", required=True, help="The agent name (the fallback rule applies if it is taken).")
    p.add_argument(
        "--session",
        dest="session_ref",
        help="The session the agent_id derives from (default: the name); the same session finds the "
        "same journal after a restart.",
    )
    p.add_argument("--inbox", help="Append each injected message to this file as one JSON line.")
    p.add_argument(
        "--script",
        dest="fake_script",
        default="",
        help="Fake outcomes, one per injection, comma-separated (accept, queue, race, fallback, "
        "malformed, refuse, presend, disconnect, block, hang, hold, decline); then --default repeats.",
    )
    p.add_argument(
        "--default",
        dest="fake_default",
        default="accept",
        help="The fake outcome once the script runs out (default accept).",
    )
    p.add_argument(
        "--role",
        choices=["primary", "orchestrator", "worker", "peer"],
        default="primary",
        help="The agent's role; decides whom it accepts messages from (default primary).",
    )
    p.add_argument("--parent", help="For --role worker: the live agent (name or agent_id) that owns it.")
    p.add_argument(
        "--peer", dest="peers", action="append", default=[], help="A peer agent (name or agent_id); repeatable."
    )
    p.add_argument(
        "--accept-from",
        dest="accept_from",
        action="append",
        default=[],
        help="Override the role's acceptFrom: a bucket (parent, children, peers, agents, external, "
        "unknown) or a handle (@ci:build, a name, an agent_id); repeatable.",
    )
    p.add_argument("--cwd", help="The working directory to record (default: the current one).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the ready line as JSON.")
    p.add_argument(
        "--answer",
        metavar="TEXT",
        help="Fake harness: answer every injected ask with TEXT, as the session's reply would.",
    )
    p.add_argument(
        "--conformance",
        action="store_true",
        help="Fake harness: answer the A2A conformance kit's magic message ids (tck-complete-task, "
        "tck-artifact-*, tck-message-response, tck-input-required, tck-reject-task) as its reference system "
        "under test does (opt-in; for running a2a-tck against this agent).",
    )
    p.add_argument(
        "--inject-timeout",
        dest="inject_timeout",
        type=positive_float(0.1, 86400),
        default=30.0,
        help="Seconds an injection into the session may take before its outcome is unknown (default 30).",
    )
    p.add_argument(
        "--no-a2a",
        dest="no_a2a",
        action="store_true",
        help="Serve no A2A endpoint (sessions and send still reach it on its socket; starts faster).",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="Log each delivery to stderr.")


def run(args: Any) -> int:
    """Register agent NAME, listen on its socket, and deliver into the harness until stopped."""
    name, session_ref = args.name, args.session_ref
    role, parent, peers, accept_from = args.role, args.parent, tuple(args.peers), tuple(args.accept_from)
    cwd, as_json, verbose = args.cwd, args.as_json, args.verbose
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    from crosstalk.policy import Role
    from crosstalk.registry.errors import InvalidName

    adapter = _adapter(args)
    if parent and role != "worker":
        fail("--parent needs --role worker", ErrorKind.USAGE)
    paths = state_paths()
    owner = None
    if parent:
        from crosstalk.registry.discovery import resolve
        from crosstalk.registry.errors import RegistryError

        try:
            owner = resolve(paths, parent).agent_id
        except RegistryError as exc:
            fail(f"--parent: {exc}", ErrorKind.NO_AGENT)
    try:
        from crosstalk.registry.names import validate_name

        validate_name(name)
    except InvalidName as exc:
        fail(str(exc), ErrorKind.USAGE)

    from crosstalk.agent import AgentConfig

    config = AgentConfig(
        harness=adapter,
        session_ref=session_ref or name,
        preferred_name=name,
        cwd=cwd or os.getcwd(),
        role=Role(role),
        owner=owner,
        peers=peers,
        accept_from=accept_from or None,
        a2a=not args.no_a2a,
        inject_timeout_s=args.inject_timeout,
    )
    return asyncio.run(_serve(paths, config, as_json, verbose))


def _adapter(args: Any) -> Any:
    """The harness adapter: the fake with its scripting options, or a registered standalone kind's own."""
    fake_options = {
        "--inbox": args.inbox,
        "--script": args.fake_script,
        "--default": args.fake_default != "accept",
        "--answer": args.answer,
        "--conformance": args.conformance,
    }
    if args.harness != "fake":
        given = [flag for flag, value in fake_options.items() if value]
        if given:
            fail(f"{', '.join(given)}: only for --harness fake", ErrorKind.USAGE)
        from crosstalk import harness as kinds
        from crosstalk.harness.base import SessionIdentity

        session = SessionIdentity(args.harness, args.session_ref or args.name, args.name)
        return kinds.kind(args.harness).adapter(session, dict(os.environ))
    from crosstalk.harness.fake import FakeHarness, parse_script

    try:
        script = parse_script(args.fake_script)
        parse_script(args.fake_default)
    except ValueError as exc:
        fail(str(exc), ErrorKind.USAGE)
    return FakeHarness(
        script,
        default=args.fake_default,
        inbox=args.inbox,
        answer=args.answer,
        conformance=args.conformance,
        keep_writes=FAKE_KEEP_WRITES,  # a process: nothing reads its writes but its inbox file, so memory stays flat
    )


async def _serve(paths: object, config: object, as_json: bool, verbose: bool) -> int:
    from crosstalk.agent import AgentHost
    from crosstalk.core.errors import CrosstalkError

    try:
        host = await AgentHost.start(paths, config)  # type: ignore[arg-type]
    except CrosstalkError as exc:
        fail(str(exc), ErrorKind.FAILED)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if verbose:
        host.add_listener(
            lambda inbound, outcome: logging.getLogger("crosstalk.agent").info(
                "%s from %s: %s %s", outcome.message_id, inbound.sender.label, outcome.state.value, outcome.reason or ""
            )
        )
    ready = {
        "event": "ready",
        "name": host.name,
        "agent_id": host.agent_id,
        "uds_path": host.uds_path,
        "a2a_url": host.a2a_url,
        "pid": os.getpid(),
        "notice": host.name_notice,
        "replay": host.replay_report,
    }
    if as_json:
        sys.stdout.write(json.dumps(ready) + "\n")
    else:
        sys.stdout.write(f"agent {host.name} ({host.agent_id}) ready on {ready['uds_path']}\n")
        if host.name_notice:
            sys.stdout.write(f"note: {host.name_notice}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await host.close()
    return 0
