"""The relay tests' machines: a real nats-server on loopback with a user per machine (`evil` is the hostile third),
and state roots as machines, each its own `Procs` (every process it starts stopped, its directory removed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.nats_relay import NatsServer, join_and_serve, nats_server
from tests.support.procs import Procs, procs


@pytest.fixture
def relay() -> Iterator[NatsServer]:
    with nats_server("laptop", "gpu", "evil") as server:
        yield server


@pytest.fixture
def laptop() -> Iterator[Procs]:
    with procs() as p:
        yield p


@pytest.fixture
def gpu() -> Iterator[Procs]:
    with procs() as p:
        yield p


@pytest.fixture
def machines(relay: NatsServer) -> Iterator[tuple[Procs, Procs]]:
    """laptop and gpu, each joined with its own credentials and its relay process serving."""
    with procs() as laptop, procs() as gpu:
        join_and_serve(laptop, relay, "laptop")
        join_and_serve(gpu, relay, "gpu")
        yield laptop, gpu
