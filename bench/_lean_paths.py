"""The lean-path figures (`crosstalk send`'s start, shell -> model, the shim's memory, Claude -> Codex, crosstalk's own
part of a delivery, model -> model), each beside its same-run baseline and its target: the table bench/run_all.py
prints after its summary. Every row reads a figure another benchmark already reports in its RESULT line (value,
baseline, ratio); the target is checked here, so a benchmark's own looser target does not decide the verdict.

A row whose benchmark was not run (`run_all.py --only ...`) or could not run (a harness CLI missing) says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Rows = list[tuple[str, dict[str, Any]]]  # (bench, figure) as run_all.py collects them


@dataclass(frozen=True)
class Target:
    """`ratio` <= limit (against the figure's baseline), `value` <= limit (in the figure's unit), or None: info."""

    on: str | None
    limit: float = 0.0
    unit: str = ""

    def check(self, fig: dict[str, Any]) -> bool | None:
        if self.on is None:
            return None
        got = fig.get("ratio") if self.on == "ratio" else fig.get("value")
        return None if got is None else got <= self.limit

    def text(self) -> str:
        if self.on is None:
            return ""
        return f"<= {self.limit:g}x" if self.on == "ratio" else f"<= {self.limit:g} {self.unit}"


@dataclass(frozen=True)
class Row:
    label: str
    sources: tuple[tuple[str, str], ...]  # (bench, figure name) in order of preference; a trailing * is a prefix
    target: Target


INFO = Target(None)
RSS_35 = Target("value", 35.0, "MB")
SHIM = "shim_memory"
ROWS = (
    Row("crosstalk send (wheel) vs python -c pass", (("send_cli", "crosstalk send median [wheel]"),),
        Target("ratio", 2.0)),
    Row("shell -> Claude model vs raw socket line", (("claude_delivery", "crosstalk_send_to_claude_p50"),),
        Target("ratio", 1.5)),
    Row("shim RSS idle", ((SHIM, "shim RSS idle"),), INFO),
    Row("shim RSS, one bound agent", ((SHIM, "shim RSS, one bound agent"),), INFO),
    Row("shim RSS after 1,000 messages", ((SHIM, "shim RSS after 1000 sent + 1000 received"),), RSS_35),
    Row("shim RSS, largest step of the run", ((SHIM, "shim RSS after * sent + * received"),), RSS_35),
    Row("shim RSS growth per 1,000 (warm)", ((SHIM, "shim RSS growth per 1000 messages, warm"),),
        Target("value", 1.0, "MB")),
    Row("Claude -> idle Codex vs bare client (same tool call)",
        (("codex_delivery", "claude_to_codex_idle_p50"), ("own_part", "claude_to_codex_idle_p50")),
        Target("ratio", 1.2)),
    Row("Claude -> idle Codex vs bare turn/start",
        (("codex_delivery", "claude_to_codex_idle_vs_process_p50"),
         ("own_part", "claude_to_codex_vs_bare_turn_start_p50")),
        INFO),
    Row("own part, Claude", (("own_part", "own_part_claude_p50"),), Target("value", 3.0, "ms")),
    Row("own part, Codex", (("own_part", "own_part_codex_p50"),), Target("value", 3.0, "ms")),
    Row("own part, pi", (("own_part", "own_part_pi_p50"),), Target("value", 3.0, "ms")),
    Row("model -> model vs native SendMessage",
        (("claude_delivery", "claude_to_claude_idle_p50"), ("own_part", "claude_to_claude_vs_native_p50")),
        Target("ratio", 1.05)),
)  # fmt: skip


def _matches(pattern: str, name: str) -> bool:
    if "*" not in pattern:
        return pattern == name
    parts = pattern.split("*")
    if not (name.startswith(parts[0]) and name.endswith(parts[-1])):
        return False
    at = len(parts[0])
    for part in parts[1:-1]:
        found = name.find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return at <= len(name) - len(parts[-1])


def find(row: Row, rows: Rows) -> dict[str, Any] | None:
    """The figure a row reads: the first source that has one; of several a prefix matches, the largest value."""
    for bench, pattern in row.sources:
        hits = [f for b, f in rows if b == bench and _matches(pattern, f["name"])]
        if hits:
            return max(hits, key=lambda f: f["value"])
    return None


def table(rows: Rows, fmt: Any) -> tuple[list[str], int, int]:
    """The lines of the lean-paths table, how many targets it checked and how many were met."""
    lines = [
        "\nLEAN PATHS (each figure beside its same-run baseline, with its target)",
        f"{'figure':<52} {'value':>10} {'baseline':>10} {'ratio':>7}  {'target':<10} verdict  (baseline)",
    ]
    checked = met = 0
    for row in ROWS:
        fig = find(row, rows)
        if fig is None:
            benches = ", ".join(sorted({b for b, _ in row.sources}))
            dash = "-"
            lines.append(
                f"{row.label:<52} {dash:>10} {dash:>10} {dash:>7}  {row.target.text():<10} NOT RUN  ({benches})"
            )
            continue
        passed = row.target.check(fig)
        ratio = f"{fig['ratio']:.2f}x" if fig.get("ratio") is not None else "-"
        verdict = "INFO" if passed is None else ("PASS" if passed else "MISS")
        checked += passed is not None
        met += passed is True
        lines.append(
            f"{row.label:<52} {fmt(fig['value'], fig['unit']):>10} {fmt(fig.get('baseline'), fig['unit']):>10} "
            f"{ratio:>7}  {row.target.text():<10} {verdict:<7}  ({fig.get('baseline_name') or fig['name']})"
        )
    lines.append(f"lean paths: {met}/{checked} targets met")
    return lines, checked, met
