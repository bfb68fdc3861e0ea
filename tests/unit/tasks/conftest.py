"""The task-service tests build on the receiver tests' helpers (tests/unit/receiver/receiver_support.py), imported
by name; and each gets a short private temp dir, always removed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_RECEIVER = str(Path(__file__).resolve().parents[1] / "receiver")
if _RECEIVER not in sys.path:
    sys.path.insert(0, _RECEIVER)

from receiver_support import make_tmp, rm_tmp


@pytest.fixture
def root() -> Iterator[Path]:
    path = make_tmp()
    try:
        yield path
    finally:
        rm_tmp(path)
