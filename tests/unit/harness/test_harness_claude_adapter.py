"""The Claude adapter's wire, against a unix socket that behaves as the pinned Claude Code 2.1.332 was seen to
(docs/dev/claude-adapter.md): it reads the auth and user lines, answers nothing and closes after our half-close. The
real session is driven in tests/e2e/test_claude_live.py; here every branch of the outcome rules is forced."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

import pytest

from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.fs import reading
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.base import AgentInfo, InjectRequest, SessionIdentity
from crosstalk.harness.claude import adapter as claude_adapter
from crosstalk.harness.claude import inbound
from crosstalk.harness.claude.adapter import ClaudeAdapter
from crosstalk.harness.errors import HarnessDisconnected, PreSendFailure, ReceiverRefused

ME = os.getpid()
ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "a2a")


def request(kind: Kind = Kind.INFORM, delivery: Delivery = Delivery.AUTO, text: str = "hi <b> & co") -> InjectRequest:
    msg = Message(message_id=new_message_id(), to="bob", parts=(TextPart(text),), kind=kind, delivery=delivery)
    return InjectRequest(msg, ALICE, delivery, reply_address="/x/sock/b0b.sock", meta=kind is Kind.META)


RECEIPTS = {"hold": {"status": "held"}, "refuse": {"status": "expired", "status_detail": "refused"}}


class FakeClaudeSocket:
    """A unix socket server: records each connection's lines; `mode` says how it ends the connection."""

    def __init__(self, path: Path, mode: str = "eof") -> None:
        self.path, self.mode = path, mode
        self.frames: list[list[dict]] = []
        self.handlers: set[asyncio.Task] = set()

    async def __aenter__(self) -> FakeClaudeSocket:
        self.server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for task in self.handlers:  # a hanging connection ends with the server, its socket closed
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            await self._answer(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # until our half-close
        self.frames.append([json.loads(line) for line in data.decode().splitlines()])
        if self.mode == "hang":
            await asyncio.sleep(1.0)  # past the adapter's (shortened) wait for our EOF
        if self.mode == "bytes":
            writer.write(b'{"error":"nope"}\n')
            await writer.drain()
        if self.mode in RECEIPTS:
            await self.tell(RECEIPTS[self.mode])  # as Claude does: the receipt's connection, then our EOF

    async def tell(self, fields: dict) -> None:
        """A receipt on the last message read, to its frame's `from`."""
        frame = self.frames[-1][-1]
        line = {"type": "control", "action": "peer_message_status", "orig_msg_id": frame["msg_id"], **fields}
        _, w = await asyncio.open_unix_connection(frame["from"].removeprefix("uds:"))
        w.write((json.dumps(line) + "\n").encode())
        await w.drain()
        w.close()
        await w.wait_closed()


def record(root: Path, socket_path: Path, status: str = "idle") -> None:
    (root / "sessions").mkdir(exist_ok=True)
    body = {"pid": ME, "sessionId": "s-1", "procStart": proc_start_time(ME), "status": status, "version": "2.1.332",
            "messagingSocketPath": str(socket_path)}  # fmt: skip
    (root / "sessions" / f"{ME}.json").write_text(json.dumps(body))


def adapter(tmp_path: Path, sock: Path, *, token: str | None = "child-token") -> ClaudeAdapter:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path), "CLAUDE_CODE_MESSAGING_SOCKET": str(sock)}
    if token:
        env["CLAUDE_CODE_MESSAGING_TOKEN"] = token
    return ClaudeAdapter(SessionIdentity("claude", "s-1", "bob", harness_pid=ME), env)


INFO = AgentInfo("b0b0b0b0b0b0b0b0", "bob", "s-1", "/x/sock/b0b.sock", "/w")


def test_bind_needs_the_socket_and_child_token_claude_gave_this_shim(tmp_path: Path):
    sock = tmp_path / "cc.sock"
    record(tmp_path, sock)
    bound = asyncio.run(adapter(tmp_path, sock).bind(INFO))
    assert (bound.endpoint, bound.version, bound.inbound_reachable) == (str(sock), "2.1.332", True)
    missing = asyncio.run(adapter(tmp_path, sock, token=None).bind(INFO))
    assert not missing.inbound_reachable and "not started by a Claude Code session" in (missing.reason or "")
    record(tmp_path, tmp_path / "other.sock")
    other = asyncio.run(adapter(tmp_path, sock).bind(INFO))
    assert not other.inbound_reachable and "another messaging socket" in (other.reason or "")


@pytest.mark.parametrize(
    ("delivery", "priority"), [(Delivery.AUTO, "next"), (Delivery.STEER, "now"), (Delivery.NEXT_TURN, "later")]
)
def test_one_frame_with_the_child_token_and_eof_is_accepted(tmp_path: Path, delivery: Delivery, priority: str):
    sock = tmp_path / "cc.sock"
    record(tmp_path, sock)

    async def main() -> None:
        async with FakeClaudeSocket(sock) as claude:
            a = adapter(tmp_path, sock)
            await a.bind(INFO)
            req = request(delivery=delivery)
            out = await a.inject(req)
            assert out.state is State.ACCEPTED and out.evidence["priority"] == priority
            [[auth, user]] = claude.frames
            assert auth == {"type": "auth", "token": "child-token"}
            assert (user["type"], user["priority"], user["msg_id"]) == ("user", priority, req.message.message_id)
            # Claude's receipts go to the frame's `from`: a socket of this process beside the session's own. The
            # model reads the envelope's: the agent's own socket, where a native reply comes back.
            assert user["from"].startswith(f"uds:{tmp_path}/crosstalk-{ME}-")
            content = user["message"]["content"]
            assert 'from="uds:/x/sock/b0b.sock"' in content
            assert content.startswith("<cross-session-message ") and "hi &lt;b&gt; &amp; co" in content
            assert 'from-name="alice"' in content and f'message-id="{req.message.message_id}"' in content

    asyncio.run(main())


def test_meta_joins_a_running_turn_and_is_never_sent_to_an_idle_session(tmp_path: Path):
    sock = tmp_path / "cc.sock"

    async def main() -> None:
        async with FakeClaudeSocket(sock) as claude:
            a = adapter(tmp_path, sock)
            record(tmp_path, sock, status="idle")
            await a.bind(INFO)
            with pytest.raises(PreSendFailure, match="meta never starts a turn"):
                await a.inject(request(Kind.META))
            record(tmp_path, sock, status="busy")
            out = await a.inject(request(Kind.META, Delivery.STEER))
            assert out.evidence["priority"] == "next" and len(claude.frames) == 1

    asyncio.run(main())


def test_no_socket_is_unreachable_and_anything_after_the_write_is_unknown(tmp_path: Path, monkeypatch):
    sock = tmp_path / "cc.sock"
    record(tmp_path, sock)
    monkeypatch.setattr(claude_adapter, "EOF_TIMEOUT_S", 0.3)

    async def main() -> None:
        a = adapter(tmp_path, sock)
        await a.bind(INFO)
        with pytest.raises(PreSendFailure, match="refused"):  # nothing listens: nothing was written
            await a.inject(request())
        async with FakeClaudeSocket(sock, mode="bytes"):
            with pytest.raises(HarnessDisconnected, match="answered bytes"):
                await a.inject(request())
        sock.unlink()
        async with FakeClaudeSocket(sock, mode="hang"):
            with pytest.raises(HarnessDisconnected, match="did not close"):
                await a.inject(request())
        unbound = adapter(tmp_path, sock, token=None)
        await unbound.bind(INFO)
        with pytest.raises(PreSendFailure, match="not started by a Claude Code session"):
            await unbound.inject(request())

    asyncio.run(main())


def test_status_is_the_sessions_record(tmp_path: Path):
    sock = tmp_path / "cc.sock"
    a = adapter(tmp_path, sock)
    assert a.status() == "unknown"
    record(tmp_path, sock, status="busy")
    assert a.status() == "busy"


def test_a_held_receipt_answers_held_and_the_users_word_reaches_the_sink_later(tmp_path: Path):
    sock = tmp_path / "cc.sock"
    record(tmp_path, sock)
    (tmp_path / "settings.json").write_text(json.dumps({"crossSessionInbound": "hold"}))

    async def main() -> None:
        async with FakeClaudeSocket(sock, mode="hold") as claude:
            a = adapter(tmp_path, sock)
            later: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
            a.on_settled(lambda mid, result: later.put_nowait((mid, result)))
            await a.bind(INFO)
            req = request()
            out = await a.inject(req)
            assert out.state is State.HELD and out.evidence["setting"] == "hold"
            await claude.tell({"status": "denied"})
            mid, result = await asyncio.wait_for(later.get(), 10)
            while getattr(result, "state", None) is State.HELD:  # the held receipt is told to the sink too
                mid, result = await asyncio.wait_for(later.get(), 10)
            assert mid == req.message.message_id
            assert result.state is State.REJECTED and "denied" in (result.reason or "")  # type: ignore[attr-defined]

    asyncio.run(main())


def test_the_users_refuse_setting_refuses_without_writing_and_a_refused_receipt_is_rejected_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The fake sends its receipt before our EOF, as Claude does; a loaded machine may take longer than the real
    # grace to read it, and this test is about what the receipt says, not how fast it is read.
    monkeypatch.setattr(claude_adapter, "RECEIPT_GRACE_S", 5.0)
    sock = tmp_path / "cc.sock"
    record(tmp_path, sock)

    async def main() -> None:
        (tmp_path / "settings.json").write_text(json.dumps({"crossSessionInbound": "refuse"}))
        async with FakeClaudeSocket(sock) as claude:
            a = adapter(tmp_path, sock)
            await a.bind(INFO)
            with pytest.raises(ReceiverRefused, match="crossSessionInbound: refuse"):
                await a.inject(request())
            assert claude.frames == []
        (tmp_path / "settings.json").unlink()  # a setting crosstalk cannot see: Claude's receipt says it
        async with FakeClaudeSocket(sock, mode="refuse") as claude:
            with pytest.raises(ReceiverRefused, match="crossSessionInbound"):
                await a.inject(request())
            assert len(claude.frames) == 1

    asyncio.run(main())


def test_a_setting_changed_between_two_messages_is_obeyed_by_the_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The record and settings are parsed once and reused while their stat is unchanged (fs/reading.py StatCache).
    # A test's files are all fresh: the racy window would never let them be cached; it is shut here to use the cache.
    monkeypatch.setattr(reading, "RACY_NS", -(10**12))
    sock = tmp_path / "cc.sock"
    record(tmp_path, sock, status="busy")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"crossSessionInbound": "accept"}))

    async def main() -> None:
        async with FakeClaudeSocket(sock) as claude:
            a = adapter(tmp_path, sock)
            await a.bind(INFO)
            assert (await a.inject(request())).evidence["setting"] == "accept"
            reads = inbound._settings.reads
            for _ in range(2):
                assert (await a.inject(request())).evidence["setting"] == "accept"
            assert inbound._settings.reads == reads  # unchanged: not read again
            settings.write_text(json.dumps({"crossSessionInbound": "refuse"}))  # same inode, same size
            with pytest.raises(ReceiverRefused, match="crossSessionInbound: refuse"):
                await a.inject(request())
            assert len(claude.frames) == 3
            record(tmp_path, sock, status="idle")  # the record rewritten in place, the same size
            settings.write_text(json.dumps({"crossSessionInbound": "accept"}))
            with pytest.raises(PreSendFailure, match="meta never starts a turn"):
                await a.inject(request(Kind.META))
            assert (await a.inject(request())).state is State.ACCEPTED and len(claude.frames) == 4

    asyncio.run(main())
