"""The registry of harness kinds: every entry is a package whose KIND implements the seam, under its own name;
the CLI's choices and `auto` come from the table, in its order."""

from __future__ import annotations

import importlib

import pytest

from crosstalk import harness as kinds
from crosstalk.harness.base import HarnessAdapter, HarnessKind, SessionIdentity


@pytest.mark.parametrize("name", list(kinds.KINDS))
def test_each_entry_is_a_package_whose_kind_implements_the_seam(name: str):
    entry = kinds.KINDS[name]
    assert entry.module == f"crosstalk.harness.{name}"
    kind = importlib.import_module(entry.module).KIND
    assert kind is kinds.kind(name) and kind.name == name
    assert isinstance(kind, HarnessKind)
    adapter = kind.adapter(SessionIdentity(name, "s"), {})
    assert isinstance(adapter, HarnessAdapter) and adapter.name == name
    assert kind.discover({"HOME": "/nonexistent", "CLAUDE_CONFIG_DIR": "/nonexistent"}) == []


def test_choices_standalone_and_auto_follow_the_table():
    assert kinds.choices() == ("auto", "codex", "claude", "fake", "pi", "qwen", "gemini", "opencode")
    assert kinds.standalone() == ("fake",)
    # a Codex call carries its thread id; a Qwen shim carries QWEN_CODE_SESSION_ID and has a Qwen parent
    assert [k.name for k in kinds.candidates("auto")] == ["codex", "claude", "qwen", "gemini"]
    assert [k.name for k in kinds.candidates("fake")] == ["fake"]
    expected = r"unknown harness 'nope' \(expected one of: auto, codex, claude, fake, pi, qwen, gemini, opencode\)"
    with pytest.raises(ValueError, match=expected):
        kinds.kind("nope")


def test_the_cli_offers_what_the_table_holds(monkeypatch: pytest.MonkeyPatch):
    from crosstalk.cli.parser import build_parser

    monkeypatch.setitem(kinds.KINDS, "echo", kinds.Entry("crosstalk_echo", auto=True, standalone=True))
    parser = build_parser()
    assert parser.parse_args(["mcp", "--harness", "echo"]).harness == "echo"
    assert parser.parse_args(["agent", "run", "--harness", "echo", "--name", "e"]).harness == "echo"


def test_a_kind_that_fails_to_discover_never_breaks_the_listing(monkeypatch: pytest.MonkeyPatch):
    class Broken:
        def discover(self, environ: object) -> list[object]:
            raise OSError("boom")

    real = kinds.kind
    monkeypatch.setattr(kinds, "kind", lambda n: Broken() if n == "codex" else real(n))
    assert kinds.discover({"CLAUDE_CONFIG_DIR": "/nonexistent"}) == []


def test_native_flag_names_exactly_the_kinds_that_write_natively() -> None:
    # harness.native_sessions asks only the kinds marked native (so `crosstalk send` to a name no crosstalk agent
    # holds imports no other kind): the mark must agree with what each kind implements.
    from crosstalk.harness.base import NativeDelivery

    for name, entry in kinds.KINDS.items():
        assert entry.native == isinstance(kinds.kind(name), NativeDelivery), name
