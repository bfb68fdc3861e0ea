"""The harness CLIs on PATH, and their versions beside the ones crosstalk is tested with."""

from __future__ import annotations

from crosstalk.doctor.facts import HarnessCli
from crosstalk.doctor.findings import Finding, note, ok

CHECK = "harness-cli"


def check(clis: tuple[HarnessCli, ...]) -> list[Finding]:
    out = []
    for cli in clis:
        if cli.path is None:
            out.append(note(CHECK, f"{cli.name}: not found on PATH (tested with {cli.tested})", cli.install))
        elif cli.version is None:
            why = f": {cli.error}" if cli.error else ""
            out.append(note(CHECK, f"{cli.name}: {cli.path} did not report a version{why}", f"{cli.path} --version"))
        elif cli.version != cli.tested:
            out.append(
                note(
                    CHECK,
                    f"{cli.name} {cli.version} at {cli.path}: crosstalk is tested with {cli.tested}",
                    cli.install,
                )
            )
        else:
            out.append(ok(CHECK, f"{cli.name} {cli.version} (tested version) at {cli.path}"))
    return out
