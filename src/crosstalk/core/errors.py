"""Errors raised by the pure core. Each names the field and the problem in one line."""

from __future__ import annotations


class CrosstalkError(Exception):
    """Base of every error crosstalk raises on purpose."""


class MessageError(CrosstalkError, ValueError):
    """A message record failed validation."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class EnvelopeError(CrosstalkError, ValueError):
    """Text is not a well-formed <cross-session-message> envelope."""
