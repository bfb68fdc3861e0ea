"""`crosstalk demo [--harness-bin DIR]`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from crosstalk.cli.common import echo, fail
from crosstalk.core.errors import ErrorKind


def run(args: Any) -> int:
    """Real Claude Code, Codex and pi sessions against scripted model servers on 127.0.0.1 when the CLIs are found
    (in --harness-bin DIR, else on PATH), else fake-harness agents; messages through their real sockets, every
    delivery printed with its state, then everything cleaned up. Needs no outside service."""
    from crosstalk.core.errors import CrosstalkError
    from crosstalk.demo.run import run_demo

    harness_bin = Path(args.harness_bin).expanduser() if args.harness_bin else None
    if harness_bin is not None and not harness_bin.is_dir():
        fail(f"--harness-bin {args.harness_bin}: not a directory", ErrorKind.USAGE)
    try:
        return run_demo(_show, harness_bin)
    except KeyboardInterrupt:
        echo("crosstalk demo: interrupted; everything it started is stopped and removed")
        return 130
    except (CrosstalkError, RuntimeError, OSError) as exc:
        fail(f"demo failed: {exc}")


def _show(text: str) -> None:
    """One line of the demo, at once (a pipe would otherwise hold it until the end)."""
    echo(text)
    sys.stdout.flush()
