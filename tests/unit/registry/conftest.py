"""Fixtures for registry unit tests: a short private state root under /tmp (AF_UNIX paths must stay short)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.registry.paths import StatePaths


@pytest.fixture
def tmp_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="xt"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def paths(tmp_root: Path) -> StatePaths:
    return StatePaths(tmp_root / "st").ensure()
