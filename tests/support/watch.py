"""Shared by the `crosstalk watch` tests: a bus transport with this machine's dispatcher running in a test's state
root, the text a textual app shows on its screen, and `crosstalk watch` itself in a tmux pane of its own (the e2e
tests of a harness read its agents' rows there, as a person sees them)."""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shlex
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from crosstalk.fs.procinfo import pid_alive
from tests.support.procs import Procs
from tests.support.tmux_pane import TmuxPane

_SVG_TEXT = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>')


def screen_text(app: Any) -> str:
    """What the running app's screen shows, line by line (from its SVG screenshot: each line is its text runs)."""
    lines: dict[float, list[tuple[float, str]]] = {}
    for m in _SVG_TEXT.finditer(app.export_screenshot()):
        lines.setdefault(float(m.group(2)), []).append(
            (float(m.group(1)), html.unescape(m.group(3)).replace("\xa0", " "))
        )
    return "\n".join("".join(t for _, t in sorted(runs)) for _, runs in sorted(lines.items()))


def line_with(text: str, *words: str) -> str | None:
    """The first screen line holding every word, in order."""
    pattern = re.compile(".*".join(re.escape(w) for w in words))
    return next((ln for ln in text.splitlines() if pattern.search(ln)), None)


def init_transport(xt: Procs, name: str = "t1") -> None:
    res = xt.cli("transport", "init", name, "--dir", str(xt.root / name))
    assert res.returncode == 0, res.stderr


@contextlib.contextmanager
def dispatcher(xt: Procs, name: str = "t1") -> Iterator[int]:
    """`crosstalk server start` for the transport; stopped (and its pid killed if it outlives that) on the way out."""
    res = xt.cli("server", "start", "--transport", name, "--interval", "60", "--json")
    assert res.returncode == 0, res.stderr
    pid = int(json.loads(res.stdout)["pid"])
    try:
        yield pid
    finally:
        xt.cli("server", "stop", "--transport", name)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def watch_pane(crosstalk: Path, env: Mapping[str, str], cwd: Path, name: str) -> Iterator[TmuxPane]:
    """`crosstalk watch` (the live view) running in a tmux server of its own, with `env` set for it; the server is
    killed on the way out."""
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    # A stale COLUMNS/LINES from the test's own environment would size the screen instead of the pane.
    pane = TmuxPane(name)
    pane.start(f"env -u COLUMNS -u LINES {assigns} {shlex.quote(str(crosstalk))} watch", str(cwd))
    try:
        yield pane
    finally:
        pane.close()


def lines_with(text: str, *words: str) -> set[str]:
    """Every screen line holding every word, in order."""
    pattern = re.compile(".*".join(re.escape(w) for w in words))
    return {ln for ln in text.splitlines() if pattern.search(ln)}


def wait_line(
    pane: TmuxPane, *words: str, besides: set[str] | frozenset[str] = frozenset(), timeout: float = 30.0
) -> str:
    """A line of the pane's screen holding every word in order and not one of `besides` (the lines shown before),
    once it shows one."""
    deadline = time.monotonic() + timeout
    while (found := next(iter(lines_with(pane.screen(), *words) - besides), None)) is None:
        assert time.monotonic() < deadline, f"no line with {words} within {timeout} s; the pane shows:\n{pane.screen()}"
        time.sleep(0.1)
    return found
