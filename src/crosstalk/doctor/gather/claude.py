"""Claude Code's native messaging as this user's sessions see it: the socket directory, each live session's
messaging socket (from its registry record, live by pid + procStart), and whether sessions started here run bare."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from crosstalk.doctor.facts import ClaudeMessaging, ClaudeSession
from crosstalk.harness.claude.peers import ENTRYPOINT
from crosstalk.harness.claude.sessions import live_records, text_field


def socket_dir(environ: Mapping[str, str]) -> str:
    """Where Claude binds session sockets: $XDG_RUNTIME_DIR/cc-socks, else /tmp/cc-socks (not moved by
    CLAUDE_CONFIG_DIR)."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    return os.path.join(runtime if runtime else "/tmp", "cc-socks")


def _is_socket(path: str | None) -> bool:
    if not path:
        return False
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def gather(environ: Mapping[str, str], cli_found: bool) -> ClaudeMessaging:
    directory = socket_dir(environ)
    try:
        st = os.lstat(directory)
        exists = True
        private = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    except OSError:
        exists = private = False
    sessions = []
    for pid, record in live_records(environ):
        if record.get("entrypoint") == ENTRYPOINT:
            continue  # a crosstalk agent published as a Claude peer, not a Claude session
        socket = text_field(record, "messagingSocketPath")
        sessions.append(ClaudeSession(pid, text_field(record, "name"), socket, _is_socket(socket)))
    bare = environ.get("CLAUDE_CODE_SIMPLE", "").lower() in ("1", "true", "yes", "on")
    return ClaudeMessaging(cli_found, directory, exists, private, tuple(sessions), bare)
