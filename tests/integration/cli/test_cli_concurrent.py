"""Several real agents, many concurrent senders: every message answered, injected once, journaled once."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from crosstalk.core.message import new_message
from crosstalk.ingress.client import send
from tests.support.procs import Procs

pytestmark = pytest.mark.slow

AGENTS = ("alice", "bob", "carol")
THREADS = 8
PER_THREAD = 100


def test_concurrent_senders_to_several_agents(xt: Procs) -> None:
    agents = {name: xt.start_agent(name) for name in AGENTS}
    paths = xt.paths
    answers: list[tuple[str, str, str, str]] = []  # (to, sent message_id, answered message_id, state)
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def sender(seed: int) -> None:
        rnd = random.Random(seed)
        mine: list[tuple[str, str, str, str]] = []
        try:
            start.wait(10)
            for i in range(PER_THREAD):
                to = rnd.choice(AGENTS)
                msg = new_message(to, f"t{seed} m{i} → {to}", from_=f"@load:t{seed}")
                result = send(paths, msg, timeout=30)
                assert result.target.name == to
                mine.append((to, msg.message_id, result.outcome.message_id, result.outcome.state.value))
        except BaseException as exc:
            with lock:
                errors.append(exc)
        with lock:
            answers.extend(mine)

    threads = [threading.Thread(target=sender, args=(n,), daemon=True) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a sender thread hung"
    assert errors == []
    assert len(answers) == THREADS * PER_THREAD
    assert Counter(a[3] for a in answers) == {"accepted": THREADS * PER_THREAD}
    assert all(sent == answered for _, sent, answered, _ in answers)

    expected: dict[str, set[str]] = {name: set() for name in AGENTS}
    for to, mid, _, _ in answers:
        expected[to].add(mid)
    assert sum(len(v) for v in expected.values()) == THREADS * PER_THREAD  # ids are unique

    for name, agent in agents.items():
        inbox = agent.inbox_ids()
        counts = Counter(inbox)
        assert [m for m, c in counts.items() if c > 1] == [], f"{name}: injected twice"
        assert set(inbox) == expected[name], f"{name}: inbox differs from what was sent to it"

        recs = xt.journal_records(agent.agent_id)
        received = Counter(r["message"]["message_id"] for r in recs if r["type"] == "received")
        outcomes = Counter(r["message_id"] for r in recs if r["type"] == "outcome")
        dispatch = Counter(r["message_id"] for r in recs if r["type"] == "dispatch")
        assert set(received) == expected[name]
        assert set(outcomes) == expected[name]
        assert set(dispatch) == expected[name]
        assert max(received.values()) == max(outcomes.values()) == max(dispatch.values()) == 1
        assert all(r["state"] == "accepted" for r in recs if r["type"] == "outcome")
        assert not [r for r in recs if r["type"] == "rejected"]
        # received → dispatch → outcome, in that order, for every message.
        order: dict[str, list[str]] = {}
        for r in recs:
            mid = r["message"]["message_id"] if r["type"] == "received" else r["message_id"]
            order.setdefault(mid, []).append(r["type"])
        assert {tuple(v) for v in order.values()} == {("received", "dispatch", "outcome")}
        raw = xt.paths.journal_file(agent.agent_id).read_bytes()
        assert raw.endswith(b"\n") and raw.count(b"\n") == len(recs)

    # Nothing crossed over: no agent's inbox holds another agent's message.
    all_inboxes = [set(a.inbox_ids()) for a in agents.values()]
    assert not (all_inboxes[0] & all_inboxes[1] or all_inboxes[0] & all_inboxes[2] or all_inboxes[1] & all_inboxes[2])
