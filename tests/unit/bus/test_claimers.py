"""Who is known to claim an address: this machine's claimed models and the machines learned from replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crosstalk.bus.protocol.models import ModelSpec
from crosstalk.bus.runs.claimers import STATE_FILE, known_claimer, load_claimers, parse_claimers, placed

HERE = [ModelSpec("t", "echo", ("/bin/echo",)), ModelSpec("anthropic", "sonnet", ("claude",))]
LEARNED = {"openai/codex": ["gpu", "laptop"], "anthropic/sonnet": ["gpu"], "alice": ["laptop"]}


@pytest.mark.parametrize(
    ("address", "known"),
    [
        ("t/echo", True),
        ("echo", True),
        ("t/echo@m1", True),
        ("t/echo@gpu", False),  # m1 claims it; nobody has seen gpu answer as it
        ("sonnet@gpu", True),
        ("anthropic/sonnet@laptop", False),
        ("codex", True),
        ("openai/codex@laptop", True),
        ("other/codex", False),  # a provider prefix must match
        ("alice@laptop", True),  # a live agent that has replied from its machine
        ("nosuchmodel", False),
        ("anthropic/sonnet@nowhere", False),
    ],
)
def test_known_claimer(address: str, known: bool) -> None:
    assert known_claimer(address, HERE, LEARNED, "m1") is known


def test_placed_puts_this_machine_first_and_never_twice() -> None:
    assert placed("sonnet", HERE, {**LEARNED, "anthropic/sonnet": ["gpu", "m1"]}, "m1") == [
        "anthropic/sonnet@m1",
        "anthropic/sonnet@gpu",
    ]
    assert placed("codex", [], LEARNED, "m1") == ["openai/codex@gpu", "openai/codex@laptop"]


def test_claimers_state_file_is_read_leniently(tmp: Path) -> None:
    assert load_claimers(tmp) == {}  # no dispatcher has run here yet
    (tmp / STATE_FILE).write_text(json.dumps({"open": [], "claimers": {"t/echo": ["gpu", 3], "x": "gpu", "7": []}}))
    assert load_claimers(tmp) == {"t/echo": ["gpu"], "7": []}
    (tmp / STATE_FILE).write_text("not json")
    assert load_claimers(tmp) == {}
    assert parse_claimers([1, 2]) == {}
