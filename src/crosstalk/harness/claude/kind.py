"""The Claude Code harness kind (harness.base.HarnessKind).

identify: Claude sends no session id in a tools/call; the shim's parent is the Claude process, whose registry record
names the current session. superseded: `/clear` keeps the process (and its shim) but starts a new session id; the
old session is over when its process's record parses and names another session (a missing or unreadable record is
no evidence). Sessions follow `/rename`: the record's `name` is the agent's preferred name on every call.
"""

from __future__ import annotations

from collections.abc import Mapping

from crosstalk.harness.base import CallEvidence, SessionIdentity, SessionRow, UnavailableAdapter
from crosstalk.harness.claude.sessions import live_records, read_record, text_field

NAME = "claude"
NOT_YET = "the claude adapter cannot deliver into Claude Code sessions in this build"


class ClaudeKind:
    name = NAME
    follows_renames = True

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        record = read_record(call.environ, call.parent_pid)
        if record is None:
            return None
        return SessionIdentity(NAME, record["sessionId"], text_field(record, "name"), harness_pid=call.parent_pid)

    def discover(self, environ: Mapping[str, str]) -> list[SessionRow]:
        rows = []
        for pid, record in live_records(environ):
            status = text_field(record, "status")
            rows.append(
                SessionRow(
                    harness=NAME,
                    session_ref=record["sessionId"],
                    name=text_field(record, "name"),
                    cwd=text_field(record, "cwd"),
                    status=status if status in ("idle", "busy") else "unknown",
                    reachable=False,
                    reason=NOT_YET,
                    pid=pid,
                )
            )
        return rows

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        same_process = old.harness_pid is not None and old.harness_pid == new.harness_pid
        if old.harness != NAME or new.harness != NAME or not same_process or old.session_ref == new.session_ref:
            return False
        record = read_record(environ, old.harness_pid or 0)
        return record is not None and record["sessionId"] != old.session_ref

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> UnavailableAdapter:
        # A Claude session's native reply to an injected envelope goes to our uds address (bounced there).
        return UnavailableAdapter(NAME, NOT_YET, reply_to_uds=True)


KIND = ClaudeKind()
