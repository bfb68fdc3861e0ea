"""The policy layer's errors: a malformed policy input, a claim or release the policy refuses."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError


class PolicyError(CrosstalkError, ValueError):
    """A policy input is malformed (a bad role name, an inconsistent state). One line, naming the problem."""


class ClaimError(PolicyError):
    """A claim or release the policy refuses; .reason is the stable machine-readable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
