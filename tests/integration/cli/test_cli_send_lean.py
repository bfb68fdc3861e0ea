"""`crosstalk send` imports only what a send needs: the real command, run against a live fake agent and
against a name nobody holds, loads no protocol SDK, no asyncio, no TOML or YAML parser, no harness package it does
not need, and (to a live agent) none of the costly stdlib modules the lean path avoids. A module-set assertion, never
a timing: the figures are bench/send_cli.py's (docs/performance.md, "Lean send path")."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.loaded_modules import command_modules, hits
from tests.support.procs import CLI_TIMEOUT_S, Agent, Procs

pytestmark = pytest.mark.integration

# Never on the send path: the SDKs and servers (A2A, MCP, HTTP), asyncio, the TOML and YAML parsers, and the harness
# packages a target that is a crosstalk agent does not need (it is reached over its socket, whatever its harness).
SDKS = ("asyncio", "a2a", "mcp", "httpx", "starlette", "uvicorn", "google.protobuf", "websockets")
PARSERS = ("tomlkit", "tomllib", "yaml", "ruamel")
NOT_FOR_A_LIVE_AGENT = (*SDKS, *PARSERS, "crosstalk.harness.codex", "crosstalk.harness.pi", "crosstalk.harness.claude",
                        "crosstalk.harness.fake", "crosstalk.harness.base", "crosstalk.bus", "crosstalk.journal",
                        "crosstalk.receiver", "crosstalk.agent", "crosstalk.tasks")  # fmt: skip
# The stdlib modules the lean path avoids, each for a cheap alternative (core/record.py, _socket, _thread, ...):
# argparse (with gettext and locale) for cli/fastparse.py on an ordinary send line, pathlib (with urllib.parse,
# ipaddress and fnmatch) for the strings registry/paths.py decides, json (with re, enum, functools and collections)
# for core/jsonc.py on `_json`, enum for core/strenum.py, re for str methods (core/ids.py, registry/names.py).
COSTLY_STDLIB = ("dataclasses", "inspect", "typing", "socket", "threading", "shutil", "subprocess", "logging",
                 "argparse", "gettext", "locale", "pathlib", "urllib", "ipaddress", "fnmatch", "json", "re",
                 "enum", "functools", "collections", "operator", "types", "warnings", "importlib")  # fmt: skip
# A name no crosstalk agent holds: the native kinds look for a session of that name (claude and codex, and only
# their discovery); the kinds that cannot write natively (pi, fake) are not even imported.
NOT_FOR_A_MISSING_NAME = (*SDKS, *PARSERS, "crosstalk.harness.pi", "crosstalk.harness.fake", "crosstalk.bus")


def _send_modules(xt: Procs, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    return command_modules(("send", *args), env=xt.env, workdir=xt.root, timeout=CLI_TIMEOUT_S)


def test_send_to_a_live_agent_loads_only_what_it_needs(xt: Procs, alice: Agent) -> None:
    res, mods = _send_modules(xt, "alice", "lean", "--from", "@ci:lean")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("accepted ") and res.stdout.endswith("→ alice\n")
    assert [x["text"] for x in alice.inbox_lines()] == ["lean"]
    assert hits(mods, NOT_FOR_A_LIVE_AGENT) == []
    assert hits(mods, COSTLY_STDLIB) == []


def test_send_json_to_a_live_agent_stays_lean(xt: Procs, alice: Agent) -> None:
    res, mods = _send_modules(xt, "--json", "alice", "lean json", "--kind", "meta")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["state"] == "accepted"
    assert hits(mods, NOT_FOR_A_LIVE_AGENT) == []
    assert hits(mods, COSTLY_STDLIB) == []


def test_send_to_a_missing_name_asks_only_the_native_kinds(xt: Procs, alice: Agent) -> None:
    res, mods = _send_modules(xt, "nobody", "hello")
    assert res.returncode == 4, res.stderr
    assert res.stderr == "crosstalk: no live agent is named or has agent_id 'nobody'\n"
    assert hits(mods, NOT_FOR_A_MISSING_NAME) == []
    # Discovery only: neither native kind's adapter (asyncio) nor its installer (tomlkit, config edits) is loaded.
    assert hits(mods, ("crosstalk.harness.claude.adapter", "crosstalk.harness.claude.install")) == []
    assert hits(mods, ("crosstalk.harness.codex.adapter", "crosstalk.harness.codex.install")) == []
    assert hits(mods, ("crosstalk.harness.codex.appserver",)) == []
