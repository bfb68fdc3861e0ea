"""Where `crosstalk demo` finds the real harness CLIs (claude, codex, pi; qwen, opencode and gemini when found),
and the environment every demo session gets: its own HOME and TMPDIR under the demo's temp dir, the shared
CROSSTALK_HOME, and nothing else of the caller's but PATH (no API key or session variable leaks in)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HARNESSES = ("claude", "codex", "pi")
OPTIONAL = ("qwen", "opencode", "gemini")  # the demo adds a session of each found, and runs without them
NEEDS_NODE = ("codex", "pi", "qwen", "gemini")  # opencode is a binary of its own
VERSION_TIMEOUT_S = 20.0
SETUP_TIMEOUT_S = 60.0


def _how_to_get() -> str:
    """The versions crosstalk is tested with, exactly (a plain `npm install -g` resolves to an older Claude Code on
    node 20): from the one pin file the installer and doctor read."""
    from crosstalk.doctor.pins import load_pins

    wanted = " ".join(f"{p.package}@{p.version}" for p in load_pins() if p.command in (*HARNESSES, *OPTIONAL))
    return f"bash scripts/dev.sh demo in a crosstalk checkout (it installs them), or npm install -g {wanted}"


HOW_TO_GET = _how_to_get()


@dataclass(frozen=True, slots=True)
class Harnesses:
    """The CLIs found (name -> executable; the optional ones only when found), or what is missing of the three
    and where it was looked for."""

    bins: dict[str, Path]
    missing: tuple[str, ...]
    where: str

    @property
    def complete(self) -> bool:
        return not self.missing

    def path_dirs(self) -> list[str]:
        """The directories of the CLIs, for the sessions' PATH (codex and pi also need node from PATH)."""
        return list(dict.fromkeys(str(p.parent) for p in self.bins.values()))


def find_harnesses(bin_dir: Path | None, environ: Mapping[str, str]) -> Harnesses:
    """The CLIs in `bin_dir` when given (and only there), else on the PATH of `environ`."""
    path = environ.get("PATH", os.defpath)
    bins: dict[str, Path] = {}
    for name in (*HARNESSES, *OPTIONAL):
        if bin_dir is not None:
            candidate = bin_dir / name
            found = str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
        else:
            found = shutil.which(name, path=path)
        if found:
            bins[name] = Path(found)
    missing = [n for n in HARNESSES if n not in bins]
    if shutil.which("node", path=path) is None:
        missing += [f"node (for {n})" for n in NEEDS_NODE if n in bins]
    where = f"in {bin_dir}" if bin_dir is not None else "on PATH"
    return Harnesses(bins, tuple(missing), where)


def version(exe: Path, env: Mapping[str, str]) -> str:
    """The first word of the CLI's `--version` that looks like a version, or "?"."""
    try:
        res = subprocess.run(
            [str(exe), "--version"],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    words = (res.stdout + " " + res.stderr).replace("(", " ").split()  # pi prints it on stderr
    return next((w for w in words if w[:1].isdigit() and "." in w), "?")


def session_env(root: Path, harnesses: Harnesses, crosstalk_home: Path, **extra: str) -> dict[str, str]:
    """A session's environment: HOME and TMPDIR under `root` (created), the CLIs' dirs first on PATH."""
    for sub in ("home", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([*harnesses.path_dirs(), os.environ.get("PATH", os.defpath)])
    return {
        "PATH": path,
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CROSSTALK_HOME": str(crosstalk_home),
        **extra,
    }


def install_crosstalk(harness: str, env: dict[str, str], cwd: Path) -> None:
    """`crosstalk install HARNESS`, by this Python (the MCP entry it writes names it by absolute path)."""
    res = subprocess.run(
        [sys.executable, "-m", "crosstalk", "install", harness],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=SETUP_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if res.returncode != 0:
        raise RuntimeError(f"crosstalk install {harness}: {res.stderr.strip() or res.stdout.strip()}")
