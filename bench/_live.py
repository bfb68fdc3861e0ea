"""Helpers for the benchmarks that drive live harness sessions (tests/support/live_claude.py, live_codex.py): waits
bounded by a timeout, and arrival times read off the mock model servers' clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from _common import emit_result, stats, verdict, versus

WAIT_S = 60.0


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.002)


def arrival(session: Any, token: str, after: int) -> float:
    """When the first model request (from index `after` on) carrying `token` reached the session's mock."""
    req = wait_for(lambda: next((r for r in session.requests()[after:] if token in r.raw), None), f"never saw {token}")
    return req.at


def call_sent(mock: Any, before: int) -> float:
    """When the first tool call after index `before` left the mock."""
    return wait_for(lambda: mock.tool_calls[before:] and mock.tool_calls[before]["at"], "the sender's tool call")


def settle(session: Any) -> None:
    """Let the session finish its turn: no new model request for a moment."""
    last = -1
    while len(session.requests()) != last:
        last = len(session.requests())
        time.sleep(0.25)


def against(name: str, ours: list[float], theirs: list[float], baseline: str, target: float) -> list[dict[str, Any]]:
    """p50 and p99 of `ours` beside the same percentiles of `theirs` (seconds), each with the ratio target."""
    x, b = stats(ours), stats(theirs)
    return [
        versus(f"{name}_{q}", x[q], b[q], "ms", f"{baseline} {q}", target=f"<= {target}x", passed=x[q] / b[q] <= target)
        for q in ("p50", "p99")
    ]


def report(bench: str, figures: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    """One line per figure beside its baseline, then the RESULT line run_all.py collects."""
    for f in figures:
        print(f"{f['name']}: {f['value']:.1f} {f['unit']} vs {f['baseline']:.1f} {f['unit']} ({f['baseline_name']}): "
              f"{f['ratio']:.2f}x {verdict(f.get('passed'))}", flush=True)  # fmt: skip
    emit_result(bench, figures, extra)
