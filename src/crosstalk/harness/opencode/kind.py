"""The OpenCode harness kind (harness.base.HarnessKind).

identify: one `crosstalk mcp` serves every session of an OpenCode process, and no session id reaches it in a
tools/call (`_meta` has only a progress token; the environment has `OPENCODE_PID`). crosstalk's plugin stamps the
calling session into the call's arguments just before OpenCode calls the tool (`tool.execute.before`, overwriting
whatever the model wrote there); the shim moves those keys (EVIDENCE_ARGS) out of the arguments into the call's
evidence before the schema check. A stamp counts only in a shim whose parent is the OpenCode process named by
`OPENCODE_PID`: the plugin runs in that process. Names: the session's title when it is a valid name (a user's
`/rename`); OpenCode's own titles ("New session - …", or one its model wrote) are not, so crosstalk's name stays.

discover: every OpenCode process whose plugin bound an inbox, asked for its sessions; a session no crosstalk tool
call registered yet is written to through that inbox all the same (deliver_native, native.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crosstalk.harness.base import (
    CallEvidence,
    ConfigChange,
    InjectResult,
    SessionIdentity,
    SessionRow,
    derived_name,
)
from crosstalk.harness.errors import HarnessDisconnected, PreSendFailure
from crosstalk.harness.opencode import inbox

if TYPE_CHECKING:
    from crosstalk.harness.opencode.adapter import OpenCodeAdapter

NAME = "opencode"
PID_ENV = "OPENCODE_PID"
SESSION_ARG, TITLE_ARG = "opencode/session", "opencode/title"
SESSION_RE = re.compile(r"ses_[A-Za-z0-9]{1,64}")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # registry/names.py's rule (this package may not import it)
AGENT_ID_RE = re.compile(r"[0-9a-f]{16}")
SCOPES = ("user", "project")
LIST_TIMEOUT_S = 3.0


def own_name(title: object) -> str | None:
    if isinstance(title, str) and NAME_RE.fullmatch(title) and not AGENT_ID_RE.fullmatch(title):
        return title
    return None


class OpenCodeKind:
    name = NAME
    follows_renames = True
    scopes = SCOPES
    evidence_args = (SESSION_ARG, TITLE_ARG)

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        ref = call.meta.get(SESSION_ARG)
        pid = call.environ.get(PID_ENV, "")
        if not isinstance(ref, str) or not SESSION_RE.fullmatch(ref) or not pid.isdigit():
            return None
        if int(pid) != call.parent_pid:
            return None  # not started by the OpenCode process the plugin stamps in
        return SessionIdentity(NAME, ref, own_name(call.meta.get(TITLE_ARG)), harness_pid=call.parent_pid)

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        rows = []
        for pid in inbox.live_pids(environ):
            path = inbox.socket_path(environ, pid)
            try:
                answer = inbox.request(path, {"op": "sessions"}, LIST_TIMEOUT_S)
            except (PreSendFailure, HarnessDisconnected):
                continue
            sessions = answer.get("sessions")
            for s in sessions if isinstance(sessions, list) else []:
                ref = s.get("id") if isinstance(s, dict) else None
                if not isinstance(ref, str) or not SESSION_RE.fullmatch(ref):
                    continue
                status = s.get("status") if s.get("status") in ("idle", "busy") else "unknown"
                cwd = s.get("directory") if isinstance(s.get("directory"), str) else None
                rows.append(SessionRow(
                    harness=NAME, session_ref=ref, name=own_name(s.get("title")) or derived_name(NAME, ref),
                    cwd=cwd, status=status, reachable=True, pid=pid, endpoint=str(path),
                ))  # fmt: skip
        return rows

    def deliver_native(
        self,
        row: SessionRow,
        text: str,
        *,
        from_name: str,
        sender_pid: int | None,
        environ: Mapping[str, str],
        message_id: str | None = None,
        on_settled: Callable[[str, InjectResult], None] | None = None,
    ) -> InjectResult:
        """Write `text` into a session without a crosstalk agent through its process's plugin inbox (native.py)."""
        from crosstalk.harness.opencode import native

        return native.deliver(row, text, from_name=from_name, sender_pid=sender_pid, environ=environ,
                              message_id=message_id, on_settled=on_settled)  # fmt: skip

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        return False  # sessions of one OpenCode process live side by side; none replaces another

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> OpenCodeAdapter:
        from crosstalk.harness.opencode.adapter import OpenCodeAdapter

        return OpenCodeAdapter(session, environ)

    def install(
        self,
        scope: str,
        command: list[str],
        environ: Mapping[str, str],
        cwd: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[ConfigChange]:
        from crosstalk.harness.opencode import install as setup

        return setup.install(scope, command, environ, Path(cwd), extra_env)

    def uninstall(self, scope: str, environ: Mapping[str, str], cwd: str) -> list[ConfigChange]:
        from crosstalk.harness.opencode import install as setup

        return setup.uninstall(scope, environ, Path(cwd))


KIND = OpenCodeKind()
