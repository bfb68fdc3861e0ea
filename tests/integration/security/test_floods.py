"""Floods past every admission limit into a live, stalled agent, over the real A2A HTTP path and the real socket.

Bob is a real `crosstalk agent run` process whose fake harness hangs on every injection; the agent CLI sets no
limits, so the defaults hold (policy/admission.py: 256 pending tasks, 32 open asks, 64 concurrent default waits,
64 KiB of text). Each limit is flooded all at once (threads released together) and one by one: exactly the limit
is admitted, every other message is refused with that limit's reason, and nothing admitted is evicted: every one
is in bob's journal, and once bob is unstuck (kill -9, then a restart with a harness that delivers) every one is
delivered exactly once, except those claimed by a hanging injection (the task queue's first; every socket
message, which is claimed as it is admitted), which come back unknown, never resent.
Bob's injections never time out during a test (`--inject-timeout 3600`), so how long a flood takes on a loaded
machine changes nothing it checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from crosstalk.core.errors import TaskError
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import new_message
from crosstalk.core.tasks import TaskView
from crosstalk.ingress.a2a.client import A2AClient
from crosstalk.ingress.frames import encode_auth
from crosstalk.journal.codec import read_journal
from crosstalk.policy import Limits
from crosstalk.registry.credentials import read_key
from tests.support.procs import Agent, Procs, procs, wait_for

pytestmark = pytest.mark.timeout(600)

T = TypeVar("T")
LIMITS = Limits()
TEXT_LIMIT = LIMITS.max_text_bytes
WAIT_S = 90.0  # the bound of every wait here (bob's hanging injection outlasts them all)
MODES = ["concurrent", "sequential"]
STALL_S = 3600.0  # bob's inject timeout: the hanging injection never ends during a test


@pytest.fixture
def xt() -> Iterator[Procs]:
    with procs() as p:
        yield p


@dataclass
class Shot:
    """One message of a flood: `fire(go)` connects, calls go() (the flood's start line), sends, and returns the
    refusal reason, or None when it was admitted. Connected first, the shots of a concurrent flood land together."""

    message_id: str
    fire: Callable[[Callable[[], object]], str | None]
    blocks: bool = False  # admitted, it gets no answer while bob is stalled (a default wait, a socket inform)


@dataclass
class Flood:
    agent: Agent
    journal: Path
    shots: list[Shot]
    refused: dict[str, str] = field(default_factory=dict)
    admitted: set[str] = field(default_factory=set)  # answered as admitted
    errors: dict[str, BaseException] = field(default_factory=dict)  # no answer (bob was killed under it)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)
    started: float = 0.0

    def received(self) -> set[str]:
        """Message ids in bob's journal, and the tags a socket message's text starts with (see uds_shot)."""
        texts = received_texts(self.journal)
        return set(texts) | {text[:36] for text in texts.values()}

    def _run(self, shot: Shot, barrier: threading.Barrier | None) -> None:
        try:
            reason = shot.fire(lambda: barrier.wait(WAIT_S) if barrier is not None else None)
        except BaseException as exc:  # bob killed under a blocked one: checked against the journal instead
            with self.lock:
                self.errors[shot.message_id] = exc
            if barrier is not None:  # one that never reaches the start line fails the others now, not in 90 s
                barrier.abort()
            return
        with self.lock:
            if reason is None:
                self.admitted.add(shot.message_id)
            else:
                self.refused[shot.message_id] = reason

    def answered(self, shot: Shot) -> bool:
        """Admitted, refused, failed (checked by fire) or, for a shot that blocks, journaled."""
        with self.lock:
            if shot.message_id in self.refused or shot.message_id in self.admitted or shot.message_id in self.errors:
                return True
        return shot.blocks and shot.message_id in self.received()

    def tally(self) -> str:
        """Where the flood stands, for a failure message."""
        with self.lock:
            admitted, refused, failed = len(self.admitted), len(self.refused), len(self.errors)
        waiting = sum(not self.answered(s) for s in self.shots)
        return f"admitted {admitted}, refused {refused}, failed {failed}, unanswered {waiting}"

    def fire(self, mode: str) -> None:
        self.started = time.monotonic()
        barrier = threading.Barrier(len(self.shots)) if mode == "concurrent" else None
        for shot in self.shots:
            t = threading.Thread(target=self._run, args=(shot, barrier), daemon=True)
            self.threads.append(t)
            t.start()
            if barrier is None:  # sequential: each one answered (or journaled, if it blocks) before the next
                wait_for(lambda s=shot: self.answered(s), WAIT_S, f"{shot.message_id} answered")
        try:
            wait_for(lambda: all(self.answered(s) for s in self.shots), WAIT_S, "the whole flood")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}: {self.tally()}") from None
        first = [e for e in self.errors.values() if not isinstance(e, threading.BrokenBarrierError)]
        assert not self.errors, (self.tally(), [repr(e) for e in (first or list(self.errors.values()))[:3]])

    def join(self) -> None:
        for t in self.threads:
            t.join(WAIT_S)
        assert not any(t.is_alive() for t in self.threads), "a flood thread hung"


# ---------------------------------------------------------------------- the two paths in

_LOOP_LOCK = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """The one event loop every A2A shot runs in, on its own thread, started on first use. Under a lock: the 300
    threads of a flood ask for it at once, and two loops made one shot's client meet another loop's Event."""
    with _LOOP_LOCK:
        return _start_loop()


@functools.cache
def _start_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="flood-a2a-loop", daemon=True).start()
    return loop


def in_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` in the shared loop. One loop for a flood's 300 sends, not one per thread: 300 threads each with
    its own loop starved each other of the GIL on a loaded machine until a loopback connect outlived the client's
    5 s connect timeout."""
    return asyncio.run_coroutine_threadsafe(coro, shared_loop()).result(WAIT_S + 60)  # past the clients' timeout


def a2a_shot(url: str, token: str, *, kind: Kind = Kind.INFORM, at_once: bool = True, size: int = 8) -> Shot:
    """A SendMessage over HTTP with alice's token; past the text limit as raw JSON-RPC (our client refuses it)."""
    mid = new_message_id()
    text = "x" * size

    def fire(go: Callable[[], object]) -> str | None:
        if size > TEXT_LIMIT:
            body = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}
            rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": body}}
            headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
            with httpx.Client(timeout=WAIT_S) as http:
                http.get(url + ".well-known/agent-card.json").raise_for_status()  # connected
                go()
                answer = http.post(url, json=rpc, headers=headers).json()
            return f"{answer['error']['code']}: {answer['error']['message']}" if "error" in answer else None

        async def connect() -> A2AClient:
            peer = A2AClient(url, token, timeout=WAIT_S + 40)
            with contextlib.suppress(TaskError):
                await peer.get(mid)  # connected (GetTask injects nothing; the task does not exist yet)
            return peer

        async def send(peer: A2AClient) -> TaskView:
            try:
                return await peer.send(new_message("bob", text, kind=kind, message_id=mid), return_immediately=at_once)
            finally:
                await peer.close()

        peer = in_loop(connect())
        try:
            go()
        except BaseException:
            in_loop(peer.close())
            raise
        try:
            in_loop(send(peer))
        except TaskError as exc:
            return str(exc)
        return None

    return Shot(mid, fire, blocks=not at_once)


def uds_shot(agent: Agent, key: str, size: int) -> tuple[Shot, list[str]]:
    """A keyed plain user line on bob's socket (an unverified inform). Its message id is bob's to choose, so it is
    learned from the answer or, while it blocks, from the journal text (each shot's text is unique)."""
    tag = new_message_id()
    text = (tag + "y" * size)[:size]
    found: list[str] = []

    def fire(go: Callable[[], object]) -> str | None:
        line = json.dumps({"type": "user", "message": {"role": "user", "content": text}}).encode() + b"\n"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(60)
            sock.connect(agent.ready["uds_path"])
            sock.sendall(encode_auth(key))
            go()
            sock.sendall(line)
            sock.shutdown(socket.SHUT_WR)
            answer = json.loads(sock.makefile("rb").readline())
        found.append(answer["message_id"])
        return str(answer["reason"]) if answer["state"] == "rejected" else None

    return Shot(tag, fire, blocks=True), found


# ---------------------------------------------------------------------- set-up and the after-checks


def stalled(xt: Procs) -> tuple[Agent, str]:
    """alice (the A2A sender: her token names her) and bob, whose session hangs on every injection."""
    alice = xt.start_agent("alice", "--no-a2a")  # her token still names her at bob
    bob = xt.start_agent("bob", "--default", "hang", "--inject-timeout", f"{STALL_S:g}")
    return bob, read_key(xt.paths.token_path(alice.agent_id))


def unstick_and_check(xt: Procs, flood: Flood, admitted: set[str]) -> None:
    """kill -9 the stalled bob, restart him with a harness that delivers: every admitted message is delivered once,
    but those a hanging injection had claimed, which are reconciled unknown and never injected."""

    def caught() -> set[str]:  # claimed for dispatch, no outcome
        records = read_journal(flood.journal).records
        claimed = {r["message_id"] for r in records if r["type"] == "dispatch"}
        return claimed - {r["message_id"] for r in records if r["type"] == "outcome"}

    wait_for(lambda: bool(caught()), WAIT_S, "the hanging injection's claim journaled")
    xt.kill9(flood.agent)
    flood.join()
    held = caught()  # the journal as the kill left it
    assert held <= admitted, stray_claims(flood, held - admitted)
    bob = xt.start_agent("bob")
    assert bob.agent_id == flood.agent.agent_id
    delivered = admitted - held
    wait_for(lambda: delivered <= set(bob.inbox_ids()), WAIT_S, f"{len(delivered)} delivered after the restart")
    inbox = Counter(bob.inbox_ids())
    assert set(inbox) == delivered and max(inbox.values()) == 1, "delivered exactly the admitted ones, once each"
    after = read_journal(flood.journal).records
    for mid in held:
        outs = [(r["state"], r.get("reconciled")) for r in after if r["type"] == "outcome" and r["message_id"] == mid]
        assert outs == [("unknown", True)], (mid, outs)


def stray_claims(flood: Flood, strays: set[str]) -> str:
    """What the journal and the flood know of claims outside the admitted set: each one's records, and whether it
    was a shot of this flood and how that shot was answered (a failure seen once under load, not reproduced since:
    this says which path wrote it)."""
    records = read_journal(flood.journal).records
    shots = {s.message_id for s in flood.shots}
    lines = [f"{len(strays)} claimed for dispatch, no outcome, not admitted: {flood.tally()}"]
    for mid in sorted(strays):
        answer = flood.refused.get(mid, "admitted" if mid in flood.admitted else repr(flood.errors.get(mid)))
        lines.append(f"{mid}: {'a shot, answered ' + answer if mid in shots else 'not a shot of this flood'}")
        lines += [
            "  " + json.dumps({k: v for k, v in r.items() if k != "message"} | {"mid": mid})[:400]
            for r in records
            if mid in (r.get("message_id"), (r.get("message") or {}).get("message_id"))
        ]
    return "\n".join(lines)


def received_texts(journal: Path) -> dict[str, str]:
    """message_id → text of every received record."""
    records = read_journal(journal).records
    return {
        r["message"]["message_id"]: "".join(p.get("text", "") for p in r["message"].get("parts", []))
        for r in records
        if r["type"] == "received"
    }


def tag_to_id(journal: Path) -> dict[str, str]:
    """A socket shot's tag (the first 36 characters of its text) → the message id bob gave it."""
    return {text[:36]: mid for mid, text in received_texts(journal).items()}


def check_exact(flood: Flood, limit: int, reason: str) -> set[str]:
    """Exactly `limit` of the flood in bob's journal, every other one refused with `reason` and not journaled."""
    received = flood.received()
    ids = {s.message_id for s in flood.shots}
    admitted = ids & received
    assert len(admitted) == limit, (len(admitted), limit, Counter(flood.refused.values()))
    assert set(flood.refused) == ids - admitted, "every message is either admitted or refused, never both"
    assert all(reason in r for r in flood.refused.values()), Counter(flood.refused.values())
    assert flood.admitted <= admitted
    wait_audited(flood.journal, set(flood.refused), reason)
    return admitted


def wait_audited(journal: Path, refused: set[str], reason: str | None = None) -> None:
    """Every refused message gets its `rejected` audit record (with `reason`, when given), but not before its
    answer: the chain queues the record and answers at once (receiver/chain.py `_refuse`: written, not waited
    for), so the last refusals' records may still be on their way to the file when the flood's last answer is
    in. Read once, the journal missed one under load; the promise is that they arrive."""

    def audited() -> set[str]:
        return {
            r["message_id"]
            for r in read_journal(journal).records
            if r["type"] == "rejected" and (reason is None or r["reason"] == reason)
        }

    try:
        wait_for(lambda: refused <= audited(), WAIT_S, "every refusal audited")
    except TimeoutError:
        raise AssertionError(f"refused but never audited: {sorted(refused - audited())}") from None


async def listed(url: str, token: str) -> int:
    async with A2AClient(url, token, timeout=WAIT_S) as peer:
        return (await peer.list(page_size=1)).total_size


# ---------------------------------------------------------------------- the floods


@pytest.mark.parametrize("mode", MODES)
def test_pending_task_flood_admits_exactly_256(xt: Procs, mode: str) -> None:
    bob, token = stalled(xt)
    url = bob.ready["a2a_url"]
    flood = Flood(
        bob, xt.paths.journal_file(bob.agent_id), [a2a_shot(url, token) for _ in range(LIMITS.max_pending_tasks + 44)]
    )
    flood.fire(mode)
    admitted = check_exact(flood, LIMITS.max_pending_tasks, "admission:pending_tasks")
    assert asyncio.run(listed(url, token)) == LIMITS.max_pending_tasks  # a task for each, none for the refused
    unstick_and_check(xt, flood, admitted)


@pytest.mark.parametrize("mode", MODES)
def test_open_ask_flood_admits_exactly_32(xt: Procs, mode: str) -> None:
    bob, token = stalled(xt)
    url = bob.ready["a2a_url"]
    asks = [a2a_shot(url, token, kind=Kind.ASK) for _ in range(LIMITS.max_open_asks + 18)]
    flood = Flood(bob, xt.paths.journal_file(bob.agent_id), asks)
    flood.fire(mode)
    admitted = check_exact(flood, LIMITS.max_open_asks, "admission:open_asks")
    assert asyncio.run(listed(url, token)) == LIMITS.max_open_asks
    unstick_and_check(xt, flood, admitted)


@pytest.mark.parametrize("mode", MODES)
def test_default_wait_flood_admits_exactly_64(xt: Procs, mode: str) -> None:
    bob, token = stalled(xt)
    url = bob.ready["a2a_url"]
    flood = Flood(
        bob,
        xt.paths.journal_file(bob.agent_id),
        [a2a_shot(url, token, at_once=False) for _ in range(LIMITS.max_default_waits + 36)],
    )
    flood.fire(mode)  # the admitted ones block: each is waited for in the journal, not for an answer
    admitted = check_exact(flood, LIMITS.max_default_waits, "admission:default_waits")
    assert not flood.admitted  # none answered while bob is stalled (they wait, the sender is never told early)
    assert asyncio.run(listed(url, token)) == LIMITS.max_default_waits
    # A wait is what the limit bounds, not a task: returnImmediately is still admitted.
    quick = a2a_shot(url, token)
    assert quick.fire(lambda: None) is None
    flood.shots.append(quick)
    unstick_and_check(xt, flood, admitted | {quick.message_id})


@pytest.mark.parametrize("mode", MODES)
def test_text_flood_admits_the_limit_and_refuses_one_byte_more(xt: Procs, mode: str) -> None:
    bob, token = stalled(xt)
    url, key = bob.ready["a2a_url"], read_key(xt.paths.key_path(bob.agent_id))
    over_a2a = [a2a_shot(url, token, size=TEXT_LIMIT + 1) for _ in range(12)]
    at_a2a = [a2a_shot(url, token, size=TEXT_LIMIT) for _ in range(12)]
    over_uds = [uds_shot(bob, key, TEXT_LIMIT + 1) for _ in range(12)]
    at_uds = [uds_shot(bob, key, TEXT_LIMIT) for _ in range(12)]
    shots = [s for s, _ in at_uds] + at_a2a + [s for s, _ in over_uds] + over_a2a
    flood = Flood(bob, xt.paths.journal_file(bob.agent_id), shots)
    flood.fire(mode)
    admitted = {s.message_id for s in at_a2a} | {s.message_id for s, _ in at_uds}
    assert flood.received() & {s.message_id for s in shots} == admitted
    # Over A2A the 64 KiB limit is enforced when the request is read (Invalid params), before the chain: nothing
    # is journaled, not even the audit record.
    assert {flood.refused[s.message_id] for s in over_a2a} == {
        f"-32602: message.parts: text is {TEXT_LIMIT + 1} bytes, over the {TEXT_LIMIT}-byte limit"
    }
    # On the socket a plain line reaches the chain's admission check, which refuses and audits it.
    assert {flood.refused[s.message_id] for s, _ in over_uds} == {"admission:text_too_large"}
    wait_audited(flood.journal, {f[0] for _, f in over_uds})
    records = read_journal(flood.journal).records
    assert not {s.message_id for s in over_a2a} & {r.get("message_id") for r in records}
    assert asyncio.run(listed(url, token)) == len(at_a2a)
    # The rest is checked by journal message id: the socket ones under bob's own ids.
    by_tag = tag_to_id(flood.journal)
    unstick_and_check(xt, flood, {by_tag.get(m, m) for m in admitted})
