"""Which harnesses have crosstalk installed, read from the files the real `crosstalk install` writes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.doctor_machine import Machine, findings, problems


def _installed(report: dict[str, object]) -> dict[str, dict[str, str]]:
    return {f["text"].split(":")[0]: f for f in findings(report, "installed")}  # type: ignore[arg-type]


def test_nothing_installed_is_healthy(machine: Machine) -> None:
    code, report = machine.doctor()
    assert code == 0
    rows = _installed(report)
    assert set(rows) == {"claude", "codex", "pi", "qwen", "gemini", "opencode"}
    assert all(r["status"] == "ok" and "not installed" in r["text"] for r in rows.values())


def test_each_install_is_seen_and_a_broken_one_says_to_install_again(machine: Machine) -> None:
    for harness in ("claude", "codex", "pi", "qwen", "opencode"):
        assert machine.crosstalk("install", harness).returncode == 0
    code, report = machine.doctor()
    rows = _installed(report)
    assert code == 0, problems(report)
    assert rows["claude"]["text"] == f"claude: crosstalk installed ({machine.home / '.claude.json'})"
    assert rows["codex"]["text"] == f"codex: crosstalk installed ({machine.home / '.codex' / 'config.toml'})"
    assert rows["pi"]["text"] == f"pi: crosstalk installed ({machine.home / '.pi' / 'agent' / 'settings.json'})"
    qwen_settings = machine.home / ".qwen" / "settings.json"
    assert rows["qwen"]["text"] == f"qwen: crosstalk installed ({qwen_settings})"

    # The skill deleted, and Codex's entry pointing at a crosstalk that is gone (a removed venv).
    skill = machine.home / ".claude" / "skills" / "crosstalk" / "SKILL.md"
    skill.unlink()
    config = machine.home / ".codex" / "config.toml"
    config.write_text(config.read_text().replace(json.dumps(str(Path(machine.crosstalk_path()))), '"/gone/crosstalk"'))
    code, report = machine.doctor()
    by_fix = {f["fix"]: f["text"] for f in problems(report, "installed")}
    assert code == 1
    assert by_fix == {
        "crosstalk install claude": f"claude: installed but the skill {skill} is missing",
        "crosstalk install codex": "codex: the installed command /gone/crosstalk is missing or not executable",
    }
    # Qwen's tools taken out of tools.visible: the model would not see them.
    data = json.loads(qwen_settings.read_text())
    data["tools"]["visible"] = []
    qwen_settings.write_text(json.dumps(data))
    code, report = machine.doctor()
    by_fix = {f["fix"]: f["text"] for f in problems(report, "installed")}
    hidden = f"qwen: installed but crosstalk's tools in tools.visible of {qwen_settings} is missing"
    assert by_fix["crosstalk install qwen"] == hidden
    assert machine.crosstalk("install", "qwen").returncode == 0
    # OpenCode's plugin taken out of its config: no call would say which session makes it.
    [oc_config] = rows["opencode"]["text"].removeprefix("opencode: crosstalk installed (").removesuffix(")").split(", ")
    data = json.loads(Path(oc_config).read_text())
    data["plugin"] = []
    Path(oc_config).write_text(json.dumps(data))
    code, report = machine.doctor()
    by_fix = {f["fix"]: f["text"] for f in problems(report, "installed")}
    no_plugin = f"opencode: installed but crosstalk's plugin in the plugin list of {oc_config} is missing"
    assert by_fix["crosstalk install opencode"] == no_plugin
    assert machine.crosstalk("install", "opencode").returncode == 0
    # Running the fix it names makes it healthy again.
    assert machine.crosstalk("install", "claude").returncode == 0
    assert machine.crosstalk("install", "codex").returncode == 0
    assert machine.doctor()[0] == 0


def test_an_unreadable_config_is_a_problem_naming_the_file(machine: Machine) -> None:
    config = machine.home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text("[mcp_servers\n")
    code, report = machine.doctor()
    [p] = problems(report, "installed")
    assert code == 1 and p["text"].startswith(f"codex: {config}: not valid TOML")


def test_a_gemini_install_without_its_hook_says_to_install_again(machine: Machine) -> None:
    """Without crosstalk's hooks a Gemini session is never identified and no message reaches its model."""
    assert machine.crosstalk("install", "gemini").returncode == 0
    settings = machine.home / ".gemini" / "settings.json"
    assert _installed(machine.doctor()[1])["gemini"]["text"] == f"gemini: crosstalk installed ({settings})"
    data = json.loads(settings.read_text())
    del data["hooks"]["AfterTool"]
    settings.write_text(json.dumps(data))
    code, report = machine.doctor()
    by_fix = {f["fix"]: f["text"] for f in problems(report, "installed")}
    assert code == 1
    assert by_fix == {
        "crosstalk install gemini": f"gemini: installed but crosstalk's AfterTool hook in {settings} is missing"
    }
    assert machine.crosstalk("install", "gemini").returncode == 0
    assert machine.doctor()[0] == 0
