"""The Codex harness kind (harness.base.HarnessKind).

identify: Codex puts the thread id in every tools/call's `_meta.threadId`; a call without it carries no identity.
One MCP process may serve several live threads, so "same shim, another thread" proves nothing: Codex never
supersedes. Codex threads have no name of their own to follow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from crosstalk.core.states import State
from crosstalk.harness.base import CallEvidence, ConfigChange, InjectResult, SessionIdentity, SessionRow

# The adapter (asyncio) and install.py (tomlkit) load where they are used: `crosstalk send` to a name no crosstalk
# agent holds asks this kind to discover its threads, and must not pay for them (docs/performance.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from crosstalk.harness.codex.adapter import CodexAdapter

NAME = "codex"


class CodexKind:
    name = NAME
    follows_renames = False

    @property
    def scopes(self) -> tuple[str, ...]:
        from crosstalk.harness.codex import install as setup

        return setup.SCOPES

    def install(
        self,
        scope: str,
        command: list[str],
        environ: Mapping[str, str],
        cwd: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[ConfigChange]:
        from crosstalk.harness.codex import install as setup

        return setup.install(scope, [*command, "--harness", NAME], environ, extra_env or {})

    def uninstall(self, scope: str, environ: Mapping[str, str], cwd: str) -> list[ConfigChange]:
        from crosstalk.harness.codex import install as setup

        return setup.uninstall(scope, environ)

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        ref = call.meta.get("threadId")
        return SessionIdentity(NAME, ref) if isinstance(ref, str) and ref else None

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        """The threads the app-servers have loaded (with or without crosstalk): the control socket's and those
        crosstalk's Codex agents are bound to."""
        from crosstalk.harness.codex.threads import loaded

        return loaded(environ, known_endpoints)

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
        """An inform into a loaded thread crosstalk does not serve: a turn/start carrying the envelope, on the
        app-server the listing found it on. Codex never holds a message for its user: the answer is final, and
        `on_settled` is never called."""
        from crosstalk.core import envelope
        from crosstalk.harness.codex.threads import deliver

        if not row.reachable or not row.endpoint:
            return InjectResult(State.UNREACHABLE, row.reason or "the thread is on no app-server")
        return deliver(row.endpoint, row.session_ref, envelope.render(text, {"from-name": from_name}))

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        return False

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> CodexAdapter:
        from crosstalk.harness.codex.adapter import CodexAdapter

        return CodexAdapter(session, environ)


KIND = CodexKind()
