"""The harness CLIs on PATH and the versions they report. `--version` runs in a throwaway HOME (even `codex
--version` writes under ~/.codex), all at once, each under a timeout."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping

from crosstalk.doctor.facts import HarnessCli
from crosstalk.doctor.pins import Pin

VERSION_TIMEOUT_S = 20.0
_VERSION = re.compile(r"\b(\d+\.\d+\.\d+)\b")


def parse_version(output: str) -> str | None:
    """The first x.y.z in a `--version` output ("2.1.332 (Claude Code)", "codex-cli 0.171.0", "0.73.1")."""
    match = _VERSION.search(output)
    return match.group(1) if match else None


def gather(pins: tuple[Pin, ...], environ: Mapping[str, str]) -> tuple[HarnessCli, ...]:
    found = {p.command: shutil.which(p.command, path=environ.get("PATH", "")) for p in pins}
    with tempfile.TemporaryDirectory(prefix="xtdoc") as scratch:
        env = {
            "PATH": environ.get("PATH", ""), "HOME": scratch, "CODEX_HOME": f"{scratch}/.codex",
            "CLAUDE_CONFIG_DIR": f"{scratch}/.claude", "PI_CODING_AGENT_DIR": f"{scratch}/.pi", "PI_OFFLINE": "1",
            "DISABLE_AUTOUPDATER": "1", "NO_COLOR": "1",
        }  # fmt: skip
        procs: dict[str, subprocess.Popen[str]] = {}
        errors: dict[str, str] = {}
        for name, path in found.items():
            if path is None:
                continue
            try:
                procs[name] = subprocess.Popen(
                    [path, "--version"], env=env, cwd=scratch, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                errors[name] = exc.strerror or str(exc)
        outputs: dict[str, str] = {}
        for name, proc in procs.items():
            try:
                outputs[name] = proc.communicate(timeout=VERSION_TIMEOUT_S)[0]
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its own session: a wrapper's children go too
                proc.communicate()
                errors[name] = f"`--version` took over {VERSION_TIMEOUT_S:.0f}s"
    out = []
    for pin in pins:
        text = outputs.get(pin.command, "")
        version = parse_version(text)
        error = errors.get(pin.command)
        if version is None and error is None and found[pin.command]:
            error = (text.strip().splitlines() or ["no output"])[0][:120]
        out.append(HarnessCli(pin.command, pin.version, pin.install, found[pin.command], version, error))
    return tuple(out)
