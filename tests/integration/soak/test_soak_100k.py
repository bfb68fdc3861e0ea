"""Memory and time stay flat with history: a real agent process (`crosstalk agent run --harness fake`) receives
100,000 messages over its real socket (bench/soak_100k.py drives it; CROSSTALK_SOAK_MESSAGES changes the count).

Nothing is lost or injected twice; its RSS over the second half of the run stays flat within a bound; the journal
stays bounded; it restarts on that journal within 1.5x its live RSS; and `crosstalk watch --once` reads it. Times
are never asserted in a test (a loaded machine makes them noise): bench/soak_100k.py prints the restart and
`watch --once` times beside an empty agent's, and docs/reliability.md records them."""

from __future__ import annotations

import os

import pytest

from bench._common import make_tmp, remove_tmp
from bench.soak_100k import soak

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

MESSAGES = int(os.environ.get("CROSSTALK_SOAK_MESSAGES", "100000"))
SECOND_HALF_GROWTH_MB = 16.0  # the most the RSS may grow between half way and the end
JOURNAL_MB = 16.0  # the most the journal may hold at any sample (compaction every 2 MB of growth; main: 130 MB)
OVER_EMPTY_MB = 96.0  # the most the RSS may be above an empty agent's at the end (main: +295 MB at 100k; here +59)


def test_an_agent_receiving_100k_messages_stays_flat_in_memory_and_time() -> None:
    tmp = make_tmp()
    try:
        r = soak(MESSAGES, 8, tmp)
    finally:
        remove_tmp(tmp)  # soak() has stopped every agent it started, by pid
    print(r)
    assert r["states"] == {"accepted": MESSAGES}, r["agent_log"]
    assert (r["lost"], r["injected_twice"]) == (0, 0)
    half = next(s for s in r["rss_samples"] if s[0] >= MESSAGES // 2)
    assert r["rss_mb"] - half[1] <= SECOND_HALF_GROWTH_MB, r["rss_samples"]
    assert r["rss_mb"] - r["empty_rss_mb"] <= OVER_EMPTY_MB, r["rss_samples"]
    assert max(s[2] for s in r["rss_samples"]) <= JOURNAL_MB * 1e6, r["rss_samples"]
    assert r["restart_rss_mb"] <= 1.5 * r["rss_mb"], (r["restart_rss_mb"], r["rss_mb"])
    assert r["restart_peak_mb"] <= 1.5 * r["rss_mb"], (r["restart_peak_mb"], r["rss_mb"])
