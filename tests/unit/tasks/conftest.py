"""The task-service tests build on the receiver tests' helpers (tests/support/receiver.py); each gets a short private
temp dir, always removed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.receiver import make_tmp, rm_tmp


@pytest.fixture
def root() -> Iterator[Path]:
    path = make_tmp()
    try:
        yield path
    finally:
        rm_tmp(path)
