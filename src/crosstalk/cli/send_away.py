"""`crosstalk send NAME@MACHINE` to an address no live agent here has: across the NATS relay this state root joined
(a live agent of that machine, through this machine's relay process; docs/dev/relay.md), else over the git bus
(docs/bus.md). cli/send_cmd.py routes here and prints and exits the way it does for a local agent."""

from __future__ import annotations

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.core.errors import EXIT_OK, ErrorKind

NO_MACHINE = "relay:no_machine"  # relay/send.py's: the relay process answers with it (not imported: it loads NATS)

# `typing` is only needed by type checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def send_away(msg: Any, text: str, sender_tag: str, as_json: bool, timeout: float, transport: str | None) -> int:
    """The relay first when this state root joined one, else (or when that machine has no such agent, or no machine
    of that alias is on the relay, and a bus is known here) the git bus."""
    from crosstalk.relay.local_cli import joined

    if joined(state_paths()):
        code = _send_relay(msg, as_json, timeout, transport)
        if code is not None:
            return code
    kind = msg.kind.value
    if kind != "inform":
        fail(f"--kind {kind}: over the git bus `crosstalk send` carries informs only", ErrorKind.USAGE)
    return _send_bus(msg.to, text, sender_tag, as_json, transport)


def _send_relay(msg: Any, as_json: bool, timeout: float, transport: str | None) -> int | None:
    """`crosstalk send NAME@ALIAS` across the NATS relay (docs/dev/relay.md), through this machine's relay process's
    local socket (relay/local_cli.py: no NATS client, connection or credentials here; `--from` is the sender, the
    socket's uid its proof): the remote machine's receiver chain answers, and this prints and exits as for a local
    agent. None: machine ALIAS has no live agent NAME, no machine ALIAS is on the relay, or no relay process serves
    here, and a git bus is known here to try instead."""
    from crosstalk.relay.local_cli import NOT_SERVING, send_via_relay_process

    result = send_via_relay_process(state_paths(), msg, timeout=timeout)
    outcome = result.outcome
    if (result.no_agent is not None or outcome.reason in (NO_MACHINE, NOT_SERVING)) and _bus_known(transport):
        return None
    if result.no_agent is not None:
        alias = msg.to.rpartition("@")[2]
        fail(f"no live agent is named {msg.to!r} (machine {alias} says: {result.no_agent})", ErrorKind.NO_AGENT)
    from crosstalk.cli.send_output import exit_for, print_outcome

    print_outcome(outcome, result.to, result.agent_id, as_json)
    detail = outcome.evidence.get("detail") if isinstance(outcome.evidence, dict) else None
    reason = f"{outcome.reason}: {detail}" if detail else outcome.reason
    return exit_for(outcome.state.value, result.to, reason)


def _bus_known(transport: str | None) -> bool:
    """Whether a git bus could carry a NAME@MACHINE message from here (a transport named, or one registered)."""
    import os

    if transport is not None or os.environ.get("CROSSTALK_TRANSPORT"):
        return True
    from crosstalk.bus.transport.transports import load_entries

    try:
        return bool(load_entries(os.environ))
    except Exception:  # an unreadable bus registry: the relay's own answer stands
        return False


def _send_bus(target: str, text: str, sender_tag: str, as_json: bool, transport: str | None) -> int:
    """`crosstalk send model@machine`: no live agent here has that address, so it goes over the git bus (--transport,
    else $CROSSTALK_TRANSPORT, else the one containing the current directory, else the only one known here) as a new
    task in this machine's live-<alias> channel."""
    import os

    from crosstalk.bus.live.bridge import send_from_live

    # On the bus `from:` is a plain name: the operator's own for the default @cli:<user>, else the tag as given.
    sender = sender_tag.removeprefix("@cli:") if sender_tag.startswith("@cli:") else sender_tag
    environ = dict(os.environ)
    if transport is not None:
        environ["CROSSTALK_TRANSPORT"] = transport
    out = send_from_live(state_paths(), "cli", target, text, sender=sender, environ=environ)
    if out["state"] != "queued":
        fail(f"cannot send {target!r} over the git bus: {out.get('detail') or out.get('reason')}", ErrorKind.NO_AGENT)
    if as_json:
        print_json(out)
    else:
        echo(f"queued via the git bus ({out['transport']}) → {target}: {out['rel_path']}")
        if out.get("push_error"):
            echo(f"crosstalk: warning: committed locally; the push failed ({out['push_error']})", err=True)
    return EXIT_OK
