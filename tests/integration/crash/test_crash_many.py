"""kill -9 at random points, many times over one agent: after every restart, every acknowledged message is in the
journal with an accepted outcome, and nothing reached the session twice across all its lives.

Each iteration starts the agent, streams sends into it from several threads, kills it at a random moment
(sometimes while an injection hangs between its dispatch claim and its outcome), and checks. The
iteration count comes from CROSSTALK_CRASH_ITERATIONS (default 10 here; the slow run in docs/reliability.md uses
1,000). Marked slow: `pytest -m slow tests/integration/crash` runs it alone.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter

import pytest

from crosstalk.journal.codec import read_journal
from tests.support.crash import Stream, by_type

pytestmark = [pytest.mark.slow, pytest.mark.timeout(7200)]
ITERATIONS = int(os.environ.get("CROSSTALK_CRASH_ITERATIONS", "10"))


LIVES_PER_AGENT = 25  # a fresh agent every so many lives: each life's checks read its whole journal and inbox


def test_kill_9_at_random_points_loses_nothing_acknowledged_and_injects_nothing_twice(xt) -> None:
    rng = random.Random(int(os.environ.get("CROSSTALK_CRASH_SEED", "14")))
    totals = {"kills": 0, "acknowledged": 0, "caught_mid_dispatch": 0}
    for start in range(0, ITERATIONS, LIVES_PER_AGENT):
        name = f"crashy{start // LIVES_PER_AGENT}"
        one_agent(xt, rng, name, min(LIVES_PER_AGENT, ITERATIONS - start), totals)
        print(
            f"crash suite: {totals['kills']} kills, {totals['acknowledged']} acknowledged, 0 lost, 0 injected "
            f"twice, {totals['caught_mid_dispatch']} caught mid-dispatch (reconciled unknown)",
            flush=True,
        )
    assert totals["kills"] == ITERATIONS


def one_agent(xt, rng: random.Random, name: str, lives: int, totals: dict[str, int]) -> None:
    """`lives` lives of one agent, each killed at a random moment and checked; then one more that must deliver."""
    all_acked: set[str] = set()
    agent_id = None
    for _ in range(lives):
        hang = rng.random() < 0.3
        script = ("--script", ",".join(["accept"] * rng.randint(0, 5) + ["hang"])) if hang else ()
        agent = xt.start_agent(name, *script)
        assert agent_id in (None, agent.agent_id)
        agent_id = agent.agent_id
        stream = Stream(xt.paths, name).start()
        try:
            time.sleep(rng.uniform(0.02, 0.4))  # a random point in the stream
            xt.kill9(agent)
            assert agent.proc.returncode == -signal.SIGKILL
        finally:
            stream.join()
        totals["kills"] += 1
        all_acked |= set(stream.acked)
        totals["acknowledged"] += len(stream.acked)
        types = by_type(read_journal(xt.paths.journal_file(agent_id)).records)
        totals["caught_mid_dispatch"] += len(set(types.get("dispatch", {})) - set(types.get("outcome", {})))
        for mid in stream.acked:  # every acknowledgement was durable before it was given
            outs = [o["state"] for o in types.get("outcome", {}).get(mid, [])]
            assert len(types["received"].get(mid, [])) == 1 and outs[:1] == ["accepted"], (mid, outs)
        inbox = agent.inbox_ids()
        twice = [m for m, c in Counter(inbox).items() if c > 1]
        assert not twice, twice  # nothing injected twice across every life so far
        assert all_acked <= set(inbox)
    final = xt.start_agent(name)  # the last life reconciles and still delivers
    try:
        assert final.agent_id == agent_id
        assert not [m for m, c in Counter(final.inbox_ids()).items() if c > 1]
    finally:
        xt.kill9(final)
