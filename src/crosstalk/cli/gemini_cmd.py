"""`crosstalk gemini token`: the A2A bearer token of the crosstalk agent of the Gemini CLI session it runs under.

Gemini CLI calls a remote A2A agent with the credentials of its agent file (`~/.gemini/agents/<name>.md`), and
resolves a `!command` value by running it as its child (docs/gemini.md). With `token: "!crosstalk gemini token"`
the call carries the token of the calling session's own crosstalk agent, so the receiving agent knows who sent it,
as for any other agent's message. The session is found as crosstalk's hook and shim find it: the Gemini process
this command runs under (past a shell), its hook record (the session id), and the live agent that serves that
session in that process (harness/gemini/sessions.py).

Gemini runs the command once when it loads its agents, which is before the session's first crosstalk tool call
registers its agent: then there is no token yet and a placeholder is printed, which every crosstalk agent refuses;
Gemini runs the command again when a call is refused, by which time the session has its agent.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from crosstalk.cli.common import state_paths

NO_AGENT_YET = "crosstalk-gemini-session-without-an-agent-yet"  # refused by every agent (no token file holds it)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("gemini", help="Gemini CLI helpers (its remote agents' auth: `gemini token`).")
    verbs = p.add_subparsers(dest="gemini_command", metavar="COMMAND", required=True)
    t = verbs.add_parser(
        "token",
        help="Print the A2A bearer token of the crosstalk agent of the Gemini CLI session this runs under.",
        description='For a Gemini CLI agent file\'s auth (`token: "!crosstalk gemini token"`): Gemini runs it as '
        "its child, and the token names the calling Gemini session's crosstalk agent as the sender. Before the "
        "session has an agent (its first crosstalk tool call) it prints a placeholder every agent refuses.",
    )
    t.set_defaults(run="crosstalk.cli.gemini_cmd:run_token")


def session_token(environ: Any, start_pid: int) -> str | None:
    """The token of the live crosstalk agent serving the Gemini session of the Gemini process above `start_pid`."""
    from crosstalk.harness.gemini.sessions import gemini_pid, read_record
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.discovery import list_descriptors
    from crosstalk.registry.errors import KeyFileError

    pid = gemini_pid(start_pid)
    record = read_record(environ, pid)
    if record is None:
        return None
    paths = state_paths()
    for desc in list_descriptors(paths):
        if desc.harness == "gemini" and desc.session_ref == record["sessionId"] and desc.harness_pid == pid:
            try:
                return read_key(paths.token_path(desc.agent_id))
            except (KeyFileError, OSError):
                return None
    return None


def run_token(args: Any) -> int:
    token = session_token(os.environ, os.getppid())
    if token is None:
        sys.stderr.write(
            "crosstalk: no crosstalk agent serves the Gemini CLI session this runs under yet (its first crosstalk "
            "tool call registers it): printed a placeholder\n"
        )
        token = NO_AGENT_YET
    sys.stdout.write(token + "\n")
    return 0
