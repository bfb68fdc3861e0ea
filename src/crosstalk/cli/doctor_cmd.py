"""`crosstalk doctor [--fix] [--json]`: check this machine's crosstalk and say what to run for each problem.

Exit 0 when healthy (notes are not problems), 1 when any check found a problem."""

from __future__ import annotations

import os
from typing import Any

from crosstalk.cli.common import echo, fail, print_json

_MARK = {"ok": "ok     ", "note": "note   ", "problem": "PROBLEM"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="Check harnesses, installs, the state root and transports; say what to run to fix each problem.",
        description="Check the harness CLIs and their versions, which harnesses have crosstalk installed, Claude's "
        "native messaging, the state root's permissions, stale descriptors, sockets and keys, Codex's state root, "
        "and each bus transport. Each problem is one line ending in what to run. Exit 0 when healthy, 1 otherwise.",
    )
    p.add_argument(
        "--fix",
        action="store_true",
        help="First remove stale descriptors, sockets, keys and temp files whose process is provably dead "
        "(pid + start time, and the agent's lock free); nothing that may be alive is touched.",
    )
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the findings as JSON.")
    p.set_defaults(run="crosstalk.cli.doctor_cmd:run")


def line(finding: Any) -> str:
    """One finding as one line: its mark, what was found, and (for a note or a problem) what to run."""
    text = f"{_MARK[finding.status.value]} {finding.text}"
    return f"{text} -> run: {finding.fix}" if finding.fix else text


def run(args: Any) -> int:
    from crosstalk.core.errors import CrosstalkError
    from crosstalk.doctor.diagnose import diagnose
    from crosstalk.registry.paths import StatePaths

    environ = dict(os.environ)
    fixed = None
    try:
        if args.fix:
            from crosstalk.doctor.prune import prune

            fixed = prune(StatePaths.from_env(environ), environ)
        report = diagnose(environ)
    except (OSError, CrosstalkError) as exc:  # a check that cannot read what it must: one line, not a traceback
        fail(f"doctor could not finish: {exc}")
    if args.as_json:
        data: dict[str, Any] = {"healthy": report.healthy, "findings": [f.to_json() for f in report.findings]}
        if fixed is not None:
            data["fixed"] = {"removed": list(fixed.removed), "kept": list(fixed.kept)}
        print_json(data)
        return 0 if report.healthy else 1
    if fixed is not None:
        for path in fixed.removed:
            echo(f"removed {path}")
        for what in fixed.kept:
            echo(f"kept    {what} (its process may be alive)")
    for finding in report.findings:
        echo(line(finding))
    problems = len(report.problems)
    notes = sum(f.status.value == "note" for f in report.findings)
    tail = f" ({notes} note{'s' if notes != 1 else ''})" if notes else ""
    echo(f"healthy{tail}" if not problems else f"{problems} problem{'s' if problems != 1 else ''}{tail}")
    return 0 if report.healthy else 1
