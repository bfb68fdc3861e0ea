"""The Qwen adapter's wire, against a unix socket that behaves as the pinned Qwen Code 0.24.4 was seen to
(docs/dev/qwen-adapter.md): it reads the auth and user lines, closes, and answers on a new connection to the frame's
`from` with the frame's `replyToken`. The real session is driven in tests/e2e/test_qwen_live.py; here every receipt
is forced, and each must end in exactly one state."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.harness.base import AgentInfo, InjectRequest, InjectResult, SessionIdentity
from crosstalk.harness.errors import HarnessRefused, PreSendFailure, ReceiverRefused
from crosstalk.harness.qwen.adapter import QwenAdapter
from tests.support.qwen_registry import record, write

ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "a2a")
CHILD_TOKEN = "c" * 64


def request(kind: Kind = Kind.INFORM) -> InjectRequest:
    msg = Message(message_id=new_message_id(), to="q", parts=(TextPart("hello qwen"),), kind=kind)
    return InjectRequest(msg, ALICE, Delivery.AUTO, meta=kind is Kind.META, bucket="agents")


class FakeQwen:
    """Reads one frame per connection, closes, then sends `statuses` as receipts to the frame's `from`."""

    def __init__(self, path: Path, *statuses: str) -> None:
        self.path, self.statuses = path, list(statuses)
        self.frames: list[list[dict[str, Any]]] = []

    async def __aenter__(self) -> FakeQwen:
        self.server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = [json.loads(x) for x in (await reader.read()).splitlines()]
        self.frames.append(lines)
        writer.close()
        user = lines[-1]
        for status in self.statuses:
            await asyncio.to_thread(self._receipt, user, status)

    @staticmethod
    def _receipt(user: dict[str, Any], status: str) -> None:
        receipt = {"msgV": 1, "msgId": "r", "type": "control", "action": "delivery_status", "status": status,
                   "origMsgId": user["msgId"], "reason": "because"}  # fmt: skip
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(user["from"])
            sock.sendall(f"{json.dumps({'msgV': 1, 'type': 'auth', 'token': user['replyToken']})}\n".encode())
            sock.sendall(f"{json.dumps(receipt)}\n".encode())
            sock.shutdown(socket.SHUT_WR)
            sock.recv(1)


async def adapter(tmp_path: Path) -> QwenAdapter:
    inbox = tmp_path / "in.sock"
    write(tmp_path / "qwen", record(ipcPath=str(inbox)))
    environ = {"QWEN_HOME": str(tmp_path / "qwen"), "XDG_RUNTIME_DIR": str(tmp_path),
               "QWEN_CODE_MESSAGING_SOCKET": str(inbox), "QWEN_CODE_MESSAGING_TOKEN": CHILD_TOKEN}  # fmt: skip
    qa = QwenAdapter(SessionIdentity("qwen", str(record()["sessionId"]), harness_pid=os.getpid()), environ)
    info = AgentInfo("a" * 16, "q", str(record()["sessionId"]), str(tmp_path / "agent.sock"), str(tmp_path))
    assert (await qa.bind(info)).inbound_reachable
    return qa


def test_delivered_is_queued_with_the_child_token_and_the_sessions_id(tmp_path: Path) -> None:
    asyncio.run(_delivered(tmp_path))


async def _delivered(tmp_path: Path) -> None:
    qa = await adapter(tmp_path)
    async with FakeQwen(tmp_path / "in.sock", "delivered") as fake:
        result = await qa.inject(request())
    assert result.state is State.QUEUED and "after its running turn ends" in (result.reason or "")
    auth, user = fake.frames[0]
    assert auth == {"msgV": 1, "type": "auth", "token": CHILD_TOKEN}
    assert user["toSessionId"] == record()["sessionId"] and "fromMode" not in user
    assert user["message"]["content"].startswith("[crosstalk inform · from agents:alice · message-id ")


@pytest.mark.parametrize(
    ("statuses", "first", "later"),
    [(("held", "delivered"), State.HELD, [State.QUEUED]),
     (("held", "delivered", "expired"), State.HELD, [State.QUEUED, State.UNREACHABLE]),
     (("held", "expired"), State.HELD, [State.UNREACHABLE]),
     (("delivered", "expired"), State.QUEUED, [State.UNREACHABLE]),
     (("delivered", "misaddressed"), State.QUEUED, [State.UNREACHABLE])],
)  # fmt: skip
def test_every_later_receipt_goes_to_the_sink_as_its_one_state(
    tmp_path: Path, statuses: tuple[str, ...], first: State, later: list[State]
) -> None:
    asyncio.run(_later(tmp_path, statuses, first, later))


async def _later(tmp_path: Path, statuses: tuple[str, ...], first: State, later: list[State]) -> None:
    qa = await adapter(tmp_path)
    settled: asyncio.Queue[tuple[str, InjectResult]] = asyncio.Queue()
    qa.on_settled(lambda mid, result: settled.put_nowait((mid, result)))
    req = request()
    async with FakeQwen(tmp_path / "in.sock", *statuses):
        result = await qa.inject(req)
        assert result.state is first
        words = [await asyncio.wait_for(settled.get(), 5) for _ in later]
    assert [mid for mid, _ in words] == [req.message.message_id] * len(later)
    assert [r.state for _, r in words] == later


@pytest.mark.parametrize(("status", "error"), [("refused", ReceiverRefused), ("misaddressed", HarnessRefused),
                                               ("dropped", HarnessRefused)])  # fmt: skip
def test_a_refusal_is_one_typed_error(tmp_path: Path, status: str, error: type[Exception]) -> None:
    asyncio.run(_refused(tmp_path, status, error))


async def _refused(tmp_path: Path, status: str, error: type[Exception]) -> None:
    qa = await adapter(tmp_path)
    async with FakeQwen(tmp_path / "in.sock", status):
        with pytest.raises(error):
            await qa.inject(request())


def test_meta_and_a_gone_inbox_write_nothing(tmp_path: Path) -> None:
    asyncio.run(_nothing(tmp_path))


async def _nothing(tmp_path: Path) -> None:
    qa = await adapter(tmp_path)
    with pytest.raises(PreSendFailure, match="meta"):
        await qa.inject(request(Kind.META))
    with pytest.raises(HarnessRefused, match="gone"):
        await qa.inject(request())  # nothing listens on the inbox
