"""Fixtures for the uds ingress tests: a short temp state root and AgentHosts that are always closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.uds import HostThread, make_tmp, rm_tmp


@pytest.fixture
def xt_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = make_tmp()
    monkeypatch.setenv("CROSSTALK_HOME", str(root))
    try:
        yield root
    finally:
        rm_tmp(root)


@pytest.fixture
def start_host(xt_home: Path) -> Iterator[Callable[..., HostThread]]:
    hosts: list[HostThread] = []

    def factory(**kw: Any) -> HostThread:
        host = HostThread(xt_home, **kw)
        hosts.append(host)
        return host

    yield factory
    for host in reversed(hosts):
        host.close()


@pytest.fixture
def host(start_host: Callable[..., HostThread]) -> HostThread:
    return start_host()
