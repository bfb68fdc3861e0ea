"""`crosstalk demo`: real Claude Code, Codex and pi sessions when their CLIs are found (crosstalk.demo.real), else
fake-harness agents (crosstalk.demo.live), said in one line (real sessions that fail fall back to them too, with the
reason); then the git bus between two machines (crosstalk.demo.bus). Ctrl-C, SIGTERM and SIGHUP stop it with
everything it started cleaned up."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from crosstalk.demo.harnesses import HOW_TO_GET, find_harnesses
from crosstalk.demo.procs import interrupts_raise


def run_demo(out: Callable[[str], None] = print, harness_bin: Path | None = None) -> int:
    """`harness_bin`: the directory holding claude, codex and pi (default: PATH)."""
    harnesses = find_harnesses(harness_bin, os.environ)
    with interrupts_raise():
        code = None
        if harnesses.complete:
            from crosstalk.demo.real import run_real

            try:
                code = run_real(harnesses, out)
            except (RuntimeError, TimeoutError, OSError) as exc:  # everything it started is stopped by now
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                out(f"crosstalk demo: the real sessions failed ({first}): fake agents instead")
        else:
            out(
                f"crosstalk demo: no {', '.join(harnesses.missing)} {harnesses.where}: fake agents instead of real "
                f"sessions (for those: {HOW_TO_GET}, or --harness-bin DIR)"
            )
        if code is None:
            from crosstalk.demo.live import run_fake_demo

            code = run_fake_demo(out)
        from crosstalk.demo.bus import run_bus_demo

        return max(code, run_bus_demo(out))
