"""Fixtures for doctor's integration tests: a machine of its own (HOME, state root, runtime dir under one short temp
dir) with real agents, dead processes and a real `crosstalk doctor`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.doctor_machine import Machine


@pytest.fixture
def machine() -> Iterator[Machine]:
    m = Machine()
    try:
        yield m
    finally:
        m.close()
