"""Mapping an A2A bearer token to the registered agent it belongs to: the token names the sender.

Each live agent's token sits in a 0600 file its descriptor points to (credential_ref). A token that matches no
live agent's file is refused. Lookups are cached briefly so each request does not reread every file, and a hit is
re-checked against the descriptor's liveness so a stopped agent's token stops working. A known token's cache is
refreshed after the ttl only when the registry changed since (the agents' and credentials' directories' mtimes: a
descriptor or token is written by rename), so a request seconds after the last one does not reread every file.
"""

from __future__ import annotations

import hmac
import os
import time
from pathlib import Path

from crosstalk.registry.credentials import read_key
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import is_live, list_descriptors, registry_stamp
from crosstalk.registry.errors import KeyFileError
from crosstalk.registry.paths import StatePaths


class BearerDirectory:
    def __init__(self, paths: StatePaths, ttl_s: float = 2.0) -> None:
        self._paths = paths
        self._ttl = ttl_s
        self._tokens: dict[str, Descriptor] = {}
        self._loaded_at = float("-inf")
        self._liveness: dict[str, tuple[float, bool]] = {}
        self._inodes: dict[str, int] = {}  # instance_id → inode of the token file read for it
        self._stamp: tuple[int, int] | None = None  # registry_stamp at the last reload

    def lookup(self, token: str) -> Descriptor | None:
        """The live agent whose token this is, or None."""
        if not token:
            return None
        desc = self._find(token)
        if desc is None and (time.monotonic() - self._loaded_at > 0.05 or self._changed()):
            # A token we have not seen: maybe an agent that registered since the last load. Unknown tokens reread
            # at most every 50 ms, unless the registry changed since: a new agent's first request never waits.
            self._reload()
            desc = self._find(token)
        elif desc is not None and time.monotonic() - self._loaded_at > self._ttl:
            if self._changed():
                self._reload()
                desc = self._find(token)
            else:
                self._loaded_at = time.monotonic()  # nothing was renamed into either directory since
        if desc is not None and not self._live(desc):
            return None
        return desc

    def _changed(self) -> bool:
        """The registry may have changed since the last load (or changed too recently to tell)."""
        return self._stamp is None or self._stamp != registry_stamp(self._paths)

    def _live(self, desc: Descriptor) -> bool:
        """Liveness (pid, start time, lock) costs ~0.1 ms: checked at most once per ttl per agent. A clean stop
        removes the token file, and that is checked on every request (a stat), so it takes effect at once."""
        try:
            inode = os.stat(self._paths.token_path(desc.agent_id)).st_ino
        except FileNotFoundError:
            inode = None
        if inode is None or inode != self._inodes.get(desc.instance_id):
            # Gone, or replaced by a new registration's token: this token no longer names anyone.
            self._liveness.pop(desc.instance_id, None)
            return False
        now = time.monotonic()
        hit = self._liveness.get(desc.instance_id)
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        live = is_live(self._paths, desc)
        self._liveness[desc.instance_id] = (now, live)
        return live

    def _find(self, token: str) -> Descriptor | None:
        for known, desc in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return desc
        return None

    def _reload(self) -> None:
        self._stamp = registry_stamp(self._paths)
        tokens: dict[str, Descriptor] = {}
        for desc in list_descriptors(self._paths):
            expected = self._paths.token_path(desc.agent_id)
            if not desc.credential_ref or Path(desc.credential_ref) != expected:
                continue  # only the agent's own token file under the state root ever names it
            try:
                inode = os.stat(expected).st_ino
                tokens[read_key(expected)] = desc
                self._inodes[desc.instance_id] = inode
            except (KeyFileError, OSError):
                continue  # a missing or unsafe token file authenticates nobody
        self._tokens = tokens
        self._loaded_at = time.monotonic()
