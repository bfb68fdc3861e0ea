"""`crosstalk agent run`: a standalone agent in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

from crosstalk.cli.common import EXIT_NO_AGENT, EXIT_USAGE, EXIT_WIRE, fail, state_paths


def run(args: Any) -> int:
    """Register agent NAME, listen on its socket, and deliver into the harness until stopped."""
    name, session_ref, inbox, fake_script, fake_default = (
        args.name,
        args.session_ref,
        args.inbox,
        args.fake_script,
        args.fake_default,
    )
    role, parent, peers, accept_from = args.role, args.parent, tuple(args.peers), tuple(args.accept_from)
    cwd, as_json, verbose = args.cwd, args.as_json, args.verbose
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    from crosstalk.harness.fake import FakeHarness, parse_script
    from crosstalk.policy import Role
    from crosstalk.registry.errors import InvalidName

    try:
        script = parse_script(fake_script)
        parse_script(fake_default)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if parent and role != "worker":
        fail("--parent needs --role worker", EXIT_USAGE)
    paths = state_paths()
    owner = None
    if parent:
        from crosstalk.registry.discovery import resolve
        from crosstalk.registry.errors import RegistryError

        try:
            owner = resolve(paths, parent).agent_id
        except RegistryError as exc:
            fail(f"--parent: {exc}", EXIT_NO_AGENT)
    try:
        from crosstalk.registry.names import validate_name

        validate_name(name)
    except InvalidName as exc:
        fail(str(exc), EXIT_USAGE)

    from crosstalk.agent import AgentConfig

    config = AgentConfig(
        harness=FakeHarness(
            script, default=fake_default, inbox=inbox, answer=args.answer, conformance=args.conformance
        ),
        session_ref=session_ref or name,
        preferred_name=name,
        cwd=cwd or os.getcwd(),
        role=Role(role),
        owner=owner,
        peers=peers,
        accept_from=accept_from or None,
        a2a=not args.no_a2a,
    )
    return asyncio.run(_serve(paths, config, as_json, verbose))


def _logging_refusals(op: Any, what: str) -> Any:
    """A task operation the fake harness calls as its session's answer: a refusal (e.g. the task has moved on) is
    logged, never raised into the harness."""
    from crosstalk.core.errors import CrosstalkError

    async def call(message_id: str, *args: Any) -> object:
        try:
            return await op(message_id, *args)
        except CrosstalkError as exc:
            logging.getLogger("crosstalk.agent").warning("%s %s refused: %s", what, message_id, exc)
            return None

    return call


def _wire_fake(harness: Any, tasks: Any) -> None:
    """The fake's scripted answers (--answer) and conformance profile reply through the task service, as a
    session's reply would."""
    if getattr(harness, "answer", None) is not None:
        harness.on_answer = _logging_refusals(tasks.reply, "scripted answer to")
    if getattr(harness, "conformance", False):
        harness.on_expect = tasks.expect_answer
        harness.on_reply = _logging_refusals(
            lambda mid, text, artifacts, direct: tasks.reply(mid, text, artifacts=artifacts, direct=direct),
            "conformance answer to",
        )
        harness.on_require_input = _logging_refusals(tasks.require_input, "conformance input request for")


async def _serve(paths: object, config: object, as_json: bool, verbose: bool) -> int:
    from crosstalk.agent import AgentHost
    from crosstalk.core.errors import CrosstalkError

    try:
        host = await AgentHost.start(paths, config)  # type: ignore[arg-type]
    except CrosstalkError as exc:
        fail(str(exc), EXIT_WIRE)
    if host.tasks is not None:
        _wire_fake(host.config.harness, host.tasks)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if verbose and host.receiver is not None:
        host.receiver.add_listener(
            lambda inbound, outcome: logging.getLogger("crosstalk.agent").info(
                "%s from %s: %s %s", outcome.message_id, inbound.sender.label, outcome.state.value, outcome.reason or ""
            )
        )
    ready = {
        "event": "ready",
        "name": host.name,
        "agent_id": host.agent_id,
        "uds_path": str(host.paths.uds_path(host.agent_id)),
        "a2a_url": host.a2a.url if host.a2a is not None else None,
        "pid": os.getpid(),
        "notice": host.registration.name_notice,
        "replay": host.replay_report,
    }
    if as_json:
        sys.stdout.write(json.dumps(ready) + "\n")
    else:
        sys.stdout.write(f"agent {host.name} ({host.agent_id}) ready on {ready['uds_path']}\n")
        if host.registration.name_notice:
            sys.stdout.write(f"note: {host.registration.name_notice}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await host.close()
    return 0
