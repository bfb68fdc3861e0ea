"""Helpers for the receiver-chain tests: a receiver wired to the fake harness and a real journal in a short
temp dir."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from crosstalk.core.ids import hop_entry, new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.harness.fake import FakeHarness
from crosstalk.journal import Journal, JournalState
from crosstalk.journal import records as R
from crosstalk.journal.codec import read_journal
from crosstalk.journal.writer import FsOps
from crosstalk.policy import Limits, ReceiverView, Role
from crosstalk.receiver import AgentIdentity, Inbound, Receiver
from tests.support.bounded import run_bounded

T = TypeVar("T")

AGENT_ID = "b0b0b0b0b0b0b0b0"
AGENT_NAME = "bob"
SESSION_REF = "sess-bob"
WAIT_S = 10.0  # every wait in these tests is bounded by this

ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "uds")
CAROL = Sender(SenderClass.VERIFIED, "ca401ca401ca401c", "carol", "a2a")
CI = Sender.unverified("@ci:build")  # external
ANON = Sender.unverified(None)  # unverified, unnamed: the unknown bucket


def make_tmp() -> Path:
    """A short private temp dir (AF_UNIX paths must fit in 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))


def rm_tmp(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def msg(
    text: str = "hello",
    *,
    kind: Kind | str = Kind.INFORM,
    mid: str | None = None,
    hop_chain: tuple[str, ...] = (),
    delivery: Delivery = Delivery.AUTO,
    from_: str | None = None,
) -> Message:
    """A message record built directly (no size check: admission is the chain's job)."""
    return Message(
        message_id=mid or new_message_id(),
        to=AGENT_NAME,
        parts=(TextPart(text),),
        from_=from_,
        kind=Kind(kind),
        delivery=delivery,
        hop_chain=tuple(hop_chain),
    )


def inbound(message: Message, sender: Sender = ALICE, transport: str | None = None, **kw: Any) -> Inbound:
    return Inbound(message, sender, transport or sender.transport, **kw)


class FlakyFsync:
    """An fsync that fails on the listed (1-based) calls and passes through otherwise."""

    def __init__(self, fail_on: set[int]) -> None:
        self.fail_on = fail_on
        self.calls = 0

    def __call__(self, fd: int) -> None:
        import os

        self.calls += 1
        if self.calls in self.fail_on:
            raise OSError(5, "Input/output error (injected)")
        os.fsync(fd)


class Rig:
    """A receiver chain over a fake harness and a real journal in `root`."""

    def __init__(
        self,
        root: Path,
        *,
        script: list[str] | None = None,
        default: str = "accept",
        limits: Limits | None = None,
        inject_timeout_s: float = 5.0,
        fs: FsOps | None = None,
        role: Role = Role.PRIMARY,
        owner: str | None = None,
        session_ref: str = SESSION_REF,
        fake: FakeHarness | None = None,
    ) -> None:
        self.root = root
        self.path = root / "bob.jsonl"
        self.journal, read = Journal.open(self.path, root / "bob.lock", fs=fs)
        self.read = read
        self.state = JournalState.replay(read.records)
        self.fake = fake or FakeHarness(script, default=default)
        self.role = role
        self.owner = owner
        self.identity = AgentIdentity(
            agent_id=AGENT_ID,
            name=AGENT_NAME,
            hop_entry=hop_entry(AGENT_ID),
            binding=R.binding("inst-1", session_ref, None),
            reply_address=str(root / "bob.sock"),
        )
        self.receiver = Receiver(
            self.identity,
            self.journal,
            self.state,
            self.fake,
            self.view,
            limits=limits,
            inject_timeout_s=inject_timeout_s,
        )

    def view(self) -> ReceiverView:
        return ReceiverView(agent_id=AGENT_ID, name=AGENT_NAME, role=self.role, owner=self.owner)

    # ------------------------------------------------------------- journal inspection
    def flush(self) -> None:
        """Wait until every record queued so far (durable or not) is written: batches run in order."""
        self.journal.submit([], durable=False).result(timeout=WAIT_S)

    def records(self) -> list[dict[str, Any]]:
        self.flush()
        return read_journal(self.path).records

    def records_for(self, message_id: str, rtype: str | None = None) -> list[dict[str, Any]]:
        return [
            rec
            for rec in self.records()
            if R.message_id_of(rec) == message_id and (rtype is None or rec["type"] == rtype)
        ]

    def types_for(self, message_id: str) -> list[str]:
        return [r["type"] for r in self.records_for(message_id)]

    def writes_for(self, message_id: str) -> list[dict[str, Any]]:
        return [w for w in self.fake.writes if w["message_id"] == message_id]

    def close(self) -> None:
        self.journal.close()


def run(coro: Coroutine[Any, Any, T], timeout: float = 60.0, what: str | None = None) -> T:
    """Run one async test body in a fresh loop, failing it when it runs past `timeout` (tests/support/bounded.py)."""
    return run_bounded(coro, timeout, what=what)


async def wait_for(event_or_pred: asyncio.Event | Callable[[], bool], timeout: float = WAIT_S) -> None:
    if isinstance(event_or_pred, asyncio.Event):
        await asyncio.wait_for(event_or_pred.wait(), timeout)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not event_or_pred():
        if loop.time() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.005)


async def settle(aw: Awaitable[T], timeout: float = WAIT_S) -> T:
    return await asyncio.wait_for(aw, timeout)
