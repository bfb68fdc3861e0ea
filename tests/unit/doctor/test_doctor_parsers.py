"""The parsers doctor relies on: the pin file (one source for the tested versions) and `--version` outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.doctor.gather.clis import parse_version
from crosstalk.doctor.gather.codex_env import is_codex
from crosstalk.doctor.pins import PIN_FILE, Pin, load_pins, parse_pins

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "install_harnesses.sh"


def test_the_shipped_pins_are_the_five_harnesses() -> None:
    assert [(p.command, p.version) for p in load_pins()] == [
        ("claude", "2.1.332"),
        ("codex", "0.171.0"),
        ("pi", "0.73.1"),
        ("qwen", "0.24.4"),
        ("gemini", "0.61.0"),
        ("opencode", "1.18.33"),
    ]
    assert load_pins()[1].install == "npm install -g @openai/codex@0.171.0"


def test_the_install_script_reads_the_same_pin_file_and_repeats_no_version() -> None:
    text = SCRIPT.read_text()
    assert f"PIN_FILE={PIN_FILE.relative_to(SCRIPT.parents[1])}" in text
    for pin in load_pins():
        assert pin.version not in text, f"{pin.command}'s version is written in {SCRIPT.name} as well"


def test_a_malformed_pin_line_names_its_line() -> None:
    with pytest.raises(ValueError, match="line 2: expected"):
        parse_pins("# c\nclaude 2.1.332\n")


_word = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20).filter(
    lambda w: not w.startswith("#")
)


@given(st.lists(st.tuples(_word, _word, _word), max_size=5))
def test_pins_round_trip(rows: list[tuple[str, str, str]]) -> None:
    text = "# pins\n\n" + "".join(f"{a} {b}   {c}\n" for a, b, c in rows)
    assert parse_pins(text) == tuple(Pin(*r) for r in rows)


@given(st.tuples(*[st.integers(0, 9999)] * 3), st.text(max_size=30), st.text(max_size=30))
def test_the_first_dotted_version_is_found(parts: tuple[int, int, int], before: str, after: str) -> None:
    version = ".".join(map(str, parts))
    before = re.sub(r"[\w.]", " ", before)
    after = re.sub(r"[\w.]", " ", after)
    assert parse_version(f"{before} {version} {after}") == version


def test_real_version_lines() -> None:
    assert parse_version("2.1.332 (Claude Code)") == "2.1.332"
    assert parse_version("codex-cli 0.171.0\n") == "0.171.0"
    assert parse_version("0.73.1") == "0.73.1"
    assert parse_version("command not found") is None


def test_codex_processes_are_told_from_others() -> None:
    assert is_codex(["/x/.bin/codex", "app-server"])
    assert is_codex(["/x/codex-x86_64-unknown-linux-musl", "app-server"])
    assert is_codex(["node", "/x/node_modules/.bin/codex"])
    assert not is_codex(["less", "docs/codex-adapter.md"])
    assert not is_codex(["node", "/x/server.js", "codex"])
