"""A hostile Codex app-server, as a real process: WebSocket over a unix socket (the framing the adapter speaks), which
answers `initialize` like the real one and then misbehaves.

    python tests/support/hostile_appserver.py SOCKET MODE

MODE `silent-reads`: `thread/loaded/list` lists THREADS threads, `thread/read` is never answered.
MODE `endless-pages`: every `thread/loaded/list` page holds PAGE fresh thread ids and a next cursor, forever.

It prints `ready` once listening, then one line per request it receives (the method), so a test waits for events
instead of sleeping. SIGTERM ends it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

from websockets.asyncio.server import unix_serve

THREADS = 200
PAGE = 1000


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def handler(ws: Any, mode: str) -> None:
    pages = 0
    async for frame in ws:
        msg = json.loads(frame)
        if "id" not in msg:
            continue
        method = msg.get("method")
        say(str(method))
        if method == "initialize":
            result: Any = {"userAgent": "hostile"}
        elif method == "thread/loaded/list" and mode == "silent-reads":
            result = {"data": [f"thread-{i:04d}" for i in range(THREADS)], "nextCursor": None}
        elif method == "thread/loaded/list":
            pages += 1
            result = {"data": [f"p{pages}-thread-{i:05d}" for i in range(PAGE)], "nextCursor": f"c{pages}"}
        else:
            continue  # never answered
        await ws.send(json.dumps({"id": msg["id"], "result": result}))


async def main(path: str, mode: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with unix_serve(lambda ws: handler(ws, mode), path, max_size=None):
        say("ready")
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
