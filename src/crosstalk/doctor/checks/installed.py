"""Which harnesses have crosstalk installed (`crosstalk install claude|codex|pi|qwen|opencode`), and whether what
the install wrote still points at a crosstalk that runs."""

from __future__ import annotations

from crosstalk.doctor.facts import HarnessCli, Install
from crosstalk.doctor.findings import Finding, note, ok, problem

CHECK = "installed"


def check(installs: tuple[Install, ...], clis: tuple[HarnessCli, ...] = ()) -> list[Finding]:
    found = {c.name for c in clis if c.path is not None}
    out = []
    for inst in installs:
        fix = f"crosstalk install {inst.harness}"
        if inst.error is not None:
            out.append(problem(CHECK, f"{inst.harness}: {inst.error}", f"fix that file, then {fix}"))
        elif not inst.installed:
            if inst.harness in found:
                out.append(note(CHECK, f"{inst.harness}: crosstalk is not installed", fix))
            else:
                out.append(ok(CHECK, f"{inst.harness}: not installed (and {inst.harness} is not on PATH)"))
        elif not inst.command_ok:
            program = inst.command[0] if inst.command else "(none)"
            out.append(
                problem(CHECK, f"{inst.harness}: the installed command {program} is missing or not executable", fix)
            )
        elif inst.missing:
            out.append(problem(CHECK, f"{inst.harness}: installed but {', '.join(inst.missing)} is missing", fix))
        else:
            out.append(ok(CHECK, f"{inst.harness}: crosstalk installed ({', '.join(inst.where)})"))
    return out
