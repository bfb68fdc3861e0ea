"""Running git for the bus: every call has a timeout, never prompts, and fails with git's meaningful line."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from crosstalk.bus.errors import GitError


def git_env() -> dict[str, str]:
    """The environment of every git the bus runs: never blocking on a credential prompt or an editor, with git's
    messages in English (parsed by error_line and the push's race detection), and no inherited GIT_DIR."""
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_MERGE_AUTOEDIT": "no", "LC_ALL": "C"})
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    return env


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def error_line(stderr: str, stdout: str = "", returncode: int | None = None) -> str:
    """The one line that says why git failed, for GitError messages and GitRepo.last_push_error.

    git ends many failures with advice ("hint: ...") or with the second half of a wrapped sentence, so the last
    line is often useless. Preferred, in order: the ref rejection ("! [rejected] HEAD -> main (fetch first)"),
    the "fatal:" lines, the "error:" lines (several of a kind are joined with "; "); else the last line that is
    not a hint, of stderr and then of stdout; else "exit N"."""
    lines = [line for line in _lines(stderr) if not line.lower().startswith("hint:")]
    for wanted in (
        lambda line: line.startswith("! ["),
        lambda line: line.lower().startswith("fatal:"),
        lambda line: line.lower().startswith("error:"),
    ):
        found = [line for line in lines if wanted(line)]
        if found:
            return "; ".join(dict.fromkeys(found))
    if lines:
        return lines[-1]
    out = [line for line in _lines(stdout) if not line.lower().startswith("hint:")]
    if out:
        return out[-1]
    return f"exit {returncode}" if returncode is not None else "no output"


def run_git(args: Iterable[str], *, cwd: Path | None = None, timeout: float = 60.0, input: str | None = None) -> str:
    """Run git outside any repository (clone, init); GitError with git's error line (error_line) on failure."""
    argv = ["git", *args]
    try:
        proc = subprocess.run(
            argv, cwd=cwd, input=input, capture_output=True, text=True, timeout=timeout, env=git_env()
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(argv[1:3])} timed out after {timeout:g} s") from None
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from None
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(argv[1:3])} failed: {error_line(proc.stderr, proc.stdout, proc.returncode)}")
    return proc.stdout
