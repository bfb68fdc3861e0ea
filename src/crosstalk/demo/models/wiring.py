"""How Codex, pi, Qwen Code, OpenCode and Gemini CLI are pointed at a scripted model server: the config each reads
(Claude Code needs only ANTHROPIC_BASE_URL). One place for the demo's sessions and the e2e tests' harness runs."""

from __future__ import annotations

import json
from pathlib import Path

MODEL = "scripted-model"


def write_codex_config(
    codex_home: Path, base_url: str, *, provider: str = "scripted", key_env: str = "SCRIPTED_API_KEY", extra: str = ""
) -> None:
    """$CODEX_HOME/config.toml: model MODEL from `provider`, the Responses API at `base_url`, its key read from
    `key_env`, no retries (a refused request fails the run at once), no approvals or sandbox; `extra` appended."""
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "{provider}"\napproval_policy = "never"\n'
        f'sandbox_mode = "danger-full-access"\n\n[model_providers.{provider}]\nname = "Scripted Responses"\n'
        f'base_url = "{base_url}/v1"\nwire_api = "responses"\nenv_key = "{key_env}"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n" + (f"\n{extra}" if extra else "")
    )


def write_pi_models(agent_dir: Path, base_url: str, *, provider: str = "scripted") -> None:
    """$PI_CODING_AGENT_DIR/models.json: `provider` serving MODEL over the Chat Completions API at `base_url`."""
    agent_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "baseUrl": f"{base_url}/v1", "api": "openai-completions", "apiKey": "scripted",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": MODEL, "name": "Scripted model", "reasoning": False, "input": ["text"],
                    "contextWindow": 200000, "maxTokens": 1024}],
    }  # fmt: skip
    (agent_dir / "models.json").write_text(json.dumps({"providers": {provider: spec}}, indent=1))


def write_qwen_settings(qwen_home: Path, extra: dict[str, object] | None = None) -> None:
    """$QWEN_HOME/settings.json for a session against the mock (its URL and key come from OPENAI_BASE_URL,
    OPENAI_API_KEY and OPENAI_MODEL in the environment): OpenAI auth, model MODEL, yolo approvals, nothing that
    calls home; `extra` merged in at the top level."""
    qwen_home.mkdir(parents=True, exist_ok=True)
    settings: dict[str, object] = {
        "security": {"auth": {"selectedType": "openai"}}, "model": {"name": MODEL},
        "general": {"enableAutoUpdate": False}, "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False}, "ui": {"hideTips": True, "enableUserFeedback": False},
        "tools": {"approvalMode": "yolo"}, **(extra or {}),
    }  # fmt: skip
    (qwen_home / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")


OPENCODE_PLUGIN_DEP = "@opencode-ai/plugin"


def write_opencode_config(config_dir: Path, base_url: str) -> None:
    """<config dir>/opencode.json for OpenCode against the Chat Completions mock at `base_url` (a custom
    openai-compatible provider serving MODEL, nothing that calls home, bash allowed), and the directory pre-seeded
    with what OpenCode's start-up `npm install @opencode-ai/plugin` check takes for installed: no npm run, no network
    (docs/dev/opencode-adapter.md; crosstalk's plugin imports nothing from it)."""
    config_dir.mkdir(parents=True, exist_ok=True)
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": "dummy"},
                "models": {MODEL: {"name": "Mock", "tool_call": True}}}  # fmt: skip
    config = {"provider": {"mock": provider}, "model": f"mock/{MODEL}", "small_model": f"mock/{MODEL}",
              "autoupdate": False, "share": "disabled", "permission": {"bash": "allow"}}  # fmt: skip
    (config_dir / "opencode.json").write_text(json.dumps(config, indent=2) + "\n")
    (config_dir / "node_modules").mkdir(exist_ok=True)
    (config_dir / "package.json").write_text(json.dumps({"dependencies": {OPENCODE_PLUGIN_DEP: "*"}}) + "\n")
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": {OPENCODE_PLUGIN_DEP: "*"}}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock) + "\n")


OPENCODE_ENV = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
                "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "npm_config_offline": "true"}  # fmt: skip
GEMINI_MODEL = "gemini-2.5-pro"
GEMINI_SETTINGS: dict[str, object] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
    "ui": {"hideBanner": True, "hideTips": True}, "model": {"name": GEMINI_MODEL},
}  # fmt: skip


def write_gemini_settings(gemini_dir: Path, extra: dict[str, object] | None = None) -> None:
    """<HOME>/.gemini/settings.json for Gemini CLI against the Gemini API mock (its URL and key come from
    GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY: docs/dev/gemini-adapter.md shows nothing else is contacted), API-key
    auth, no folder-trust prompt, nothing that calls home; `extra` merged in at the top level."""
    gemini_dir.mkdir(parents=True, exist_ok=True)
    (gemini_dir / "settings.json").write_text(json.dumps({**GEMINI_SETTINGS, **(extra or {})}) + "\n")
