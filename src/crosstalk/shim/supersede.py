"""Superseded sessions (seed 000 §3): Claude Code's `/clear` keeps the process and its shim but starts a new session
id, so the old session's agent outlives its session.

Only a harness that can prove it retires anything. Claude: the old session is superseded when the registry record of
its process, `$CLAUDE_CONFIG_DIR/sessions/<harness_pid>.json`, parses and names another session; a missing or
unreadable record is no evidence. Codex (and the fake) never supersede: one process serves several live threads,
and "same shim, different session" proves nothing.

A retired agent is closed (descriptor, sockets and keys go; its journal stays for a later `/resume`), so it is no
longer listed, its name and agent_id answer no_such_agent, and the new session can take the name.
"""

from __future__ import annotations

from collections.abc import Mapping

from crosstalk.shim.identity import CLAUDE, Identity, read_claude_record


def may_supersede(new: Identity, old: Identity) -> bool:
    """Whether `new` could supersede `old` at all: both Claude sessions of one live process, different sessions."""
    return (
        new.harness == CLAUDE
        and old.harness == CLAUDE
        and new.harness_pid is not None
        and new.harness_pid == old.harness_pid
        and new.session_ref != old.session_ref
    )


def claude_superseded(environ: Mapping[str, str], old: Identity) -> bool:
    """The proof: the registry record of `old`'s process parses and names another session."""
    if old.harness != CLAUDE or old.harness_pid is None:
        return False
    record = read_claude_record(environ, old.harness_pid)
    return record is not None and record["sessionId"] != old.session_ref
