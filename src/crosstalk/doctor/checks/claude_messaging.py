"""Claude Code's native messaging: the socket directory it binds session sockets in, and each live session's
messaging socket (the shim injects through it; without it a message cannot reach the session)."""

from __future__ import annotations

from crosstalk.doctor.facts import ClaudeMessaging
from crosstalk.doctor.findings import Finding, ok, problem

CHECK = "claude-messaging"


def check(facts: ClaudeMessaging | None) -> list[Finding]:
    if facts is None or (not facts.cli_found and not facts.sessions):
        return [ok(CHECK, "claude not on PATH: nothing to check")]
    out = []
    if facts.bare:
        out.append(
            problem(
                CHECK,
                "CLAUDE_CODE_SIMPLE is set: Claude sessions started from here run bare, without native messaging",
                "unset CLAUDE_CODE_SIMPLE, then restart the Claude sessions",
            )
        )
    if facts.socket_dir_exists and not facts.socket_dir_private:
        out.append(
            problem(
                CHECK,
                f"{facts.socket_dir} is not a private directory of yours (Claude binds session sockets there)",
                f"chmod 700 {facts.socket_dir}",
            )
        )
    broken = [s for s in facts.sessions if not s.socket_ok]
    for s in broken:
        label = f"{s.name} (pid {s.pid})" if s.name else f"pid {s.pid}"
        where = s.socket or "no messagingSocketPath in its record"
        out.append(
            problem(
                CHECK,
                f"Claude session {label} has no messaging socket ({where}): messages cannot reach it",
                f"restart that session without --bare (kill {s.pid}; then claude --resume)",
            )
        )
    if not out:
        live = len(facts.sessions)
        sessions = f"{live} live session{'s' if live != 1 else ''} with sockets" if live else "no live session"
        out.append(ok(CHECK, f"native messaging available ({sessions}; sockets in {facts.socket_dir})"))
    return out
