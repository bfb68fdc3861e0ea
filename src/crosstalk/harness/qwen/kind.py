"""The Qwen Code harness kind (harness.base.HarnessKind).

identify: Qwen sends no session id in a tools/call (`_meta` has only a progress token). The shim's parent is the Qwen
TUI process, whose registry record (`$QWEN_HOME/sessions/<parent pid>.json`, live: pid, pidNs, boot id and start
ticks) names the current session; the shim's `QWEN_CODE_SESSION_ID` only names the session it was started in, so
the record decides. superseded: `/clear` and `/resume` keep the process (and its shim) and swap the session id; the
old session is over when the same process's record names another. Names: the record's `name` when the user chose it;
a name Qwen derived (cwd basename + two hex of the id, new after `/clear`) is not used, so crosstalk's stays.

Imports nothing heavy: `crosstalk send` imports this module when its target is a Qwen session; the adapter (asyncio)
and the install (config editing) are imported when used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crosstalk.harness.base import CallEvidence, ConfigChange, InjectResult, SessionIdentity, SessionRow, derived_name
from crosstalk.harness.qwen.sessions import live_records, own_name, read_record, socket_problem, text_field

if TYPE_CHECKING:
    from crosstalk.harness.qwen.adapter import QwenAdapter

NAME = "qwen"
SESSION_ENV = "QWEN_CODE_SESSION_ID"
SCOPES = ("user", "project")


class QwenKind:
    name = NAME
    follows_renames = True
    scopes = SCOPES

    def install(
        self,
        scope: str,
        command: list[str],
        environ: Mapping[str, str],
        cwd: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[ConfigChange]:
        from crosstalk.harness.qwen import install as setup

        return setup.install(scope, command, environ, Path(cwd), extra_env)

    def uninstall(self, scope: str, environ: Mapping[str, str], cwd: str) -> list[ConfigChange]:
        from crosstalk.harness.qwen import install as setup

        return setup.uninstall(scope, environ, Path(cwd))

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        """The session of the shim's parent process, by its live record. A shim Qwen started carries
        QWEN_CODE_SESSION_ID; without it, this is not a Qwen session's shim (a Claude parent has no Qwen record)."""
        if not call.environ.get(SESSION_ENV):
            return None
        record = read_record(call.environ, call.parent_pid)
        if record is None:
            return None
        return SessionIdentity(NAME, str(record["sessionId"]), own_name(record), harness_pid=call.parent_pid)

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        rows = []
        for pid, record in live_records(environ):
            ref = str(record["sessionId"])
            path = text_field(record, "ipcPath")
            problem = socket_problem(path)
            rows.append(
                SessionRow(
                    harness=NAME,
                    session_ref=ref,
                    name=text_field(record, "name") or derived_name(NAME, ref),
                    cwd=text_field(record, "cwd"),
                    status="unknown",
                    reachable=problem is None,
                    reason=problem,
                    pid=pid,
                    endpoint=path,
                )
            )
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
        """Write `text` into a session without crosstalk as Qwen's own peers do: the registry token and the sending
        session's review class (none for a sender that is not a session: held for the user), or the controller token
        the user minted for crosstalk (native.py)."""
        from crosstalk.harness.qwen import native

        return native.deliver(row, text, from_name=from_name, sender_pid=sender_pid, environ=environ,
                              message_id=message_id, on_settled=on_settled)  # fmt: skip

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        same_process = old.harness_pid is not None and old.harness_pid == new.harness_pid
        if old.harness != NAME or new.harness != NAME or not same_process or old.session_ref == new.session_ref:
            return False
        record = read_record(environ, old.harness_pid or 0)
        return record is not None and record["sessionId"] != old.session_ref

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> QwenAdapter:
        from crosstalk.harness.qwen.adapter import QwenAdapter

        return QwenAdapter(session, environ)


KIND = QwenKind()
