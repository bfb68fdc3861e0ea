"""Where doctor is composed: gather every fact, run every check, in the order the report shows them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crosstalk.doctor.checks import (
    claude_messaging,
    codex_env,
    harness_cli,
    installed,
    permissions,
    relay,
    stale,
    transports,
)
from crosstalk.doctor.facts import Facts
from crosstalk.doctor.findings import Finding, Status
from crosstalk.doctor.pins import load_pins
from crosstalk.registry.paths import StatePaths


@dataclass(frozen=True, slots=True)
class Report:
    findings: tuple[Finding, ...]

    @property
    def healthy(self) -> bool:
        return all(f.status is not Status.PROBLEM for f in self.findings)

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status is Status.PROBLEM)


def gather(environ: Mapping[str, str], cwd: Path) -> Facts:
    from crosstalk.doctor.gather import claude, clis, codex_env, installs, state
    from crosstalk.doctor.gather import relay as relay_facts
    from crosstalk.doctor.gather import transports as bus

    paths = StatePaths.from_env(environ)
    found = clis.gather(load_pins(), environ)
    return Facts(
        clis=found,
        installs=installs.gather(environ, cwd),
        claude=claude.gather(environ, any(c.name == "claude" and c.path for c in found)),
        state=state.gather_state(paths),
        leftovers=state.gather_leftovers(paths, environ),
        codex=codex_env.gather(environ),
        transports=bus.gather(environ),
        relay=relay_facts.gather(paths),
    )


def check(facts: Facts) -> Report:
    """Every check over the facts: pure, so a test can hand it any machine it likes."""
    return Report(
        (
            *harness_cli.check(facts.clis),
            *installed.check(facts.installs, facts.clis),
            *claude_messaging.check(facts.claude),
            *permissions.check(facts.state),
            *stale.check(facts.leftovers),
            *codex_env.check(facts.codex),
            *transports.check(facts.transports),
            *relay.check(facts.relay),
        )
    )


def diagnose(environ: Mapping[str, str] = os.environ, cwd: Path | None = None) -> Report:
    return check(gather(environ, cwd or Path.cwd()))
