"""Who is on the other end of an agent's socket (ingress/uds.py): the peer's pid and uid from SO_PEERCRED, and the
registered descriptor that pid serves, briefly cached."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from crosstalk.fs.procinfo import proc_start_time
from crosstalk.registry.descriptor import Descriptor

_PEERCRED = struct.Struct("3i")
PeerResolver = Callable[[int], Descriptor | None]


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process on the other end of a unix socket (Linux SO_PEERCRED)."""
    pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return pid, uid


class PeerCache:
    """Map a peer pid to its descriptor, briefly cached: one connection per message must not rescan the registry
    each time, but a registration that ends must stop verifying soon after."""

    def __init__(self, resolve: PeerResolver, ttl_s: float = 2.0) -> None:
        self._resolve = resolve
        self._ttl = ttl_s
        self._cache: dict[int, tuple[float, Descriptor | None]] = {}

    def get(self, pid: int) -> Descriptor | None:
        now = time.monotonic()
        hit = self._cache.get(pid)
        if hit and now - hit[0] < self._ttl:
            desc = hit[1]
            # The pid may have been reused since: the resolver checks start times, the cache must too.
            if desc is None or _still_same(desc, pid):
                return desc
        desc = self._resolve(pid)
        if len(self._cache) > 1024:
            self._cache.clear()
        self._cache[pid] = (now, desc)
        return desc


def _still_same(desc: Descriptor, pid: int) -> bool:
    start = proc_start_time(pid)
    return start is not None and desc.served_by(pid, start)
