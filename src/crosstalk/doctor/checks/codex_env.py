"""The Codex environment mismatch of a non-default state root. Codex passes its MCP children only a few variables
plus the entry's own `env`, so the state root a Codex session's crosstalk uses is the one `crosstalk install codex`
wrote into config.toml. A shell (or a running Codex session) whose CROSSTALK_HOME names another root cannot see
those agents, nor they it."""

from __future__ import annotations

import shlex

from crosstalk.doctor.facts import CodexEnvironment
from crosstalk.doctor.findings import Finding, ok, problem

CHECK = "codex-env"


def check(codex: CodexEnvironment | None) -> list[Finding]:
    if codex is None or not codex.installed or codex.entry_root is None:
        return [ok(CHECK, "crosstalk not installed for codex: no state root to compare")]
    entry = codex.entry_root
    out = []
    if codex.shell_root != entry:
        out.append(
            problem(
                CHECK,
                f"Codex sessions' crosstalk uses {entry} ({codex.config}), but this shell uses {codex.shell_root}",
                "crosstalk install codex (from the shell you start codex in), then restart codex",
            )
        )
    for session in codex.sessions:
        if session.root != entry:
            out.append(
                problem(
                    CHECK,
                    f"codex pid {session.pid} was started with state root {session.root}, but its crosstalk uses "
                    f"{entry}: its agent is invisible there",
                    f"CROSSTALK_HOME={shlex.quote(session.root)} crosstalk install codex, then restart codex "
                    f"(pid {session.pid})",
                )
            )
    if not out:
        n = len(codex.sessions)
        running = f"{n} Codex session{'s' if n != 1 else ''} running" if n else "no Codex session running"
        out.append(ok(CHECK, f"Codex's crosstalk uses this shell's state root ({running})"))
    return out
