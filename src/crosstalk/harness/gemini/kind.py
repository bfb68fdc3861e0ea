"""The Gemini CLI harness kind (harness.base.HarnessKind).

identify: Gemini sends no session id in a tools/call (`_meta` has only a progress token), and its MCP children get
none in their environment (only `GEMINI_CLI=1`). Its hooks do get the session id, on stdin, and hooks and MCP
children share the Gemini process as parent; so crosstalk's hook records `{Gemini pid → session id}` on every event
(harness/gemini/sessions.py) and each call is identified by the live record of the shim's parent process, read
afresh per call. superseded: `/clear` keeps the process (and its shim) and the hook records the new session id.

Imports nothing heavy: the adapter (asyncio) and the install (config editing) are imported when used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crosstalk.harness.base import CallEvidence, ConfigChange, SessionIdentity, SessionRow, derived_name
from crosstalk.harness.gemini.sessions import live_records, read_record, run_dir, socket_path, status_of

if TYPE_CHECKING:
    from crosstalk.harness.gemini.adapter import GeminiAdapter

NAME = "gemini"
CLI_ENV = "GEMINI_CLI"  # Gemini sets it to 1 in its MCP children and hooks
SCOPES = ("user", "project")


class GeminiKind:
    name = NAME
    follows_renames = False
    scopes = SCOPES

    def install(
        self,
        scope: str,
        command: list[str],
        environ: Mapping[str, str],
        cwd: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[ConfigChange]:
        from crosstalk.harness.gemini import install as setup

        return setup.install(scope, command, environ, Path(cwd), extra_env)

    def uninstall(self, scope: str, environ: Mapping[str, str], cwd: str) -> list[ConfigChange]:
        from crosstalk.harness.gemini import install as setup

        return setup.uninstall(scope, environ, Path(cwd))

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        if call.environ.get(CLI_ENV) != "1":
            return None
        record = read_record(call.environ, call.parent_pid)
        if record is None:
            return None
        return SessionIdentity(NAME, str(record["sessionId"]), None, harness_pid=call.parent_pid)

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        directory = run_dir(environ)
        rows = []
        for pid, record in live_records(environ):
            ref = str(record["sessionId"])
            path = socket_path(directory, pid) if directory is not None else None
            served = path is not None and path.exists()
            rows.append(
                SessionRow(
                    harness=NAME,
                    session_ref=ref,
                    name=derived_name(NAME, ref),
                    cwd=record.get("cwd") if isinstance(record.get("cwd"), str) else None,
                    status=status_of(record),
                    reachable=served,
                    reason=None if served else "crosstalk's MCP server is not running in this Gemini CLI session",
                    pid=pid,
                    endpoint=str(path) if served else None,
                )
            )
        return rows

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        same_process = old.harness_pid is not None and old.harness_pid == new.harness_pid
        if old.harness != NAME or new.harness != NAME or not same_process or old.session_ref == new.session_ref:
            return False
        record = read_record(environ, old.harness_pid or 0)
        return record is not None and record["sessionId"] != old.session_ref

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> GeminiAdapter:
        from crosstalk.harness.gemini.adapter import GeminiAdapter

        return GeminiAdapter(session, environ)


KIND = GeminiKind()
