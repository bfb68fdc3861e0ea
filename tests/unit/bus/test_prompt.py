"""The dispatch prompt: PROTOCOL.md, persona, "--- Message K of N ---" blocks; persona loading."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.bus.errors import ModelError
from crosstalk.bus.runs.prompt import PromptItem, build_prompt, load_persona


def test_full_prompt_layout() -> None:
    items = [PromptItem("alice", "2026/06/11/1.md", "first\n"), PromptItem("bob@m", "2026/06/11/2.md", "second")]
    text = build_prompt("# Protocol\n\nRules.\n", "You are terse.\n", items)
    assert text == (
        "# Protocol\n\nRules.\n\n"
        "## Persona\n\nYou are terse.\n\n"
        "--- Message 1 of 2 (from: alice, ref: 2026/06/11/1.md) ---\nfirst\n\n"
        "--- Message 2 of 2 (from: bob@m, ref: 2026/06/11/2.md) ---\nsecond\n"
    )


def test_without_persona_and_items() -> None:
    assert build_prompt("P", None, []) == "P\n"
    text = build_prompt("P\n", None, [PromptItem("a", "r.md", "hi")])
    assert text == "P\n\n--- Message 1 of 1 (from: a, ref: r.md) ---\nhi\n"
    assert "## Persona" not in text


@given(st.lists(st.text(max_size=50), max_size=6), st.one_of(st.none(), st.text(max_size=30)))
def test_every_message_appears_once_in_order(bodies: list[str], persona: str | None) -> None:
    items = [PromptItem(f"s{i}", f"r{i}.md", body) for i, body in enumerate(bodies)]
    text = build_prompt("PROTOCOL", persona, items)
    assert text.startswith("PROTOCOL") and text.endswith("\n")
    pos = 0
    for i, body in enumerate(bodies):
        header = f"--- Message {i + 1} of {len(bodies)} (from: s{i}, ref: r{i}.md) ---\n"
        found = text.find(header, pos)
        assert found >= pos
        pos = found + len(header)
        assert text[pos:].startswith(body.strip("\n"))
    # Only the part before the first message block can hold the persona section (a body may quote one).
    head = text.split("\n\n--- Message 1 of ", 1)[0]
    assert head.startswith("PROTOCOL\n\n## Persona\n\n") == (persona is not None)


def test_load_persona(tmp: Path) -> None:
    (tmp / "local" / "actors").mkdir(parents=True)
    (tmp / "local" / "actors" / "junior-dev.md").write_text("Be careful.\n", encoding="utf-8")
    assert load_persona(tmp, "junior-dev") == "Be careful.\n"
    with pytest.raises(ModelError, match=r"^persona 'x' not found: local/actors/x.md$"):
        load_persona(tmp, "x")
    for bad in ("../etc/passwd", "a/b", "", ".hidden"):
        with pytest.raises(ModelError, match="not valid"):
            load_persona(tmp, bad)
