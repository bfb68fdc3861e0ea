"""The one routing decision: a live agent first, then a NAME@MACHINE bus address, then a session without crosstalk,
else unknown with the registry's word. The registry and the native lookup are stood in for, so each kind is reached
by exactly the condition that decides it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crosstalk.registry.errors import AmbiguousName, NoSuchAgent
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.routing import RouteKind, route

PATHS = StatePaths(Path("/nonexistent"))
DESCRIPTOR = object()  # what resolve returns: the route hands it on untouched
SESSION = ("claude-kind", "row")


class World:
    """Who is live (`agents`, `ambiguous`) and which native sessions exist, and what the route asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, agents=(), ambiguous=(), native=()) -> None:
        self.agents, self.ambiguous, self.native = set(agents), set(ambiguous), set(native)
        self.native_asked: list[str] = []
        monkeypatch.setattr("crosstalk.registry.discovery.resolve", self.resolve)
        monkeypatch.setattr("crosstalk.ingress.client.native_targets", self.native_targets)

    def resolve(self, _paths: StatePaths, to: str) -> Any:
        if to in self.ambiguous:
            raise AmbiguousName(to, [("a" * 16, to, "claude", "/x"), ("b" * 16, to, "codex", "/y")])
        if to in self.agents:
            return DESCRIPTOR
        raise NoSuchAgent(to)

    def native_targets(self, _paths: StatePaths, to: str, _environ: Any) -> list[Any]:
        self.native_asked.append(to)
        return [SESSION] if to in self.native else []


def test_a_live_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(monkeypatch, agents={"alice"}, native={"alice"})
    got = route(PATHS, "alice", {})
    assert got.kind is RouteKind.LIVE_AGENT and got.agent is DESCRIPTOR
    assert world.native_asked == []  # a live agent wins; no session is looked for


def test_a_bus_address(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(monkeypatch, native={"sonnet@cachy"})
    got = route(PATHS, "sonnet@cachy", {})
    assert got.kind is RouteKind.BUS and got.agent is None and got.to == "sonnet@cachy"
    assert world.native_asked == []  # an address no live agent has goes to the bus, whatever a session is named


def test_a_session_without_crosstalk(monkeypatch: pytest.MonkeyPatch) -> None:
    World(monkeypatch, native={"bob"})
    got = route(PATHS, "bob", {})
    assert got.kind is RouteKind.NATIVE and got.sessions == [SESSION]


@pytest.mark.parametrize("to", ["nobody", "@cachy", "sonnet@"])  # half an address is not a bus address
def test_unknown_says_no_such_agent(monkeypatch: pytest.MonkeyPatch, to: str) -> None:
    world = World(monkeypatch)
    got = route(PATHS, to, {})
    assert got.kind is RouteKind.UNKNOWN and isinstance(got.problem, NoSuchAgent)
    assert world.native_asked == [to]


def test_an_ambiguous_name_is_unknown_and_looks_no_further(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(monkeypatch, ambiguous={"twin"}, native={"twin"})
    got = route(PATHS, "twin", {})
    assert got.kind is RouteKind.UNKNOWN and isinstance(got.problem, AmbiguousName)
    assert len(got.problem.candidates) == 2 and world.native_asked == []


def test_the_lean_relay_address_test_agrees_with_the_relays() -> None:
    """shim/routing.py decides NAME@ALIAS without loading relay/wire.py: the two agree."""
    from crosstalk.relay.wire import split_remote
    from crosstalk.shim.routing import _relay_address

    cases = ["bob@gpu", "local/echo@laptop", "a@b@c", "@gpu", "bob@", "bob@gpu.example", "bob@" + "x" * 64,
             "bob@" + "x" * 65, "bob@gpu_1-x", "bob@gpü", "bob", "b ob@gpu", "bob@g pu"]  # fmt: skip
    for to in cases:
        assert _relay_address(to) == (split_remote(to) is not None), to
