"""What a check reports: one finding per line of `crosstalk doctor`'s output."""

from __future__ import annotations

from dataclasses import dataclass

from crosstalk.core.strenum import StrEnum


class Status(StrEnum):
    OK = "ok"
    NOTE = "note"  # worth knowing, not a problem (a harness you may not use is not installed)
    PROBLEM = "problem"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str  # which check said it: "harness-cli", "stale", ...
    status: Status
    text: str  # one short line: what was found
    fix: str | None = None  # what to run, for a note or a problem
    prunable: tuple[str, ...] = ()  # files `--fix` may remove (each re-proven dead at removal)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"check": self.check, "status": self.status.value, "text": self.text}
        if self.fix:
            out["fix"] = self.fix
        if self.prunable:
            out["prunable"] = list(self.prunable)
        return out


def ok(check: str, text: str) -> Finding:
    return Finding(check, Status.OK, text)


def note(check: str, text: str, fix: str | None = None) -> Finding:
    return Finding(check, Status.NOTE, text, fix)


def problem(check: str, text: str, fix: str, prunable: tuple[str, ...] = ()) -> Finding:
    return Finding(check, Status.PROBLEM, text, fix, prunable)
