"""The OpenCode kind and adapter. identify: only the plugin's stamp, in a shim whose parent is the OpenCode process
OPENCODE_PID names; the shim moves the stamp out of the tool's arguments. The adapter, against a unix socket that
answers as crosstalk's plugin does (integrations/opencode/crosstalk.js): every answer ends in exactly one state. The
real plugin and OpenCode are driven in tests/e2e/test_opencode_live.py."""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from crosstalk import harness as kinds
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.harness.base import AgentInfo, CallEvidence, InjectRequest, SessionIdentity
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, PreSendFailure
from crosstalk.harness.opencode import KIND, inbox
from crosstalk.harness.opencode.adapter import OpenCodeAdapter

SID = "ses_dbfc4850effeUMw3y6PcB0rgjK"
PID = os.getpid()  # the fake plugin below listens in this process: it stands for the OpenCode process
ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "a2a")


def evidence(meta: dict[str, Any], pid: int = 4242, env_pid: str = "4242") -> CallEvidence:
    return CallEvidence(meta, pid, {"OPENCODE_PID": env_pid})


def test_identify_takes_the_plugins_stamp_in_a_shim_of_that_opencode_process() -> None:
    ident = KIND.identify(evidence({"opencode/session": SID, "opencode/title": "reviewer"}))
    assert ident == SessionIdentity("opencode", SID, "reviewer", harness_pid=4242)
    # OpenCode's own titles are not names: crosstalk's stays
    assert KIND.identify(evidence({"opencode/session": SID, "opencode/title": "New session - 2026-12-04"})) == (
        SessionIdentity("opencode", SID, None, harness_pid=4242)
    )


@pytest.mark.parametrize(
    "call",
    [
        evidence({}),  # no stamp: no evidence, never "the most recent session"
        evidence({"opencode/session": SID}, pid=4242, env_pid="999"),  # not a child of the stamping process
        evidence({"opencode/session": SID}, env_pid=""),  # not started by OpenCode
        evidence({"opencode/session": "../../etc"}),
        evidence({"opencode/session": 7}),
    ],
)
def test_identify_without_a_stamp_from_its_own_opencode_finds_nobody(call: CallEvidence) -> None:
    assert KIND.identify(call) is None


def test_the_shim_moves_the_stamp_from_the_arguments_to_the_evidence() -> None:
    args = {"to": "bob", "text": "hi", "opencode/session": SID, "opencode/title": "t"}
    given, meta = kinds.take_evidence("opencode", args, {"progressToken": 2, "opencode/session": "ses_forged"})
    assert given == {"to": "bob", "text": "hi"}
    assert meta == {"progressToken": 2, "opencode/session": SID, "opencode/title": "t"}
    # other harnesses' shims leave arguments alone (the schema check refuses the extra key there)
    assert kinds.take_evidence("claude", args, {}) == (args, {})


# --------------------------------------------------------------------------------------------------- the adapter
def sync(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def run(*args: Any, **kw: Any) -> None:
        asyncio.run(fn(*args, **kw))

    return run


def request(kind: Kind = Kind.INFORM, delivery: Delivery = Delivery.AUTO) -> InjectRequest:
    msg = Message(message_id=new_message_id(), to="o", parts=(TextPart("hello opencode"),), kind=kind)
    return InjectRequest(msg, ALICE, delivery, meta=kind is Kind.META, bucket="agents")


class FakePlugin:
    """Answers `hello` with `pid`, and each `deliver` with the next of `answers` (None: close without a word)."""

    def __init__(self, path: Path, pid: int, *answers: dict[str, Any] | None) -> None:
        self.path, self.pid, self.answers = path, pid, list(answers)
        self.seen: list[dict[str, Any]] = []
        self.open = self.done = 0

    async def __aenter__(self) -> FakePlugin:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()
        while self.open:  # a handler still running (a client that hung up at once): let it end
            await asyncio.sleep(0.001)

    async def handled(self, n: int, timeout: float = 5.0) -> None:
        """Until `n` connections were served to their end (bounded)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.done < n:
            assert asyncio.get_running_loop().time() < deadline, f"{self.done} of {n} connections served"
            await asyncio.sleep(0.001)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            line = await reader.readline()
            if not line:  # the client hung up before writing (it would not talk to this listener)
                return
            msg = json.loads(line)
            self.seen.append(msg)
            answer = {"pid": self.pid, "version": 1} if msg["op"] == "hello" else self.answers.pop(0)
            if answer is not None:
                writer.write((json.dumps(answer) + "\n").encode())
        finally:
            writer.close()
            await writer.wait_closed()
            self.open -= 1
            self.done += 1


def adapter(tmp_path: Path, pid: int = PID) -> tuple[OpenCodeAdapter, Path]:
    env = {"CROSSTALK_OPENCODE_DIR": str(tmp_path / "oc")}
    oa = OpenCodeAdapter(SessionIdentity("opencode", SID, None, harness_pid=pid), env)
    return oa, inbox.socket_path(env, pid)


def info(tmp_path: Path) -> AgentInfo:
    return AgentInfo("a" * 16, "o", SID, str(tmp_path / "agent.sock"), str(tmp_path))


@pytest.mark.parametrize(
    ("answer", "delivery", "state", "reason"),
    [
        ({"delivered": "immediate", "status": "idle"}, Delivery.AUTO, State.ACCEPTED, None),
        ({"delivered": "queued", "status": "busy"}, Delivery.STEER, State.QUEUED, "at its next step"),
        ({"delivered": "queued", "status": "busy", "held": "next_turn"}, Delivery.NEXT_TURN, State.QUEUED, "ends"),
    ],
)
@sync
async def test_each_answer_of_the_plugin_is_one_state(
    tmp_path: Path, answer: dict[str, Any], delivery: Delivery, state: State, reason: str | None
) -> None:
    oa, path = adapter(tmp_path)
    async with FakePlugin(path, PID, answer) as plugin:
        assert (await oa.bind(info(tmp_path))).inbound_reachable
        result = await oa.inject(request(delivery=delivery))
    assert result.state is state and (reason is None or reason in (result.reason or "")), result
    sent = plugin.seen[-1]
    assert sent["session"] == SID and sent["as"] == delivery.value
    assert (
        sent["text"].startswith("[crosstalk inform · from agents:alice · message-id ")
        and "hello opencode" in (sent["text"])
    )


@sync
async def test_meta_is_written_without_a_turn(tmp_path: Path) -> None:
    oa, path = adapter(tmp_path)
    async with FakePlugin(path, PID, {"delivered": "noted", "status": "idle"}) as plugin:
        await oa.bind(info(tmp_path))
        result = await oa.inject(request(Kind.META))
    assert result.state is State.QUEUED and plugin.seen[-1]["as"] == "meta"


@sync
async def test_nothing_written_is_unreachable_and_no_word_is_unknown(tmp_path: Path) -> None:
    oa, path = adapter(tmp_path)
    answers = ({"error": "no session"}, None, {"delivered": None, "wait": "not written within the timeout"})
    async with FakePlugin(path, PID, *answers):
        await oa.bind(info(tmp_path))
        with pytest.raises(HarnessRefused):
            await oa.inject(request())
        with pytest.raises(HarnessDisconnected):
            await oa.inject(request())
        with pytest.raises(HarnessDisconnected):
            await oa.inject(request())
    with pytest.raises(PreSendFailure):  # the plugin is gone: nothing could be written
        await oa.inject(request())


@sync
async def test_bind_without_the_plugin_or_from_another_process_is_unreachable(tmp_path: Path) -> None:
    oa, path = adapter(tmp_path)
    bound = await oa.bind(info(tmp_path))
    assert not bound.inbound_reachable and "crosstalk install opencode" in (bound.reason or "")
    with pytest.raises(PreSendFailure):
        await oa.inject(request())
    # a listener on OpenCode 4242's socket name that is another process (SO_PEERCRED): nothing is written to it
    oa, path = adapter(tmp_path, pid=4242)
    async with FakePlugin(path, 4242) as plugin:
        bound = await oa.bind(info(tmp_path))
        await plugin.handled(1)  # the connection it dropped before writing
    assert not bound.inbound_reachable and "not served by OpenCode process 4242" in (bound.reason or "")
    assert plugin.seen == []


@sync
async def test_a_session_without_an_agent_is_written_through_the_same_inbox(tmp_path: Path) -> None:
    from crosstalk.harness.base import SessionRow
    from crosstalk.harness.opencode import native

    env = {"CROSSTALK_OPENCODE_DIR": str(tmp_path / "oc")}
    row = SessionRow("opencode", SID, "opencode-12345678", None, "idle", True, pid=PID)
    answers = ({"delivered": "immediate", "status": "idle"}, {"error": "no session"})
    async with FakePlugin(inbox.socket_path(env, PID), PID, *answers) as plugin:
        out = await asyncio.to_thread(native.deliver, row, "hi", from_name="@cli:me", sender_pid=None, environ=env)
        assert out.state is State.ACCEPTED and plugin.seen[-1]["text"].startswith(
            "[crosstalk inform · from @cli:me (native, unverified) · message-id "
        )
        out = await asyncio.to_thread(native.deliver, row, "hi", from_name="@cli:me", sender_pid=None, environ=env)
        assert out.state is State.UNREACHABLE
    out = await asyncio.to_thread(native.deliver, row, "hi", from_name="@cli:me", sender_pid=None, environ=env)
    assert out.state is State.UNREACHABLE  # no plugin: nothing written
