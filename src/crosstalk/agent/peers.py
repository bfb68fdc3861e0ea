"""Native peers (opt-in): an agent is published as a peer of the harnesses that have such peers (Claude's ListAgents
and SendMessage), per `$CROSSTALK_HOME/native-peers/<harness>.json`, written by `crosstalk install <harness>
--native-peers`. A message to the published peer arrives on the agent's own uds socket and runs the receiver chain
with the sender class its socket credentials prove."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crosstalk import harness as kinds
from crosstalk.core import untrusted
from crosstalk.fs.reading import read_capped
from crosstalk.harness.base import AgentInfo, PeerPublisher
from crosstalk.registry.paths import StatePaths

log = logging.getLogger(__name__)
MAX_SETTINGS_BYTES = 64 * 1024


def settings(paths: StatePaths) -> dict[str, dict[str, str]]:
    """The opted-in harnesses and their settings (unreadable or malformed files are skipped, and said so)."""
    out: dict[str, dict[str, str]] = {}
    for name in kinds.names():
        path = paths.native_peers / f"{name}.json"
        raw = read_capped(path, MAX_SETTINGS_BYTES)
        if raw is None:
            continue
        try:
            data = untrusted.loads(raw, what=str(path), max_bytes=MAX_SETTINGS_BYTES)
        except untrusted.UntrustedInput:
            data = None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            log.warning("ignoring %s: not a JSON object of strings", path)
            continue
        out[name] = data
    return out


def publish_native_peers(paths: StatePaths, own_harness: str, agent: AgentInfo, token: str) -> list[Callable[[], None]]:
    """Publish `agent` as a native peer of every opted-in harness but its own; how to unpublish each."""
    undo: list[Callable[[], None]] = []
    for name, opts in settings(paths).items():
        kind = kinds.kind(name)
        if name == own_harness or not isinstance(kind, PeerPublisher):
            continue
        try:
            done = kind.publish_peer(agent, token, opts)
        except OSError as exc:
            log.warning("could not publish %s as a %s peer: %s", agent.name, name, exc)
            continue
        if done is not None:
            undo.append(done)
    return undo
