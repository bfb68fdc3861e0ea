"""install/uninstall never lose a user's byte: a SKILL.md the user changed is kept, Codex's config.toml comes back
byte for byte after install + uninstall, an edited file is reported `updated` (only a deleted one `removed`), and a
refused config names the exact reason."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tomlkit
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from crosstalk.harness.claude import KIND as CLAUDE
from crosstalk.harness.claude.install import SKILL
from crosstalk.harness.codex import KIND as CODEX
from crosstalk.harness.errors import InstallError
from crosstalk.harness.pi import install as pi_setup

CMD = ["/opt/xt/bin/crosstalk", "mcp"]


def claude_env(tmp_path: Path) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "HOME": str(tmp_path / "home")}


def actions(changes) -> list[str]:
    return [c.action for c in changes]


# ------------------------------------------------------------------ finding 1: the skill folder is partly the user's
def test_uninstall_claude_keeps_the_users_own_files_in_the_skill_folder(tmp_path: Path):
    CLAUDE.install("user", CMD, claude_env(tmp_path), str(tmp_path))
    folder = tmp_path / "cfg" / "skills" / "crosstalk"
    (folder / "notes.md").write_text("mine\n")
    # .claude.json did not exist before install: removed; the skill folder keeps the user's file
    assert actions(CLAUDE.uninstall("user", claude_env(tmp_path), str(tmp_path))) == ["removed", "removed"]
    assert not (folder / "SKILL.md").exists()
    assert (folder / "notes.md").read_text() == "mine\n"
    (folder / "notes.md").unlink()
    CLAUDE.install("user", CMD, claude_env(tmp_path), str(tmp_path))
    CLAUDE.uninstall("user", claude_env(tmp_path), str(tmp_path))
    assert not folder.exists()  # nothing of the user's in it: the folder goes too


def test_a_skill_the_user_changed_is_kept_by_install_and_by_uninstall(tmp_path: Path):
    skill = tmp_path / "cfg" / "skills" / "crosstalk" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("my own crosstalk notes\n")
    assert actions(CLAUDE.install("user", CMD, claude_env(tmp_path), str(tmp_path))) == ["created", "kept"]
    assert skill.read_text() == "my own crosstalk notes\n"
    assert actions(CLAUDE.uninstall("user", claude_env(tmp_path), str(tmp_path)))[1] == "kept"
    assert skill.read_text() == "my own crosstalk notes\n"
    # crosstalk's own skill, edited by the user after install: kept as well
    skill.unlink()
    CLAUDE.install("user", CMD, claude_env(tmp_path), str(tmp_path))
    skill.write_bytes(SKILL.read_bytes() + b"\nmy addition\n")
    assert actions(CLAUDE.install("user", CMD, claude_env(tmp_path), str(tmp_path)))[1] == "kept"
    assert actions(CLAUDE.uninstall("user", claude_env(tmp_path), str(tmp_path)))[1] == "kept"
    assert skill.read_bytes().endswith(b"my addition\n")


def test_a_skill_crosstalk_shipped_before_is_updated_and_removed(tmp_path: Path):
    skill = tmp_path / "cfg" / "skills" / "crosstalk" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    old = b"# crosstalk\n\nan older shipped skill\n"
    skill.write_bytes(old)
    from crosstalk.harness.claude import install as setup

    setup.SHIPPED = setup.SHIPPED | {setup.digest(old)}
    try:
        assert actions(CLAUDE.install("user", CMD, claude_env(tmp_path), str(tmp_path)))[1] == "updated"
    finally:
        setup.SHIPPED = setup.SHIPPED - {setup.digest(old)}
    assert skill.read_bytes() == SKILL.read_bytes()
    assert actions(CLAUDE.uninstall("user", claude_env(tmp_path), str(tmp_path)))[1] == "removed"


# ------------------------------------------------------------------ finding 3: Codex's file comes back byte for byte
def codex_round_trip(tmp_path: Path, original: bytes | None, extra: dict[str, str] | None = None) -> bytes | None:
    home = tmp_path / "codex"
    home.mkdir(exist_ok=True)
    path = home / "config.toml"
    if original is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(original)
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path / "h")}
    CODEX.install("user", CMD, env, str(tmp_path), extra or {})
    entry = tomlkit.parse(path.read_text())["mcp_servers"]["crosstalk"]
    assert entry["command"] == CMD[0]
    CODEX.uninstall("user", env, str(tmp_path))
    return path.read_bytes() if path.exists() else None


CASES = [
    b'model = "o4"\n',
    b'model = "o4"',  # no final newline
    b"",
    b"\n\n",
    b"[mcp_servers]\n# my servers go here\n",
    b'[mcp_servers.other]\ncommand = "x"\n\n# a comment after the last table\n',
    b'[mcp_servers.other]\ncommand = "x"\n# trailing comment, no blank\n',
    b'model = "o4"\r\n[profiles.fast]\r\nmodel = "x"\r\n',
    b"# only a comment",
    b'mcp_servers.other.command = "x"\n',
]


@pytest.mark.parametrize("original", CASES)
def test_codex_install_then_uninstall_gives_back_every_byte(tmp_path: Path, original: bytes):
    assert codex_round_trip(tmp_path, original, {"CROSSTALK_HOME": "/x/state"}) == original


def test_codex_uninstall_keeps_a_comment_the_user_added_after_crosstalks_table(tmp_path: Path):
    home = tmp_path / "codex"
    home.mkdir()
    path = home / "config.toml"
    path.write_text('model = "o4"\n')
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path / "h")}
    CODEX.install("user", CMD, env, str(tmp_path), {})
    path.write_text(path.read_text() + "\n# mine, after crosstalk's table\n")
    assert actions(CODEX.uninstall("user", env, str(tmp_path))) == ["updated"]
    assert path.read_text() == 'model = "o4"\n\n# mine, after crosstalk\'s table\n'


_line = st.one_of(
    st.from_regex(r"# [a-z \[\]=.]{0,20}", fullmatch=True),
    st.from_regex(r"[a-z]{1,6} = [0-9]{1,4}( # [a-z]{0,8})?", fullmatch=True),
    st.just(""),
)


@st.composite
def toml_files(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(_line, max_size=4))
    for i, name in enumerate(draw(st.lists(st.sampled_from(["mcp_servers.a", "profiles.p", "x", "mcp_servers"]),
                                           max_size=3, unique=True))):  # fmt: skip
        parts.append(f"[{name}]")
        parts += [f"k{i}{j} = {j}" if ln and not ln.startswith("#") else ln
                  for j, ln in enumerate(draw(st.lists(_line, max_size=3)))]  # fmt: skip
    text = "\n".join(parts) + draw(st.sampled_from(["", "\n", "\n\n"]))
    try:
        tomlkit.parse(text)
    except Exception:
        assume(False)  # only valid TOML is a config Codex would have
    return text.encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(original=toml_files())
def test_codex_round_trip_on_generated_files(tmp_path: Path, original: bytes):
    assert codex_round_trip(tmp_path, original) == original


def test_codex_install_over_an_inline_mcp_servers_table_is_a_clear_error(tmp_path: Path):
    body = 'mcp_servers = { other = { command = "x" } }\n'
    (tmp_path / "config.toml").write_text(body)
    with pytest.raises(InstallError, match=r"config\.toml: mcp_servers is an inline table"):
        CODEX.install("user", CMD, {"CODEX_HOME": str(tmp_path)}, str(tmp_path), {})
    assert (tmp_path / "config.toml").read_text() == body


# ------------------------------------------------------------------ finding 4: `updated` for an edit
def test_uninstall_never_says_removed_for_a_file_it_only_edited(tmp_path: Path):
    """A file the user had is `restored` byte for byte while it is as crosstalk left it, `updated` (crosstalk's entry
    taken out) once someone changed it since: never `removed`."""
    env = {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    settings = tmp_path / "agent" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme": "dark"}')
    pi_setup.install("user", ["/x"], env, tmp_path)
    settings.write_text(settings.read_text().replace('"dark"', '"light"'))  # pi saved a setting meanwhile
    assert actions(pi_setup.uninstall("user", env, tmp_path)) == ["updated", "removed"]  # the extension config: ours
    assert json.loads(settings.read_text()) == {"theme": "light"}
    (tmp_path / "codex").mkdir()
    codex_env = {"CODEX_HOME": str(tmp_path / "codex"), "HOME": str(tmp_path / "home")}
    (tmp_path / "codex" / "config.toml").write_text("a = 1\n")
    CODEX.install("user", CMD, codex_env, str(tmp_path), {})
    assert actions(CODEX.uninstall("user", codex_env, str(tmp_path))) == ["restored"]
    assert (tmp_path / "codex" / "config.toml").read_text() == "a = 1\n"


# ------------------------------------------------------------------ finding 5: the exact reason
def reasons(tmp_path: Path) -> list[tuple[Path, str]]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big"
    big.write_bytes(b"")
    os.truncate(big, 64 * 1024 * 1024 + 1)  # sparse: over every harness's cap
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    folder = tmp_path / "folder"
    folder.mkdir()
    return [(fifo, "is a FIFO, not a regular file"), (big, r"is 67108865 bytes, over the \d+-byte limit"),
            (link, "is a symlink"), (folder, "is a directory, not a regular file")]  # fmt: skip


def test_a_refused_config_names_the_exact_reason(tmp_path: Path):
    for path, reason in reasons(tmp_path):
        home = tmp_path / f"codex-{path.name}"
        home.mkdir()
        (home / "config.toml").symlink_to(path) if path.name == "link" else os.rename(path, home / "config.toml")
        with pytest.raises(InstallError, match=reason) as err:
            CODEX.install("user", CMD, {"CODEX_HOME": str(home)}, str(tmp_path), {})
        assert str(home / "config.toml") in str(err.value)
        agent = tmp_path / f"pi-{path.name}"
        agent.mkdir()
        os.rename(home / "config.toml", agent / "settings.json")
        with pytest.raises(InstallError, match=reason):
            pi_setup.install("user", ["/x"], {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent)}, tmp_path)
        cfg = tmp_path / f"claude-{path.name}"
        cfg.mkdir()
        os.rename(agent / "settings.json", cfg / ".claude.json")
        with pytest.raises(InstallError, match=reason):
            CLAUDE.install("user", CMD, {"CLAUDE_CONFIG_DIR": str(cfg)}, str(tmp_path))
