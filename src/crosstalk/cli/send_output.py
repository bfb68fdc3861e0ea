"""How `crosstalk send` prints an answer and which code it exits with: the same for a local agent (cli/send_cmd.py)
and one across the relay (cli/send_away.py)."""

from __future__ import annotations

from crosstalk.cli.common import echo, fail, print_json
from crosstalk.core.errors import EXIT_OK, ErrorKind
from crosstalk.core.states import DELIVERED_STATES

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def print_outcome(outcome: Any, name: str, agent_id: str | None, as_json: bool) -> None:
    state = outcome.state.value
    if as_json:
        print_json({**outcome.to_dict(), "to": name, "agent_id": agent_id})
    elif state == "held":
        echo(f"held {outcome.message_id} → {name}: {outcome.reason or 'held for its user'}")
    else:
        line = f"{state} {outcome.message_id} → {name}"
        echo(line + (f" ({outcome.reason})" if outcome.reason and state != "rejected" else ""))


def exit_for(state: str, name: str, reason: str | None) -> int:
    """The exit code of a final (or held) state; a failure's line on stderr."""
    if state in DELIVERED_STATES:
        return EXIT_OK
    if state == "held":
        fail(
            f"{name} holds the message for its user to decide; --wait-held SECONDS waits for the decision",
            ErrorKind.HELD,
        )
    if state == "rejected":
        fail(f"rejected by {name}: {reason or 'no reason given'}", ErrorKind.REJECTED)
    if state == "unreachable":
        fail(f"{name} could not take the message: {reason or 'unreachable'}", ErrorKind.NO_AGENT)
    fail(f"delivery to {name} is {state}: {reason or 'no evidence either way'}", ErrorKind.FAILED)
