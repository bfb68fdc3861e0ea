"""The pi harness kind (harness.base.HarnessKind).

identify: the extension's core names the pi session in every call it makes (`_meta["pi/session"]`, with the
handle it asked for in `_meta["pi/handle"]`); a call without it carries no identity. A pi session with crosstalk
off is not discoverable (crosstalk is off by default in pi: no socket, no registry entry), so discover lists
nothing: every pi session crosstalk can reach is an agent. `/new` and `/reload` start a new core for the new
session id, so pi never supersedes in one process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from crosstalk.harness.base import CallEvidence, ConfigChange, SessionIdentity, SessionRow
from crosstalk.harness.pi import install as setup
from crosstalk.harness.pi.adapter import NAME, PiAdapter

SESSION_KEY = "pi/session"
HANDLE_KEY = "pi/handle"


class PiKind:
    name = NAME
    follows_renames = True  # `/crosstalk handle NAME` renames the agent
    scopes = setup.SCOPES

    def identify(self, call: CallEvidence) -> SessionIdentity | None:
        ref = call.meta.get(SESSION_KEY)
        if not isinstance(ref, str) or not ref:
            return None
        handle = call.meta.get(HANDLE_KEY)
        return SessionIdentity(NAME, ref, handle if isinstance(handle, str) and handle else None)

    def discover(self, environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
        return []

    def superseded(self, old: SessionIdentity, new: SessionIdentity, environ: Mapping[str, str]) -> bool:
        return False

    def adapter(self, session: SessionIdentity, environ: Mapping[str, str]) -> PiAdapter:
        return PiAdapter(None)  # hosted outside the extension's core: sends work, nothing can be delivered in

    def install(
        self,
        scope: str,
        command: list[str],
        environ: Mapping[str, str],
        cwd: str,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[ConfigChange]:
        core = command[:-1] if command and command[-1] == "mcp" else command  # the extension adds `pi-agent …`
        return setup.install(scope, core, environ, Path(cwd))

    def uninstall(self, scope: str, environ: Mapping[str, str], cwd: str) -> list[ConfigChange]:
        return setup.uninstall(scope, environ, Path(cwd))


KIND = PiKind()
