"""The models registry: parsing data/crosstalk.yaml, skip-bad-provider/model, claim, resolve, spawn_env."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.bus.errors import AmbiguousModel, ModelError, UnknownModel
from crosstalk.bus.protocol.models import (
    DEFAULT_TIMEOUT_S,
    ModelSpec,
    Registry,
    claim,
    is_env_reference,
    load_registry,
    parse_registry,
    resolve,
    spawn_env,
)


@pytest.fixture
def root(tmp: Path) -> Path:
    """The conftest's short temp dir with a data/ dir: a transport root for load_registry."""
    (tmp / "data").mkdir()
    return tmp


def write(root: Path, text: str) -> Registry:
    (root / "data" / "crosstalk.yaml").write_text(text, encoding="utf-8")
    return load_registry(root)


def reasons(reg: Registry) -> dict[str, str]:
    return {s.what: s.reason for s in reg.skipped}


def test_example_registry_loads(root: Path) -> None:
    (root / "auth").mkdir()
    (root / "auth" / "a.env").write_text("K=v\n")
    reg = write(
        root,
        """
providers:
  anthropic-personal:
    env_file: auth/a.env
    timeout: 30
    models:
      sonnet: claude --print   --model sonnet
      haiku: claude --print --model haiku
  google-personal:
    env:
      GEMINI_API_KEY: ${GOOGLE_PERSONAL_KEY}
    models:
      gemini-pro: gemini --skip-trust -p
""",
    )
    assert reg.skipped == [] and reg.warnings == []
    assert [m.key for m in reg.models] == [
        "anthropic-personal/sonnet",
        "anthropic-personal/haiku",
        "google-personal/gemini-pro",
    ]
    sonnet = reg.models[0]
    assert sonnet.argv == ("claude", "--print", "--model", "sonnet")
    assert sonnet.env_file == Path("auth/a.env") and sonnet.timeout == 30.0
    gem = reg.models[2]
    assert gem.env == {"GEMINI_API_KEY": "${GOOGLE_PERSONAL_KEY}"} and gem.timeout == DEFAULT_TIMEOUT_S


def test_quotes_stay_literal_no_shlex() -> None:
    reg = parse_registry("providers:\n  p:\n    models:\n      m: bash -c 'echo X' | cat\n")
    assert reg.models[0].argv == ("bash", "-c", "'echo", "X'", "|", "cat")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("    models: {m: x}\n    extra: 1\n", "unknown key 'extra'"),
        ("    env: {TOKEN: sk-secret}\n    models: {m: x}\n", "env TOKEN: raw values are refused; use ${VAR}"),
        ("    env: {TOKEN: 'pre${VAR}'}\n    models: {m: x}\n", "env TOKEN: raw values are refused"),
        ("    env: {TOKEN: '${A}${B}'}\n    models: {m: x}\n", "env TOKEN: raw values are refused"),
        ("    env: {TOKEN: 12345}\n    models: {m: x}\n", "env TOKEN: raw values are refused"),
        ("    env: [a]\n    models: {m: x}\n", "env must be a mapping"),
        ("    env_file: ../secrets.env\n    models: {m: x}\n", "no '..'"),
        ("    env_file: /etc/secrets.env\n    models: {m: x}\n", "relative to the transport root"),
        ("    timeout: 0\n    models: {m: x}\n", "timeout must be"),
        ("    timeout: 86401\n    models: {m: x}\n", "timeout must be"),
        ("    timeout: true\n    models: {m: x}\n", "timeout must be"),
        ("    timeout: soon\n    models: {m: x}\n", "timeout must be"),
        ("    models: {}\n", "declares no models"),
        ("    env_file: auth/x.env\n", "declares no models"),
    ],
)
def test_bad_provider_is_skipped_and_the_rest_loads(body: str, fragment: str) -> None:
    reg = parse_registry(f"providers:\n  bad:\n{body}  good:\n    models: {{ok: echo hi}}\n")
    assert [m.key for m in reg.models] == ["good/ok"]
    reason = reasons(reg)["bad"]
    assert fragment in reason and "'bad'" in reason
    assert "sk-secret" not in reason and "12345" not in reason  # a refused value is never echoed


def test_provider_shapes_and_names() -> None:
    reg = parse_registry(
        "providers:\n  1234: {models: {m: x}}\n  -bad: {models: {m: x}}\n  notmap: 3\n  ok: {models: {m: echo}}\n"
    )
    assert [m.key for m in reg.models] == ["ok/m"]
    r = reasons(reg)
    assert "must be a string" in r["1234"]
    assert "the name must be" in r["-bad"]
    assert "must be a mapping" in r["notmap"]


def test_bad_models_skipped_individually() -> None:
    reg = parse_registry(
        "providers:\n  p:\n    models:\n      good: echo\n      empty: ''\n      blank: '   '\n"
        "      nul: ~\n      num: 5\n      rel: bin/tool --x\n      'bad name': echo\n"
    )
    assert [m.key for m in reg.models] == ["p/good"]
    r = reasons(reg)
    assert set(r) == {"p/empty", "p/blank", "p/nul", "p/num", "p/rel", "p/bad name"}
    assert "non-empty string" in r["p/empty"] and "model p/empty" in r["p/empty"]
    assert "relative path" in r["p/rel"]


def test_duplicate_model_names_across_providers_allowed() -> None:
    reg = parse_registry("providers:\n  a: {models: {sonnet: echo}}\n  b: {models: {sonnet: echo}}\n")
    assert [m.key for m in reg.models] == ["a/sonnet", "b/sonnet"]


def test_missing_env_file_is_a_warning_not_a_skip(root: Path) -> None:
    reg = write(root, "providers:\n  p:\n    env_file: auth/x.env\n    models: {m: echo}\n")
    assert [m.key for m in reg.models] == ["p/m"] and reg.skipped == []
    assert any("auth/x.env" in w.reason and w.what == "p" for w in reg.warnings)
    with pytest.raises(ModelError, match=r"^env_file auth/x.env of provider p is missing$"):
        spawn_env(reg.models[0], {}, root)


def test_whole_file_errors(root: Path) -> None:
    with pytest.raises(ModelError, match=r"data/crosstalk\.yaml is missing"):
        load_registry(root)
    with pytest.raises(ModelError, match=r"^data/crosstalk.yaml: YAML syntax error at line 3: mapping values"):
        write(root, "providers:\n  p:\n    models: a: b\n")
    with pytest.raises(ModelError, match="top level must be a mapping"):
        write(root, "- a\n- b\n")
    with pytest.raises(ModelError, match="'providers' must be a mapping"):
        write(root, "providers: [a]\n")
    assert write(root, "").models == []
    assert write(root, "# only comments\n").warnings


def test_claim_path_selection_and_absolute_paths(root: Path) -> None:
    bindir = root / "bin"
    bindir.mkdir()
    tool = bindir / "mytool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    noexec = bindir / "noexec"
    noexec.write_text("#!/bin/sh\n")
    noexec.chmod(0o644)
    reg = parse_registry(
        "providers:\n  p:\n    models:\n"
        f"      onpath: mytool --x\n      notonpath: nosuchtool-xt\n      abs: {tool}\n"
        f"      absmissing: {bindir}/gone\n      absnoexec: {noexec}\n      absdir: {bindir}\n"
        "  bad: {models: {}}\n"
    )
    claimed, skipped = claim(reg, str(bindir))
    assert [m.key for m in claimed] == ["p/onpath", "p/abs"]
    r = {s.what: s.reason for s in skipped}
    assert "bad" in r  # load-time skips come along
    assert "'nosuchtool-xt' is not on PATH" in r["p/notonpath"]
    assert "does not exist" in r["p/absmissing"]
    assert "is not executable" in r["p/absnoexec"]
    assert "is not a regular file" in r["p/absdir"]
    assert all(s.reason.startswith(("not claimed: ", "provider 'bad'")) for s in skipped)
    claimed_empty_path, _ = claim(reg, "")
    assert [m.key for m in claimed_empty_path] == ["p/abs"]


def spec(provider: str, name: str, **kw: object) -> ModelSpec:
    return ModelSpec(provider, name, ("echo",), **kw)  # type: ignore[arg-type]


def test_resolve() -> None:
    models = [spec("a", "sonnet"), spec("b", "sonnet"), spec("a", "haiku")]
    assert resolve(models, "haiku").key == "a/haiku"
    assert resolve(models, "b/sonnet").key == "b/sonnet"
    with pytest.raises(AmbiguousModel) as info:
        resolve(models, "sonnet")
    assert info.value.message == "model 'sonnet' is ambiguous: a/sonnet, b/sonnet"
    assert info.value.choices == ("a/sonnet", "b/sonnet")
    with pytest.raises(UnknownModel):
        resolve(models, "opus")
    with pytest.raises(UnknownModel):
        resolve(models, "c/sonnet")


def test_spawn_env_precedence(root: Path) -> None:
    (root / "auth").mkdir()
    (root / "auth" / "p.env").write_text("A=file\nB=file\nC=file\n")
    s = spec("p", "m", env_file=Path("auth/p.env"), env={"B": "${HOST_B}", "C": "${HOST_C}"})
    base = {"A": "base", "B": "base", "C": "base", "D": "base", "HOST_B": "inline", "HOST_C": "inline"}
    env = spawn_env(s, base, root, {"C": "dispatch", "CROSSTALK_ALIAS": "x"})
    assert (env["A"], env["B"], env["C"], env["D"], env["CROSSTALK_ALIAS"]) == (
        "file",
        "inline",
        "dispatch",
        "base",
        "x",
    )
    assert base["A"] == "base"  # the caller's mapping is not modified


def test_spawn_env_missing_var_and_bad_dotenv(root: Path) -> None:
    s = spec("p", "m", env={"KEY": "${NOT_SET_XT}"})
    with pytest.raises(ModelError, match=r"env KEY of provider p: \$\{NOT_SET_XT\} is not set"):
        spawn_env(s, {}, root)
    (root / "auth").mkdir()
    (root / "auth" / "bad.env").write_text("A=1\noops\n")
    with pytest.raises(ModelError, match=r"auth/bad.env line 2"):
        spawn_env(spec("p", "m", env_file=Path("auth/bad.env")), {}, root)


VAR = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)


@given(VAR)
def test_env_reference_accepts_exactly_one_reference(var: str) -> None:
    assert is_env_reference("${" + var + "}")
    reg = parse_registry(f"providers:\n  p:\n    env: {{K: '${{{var}}}'}}\n    models: {{m: echo}}\n")
    assert reg.models[0].env == {"K": "${" + var + "}"}
    assert spawn_env(reg.models[0], {var: "v"}, Path("/nonexistent"))["K"] == "v"


@given(st.text(max_size=30))
def test_env_reference_rejects_everything_else(value: str) -> None:
    accepted = is_env_reference(value)
    core = value[2:-1]
    exact = value.startswith("${") and value.endswith("}") and core != "" and (core[0].isascii())
    exact = exact and all(c.isascii() and (c.isalnum() or c == "_") for c in core) and not core[0].isdigit()
    assert accepted == exact


@given(VAR, st.text(min_size=1, max_size=10))
def test_env_reference_with_extra_text_is_refused(var: str, extra: str) -> None:
    for value in ("${" + var + "}" + extra, extra + "${" + var + "}", "$" + var, "{" + var + "}"):
        assert not is_env_reference(value)


def test_env_is_never_leaked_from_os_environ_by_default(root: Path) -> None:
    env = spawn_env(spec("p", "m"), {"ONLY": "1"}, root)
    assert env == {"ONLY": "1"}
    assert "PATH" in os.environ  # sanity: the base is what the caller passes, not os.environ
