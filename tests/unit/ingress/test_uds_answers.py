"""Every frame the agent's socket reads gets an answer (ingress/uds.py): a sender told nothing cannot tell delivered
from lost. A real UdsIngress on a unix socket in a temp dir, over a receiver stub that fails as the test says; the
sender is `crosstalk send`'s own client (uds_client.deliver) on a thread. The chain failing, whatever the exception
(TimeoutError, ConnectionError, a CancelledError that is not the connection's), is answered `unknown`; the agent
closing mid-chain too; serving that fails before the chain, or a connection that cannot start, `unreachable`."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.message import new_message
from crosstalk.core.states import Outcome, State
from crosstalk.ingress import uds as uds_mod
from crosstalk.ingress.uds import UdsIngress
from crosstalk.ingress.uds_client import deliver
from crosstalk.ingress.uds_keeping import serve_kept
from crosstalk.receiver import AgentIdentity, Inbound
from tests.support.bounded import run_bounded
from tests.support.uds import auth_line, native_line

pytestmark = pytest.mark.unit

TEST_S = 20.0  # every test's whole run is bounded by this
TOKEN = "k" * 32
Behaviour = Callable[[Inbound], Awaitable[Outcome]]


class StubReceiver:
    """What UdsIngress asks of its receiver, with `receive` doing what the test says."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.identity = AgentIdentity(agent_id="b0b0b0b0b0b0b0b0", name="bob", hop_entry="h", binding={})
        self.behaviour = behaviour
        self.entered = asyncio.Event()  # a frame reached the chain

    async def receive(self, inbound: Inbound) -> Outcome:
        self.entered.set()
        return await self.behaviour(inbound)

    def reject(self, inbound: Inbound, reason: str) -> Outcome:
        return Outcome(inbound.message.message_id, State.REJECTED, reason)


def raising(exc: BaseException) -> Behaviour:
    async def behaviour(inbound: Inbound) -> Outcome:
        raise exc

    return behaviour


async def cancelled_inside(inbound: Inbound) -> Outcome:
    """A future inside the chain is cancelled, not the connection's task: its CancelledError reaches the ingress."""
    fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
    fut.cancel()
    return await fut


async def never(inbound: Inbound) -> Outcome:
    await asyncio.Event().wait()  # until the test closes the agent
    raise AssertionError("unreachable")


def run(behaviour: Behaviour, body: Callable[[UdsIngress, StubReceiver, Path], Awaitable[None]], **kw: Any) -> None:
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))  # AF_UNIX paths must fit in 107 bytes

    async def main() -> None:
        receiver = StubReceiver(behaviour)
        ingress = UdsIngress(root / "bob.sock", TOKEN, receiver, kw.get("resolve", lambda pid: None))  # type: ignore[arg-type]
        await ingress.start()
        try:
            await body(ingress, receiver, ingress.path)
        finally:
            await ingress.close()

    try:
        run_bounded(main, TEST_S)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def send(path: Path) -> Outcome:
    """One message as `crosstalk send` sends it; its WireError (a close without an answer) propagates."""
    msg = new_message("bob", "hello", from_="@ci:test")
    return await asyncio.to_thread(deliver, path, TOKEN, msg, timeout=TEST_S / 2)


async def exchange(path: Path, data: bytes) -> bytes:
    """Write `data`, half-close, and read everything the agent answers until it closes."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        writer.write(data)
        writer.write_eof()
        return await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.parametrize(
    "exc", [TimeoutError(), ConnectionResetError(104, "reset inside the agent"), RuntimeError("boom")]
)
def test_a_chain_that_raises_is_answered_unknown_whatever_the_exception(exc: BaseException) -> None:
    async def body(ingress: UdsIngress, rx: StubReceiver, path: Path) -> None:
        out = await send(path)
        assert (out.state, out.evidence) == (State.UNKNOWN, {"internal": type(exc).__name__})
        assert out.message_id and out.reason is not None and out.reason.startswith("internal:")

    run(raising(exc), body)


def test_a_cancelled_future_inside_the_chain_is_answered_unknown_and_the_connection_goes_on() -> None:
    async def body(ingress: UdsIngress, rx: StubReceiver, path: Path) -> None:
        out = await send(path)
        assert (out.state, out.evidence) == (State.UNKNOWN, {"internal": "CancelledError"})

    run(cancelled_inside, body)


def test_the_agent_closing_while_a_frame_is_in_the_chain_answers_it_unknown() -> None:
    async def body(ingress: UdsIngress, rx: StubReceiver, path: Path) -> None:
        sending = asyncio.ensure_future(send(path))
        await rx.entered.wait()
        await ingress.close()  # cancels the handler mid-chain
        out = await sending
        assert (out.state, out.evidence) == (State.UNKNOWN, {"internal": "CancelledError"})

    run(never, body)


def test_claudes_own_frame_gets_bytes_not_eof_when_the_chain_fails() -> None:
    # Its sender reads EOF as taken and any bytes as failure: a chain that failed must not look taken.
    async def body(ingress: UdsIngress, rx: StubReceiver, path: Path) -> None:
        raw = await exchange(path, auth_line(TOKEN) + native_line("hello"))
        assert b'"unknown"' in raw and b"TimeoutError" in raw

    run(raising(TimeoutError()), body)


def test_serving_that_fails_before_the_chain_is_answered_unreachable() -> None:
    def resolve(pid: int) -> None:
        raise TimeoutError("the registry did not answer")

    async def body(ingress: UdsIngress, rx: StubReceiver, path: Path) -> None:
        out = await send(path)
        assert out.state is State.UNREACHABLE and "TimeoutError" in (out.reason or "")
        assert not rx.entered.is_set()

    run(raising(AssertionError("never called")), body, resolve=resolve)


@pytest.mark.parametrize("exc", [OSError(24, "Too many open files"), RuntimeError("fd in use")])
def test_a_connection_that_cannot_start_is_answered_unreachable(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    async def failing(*args: Any, **kw: Any) -> Any:
        raise exc

    async def body(ingress: UdsIngress, rx: StubReceiver, path: Path) -> None:
        monkeypatch.setattr(uds_mod.asyncio, "open_unix_connection", failing)
        try:
            out = await send(path)
        finally:
            monkeypatch.undo()
        assert out.state is State.UNREACHABLE and type(exc).__name__ in (out.reason or "")
        assert not rx.entered.is_set()

    run(raising(AssertionError("never called")), body)


def test_a_failing_chain_is_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=uds_mod.__name__)

    async def body(ingress: UdsIngress, rx: StubReceiver, path: Path) -> None:
        for _ in range(3):
            assert (await send(path)).state is State.UNKNOWN

    run(raising(TimeoutError()), body)
    mine = [r for r in caplog.records if r.name == uds_mod.__name__]
    assert len(mine) == 1 and "receiver chain failed" in mine[0].getMessage() and mine[0].exc_info is not None


def test_a_kept_connection_whose_peer_takes_no_answer_ends_without_raising() -> None:
    # Its frames were answered; the peer not reading them is the connection's failure, not the agent's: the caller
    # (uds.py) must not answer again on it, which it would for a TimeoutError.
    class Writer:
        def write(self, data: bytes) -> None:
            pass

        async def drain(self) -> None:
            raise TimeoutError

    async def answer(line: Any) -> bytes:
        return b'{"state": "accepted"}\n'

    async def main() -> None:
        line = uds_mod.parse_line(b'{"type": "user", "message": {"content": "x"}, "crosstalk": {"keep": true}}\n')
        reader = asyncio.StreamReader()
        assert await serve_kept(line, answer, reader, Writer()) is None  # type: ignore[arg-type]

    run_bounded(main, TEST_S)


def test_an_answer_written_before_the_agent_closed_is_read_though_the_send_broke() -> None:
    """An agent that answers and closes without reading the frame (`busy` at its connection cap) breaks the sender's
    write once the frame outgrows the socket buffer; the sender still reads the answer that came first."""
    import socket
    import threading

    root = Path(tempfile.mkdtemp(prefix="xt"))
    path = root / "busy.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    busy = b'{"state": "unreachable", "reason": "busy: 256 connections already open to this agent; try again"}\n'

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(1024)  # the frame is under way (the sender is blocked on a full buffer), then refused unread
        conn.sendall(busy)
        conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        text = "\x01" * (64 * 1024 - 1)  # escapes to ~384 KiB: more than the socket buffers hold
        out = deliver(path, TOKEN, new_message("bob", text, from_="@test:x"), timeout=TEST_S)
        assert out.state is State.UNREACHABLE and (out.reason or "").startswith("busy:")
    finally:
        server.join(TEST_S)
        listener.close()
        shutil.rmtree(root, ignore_errors=True)


class _BlockingTasks:
    """The task service's SendMessage, as a test drives it: the first refused (the connection stays kept), the
    second held until the agent closes under it."""

    def __init__(self) -> None:
        self.calls = 0
        self.holding = asyncio.Event()

    async def send(self, sender: Any, message: Any, *, task_id: str | None, return_immediately: bool) -> Any:
        from crosstalk.core.errors import TaskError

        self.calls += 1
        if self.calls == 1:
            raise TaskError(TaskError.INVALID, "refused, to open the kept connection")
        self.holding.set()
        await asyncio.Event().wait()  # until the agent closes
        raise AssertionError("unreachable")


def test_a_task_frame_cut_by_the_agent_stopping_is_answered_outcome_unknown_not_unreachable() -> None:
    """The agent closes while its task service holds a frame that came on a kept connection. Before, the connection
    closed without a word; the sender retried on a fresh connection, found nothing listening and said `unreachable`,
    though the message may have been journaled (and would be delivered once the agent is back)."""
    import os

    from crosstalk.core.errors import TaskError
    from crosstalk.fs.procinfo import proc_start_time
    from crosstalk.ingress.errors import A2AOutcomeUnknown, A2AUnreachable
    from crosstalk.ingress.uds_task_client import UdsTaskClient
    from crosstalk.ingress.uds_tasks import TaskDesk
    from crosstalk.registry.descriptor import Descriptor

    started = proc_start_time(os.getpid())
    assert started is not None
    alice = Descriptor(
        agent_id="a1a1a1a1a1a1a1a1", name="alice", harness="fake", pid=os.getpid(), started_at=started, cwd="/",
        session_ref="alice", uds_path="/nowhere", instance_id="i", registered_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    tasks = _BlockingTasks()
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))

    async def main() -> None:
        desk = TaskDesk(tasks=tasks, lookup=lambda bearer: alice if bearer == "alice-token" else None)  # type: ignore[arg-type]
        receiver = StubReceiver(never)
        ingress = UdsIngress(root / "bob.sock", TOKEN, receiver, lambda pid: None, desk)  # type: ignore[arg-type]
        await ingress.start()
        client = UdsTaskClient(root / "bob.sock", TOKEN, "alice-token", keep=True, timeout=TEST_S)
        try:
            with pytest.raises(TaskError):
                await client.send(new_message("bob", "first", from_="alice"))
            second = asyncio.ensure_future(client.send(new_message("bob", "second", from_="alice")))
            await asyncio.wait_for(tasks.holding.wait(), TEST_S)
            await ingress.close()
            with pytest.raises(A2AUnreachable) as told:
                await second
            assert isinstance(told.value, A2AOutcomeUnknown), told.value
            assert "stopped" in str(told.value)
        finally:
            await client.close()
            await ingress.close()

    try:
        run_bounded(main, TEST_S)
    finally:
        shutil.rmtree(root, ignore_errors=True)
