"""`crosstalk agent run`: a standalone agent in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

import click

from crosstalk.cli.common import EXIT_USAGE, EXIT_WIRE, fail, state_paths


@click.group()
def agent() -> None:
    """Run agents outside a harness session (tests, demos, benchmarks, scripted receivers)."""


@agent.command("run")
@click.option("--harness", type=click.Choice(["fake"]), required=True,
              help="The harness adapter. 'fake' writes each injected message to --inbox.")
@click.option("--name", required=True, help="The agent name (the fallback rule applies if it is taken).")
@click.option("--session", "session_ref", default=None,
              help="The session reference the agent_id derives from (default: the name). Same session → same "
                   "agent_id → same journal across restarts.")
@click.option("--inbox", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append each injected message to this file as one JSON line.")
@click.option("--script", "fake_script", default="",
              help="Fake outcomes, one per injection, comma-separated (accept, queue, race, fallback, malformed, "
                   "refuse, presend, disconnect, block, hang); then --default repeats.")
@click.option("--default", "fake_default", default="accept", show_default=True, help="The fake outcome once the "
              "script runs out.")
@click.option("--role", type=click.Choice(["primary", "orchestrator", "worker", "peer"]), default="primary",
              show_default=True, help="The agent's role; decides whom it accepts messages from.")
@click.option("--parent", default=None, help="For --role worker: the live agent (name or id) that owns it.")
@click.option("--peer", "peers", multiple=True, help="A peer agent (name or agent_id); repeatable.")
@click.option("--accept-from", "accept_from", multiple=True,
              help="Override the role's acceptFrom: a bucket (parent, children, peers, agents, external, unknown) "
                   "or a handle (@ci:build, a name, an agent_id); repeatable.")
@click.option("--cwd", default=None, help="The working directory to record (default: the current one).")
@click.option("--json", "as_json", is_flag=True, help="Print the ready line as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Log each delivery to stderr.")
def run(harness: str, name: str, session_ref: str | None, inbox: Path | None, fake_script: str, fake_default: str,
        role: str, parent: str | None, peers: tuple[str, ...], accept_from: tuple[str, ...], cwd: str | None,
        as_json: bool, verbose: bool) -> None:
    """Register agent NAME, listen on its socket, and deliver into the harness until stopped."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
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
            fail(f"--parent: {exc}", 4)
    try:
        from crosstalk.registry.names import validate_name

        validate_name(name)
    except InvalidName as exc:
        fail(str(exc), EXIT_USAGE)

    from crosstalk.agent import AgentConfig

    config = AgentConfig(
        harness=FakeHarness(script, default=fake_default, inbox=inbox),
        session_ref=session_ref or name,
        preferred_name=name,
        cwd=cwd or os.getcwd(),
        role=Role(role),
        owner=owner,
        peers=peers,
        accept_from=accept_from or None,
    )
    code = asyncio.run(_serve(paths, config, as_json, verbose))
    sys.exit(code)


async def _serve(paths: object, config: object, as_json: bool, verbose: bool) -> int:
    from crosstalk.agent import AgentHost
    from crosstalk.core.errors import CrosstalkError

    try:
        host = await AgentHost.start(paths, config)  # type: ignore[arg-type]
    except CrosstalkError as exc:
        fail(str(exc), EXIT_WIRE)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if verbose and host.receiver is not None:
        host.receiver.add_listener(lambda inbound, outcome: logging.getLogger("crosstalk.agent").info(
            "%s from %s: %s %s", outcome.message_id, inbound.sender.label, outcome.state.value,
            outcome.reason or ""))
    ready = {
        "event": "ready",
        "name": host.name,
        "agent_id": host.agent_id,
        "uds_path": str(host.paths.uds_path(host.agent_id)),
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
