"""The relay process's presence loop (relay/presence.py says what is announced and kept): announce this machine's
live agents every interval and at once when they change, take the other machines' announcements, drop the ones not
heard for EXPIRY_INTERVALS of their intervals, and say `gone` on a clean stop. And `until_left`: the relay process
ends when the join it serves is gone."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from crosstalk.registry.paths import StatePaths
from crosstalk.relay.config import config_path
from crosstalk.relay.errors import FrameError
from crosstalk.relay.presence import (
    PresenceBook,
    RemoteAgent,
    alias_of_presence,
    encode_presence,
    local_agents,
    presence_subject,
    presence_wildcard,
)

POLL_S = 0.5  # how often the registry is looked at for a change (one stat when nothing changed)
WRITE_GAP_S = 0.2  # the file is written at most this often; a change heard sooner is written by the next loop
JOIN_CHECK_S = 0.5  # how often a relay process looks whether its join still stands


async def until_left(paths: StatePaths, stop: asyncio.Event) -> None:
    """Set `stop` once the join this process serves is gone (`relay leave`, or the state root removed): a relay
    process never outlives its join, connected or not."""
    path = config_path(paths)
    while not stop.is_set():
        if not os.path.exists(path):
            stop.set()
            return
        try:
            await asyncio.wait_for(stop.wait(), JOIN_CHECK_S)
        except TimeoutError:
            pass


class PresenceLoop:
    def __init__(self, paths: StatePaths, alias: str, nc: Any, interval: float, stop: asyncio.Event) -> None:
        self.paths = paths
        self.alias = alias
        self.nc = nc
        self.interval = interval
        self.stop = stop
        self.book = PresenceBook(paths, alias)
        self.published: tuple[RemoteAgent, ...] | None = None
        self.published_at = 0.0
        self.was_connected = True
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        self.dirty = False  # the book changed since the file was last written
        self.written_at = 0.0

    async def start(self) -> None:
        await self.nc.subscribe(presence_wildcard(), cb=self._heard)
        self._task = asyncio.create_task(self._run())

    async def _heard(self, msg: Any) -> None:
        if self.closed:
            return  # stopping: what was heard is being removed, and must not be written again
        try:
            alias = alias_of_presence(msg.subject)
        except FrameError:
            return
        if self.book.heard(alias, msg.data):
            self.dirty = True
            if time.monotonic() - self.written_at >= WRITE_GAP_S:  # however fast a machine announces: a few a second
                await self._write()

    async def _write(self) -> None:
        self.dirty, self.written_at = False, time.monotonic()
        try:
            await asyncio.to_thread(self.book.write_snapshot, *self.book.snapshot())
        except OSError:  # the state root going away under it (until_left ends the process): the next pass retries
            self.dirty = True

    async def _run(self) -> None:
        seen: tuple[int, int] | None = None
        agents: tuple[RemoteAgent, ...] = ()
        checked_at = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            stamp = _stamp(self.paths)
            if stamp != seen or now - checked_at >= self.interval:
                seen, checked_at = stamp, now
                try:
                    agents = await asyncio.to_thread(local_agents, self.paths)
                except Exception:  # a registry that cannot be read now: announce what was last read, look again
                    seen = None
            connected = bool(self.nc.is_connected)
            due = now - self.published_at >= self.interval or (connected and not self.was_connected)
            self.was_connected = connected
            if connected and (due or agents != self.published):
                await self._publish(encode_presence(agents, self.interval))
                self.published, self.published_at = agents, now
            if self.book.expire() or self.dirty:
                await self._write()
            try:
                await asyncio.wait_for(self.stop.wait(), min(POLL_S, self.interval))
            except TimeoutError:
                pass

    async def _publish(self, frame: bytes) -> None:
        try:
            await self.nc.publish(presence_subject(self.alias), frame)
        except Exception:  # a connection between states: the next interval announces again
            self.published_at = 0.0

    async def close(self) -> None:
        """Say `gone` (best effort: a machine that cannot expires instead) and remove what was heard."""
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if self.nc.is_connected:
            await self._publish(encode_presence((), self.interval, gone=True))
            try:
                await self.nc.flush(timeout=1)
            except Exception:  # the goodbye is a courtesy: the others expire this machine anyway
                pass
        self.book.clear()


def _stamp(paths: StatePaths) -> tuple[int, int]:
    """What changes when an agent registers, unregisters or rewrites its descriptor: the registry directory."""
    try:
        st = os.stat(paths.agents)
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_ino)
