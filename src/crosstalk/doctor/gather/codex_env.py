"""The state roots in play for Codex: the one its crosstalk entry gives the shim (Codex passes its MCP children only
HOME and a few others, plus the entry's `env`), this shell's, and each running Codex process's own."""

from __future__ import annotations

import os
from collections.abc import Mapping

from crosstalk.doctor.facts import CodexEnvironment, CodexProcess
from crosstalk.doctor.gather.installs import codex_entry
from crosstalk.fs.procinfo import own_pids, process_argv, process_environ
from crosstalk.harness.codex import install as codex
from crosstalk.registry.paths import StatePaths

PASSED = ("HOME", "LANG", "PATH", "SHELL", "TERM", "TMPDIR")  # what Codex gives an MCP child of its environment


def _root(environ: Mapping[str, str]) -> str:
    return os.path.realpath(StatePaths.from_env(environ).root)


def entry_root(entry: Mapping[str, object], harness_environ: Mapping[str, str]) -> str:
    """The state root a shim started by `entry` from a Codex with `harness_environ` uses."""
    env = {k: v for k, v in harness_environ.items() if k in PASSED}
    extra = entry.get("env")
    if isinstance(extra, Mapping):
        env.update({str(k): str(v) for k, v in extra.items()})
    return _root(env)


def is_codex(argv: list[str]) -> bool:
    """A Codex process: the native binary (codex, codex-<target>) or node running the npm package's codex.js."""
    names = [os.path.basename(a) for a in argv[:2]]
    if names and (names[0] == "codex" or names[0].startswith("codex-")):
        return True
    return len(names) == 2 and names[0].startswith("node") and names[1] in ("codex", "codex.js")


def codex_processes() -> list[tuple[int, dict[str, str]]]:
    """(pid, environment) of this user's Codex processes, outermost only (a wrapper's native child is the same
    session)."""
    found: dict[int, dict[str, str]] = {}
    for pid in own_pids():
        if pid == os.getpid():
            continue
        argv = process_argv(pid)
        env = process_environ(pid) if argv and is_codex(argv) else None
        if env is not None:
            found[pid] = env
    return [(pid, env) for pid, env in sorted(found.items()) if _ppid(pid) not in found]


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rpartition(b")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def gather(environ: Mapping[str, str]) -> CodexEnvironment:
    config = str(codex.config_file(environ))
    try:
        entry = codex_entry(environ)
    except ValueError:
        entry = None  # the install check reports the unreadable file
    if entry is None:
        return CodexEnvironment(False, config, None, _root(environ))
    sessions = tuple(CodexProcess(pid, _root(env)) for pid, env in codex_processes() if _uses_config(env, environ))
    return CodexEnvironment(True, config, entry_root(entry, environ), _root(environ), sessions)


def _uses_config(session_env: Mapping[str, str], environ: Mapping[str, str]) -> bool:
    """Whether a Codex process reads the config.toml doctor read (same CODEX_HOME)."""
    return os.path.realpath(codex.config_file(session_env)) == os.path.realpath(codex.config_file(environ))
