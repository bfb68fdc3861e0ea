"""The fixtures of the CLI tests: a state root of their own with every process they start stopped by pid
(tests.support.procs.procs), and alice, a fake-harness agent in it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.procs import Agent, Procs, procs


@pytest.fixture
def xt() -> Iterator[Procs]:
    with procs() as p:
        yield p


@pytest.fixture
def alice(xt: Procs) -> Agent:
    return xt.start_agent("alice")
