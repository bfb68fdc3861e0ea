"""Shared fixtures for the bus unit tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tmp() -> Iterator[Path]:
    """A fresh short temp dir under /tmp (AF_UNIX paths must stay under 108 bytes), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
