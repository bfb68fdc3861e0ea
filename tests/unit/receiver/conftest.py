"""Fixtures for the receiver-chain tests: a short temp dir and a factory of rigs that are always closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.receiver import Rig, make_tmp, rm_tmp


@pytest.fixture
def rx_root() -> Iterator[Path]:
    root = make_tmp()
    try:
        yield root
    finally:
        rm_tmp(root)


@pytest.fixture
def make_rig(rx_root: Path) -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def factory(**kw: Any) -> Rig:
        rig = Rig(rx_root, **kw)
        rigs.append(rig)
        return rig

    yield factory
    for rig in rigs:
        rig.close()
