"""Gemini CLI's kind, hook and adapter without Gemini: the hook's record proves a call's session, a queued message is
handed over once, in order, by the hook's exchange with the adapter's socket, and the hand-over settles it later."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.harness import kind
from crosstalk.harness.base import AgentInfo, CallEvidence, InjectRequest, InjectResult
from crosstalk.harness.errors import PreSendFailure
from crosstalk.harness.gemini import hook
from crosstalk.harness.gemini.sessions import RUN_DIR_ENV, run_dir, socket_path, write_record

PARENT = os.getppid()  # stands for the Gemini process: the test process descends from it, as a hook does


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    short = Path(f"/tmp/xtg-{os.getpid()}-{tmp_path.name[-6:]}")
    environ = {RUN_DIR_ENV: str(short), "GEMINI_CLI": "1", "HOME": str(tmp_path)}
    directory = run_dir(environ, create=True)
    assert directory is not None
    yield environ
    for p in directory.iterdir():
        p.unlink()
    directory.rmdir()


def request(text: str, kind_: Kind = Kind.INFORM) -> InjectRequest:
    sender = Sender(SenderClass.VERIFIED, agent_id="a1", name="alice")
    msg = new_message("gem", text, kind=kind_)
    return InjectRequest(message=msg, sender=sender, delivery=Delivery.AUTO)


def test_identify_needs_the_live_record_of_the_parent(env: dict[str, str]) -> None:
    gemini = kind("gemini")
    call = CallEvidence(parent_pid=PARENT, environ=env)
    assert gemini.identify(call) is None
    write_record(run_dir(env), PARENT, "sess-1", "/w")  # type: ignore[arg-type]
    found = gemini.identify(call)
    assert found is not None and found.session_ref == "sess-1" and found.harness_pid == PARENT
    assert gemini.identify(CallEvidence(parent_pid=PARENT, environ={**env, "GEMINI_CLI": ""})) is None
    write_record(run_dir(env), PARENT, "sess-2", "/w")  # type: ignore[arg-type]
    newer = gemini.identify(call)
    assert newer is not None and gemini.superseded(found, newer, env)


def test_queued_then_handed_over_once_in_order(env: dict[str, str]) -> None:
    directory = run_dir(env)
    assert directory is not None
    write_record(directory, PARENT, "sess-1", "/w")
    gemini = kind("gemini")
    ident = gemini.identify(CallEvidence(parent_pid=PARENT, environ=env))
    assert ident is not None
    adapter: Any = gemini.adapter(ident, env)
    late: list[tuple[str, InjectResult]] = []
    adapter.on_settled(lambda mid, r: late.append((mid, r)))

    async def run() -> list[list[dict[str, Any]]]:
        bound = await adapter.bind(AgentInfo("a", "gem", "sess-1", "/x.sock", "/w"))
        assert bound.inbound_reachable and bound.endpoint == str(socket_path(directory, PARENT))
        first, second = request("one"), request("two", Kind.ASK)
        r1, r2 = await adapter.inject(first), await adapter.inject(second)
        assert r1.state is r2.state is State.QUEUED and "next prompt" in (r1.reason or "")
        emitted: list[list[dict[str, Any]]] = []
        for event in ("AfterTool", "AfterTool"):
            out: list[dict[str, Any]] = []
            await asyncio.to_thread(hook.ask, adapter.path, event, "sess-1", out.append)
            emitted.append(out)
        busy = await adapter.inject(request("three"))
        assert "running tool call" in (busy.reason or "")
        await asyncio.to_thread(hook.ask, adapter.path, "AfterAgent", "sess-1", lambda _: None)
        assert adapter.status() == "idle"
        await adapter.close()
        return emitted

    emitted = asyncio.run(run())
    context = emitted[0][0]["hookSpecificOutput"]["additionalContext"]
    assert context.index("one") < context.index("two") and "answer with the crosstalk reply tool" in context
    assert emitted[1] == [{}]  # seen once
    states = [(r.state, r.evidence.get("gemini")) for _, r in late]
    assert states == [(State.ACCEPTED, "AfterTool")] * 2 + [(State.UNREACHABLE, "closed")]


def test_another_session_gets_nothing_and_a_gone_session_refuses(env: dict[str, str]) -> None:
    directory = run_dir(env)
    assert directory is not None
    write_record(directory, PARENT, "sess-1", "/w")
    ident = kind("gemini").identify(CallEvidence(parent_pid=PARENT, environ=env))
    assert ident is not None
    adapter: Any = kind("gemini").adapter(ident, env)

    async def run() -> list[dict[str, Any]]:
        await adapter.bind(AgentInfo("a", "gem", "sess-1", "/x.sock", "/w"))
        await adapter.inject(request("one"))
        out: list[dict[str, Any]] = []
        await asyncio.to_thread(hook.ask, adapter.path, "BeforeAgent", "sess-other", out.append)
        write_record(directory, PARENT, "sess-2", "/w")  # /clear: the process runs another session
        with pytest.raises(PreSendFailure):
            await adapter.inject(request("two"))
        await adapter.close()
        return out

    assert asyncio.run(run()) == [{}]


def test_unbound_without_a_record(env: dict[str, str]) -> None:
    from crosstalk.harness.base import SessionIdentity

    adapter: Any = kind("gemini").adapter(SessionIdentity("gemini", "s", None, harness_pid=PARENT), env)
    bound = asyncio.run(adapter.bind(AgentInfo("a", "gem", "s", "/x.sock", "/w")))
    assert not bound.inbound_reachable and "hook" in (bound.reason or "")
    with pytest.raises(PreSendFailure):
        asyncio.run(adapter.inject(request("x")))


def test_install_is_idempotent_and_uninstall_restores_the_bytes(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "h"), "CROSSTALK_HOME": str(tmp_path / "xt")}
    settings = tmp_path / "h" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = b'{"matcher": "x", "hooks": [{"type": "command", "command": "mine"}]}'
    original = b'{"hooks": {"AfterTool": [' + mine + b']},\n "a":1}'
    settings.write_bytes(original)
    gemini: Any = kind("gemini")
    first = gemini.install("user", ["/bin/crosstalk", "mcp"], environ, str(tmp_path))
    assert [c.action for c in first] == ["updated"]
    data = json.loads(settings.read_text())
    assert data["mcpServers"]["crosstalk"]["args"] == ["mcp", "--harness", "gemini"]
    assert [len(data["hooks"][e]) for e in ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")] == [1, 1, 2, 1]
    assert data["hooks"]["AfterTool"][0]["hooks"][0]["command"] == "mine"
    assert "crosstalk.harness.gemini.hook AfterTool" in data["hooks"]["AfterTool"][1]["hooks"][0]["command"]
    assert [c.action for c in gemini.install("user", ["/bin/crosstalk", "mcp"], environ, str(tmp_path))] == [
        "unchanged"
    ]
    assert [c.action for c in gemini.uninstall("user", environ, str(tmp_path))] == ["restored"]
    assert settings.read_bytes() == original
    assert [c.action for c in gemini.uninstall("user", environ, str(tmp_path))] == ["absent"]


def test_uninstall_after_the_user_edited_removes_only_crosstalk(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "h"), "CROSSTALK_HOME": str(tmp_path / "xt")}
    gemini: Any = kind("gemini")
    gemini.install("project", ["/bin/crosstalk", "mcp"], environ, str(tmp_path))
    settings = tmp_path / ".gemini" / "settings.json"
    data = json.loads(settings.read_text())
    data["ui"] = {"theme": "x"}
    settings.write_text(json.dumps(data))
    gemini.uninstall("project", environ, str(tmp_path))
    assert json.loads(settings.read_text()) == {"ui": {"theme": "x"}}


def test_the_hook_never_fails_its_session(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"not json")))
    assert hook.main(["AfterTool"]) == 0
    assert json.loads(capsys.readouterr().out) == {}


def test_prune_removes_only_what_ended_processes_left(env: dict[str, str]) -> None:
    from crosstalk.harness.gemini.sessions import prune

    directory = run_dir(env)
    assert directory is not None
    write_record(directory, PARENT, "live", "/w")
    dead = directory / "999999999.json"
    dead.write_text(json.dumps({"pid": 999999999, "start": "1", "sessionId": "gone"}))
    (directory / "999999999.sock").write_text("")
    (directory / "other.txt").write_text("")
    prune(directory)
    assert sorted(p.name for p in directory.iterdir()) == sorted([f"{PARENT}.json", "other.txt"])
