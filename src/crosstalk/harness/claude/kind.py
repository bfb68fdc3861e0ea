"""The Claude Code harness kind (harness.base.HarnessKind).

identify: Claude sends no session id in a tools/call; the shim's parent is the Claude process, whose registry record
names the current session. superseded: `/clear` keeps the process (and its shim) but starts a new session id; the
old session is over when its process's record parses and names another session (a missing or unreadable record is
no evidence). Sessions follow `/rename`: the record's `name` is the agent's preferred name on every call,
unless Claude only derived it (own_name).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.core.states import State
from crosstalk.harness.base import (
    AgentInfo,
    CallEvidence,
    ConfigChange,
    InjectResult,
    SessionIdentity,
    SessionRow,
    derived_name,
)
from crosstalk.harness.claude import native, peers
from crosstalk.harness.claude.sessions import config_dir, live_records, read_record, text_field

# The adapter (asyncio) and install.py load where they are used: `crosstalk send` to a name no crosstalk agent holds
# asks this kind to discover its sessions, and must not pay for them (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from crosstalk.harness.claude.adapter import ClaudeAdapter

NAME = "claude"


def own_name(record: Mapping[str, Any]) -> str | None:
    """The session's name when it is its own (given by the user, or Claude's title for it): a `derived` name is
    made up by each Claude process anew (`alpha-19`, then `alpha-bf` after `--resume`), so the agent is named by
    crosstalk instead and keeps that name across restarts."""
    return None if record.get("nameSource") == "derived" else text_field(record, "name")


class ClaudeKind:
    name = NAME
    follows_renames = True

    @property
    def scopes(self) -> tuple[str, ...]:
        from crosstalk.harness.claude import install as setup

        return setup.SCOPES

    def install(
        self,
        scope: str,
        command: list[str],
        environ: Mapping[str, str],
        cwd: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[ConfigChange]:
        # Claude starts its MCP servers with its own environment: nothing extra to carry.
        from crosstalk.harness.claude import install as setup

        return setup.install(scope, command, environ, Path(cwd))

    def uninstall(self, scope: str, environ: Mapping[str, str], cwd: str) -> list[ConfigChange]:
        from crosstalk.harness.claude import install as setup

        return setup.uninstall(scope, environ, Path(cwd))

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        record = read_record(call.environ, call.parent_pid)
        if record is None:
            return None
        return SessionIdentity(NAME, record["sessionId"], own_name(record), harness_pid=call.parent_pid)

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        rows = []
        for pid, record in live_records(environ):
            if record.get("entrypoint") == peers.ENTRYPOINT:
                continue  # a crosstalk agent published as a Claude peer: listed as the agent it is
            status = text_field(record, "status")
            socket_path = text_field(record, "messagingSocketPath")
            live = native.socket_live(socket_path)
            rows.append(
                SessionRow(
                    harness=NAME,
                    session_ref=record["sessionId"],
                    name=text_field(record, "name") or derived_name(NAME, record["sessionId"]),
                    cwd=text_field(record, "cwd"),
                    status=status if status in ("idle", "busy") else "unknown",
                    reachable=live,
                    reason=None if live else "its messaging socket is gone",
                    pid=pid,
                    endpoint=socket_path,
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
        """Write `text` into a session without crosstalk as Claude's own SendMessage would, asserting the sending
        Claude session's permission class (none for a sender that is not a Claude session); the answer is the
        session's receipt (harness/claude/native.py)."""
        if row.pid is None or not row.endpoint:
            return InjectResult(State.UNREACHABLE, "the session published no messaging socket")
        mode = native.mode_class(sender_pid) if sender_pid else None
        return native.deliver(
            environ, row.pid, row.endpoint, text, from_name=from_name, from_mode=mode, message_id=message_id,
            on_settled=on_settled,
        )  # fmt: skip

    def peer_settings(self, environ: Mapping[str, str]) -> dict[str, str]:
        return {"config_dir": str(config_dir(environ))}

    def publish_peer(self, agent: AgentInfo, token: str, settings: Mapping[str, str]) -> Callable[[], None] | None:
        config_dir = peers.config_dir_of(settings)
        return peers.publish(config_dir, agent, token) if config_dir is not None else None

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        same_process = old.harness_pid is not None and old.harness_pid == new.harness_pid
        if old.harness != NAME or new.harness != NAME or not same_process or old.session_ref == new.session_ref:
            return False
        record = read_record(environ, old.harness_pid or 0)
        return record is not None and record["sessionId"] != old.session_ref

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> ClaudeAdapter:
        from crosstalk.harness.claude.adapter import ClaudeAdapter

        return ClaudeAdapter(session, environ)


KIND = ClaudeKind()
