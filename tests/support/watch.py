"""Shared by the `crosstalk watch` tests: a bus transport with this machine's dispatcher running in a test's state
root, and the text a textual app shows on its screen."""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import Any

from crosstalk.fs.procinfo import pid_alive
from tests.support.procs import Procs

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
