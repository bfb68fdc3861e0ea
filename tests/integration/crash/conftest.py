"""The crash tests' fixture: a state root of their own with every process they start stopped by pid."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.procs import Procs, procs


@pytest.fixture
def xt() -> Iterator[Procs]:
    with procs() as p:
        yield p
