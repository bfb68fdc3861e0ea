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
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from crosstalk.journal.codec import read_journal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_crash_restart import Stream, by_type, xt  # noqa: F401 (xt is the fixture)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(7200)]
ITERATIONS = int(os.environ.get("CROSSTALK_CRASH_ITERATIONS", "10"))


def test_kill_9_at_random_points_loses_nothing_acknowledged_and_injects_nothing_twice(xt) -> None:  # noqa: F811
    rng = random.Random(int(os.environ.get("CROSSTALK_CRASH_SEED", "14")))
    acked_total, lives, in_flight_total = 0, 0, 0
    all_acked: set[str] = set()
    agent_id = None
    for _ in range(ITERATIONS):
        hang = rng.random() < 0.3
        script = ("--script", ",".join(["accept"] * rng.randint(0, 5) + ["hang"])) if hang else ()
        agent = xt.start_agent("crashy", *script)
        assert agent_id in (None, agent.agent_id)
        agent_id = agent.agent_id
        lives += 1
        stream = Stream(xt.paths, "crashy").start()
        try:
            time.sleep(rng.uniform(0.02, 0.4))  # a random point in the stream
            xt.kill9(agent)
            assert agent.proc.returncode == -signal.SIGKILL
        finally:
            stream.join()
        all_acked |= set(stream.acked)
        acked_total += len(stream.acked)
        records = read_journal(xt.paths.journal_file(agent_id)).records
        types = by_type(records)
        in_flight_total += len(set(types.get("dispatch", {})) - set(types.get("outcome", {})))
        for mid in stream.acked:  # every acknowledgement was durable before it was given
            outs = [o["state"] for o in types.get("outcome", {}).get(mid, [])]
            assert len(types["received"].get(mid, [])) == 1 and outs[:1] == ["accepted"], (mid, outs)
        inbox = agent.inbox_ids()
        twice = [m for m, c in Counter(inbox).items() if c > 1]
        assert not twice, twice  # nothing injected twice across every life so far
        assert all_acked <= set(inbox)
    final = xt.start_agent("crashy")  # the last life reconciles and still delivers
    try:
        assert final.agent_id == agent_id
        assert not [m for m, c in Counter(final.inbox_ids()).items() if c > 1]
    finally:
        xt.kill9(final)
    print(f"crash suite: {ITERATIONS} kills, {lives} lives, {acked_total} acknowledged, 0 lost, 0 injected twice, "
          f"{in_flight_total} caught mid-dispatch (reconciled unknown)")  # fmt: skip
