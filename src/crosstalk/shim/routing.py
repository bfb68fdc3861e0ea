"""Where a message to `to` goes: the one routing decision `crosstalk send`, the MCP tools and the pi host share.

In this order:
- a live crosstalk agent with that name or agent_id: its socket or its A2A endpoint;
- a NAME@MACHINE (or model@machine) address no live agent here has: the git bus (live agent names never hold '@');
- a live session crosstalk does not serve (a Claude session started without it) with that name: written natively;
- nothing: unknown, with the registry's word (no such agent, or a name several agents share).
"""

from __future__ import annotations

from crosstalk.core.record import Record
from crosstalk.core.strenum import StrEnum
from crosstalk.registry.errors import AmbiguousName, NoSuchAgent

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from crosstalk.registry.descriptor import Descriptor
    from crosstalk.registry.paths import StatePaths


class RouteKind(StrEnum):
    LIVE_AGENT = "live_agent"
    BUS = "bus"
    NATIVE = "native"
    UNKNOWN = "unknown"


class Route(Record):
    """A Record (core/record.py), not a dataclass: `crosstalk send` routes on its start-up path."""

    _fields = ("kind", "to", "agent", "sessions", "problem")
    __slots__ = _fields
    kind: RouteKind
    to: str
    agent: Descriptor | None  # LIVE_AGENT: the agent's descriptor
    sessions: list[tuple[Any, Any]]  # NATIVE: (harness kind, session row) found
    problem: NoSuchAgent | AmbiguousName | None  # UNKNOWN: what the registry said

    def __init__(
        self,
        kind: RouteKind,
        to: str,
        agent: Descriptor | None = None,
        sessions: list[tuple[Any, Any]] | None = None,
        problem: NoSuchAgent | AmbiguousName | None = None,
    ) -> None:
        self._set(kind, to, agent, [] if sessions is None else sessions, problem)


def live_route(paths: StatePaths, to: str) -> Route | None:
    """The route when `to` names a live crosstalk agent (or several): only the registry's files and /proc are read,
    cheap enough for an event loop. None: `route` must look further (the bus, native sessions). On the event loop's
    thread only: the target's process is proven by a pidfd kept from one message to the next (discovery.is_live)."""
    from crosstalk.registry.discovery import resolve

    try:
        return Route(RouteKind.LIVE_AGENT, to, agent=resolve(paths, to, kept=True))
    except AmbiguousName as exc:
        return Route(RouteKind.UNKNOWN, to, problem=exc)
    except NoSuchAgent:
        return None


def away_route(to: str) -> Route | None:
    """The route for a NAME@ALIAS address once no live agent here has it (live_route said None): away, to the relay
    or the git bus, decided from the string alone, so a tool send skips `route`'s second registry read. None:
    `route` decides (an address a relay alias cannot be, like model@host.example)."""
    if "@" not in to:
        return None
    from crosstalk.relay.wire import split_remote

    return Route(RouteKind.BUS, to) if split_remote(to) is not None else None


def route(paths: StatePaths, to: str, environ: Mapping[str, str]) -> Route:
    """The route for a message to `to`. Raises RegistryError when the registry cannot be read."""
    from crosstalk.registry.discovery import resolve

    try:
        return Route(RouteKind.LIVE_AGENT, to, agent=resolve(paths, to))
    except AmbiguousName as exc:
        return Route(RouteKind.UNKNOWN, to, problem=exc)
    except NoSuchAgent as exc:
        missing = exc
    if "@" in to:  # a bus address has one; live agent names never do
        if _relay_address(to):  # NAME@ALIAS (a bus address too): decided without loading the bus (`crosstalk send`)
            return Route(RouteKind.BUS, to)
        # Imported here: the bus (PyYAML, git helpers) loads only for an address no live agent here has.
        from crosstalk.bus.live.bridge import is_bus_address

        if is_bus_address(to):
            return Route(RouteKind.BUS, to)
    from crosstalk.ingress.client import native_targets

    sessions = native_targets(paths, to, environ)
    if sessions:
        return Route(RouteKind.NATIVE, to, sessions=sessions)
    return Route(RouteKind.UNKNOWN, to, problem=missing)


_ALIAS_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _relay_address(to: str) -> bool:
    """relay/wire.py `split_remote`'s test (ALIAS one NATS token of 1-64 [A-Za-z0-9_-], NAME without '@'), without
    `re` or the relay's modules on `crosstalk send`'s path (tests/unit/shim holds the two the same)."""
    name, sep, alias = to.rpartition("@")
    return bool(sep and name and "@" not in name and 0 < len(alias) <= 64 and _ALIAS_CHARS.issuperset(alias))
