"""`crosstalk model add|remove`'s edits of data/crosstalk.yaml: comments stay, the registry's own parser reads back
exactly the command given, and removing what was added gives back the file byte for byte."""

from __future__ import annotations

from importlib.resources import files

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.bus.errors import ModelError
from crosstalk.bus.protocol.models import parse_registry
from crosstalk.bus.transport.registry_edit import EMPTY_REGISTRY, add_model, remove_model

TEMPLATE = files("crosstalk.bus.protocol").joinpath("template/data/crosstalk.yaml").read_text(encoding="utf-8")
# Names YAML 1.1 reads as something else unless quoted (booleans, dates, numbers) are names too.
NAMES = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,20}\Z") | st.sampled_from(
    ["yes", "on", "no", "2026-01-01", "1_0", "0777", "1.5"]
)
# Any argument the registry can hold: no whitespace, no NUL; the program a bare name or an absolute path.
ARGS = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=12).filter(
    lambda a: not any(ch.isspace() for ch in a)
)
PROGRAMS = NAMES | NAMES.map(lambda n: f"/usr/bin/{n}")


@settings(max_examples=40, deadline=None)
@given(NAMES, NAMES, PROGRAMS, st.lists(ARGS, max_size=5))
def test_add_reads_back_exactly_and_remove_restores_the_file(provider: str, name: str, program: str, args: list[str]):
    if provider in ("anthropic", "openai", "pi"):
        provider = f"x{provider}"  # a new provider: removing its only model removes it again
    argv = [program, *args]
    change = add_model(TEMPLATE, f"{provider}/{name}", argv)
    registry = parse_registry(change.text)
    spec = next(s for s in registry.models if s.key == f"{provider}/{name}")
    assert spec.argv == tuple(argv)
    assert {s.key for s in registry.models} == {s.key for s in parse_registry(TEMPLATE).models} | {spec.key}
    assert change.text.startswith(TEMPLATE)  # every comment and line as it was; the new provider comes last
    assert remove_model(change.text, spec.key).text == TEMPLATE


def test_add_to_an_existing_provider_keeps_its_settings_and_comments() -> None:
    change = add_model(TEMPLATE, "anthropic/opus", ["claude", "--print", "--model", "opus", "--"])
    registry = parse_registry(change.text)
    opus = next(s for s in registry.models if s.key == "anthropic/opus")
    assert str(opus.env_file) == "auth/anthropic.env"  # the provider's env_file applies to the new model
    assert "# e.g. CLAUDE_CODE_OAUTH_TOKEN=... or ANTHROPIC_API_KEY=..." in change.text
    removed = remove_model(change.text, "anthropic/opus")
    assert removed.text == TEMPLATE and removed.note is None


@pytest.mark.parametrize("start", [EMPTY_REGISTRY, "", "# only a comment\n", "providers: {}\n"])
def test_add_to_a_registry_without_providers(start: str) -> None:
    change = add_model(start, "t/echo", ["/bin/echo"])
    assert [s.key for s in parse_registry(change.text).models] == ["t/echo"]
    if start.startswith("#"):
        assert change.text.startswith("# only a comment\n")


@pytest.mark.parametrize(
    ("text", "key", "argv", "why"),
    [
        (TEMPLATE, "sonnet", ["claude"], "needs a provider"),
        (TEMPLATE, "a b/c", ["claude"], "provider name 'a b' is not valid"),
        (TEMPLATE, "anthropic/sonnet", ["claude"], "already in data/crosstalk.yaml"),
        (TEMPLATE, "t/x", [], "no command given"),
        (TEMPLATE, "t/x", ["echo", "two words"], "holds whitespace"),
        (TEMPLATE, "t/x", ["./run"], "relative path"),
        ("a: &x [1]\nb: *x\n", "t/x", ["echo"], "alias"),
        ("providers: [1, 2]\n", "t/x", ["echo"], "'providers' must be a mapping"),
        ("providers:\n  t: 3\n", "t/x", ["echo"], "provider 't' is not a mapping"),
    ],
)
def test_add_refusals_name_the_problem(text: str, key: str, argv: list[str], why: str) -> None:
    with pytest.raises(ModelError, match=why):
        add_model(text, key, argv)


def test_replace_and_remove_refusals() -> None:
    change = add_model(TEMPLATE, "anthropic/sonnet", ["claude", "--model", "sonnet"], replace=True)
    spec = next(s for s in parse_registry(change.text).models if s.key == "anthropic/sonnet")
    assert spec.argv == ("claude", "--model", "sonnet")
    with pytest.raises(ModelError, match="no model t/nope"):
        remove_model(TEMPLATE, "t/nope")
    with pytest.raises(ModelError, match="no model anthropic/nope"):
        remove_model(TEMPLATE, "anthropic/nope")
