"""`crosstalk relay serve`: this machine's relay process. It holds relay/serve.lock for life (the lock, not a pid,
says whether one runs), dials out to NATS as this machine (it listens on nothing), subscribes to the requests for
this machine's agents, and runs each one through the local receiver chain over the named agent's uds socket (the
chain `crosstalk send` and the bus bridge reach: one chain), on connections kept per agent (relay/deliver.py),
answering with the chain's outcome. It reconnects on its own and writes what it is doing to relay/status.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from typing import Any

from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.registry.paths import StatePaths, ensure_private_dir
from crosstalk.relay.config import RelayConfig, relay_dir, serve_lock_path, status_path
from crosstalk.relay.deliver import DELIVER_TIMEOUT_S, Deliverer
from crosstalk.relay.errors import AlreadyServing
from crosstalk.relay.link import Link, describe
from crosstalk.relay.local import LocalDesk
from crosstalk.relay.presence import interval_s
from crosstalk.relay.presence_loop import PresenceLoop, until_left
from crosstalk.relay.wire import FrameError, encode_error, from_alias_of, inbound_subject

MAX_IN_FLIGHT = 16  # messages delivered at once; more wait their turn in this process
ANSWERED_FLUSH_S = 0.2  # the answer count in relay/status.json is at most this late


class Status:
    """relay/status.json: who serves (pid and its start time), the connection's state and the last error."""

    def __init__(self, paths: StatePaths, config: RelayConfig) -> None:
        self.path = status_path(paths)
        self.data: dict[str, Any] = {
            "pid": os.getpid(),
            "pid_started": proc_start_time(os.getpid()),
            "url": config.url,
            "alias": config.alias,
            "state": "connecting",
            "since": time.time(),
            "error": None,
            "answered": 0,
        }
        self._flush: asyncio.TimerHandle | None = None

    def answered(self) -> None:
        """One more answer, written within ANSWERED_FLUSH_S, not at once: a write per answer would hold the loop
        (~0.5 ms) before the answer's publish is flushed to the relay."""
        self.data["answered"] += 1
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(ANSWERED_FLUSH_S, self._flushed)

    def _flushed(self) -> None:
        self._flush = None
        with contextlib.suppress(OSError):  # the state root removed under it: nothing left to tell
            self.set()

    def set(self, **fields: Any) -> None:
        if "state" in fields and fields["state"] != self.data["state"]:
            fields.setdefault("since", time.time())
        self.data.update(fields)
        # Replaced whole (a reader never sees half), not fsynced: a status lost to a crash says nothing wrong, since
        # the lock, not this file, says whether a relay process runs; an fsync per answer would cost every message.
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write((json.dumps(self.data) + "\n").encode())
        os.replace(tmp, self.path)


def read_status(paths: StatePaths) -> dict[str, Any] | None:
    """What the serving process last wrote, or None when none runs (its lock is free) or it wrote nothing yet."""
    from crosstalk.fs.locks import is_locked

    if not is_locked(serve_lock_path(paths)):
        return None
    try:
        data = json.loads(status_path(paths).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


async def serve(paths: StatePaths, config: RelayConfig, *, stop: asyncio.Event | None = None) -> None:
    """Serve until `stop` is set (or SIGTERM/SIGINT). Raises AlreadyServing when another process serves."""
    ensure_private_dir(relay_dir(paths))
    lock = FileLock(serve_lock_path(paths))
    if not lock.try_acquire():
        raise AlreadyServing(f"a relay process already serves {paths.root} (see `crosstalk relay status`)")
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    status = Status(paths, config)
    status.set()
    slots = asyncio.Semaphore(MAX_IN_FLIGHT)
    tasks: set[asyncio.Task[None]] = set()

    async def on_error(exc: BaseException) -> None:
        status.set(error=describe(exc))

    async def on_state(state: str) -> None:
        status.set(state=state, **({"error": None} if state == "connected" else {}))

    link = Link(config, on_error=on_error, on_state=on_state)
    desk = LocalDesk(paths, link)  # this machine's agents' tool sends to NAME@ALIAS (relay/local.py)
    hands = Deliverer(paths)  # the hop to this machine's agents, on connections kept per agent (relay/deliver.py)
    presence = PresenceLoop(paths, config.alias, link.nc, interval_s(), stop)  # relay/presence.py

    async def answer(msg: Any) -> None:
        if not msg.reply:
            return  # a publish no one waits on: delivered, its outcome would reach no one, so it is not delivered
        async with slots:
            try:
                from_alias = from_alias_of(msg.subject, config.alias)
            except FrameError as exc:
                frame = encode_error("bad_frame", str(exc))
            else:
                frame = await hands.answer(msg.data, config.alias, from_alias)
            try:
                await msg.respond(frame)
            except Exception as exc:  # the connection dropped: the sender times out and resends the same id
                status.set(error=f"an answer was lost: {describe(exc)}")
            status.answered()

    async def on_msg(msg: Any) -> None:
        task = asyncio.create_task(answer(msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    watching = asyncio.create_task(until_left(paths, stop))  # a relay process never outlives its join
    try:
        await desk.start()
        connecting = asyncio.create_task(link.connect(keep_trying=True, name=f"crosstalk relay {config.alias}"))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not connecting.done():
            connecting.cancel()
            return
        connecting.result()
        await link.nc.subscribe(inbound_subject(config.alias), cb=on_msg)
        await presence.start()
        await link.nc.flush(timeout=5)
        if link.permission_errors:
            status.set(error=link.permission_errors[-1])
        await stopping
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await desk.close()
        watching.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=DELIVER_TIMEOUT_S)
        await hands.close()
        await presence.close()
        await link.close()
        if status._flush is not None:
            status._flush.cancel()  # the count is written with the last word
        with contextlib.suppress(OSError):  # the state root removed under it: nothing left to tell
            status.set(state="stopped")
        lock.release()
