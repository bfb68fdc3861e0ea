"""A harness with scriptable outcomes. Each injection consumes the next step of its script; when the script runs
out, the default step repeats. Every write to the "session" is counted and, with an inbox file, appended there as
one JSON line, so tests can prove what reached the session and how often.

Steps (one per branch of the receiver chain's injector, tests/unit/receiver/test_receiver_injector.py):
  accept      write; accepted
  queue       write; queued (a verified no-wake hand-off)
  race        an idle→active race during turn start: the write joins the active turn; accepted
  fallback    the harness refuses (review/compact), the adapter falls back to one no-wake append; queued
  malformed   write; the harness answers something that is not a valid success (→ unknown)
  refuse      definite refusal, no write (→ unreachable)
  presend     failure before any write (→ unreachable)
  disconnect  write, then the connection drops before the answer (→ unknown, never resent)
  block       wait until `release()` (or the test's timeout), then accept
  hang        never answer (the receiver's inject timeout turns it into unknown)
  hold        the "user" holds it (→ held); `settle(message_id, word)` later delivers, denies or expires it
  decline     the session's own settings refuse it, no write (→ rejected)

The conformance profile (`conformance=True`, opt-in) makes the fake "model" answer the A2A conformance kit's magic
message ids (a2aproject/a2a-tck, `tck-<prefix>-<session>`) as the kit's reference system under test does, through the
agent's real task operations: the message is marked as awaiting an answer (`on_expect`), written to the session as
usual, then answered with `on_reply` (text, artifacts, or a direct message) or `on_require_input`; `tck-reject-task`
is refused by the "session" (the task fails as unreachable). Any other id is delivered as usual.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from crosstalk.core.states import State
from crosstalk.core.tasks import Artifact, ArtifactPart
from crosstalk.fs import trace
from crosstalk.harness.base import (
    AgentInfo,
    BindResult,
    InjectRequest,
    InjectResult,
    LateSink,
    SessionOps,
    render_envelope,
)
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, PreSendFailure, ReceiverRefused

# (prefix, answer) in match order (tck-artifact-file-url before tck-artifact-file). An answer is
# ("reply", text, artifacts, direct), ("input", text) or ("refuse",), mirroring the kit's reference SUT.
_TCK_FILE = ArtifactPart(raw="dGNr", media_type="text/plain", filename="output.txt")  # b"tck"
_TCK_URL = ArtifactPart(url="https://example.com/output.txt", media_type="text/plain", filename="output.txt")
CONFORMANCE_ANSWERS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("tck-complete-task", ("reply", "Hello from TCK", (), False)),
    (
        "tck-artifact-text",
        ("reply", "", (Artifact("tck-artifact-text", (ArtifactPart(text="Generated text content"),)),), False),
    ),
    ("tck-artifact-file-url", ("reply", "", (Artifact("tck-artifact-file-url", (_TCK_URL,)),), False)),
    ("tck-artifact-file", ("reply", "", (Artifact("tck-artifact-file", (_TCK_FILE,)),), False)),
    (
        "tck-artifact-data",
        ("reply", "", (Artifact("tck-artifact-data", (ArtifactPart(data={"key": "value", "count": 42}),)),), False),
    ),
    ("tck-message-response", ("reply", "Direct message response", (), True)),
    ("tck-input-required", ("input", "Input required: send a follow-up message on this task")),
    ("tck-reject-task", ("refuse",)),
)


def conformance_answer(message_id: str) -> tuple[Any, ...] | None:
    """The profile's answer to a message id, or None for an ordinary message."""
    for prefix, answer in CONFORMANCE_ANSWERS:
        if message_id.startswith(prefix):
            return answer
    return None


STEPS = (
    "accept", "queue", "race", "fallback", "malformed", "refuse", "presend", "disconnect", "block", "hang", "hold",
    "decline",
)  # fmt: skip
# What the fake's "user" may do with a held message, as the receipt words of a harness that holds.
SETTLE_WORDS = {
    "delivered": InjectResult(State.ACCEPTED, evidence={"fake": "delivered_after_hold"}),
    "denied": InjectResult(State.REJECTED, "denied: the receiving user declined it", {"fake": "denied"}),
    "expired": InjectResult(State.UNREACHABLE, "expired: the session ended while holding it", {"fake": "expired"}),
}
BLOCK_TIMEOUT_S = 60.0


def parse_script(text: str) -> list[str]:
    """Parse 'accept,refuse,queue' into steps; an unknown step is a clear error."""
    steps = [s.strip() for s in text.split(",") if s.strip()]
    for s in steps:
        if s not in STEPS:
            raise ValueError(f"unknown fake step {s!r} (expected one of: {', '.join(STEPS)})")
    return steps


class FakeHarness:
    name = "fake"

    def __init__(
        self,
        script: list[str] | None = None,
        *,
        default: str = "accept",
        inbox: str | os.PathLike[str] | None = None,
        inbox_dir: str | os.PathLike[str] | None = None,
        answer: str | None = None,
        conformance: bool = False,
        keep_writes: int | None = None,
    ) -> None:
        for s in [*(script or []), default]:
            if s not in STEPS:
                raise ValueError(f"unknown fake step {s!r}")
        self._script = list(script or [])
        self._default = default
        self._inbox = Path(inbox) if inbox else None
        self._inbox_dir = Path(inbox_dir) if inbox_dir else None  # inbox <dir>/<agent name>.jsonl, named at bind
        self._lock = threading.Lock()
        self.writes: list[dict[str, Any]] = []
        self.keep_writes = keep_writes  # None: every write (tests read them); else about the newest this many
        self.attempts = 0
        self._release = asyncio.Event()
        self.blocked = asyncio.Event()  # set while an injection waits in a `block` step
        self.agent: AgentInfo | None = None
        # A scripted "model" for asks: with `answer`, every injected ask is answered with that text through
        # `on_answer(message_id, text)`, which the agent wires to its reply path (as the reply tool would).
        self.answer = answer
        self.on_answer: Callable[[str, str], Awaitable[object]] | None = None
        self._answers: set[asyncio.Task[object]] = set()
        # The conformance profile's hooks, wired by the agent to its task service: on_expect(message_id) marks the
        # message as awaiting an answer (synchronously, before inject returns), on_reply(message_id, text,
        # artifacts, direct) and on_require_input(message_id, text) answer it.
        self.conformance = conformance
        self.on_expect: Callable[[str], object] | None = None
        self.on_reply: Callable[[str, str, tuple[Artifact, ...], bool], Awaitable[object]] | None = None
        self.on_require_input: Callable[[str, str], Awaitable[object]] | None = None
        self._sink: LateSink | None = None
        self.held: dict[str, InjectRequest] = {}  # message id → the request a `hold` step holds

    # --------------------------------------------------------------- the adapter (harness.base.HarnessAdapter)
    async def bind(self, agent: AgentInfo) -> BindResult:
        self.agent = agent
        if self._inbox_dir is not None:
            self._inbox = self._inbox_dir / f"{agent.name}.jsonl"
        return BindResult(endpoint=str(self._inbox) if self._inbox else None, version="fake-1")

    def status(self) -> str:
        return "idle"

    def attach_session(self, ops: SessionOps) -> None:
        """harness.base.SessionModel: scripted answers and the conformance profile answer through `ops`."""
        self.on_answer = ops.answer
        self.on_expect = ops.expect_answer
        self.on_reply = ops.reply
        self.on_require_input = ops.require_input

    def render(self, request: InjectRequest) -> str:
        return render_envelope(request)

    def native_reply_address(self, agent: AgentInfo) -> str | None:
        return agent.uds_path

    async def close(self) -> None:
        self._release.set()

    # --------------------------------------------------------------- scripting
    def push(self, *steps: str) -> None:
        for s in steps:
            if s not in STEPS:
                raise ValueError(f"unknown fake step {s!r}")
        self._script.extend(steps)

    def on_settled(self, sink: LateSink) -> None:
        """harness.base.SettlesLater: where `settle` reports what the "user" did with a held message."""
        self._sink = sink

    def settle(self, message_id: str, word: str) -> None:
        """The "user" decides on a held message: delivered (written to the session now), denied or expired. Call it
        on the agent's event loop."""
        request = self.held.pop(message_id)
        result = SETTLE_WORDS[word]
        if word == "delivered":
            self._write(request, "after_hold")
        if self._sink is not None:
            self._sink(message_id, result)

    def release(self) -> None:
        """Let every `block` step (now and later) proceed."""
        self._release.set()

    def _next_step(self) -> str:
        with self._lock:
            self.attempts += 1
            return self._script.pop(0) if self._script else self._default

    def _write(self, request: InjectRequest, how: str) -> None:
        msg = request.message
        line = {
            "message_id": msg.message_id,
            "from": request.sender.label,
            "sender_class": request.sender.sender_class.value,
            "kind": msg.kind.value,
            "delivery": request.delivery.value,
            "in_reply_to": msg.in_reply_to,
            "text": msg.text,
            "rendered": self.render(request),
            "how": how,
            "at": time.time(),
        }
        with self._lock:
            self.writes.append(line)
            if self.keep_writes is not None and len(self.writes) > 2 * self.keep_writes:
                del self.writes[: -self.keep_writes]  # a long-running fake agent: its inbox file holds them all
            if self._inbox is not None:
                # One write(2) of a whole line in append mode: concurrent lines never interleave, and a kill -9
                # after it returns still leaves the line in the file.
                fd = os.open(self._inbox, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, (json.dumps(line, ensure_ascii=False) + "\n").encode())
                finally:
                    os.close(fd)
        trace.mark("harness_write", harness="fake")  # bench/own_steps.py: the own part ends here

    def _maybe_answer(self, request: InjectRequest) -> None:
        if self.answer is None or self.on_answer is None or request.message.kind.value != "ask":
            return
        self._spawn(self.on_answer(request.message.message_id, self.answer))

    def _conformance(self, request: InjectRequest) -> tuple[Any, ...] | None:
        return conformance_answer(request.message.message_id) if self.conformance else None

    def _answer_conformance(self, request: InjectRequest, answer: tuple[Any, ...]) -> None:
        mid = request.message.message_id
        if answer[0] == "reply" and self.on_reply is not None:
            coro = self.on_reply(mid, answer[1], answer[2], answer[3])
        elif answer[0] == "input" and self.on_require_input is not None:
            coro = self.on_require_input(mid, answer[1])
        else:
            return
        if self.on_expect is not None:
            self.on_expect(mid)  # before inject returns: the delivery alone must not complete the task
        self._spawn(coro)

    def _spawn(self, answer: Awaitable[object]) -> None:
        """Answer after inject returns, as a session replies later; the task is held until it is done."""
        task = asyncio.ensure_future(answer)
        self._answers.add(task)
        task.add_done_callback(self._answers.discard)

    async def inject(self, request: InjectRequest) -> InjectResult:
        step = self._next_step()
        conformance = self._conformance(request)
        if conformance is not None and conformance[0] == "refuse":
            raise HarnessRefused("fake (conformance): the session rejects tck-reject-task")
        if step == "block":
            self.blocked.set()
            try:
                async with asyncio.timeout(BLOCK_TIMEOUT_S):
                    await self._release.wait()
            finally:
                self.blocked.clear()
            step = "accept"
        if step == "hang":
            await asyncio.sleep(3600)
        if step == "refuse":
            raise HarnessRefused("fake: the session refused the input")
        if step == "presend":
            raise PreSendFailure("fake: no connection to the session")
        if step == "decline":
            raise ReceiverRefused("fake: the session's settings refuse messages from other sessions")
        if step == "hold":
            self.held[request.message.message_id] = request
            return InjectResult(State.HELD, "held: the session holds it for its user", {"fake": "held"})
        how = "meta" if request.meta else "turn"
        if step == "accept":
            self._write(request, how)
            if conformance is not None:
                self._answer_conformance(request, conformance)
            else:
                self._maybe_answer(request)
            return InjectResult(State.ACCEPTED, evidence={"fake": "written", "how": how})
        if step == "queue":
            self._write(request, "append")
            return InjectResult(State.QUEUED, evidence={"fake": "appended"})
        if step == "race":
            self._write(request, "joined_active_turn")
            return InjectResult(State.ACCEPTED, evidence={"fake": "joined_active_turn"})
        if step == "fallback":
            self._write(request, "append_after_refusal")
            return InjectResult(State.QUEUED, reason="turn_refused_appended", evidence={"fake": "append"})
        if step == "malformed":
            self._write(request, how)
            return InjectResult(State.REJECTED, reason="fake: malformed success")  # not a valid inject state
        if step == "disconnect":
            self._write(request, how)
            raise HarnessDisconnected("fake: connection dropped after the write")
        raise AssertionError(f"unhandled fake step {step}")
