"""What one dispatcher tick did: the counts its `tick` log line carries (crosstalk.bus.dispatch.dispatcher)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class TickReport:
    """What one tick did (the counts the `tick` log line carries)."""

    head: str | None = None
    idle: bool = True
    added: int = 0
    parse_errors: int = 0
    batches: int = 0
    dispatched: int = 0  # messages handed to models
    replies: int = 0
    silent: int = 0
    failed: int = 0
    rejected: int = 0  # messages answered with a failure without a model run (ambiguous model, broken file)
    skipped_answered: int = 0
    skipped_taken: int = 0  # bare-name messages another dispatcher answered first
    bridged: int = 0  # messages delivered into live agents' sessions (to: NAME@ALIAS)
    incomplete: int = 0  # batches not finished (stop requested or run interrupted, commit failed): the cursor stays put
    halted: str | None = None
    duration_s: float = 0.0
    reply_paths: list[str] = field(default_factory=list)

    @property
    def eventful(self) -> bool:
        """Whether the tick did something worth a log line."""
        return bool(
            self.batches or self.rejected or self.parse_errors or self.incomplete or self.skipped_taken or self.bridged
        )

    def log_fields(self) -> dict[str, object]:
        return {
            "head": (self.head or "")[:12],
            "added": self.added,
            "batches": self.batches,
            "dispatched": self.dispatched,
            "replies": self.replies,
            "silent": self.silent,
            "failed": self.failed,
            "rejected": self.rejected,
            "parse_errors": self.parse_errors,
            "skipped_answered": self.skipped_answered,
            "skipped_taken": self.skipped_taken,
            "bridged": self.bridged,
            "incomplete": self.incomplete,
            "duration": f"{self.duration_s:.3f}",
        }
