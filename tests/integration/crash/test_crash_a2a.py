"""kill -9 inside A2A task saves, many times over one agent: after every restart, every task the sender was answered
for is still there (GetTask answers it, in the acknowledged state or a later one), every message acknowledged as
delivered is in the session, nothing reached the session twice across its lives, and a message caught between its
dispatch claim and its outcome comes back unknown (reconciled), never resent.

Each life starts the agent, streams A2A SendMessage calls into it from several threads (new informs and asks, with
and without returnImmediately, and continuations of the thread's own open tasks), kills it at a random moment
(sometimes while an injection hangs) and restarts it for the checks. The iteration count comes from
CROSSTALK_CRASH_ITERATIONS (default 10). Marked slow: `pytest -m slow tests/integration/crash` runs it alone.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from crosstalk.core.errors import CrosstalkError
from crosstalk.core.kinds import Kind
from crosstalk.core.message import new_message
from crosstalk.core.tasks import TERMINAL, TaskState, TaskView
from crosstalk.ingress.a2a.client import A2AClient
from crosstalk.journal.codec import read_journal
from crosstalk.registry.credentials import read_key
from tests.support.bounded import run_bounded
from tests.support.crash import by_type
from tests.support.procs import Agent, Procs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(7200)]
ITERATIONS = int(os.environ.get("CROSSTALK_CRASH_ITERATIONS", "10"))
LIVES_PER_AGENT = 25  # a fresh receiver every so many lives: each life's checks read its whole journal and inbox
SENDERS = 4
REQUEST_TIMEOUT_S = 10.0
FIRST_ACK_S = 30.0
RANK = {TaskState.SUBMITTED: 0, TaskState.WORKING: 1, TaskState.INPUT_REQUIRED: 1}  # terminal states rank 2


def rank(state: TaskState) -> int:
    return RANK.get(state, 2)


@dataclass
class Ack:
    """One SendMessage the sender was answered for: the task it names, and the task as the answer showed it."""

    message_id: str
    task_id: str
    state: TaskState
    delivery: str | None  # of the task's first message: a continuation's own delivery is not in the view
    continued: bool


@dataclass
class Stream:
    """SENDERS threads streaming A2A SendMessage calls into one agent until stopped; every answer is recorded."""

    url: str
    token: str
    to: str
    rng_seed: int
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    acks: list[Ack] = field(default_factory=list)
    errors: int = 0
    first_ack: threading.Event = field(default_factory=threading.Event)
    crashes: list[BaseException] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Stream:
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(SENDERS)]
        for t in self.threads:
            t.start()
        return self

    def _run(self, n: int) -> None:
        try:
            run_bounded(self._loop(n, random.Random(self.rng_seed * 31 + n)), 120)
        except BaseException as exc:  # anything but a delivery error is a test failure, reported by join()
            with self.lock:
                self.crashes.append(exc)

    async def _loop(self, n: int, rng: random.Random) -> None:
        mine: list[str] = []  # this thread's tasks, open when last seen: continuations go to them
        async with A2AClient(self.url, self.token, timeout=REQUEST_TIMEOUT_S) as peer:
            i = 0
            while not self.stop.is_set():
                i += 1
                ask = rng.random() < 0.3
                kind = Kind.ASK if ask else Kind.INFORM
                msg = new_message(
                    self.to, f"a2a t{n} m{i}", kind=kind, deadline_seconds=rng.randint(1, 3) if ask else 0
                )
                task_id = rng.choice(mine) if mine and rng.random() < 0.25 else None
                try:
                    at_once = rng.random() < (0.85 if ask else 0.5)  # a default-wait ask waits out its deadline
                    view = await peer.send(msg, task_id=task_id, return_immediately=at_once)
                except CrosstalkError:  # down, dying, refused, a finished task: not acknowledged
                    with self.lock:
                        self.errors += 1
                    if task_id is not None:
                        mine.remove(task_id)
                    await asyncio.sleep(0.005)  # the agent may be down: do not spin
                    continue
                assert task_id is None or view.task_id == task_id, (view.task_id, task_id)
                self._acked(msg.message_id, view, continued=task_id is not None)
                if view.state not in TERMINAL and view.task_id not in mine:
                    mine.append(view.task_id)
                elif view.state in TERMINAL and view.task_id in mine:
                    mine.remove(view.task_id)

    def _acked(self, message_id: str, view: TaskView, *, continued: bool) -> None:
        with self.lock:
            self.acks.append(Ack(message_id, view.task_id, view.state, view.delivery, continued))
        self.first_ack.set()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(REQUEST_TIMEOUT_S + 10)
        assert not any(t.is_alive() for t in self.threads), "a sender thread hung"
        assert not self.crashes, self.crashes[:3]


async def get_all(url: str, token: str, task_ids: list[str]) -> dict[str, TaskView]:
    async with A2AClient(url, token, timeout=REQUEST_TIMEOUT_S) as peer:
        return {tid: await peer.get(tid) for tid in task_ids}


def check_after_restart(
    agent: Agent, token: str, acks: list[Ack], caught: dict[str, int], records: list[dict[str, Any]]
) -> None:
    """The restarted agent against what the previous life acknowledged and left caught mid-dispatch."""
    # Every acknowledged task is there, in its acknowledged state or a later one; a terminal one unchanged.
    best: dict[str, Ack] = {}
    for ack in acks:
        if ack.task_id not in best or rank(ack.state) > rank(best[ack.task_id].state):
            best[ack.task_id] = ack
    views = run_bounded(get_all(agent.ready["a2a_url"], token, sorted(best)), 120)
    for tid, ack in best.items():
        now = views[tid]
        assert now.task_id == tid
        assert rank(now.state) >= rank(ack.state), (tid, ack.state, now.state)
        if ack.state in TERMINAL:
            assert now.state is ack.state, (tid, ack.state, now.state)
        if ack.delivery in ("accepted", "queued") and now.state is not TaskState.COMPLETED:
            assert now.delivery == ack.delivery, (tid, ack.delivery, now.delivery)
    # Caught between claim and outcome: reconciled unknown, once, and never written to the session again.
    types = by_type(records)
    inbox = Counter(agent.inbox_ids())
    for mid, before in caught.items():
        outs = types.get("outcome", {}).get(mid, [])
        assert [(o["state"], o.get("reconciled")) for o in outs] == [("unknown", True)], (mid, outs)
        assert inbox[mid] == before, (mid, before, inbox[mid])


def life(xt: Procs, rng: random.Random, name: str, token: str) -> tuple[Agent, Stream]:
    hang = rng.random() < 0.3
    script = ("--script", ",".join(["accept"] * rng.randint(0, 5) + ["hang"])) if hang else ()
    agent = xt.start_agent(name, *script)
    stream = Stream(agent.ready["a2a_url"], token, name, rng.randrange(1 << 30)).start()
    try:
        # The agent loads its A2A stack when the first client connects (ingress/a2a/lazy.py): over a second on a
        # loaded machine. The kill must land in the stream, not before it started, or a life acknowledges nothing.
        assert stream.first_ack.wait(FIRST_ACK_S), f"no SendMessage acknowledged within {FIRST_ACK_S:g} s"
        time.sleep(rng.uniform(0.1, 1.0))  # a random point in the stream
        xt.kill9(agent)
        assert agent.proc.returncode == -signal.SIGKILL
    finally:
        stream.join()
    return agent, stream


def test_kill_9_inside_a2a_task_saves_loses_no_task_and_injects_nothing_twice(xt: Procs) -> None:
    rng = random.Random(int(os.environ.get("CROSSTALK_CRASH_SEED", "14")))
    sender = xt.start_agent("alice")  # the A2A sender: its token names it; it lives through every kill
    token = read_key(xt.paths.token_path(sender.agent_id))
    totals = {"kills": 0, "acknowledged": 0, "continuations": 0, "tasks": 0, "caught_mid_dispatch": 0}
    for start in range(0, ITERATIONS, LIVES_PER_AGENT):
        one_agent(
            xt, rng, f"a2acrash{start // LIVES_PER_AGENT}", token, min(LIVES_PER_AGENT, ITERATIONS - start), totals
        )
        print(
            f"a2a crash suite: {totals['kills']} kills, {totals['acknowledged']} sends acknowledged "
            f"({totals['tasks']} tasks, {totals['continuations']} continuations), 0 lost, 0 injected twice, "
            f"{totals['caught_mid_dispatch']} caught "
            "mid-dispatch (reconciled unknown)",
            flush=True,
        )
    assert totals["kills"] == ITERATIONS
    assert totals["acknowledged"] >= ITERATIONS  # the stream really ran: a life acknowledges dozens of sends


def one_agent(xt: Procs, rng: random.Random, name: str, token: str, lives: int, totals: dict[str, int]) -> None:
    """`lives` lives of one agent, each killed at a random moment, then restarted and checked."""
    agent_id = None
    all_tasks: set[str] = set()
    for n in range(lives):
        agent, stream = life(xt, rng, name, token)
        assert agent_id in (None, agent.agent_id)
        agent_id = agent.agent_id
        totals["kills"] += 1
        totals["acknowledged"] += len(stream.acks)
        totals["continuations"] += sum(a.continued for a in stream.acks)
        if os.environ.get("CROSSTALK_CRASH_DEBUG"):
            print(Counter((a.state.value, a.delivery, a.continued) for a in stream.acks), stream.errors)
        all_tasks |= {a.task_id for a in stream.acks}
        journal = xt.paths.journal_file(agent_id)
        types = by_type(read_journal(journal).records)
        for ack in stream.acks:  # every acknowledgement was durable before it was given
            assert len(types["received"].get(ack.message_id, [])) == 1, ack
            assert any(r.get("task_id") == ack.task_id for r in types["task"].get(ack.message_id, [])), ack
        inbox = Counter(agent.inbox_ids())
        for ack in stream.acks:
            if ack.delivery in ("accepted", "queued") and not ack.continued:
                assert inbox[ack.message_id] == 1, ack  # acknowledged as delivered: in the session
        caught = {m: inbox[m] for m in set(types.get("dispatch", {})) - set(types.get("outcome", {}))}
        totals["caught_mid_dispatch"] += len(caught)
        restarted = xt.start_agent(name)  # the restart the checks run against (the next life is another one)
        try:
            assert restarted.agent_id == agent_id
            check_after_restart(restarted, token, stream.acks, caught, read_journal(journal).records)
            twice = [m for m, c in Counter(restarted.inbox_ids()).items() if c > 1]
            assert not twice, twice  # nothing injected twice across every life so far
        finally:
            xt.kill9(restarted)
        if n == lives - 1:
            totals["tasks"] += len(all_tasks)
