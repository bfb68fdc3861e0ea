"""The Codex and pi adapters' own part of a delivery, in one process, as bench/claude_inject.py measures Claude's:
`inject` → the adapter's write into its harness, beside a bare write of the same bytes by the same process.

- Codex: `inject` → `turn/start` sent on the adapter's kept app-server connection (a loopback WebSocket server on a
  unix socket that answers as `codex app-server` 0.171.0 does, and declines permessage-deflate as it does), beside
  a bare `ws.send` of the same frame on a connection of its own (what no adapter can go below: WebSocket framing
  and masking).
- pi: `inject` → the link's `deliver` line written (the extension's side, in the same loop, answers `delivered`),
  beside a bare write of the same line on a link of its own.

The live figures, with the harnesses, the sending shim and the chain around them, are bench/own_part.py's.

    .venv/bin/python bench/adapters_inject.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package

from _common import exit_on_sigterm, stats, versus
from _live import report
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.harness.base import InjectRequest, SessionIdentity
from crosstalk.harness.codex import appserver
from crosstalk.harness.codex.adapter import CodexAdapter
from crosstalk.harness.pi import link as pi_link
from crosstalk.harness.pi.adapter import PiAdapter
from crosstalk.harness.pi.link import PiLink

ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "a2a")
THREAD = "019a0000-0000-7000-8000-000000000001"
WARM = 20


def request() -> InjectRequest:
    msg = Message(message_id=new_message_id(), to="bob", parts=(TextPart("hello from alice"),), kind=Kind.INFORM)
    return InjectRequest(msg, ALICE, Delivery.AUTO, reply_address="/x/sock/a11ce.sock")


def marks(module: Any) -> list[float]:
    """The module's trace marks, as perf_counter times (the adapter's write is its `harness_write`)."""
    written: list[float] = []
    module.trace.mark = lambda event, **_: written.append(time.perf_counter()) if event == "harness_write" else None
    return written


async def paired(rounds: int, ours: Callable[[], Any], bare: Callable[[], Any], written: list[float]) -> tuple:
    """(inject → write, bare write) seconds per round, interleaved, after WARM rounds."""
    out_ours: list[float] = []
    out_bare: list[float] = []
    for i in range(rounds + WARM):
        written.clear()
        t0 = time.perf_counter()
        await ours()
        ours_s = written[0] - t0
        bare_s = await bare()
        if i >= WARM:
            out_ours.append(ours_s)
            out_bare.append(bare_s)
    return out_ours, out_bare


# ------------------------------------------------------------------ Codex
async def app_server(ws: Any) -> None:
    """Answers as codex app-server does, for what the adapter asks on a kept connection."""
    async for frame in ws:
        msg = json.loads(frame)
        if "id" not in msg:
            continue
        result: dict[str, Any] = {}
        if msg.get("method") == "turn/start":
            result = {"turn": {"id": "turn-1", "status": "inProgress", "items": []}}
        await ws.send(json.dumps({"id": msg["id"], "result": result}))


async def codex(root: Path, rounds: int) -> tuple[list[float], list[float]]:
    from websockets.asyncio.client import unix_connect
    from websockets.asyncio.server import unix_serve

    path = str(root / "codex.sock")
    written = marks(appserver)
    async with unix_serve(app_server, path, compression=None):  # codex app-server 0.171.0 declines deflate
        adapter = CodexAdapter(SessionIdentity("codex", THREAD, "bob"), {})
        adapter.endpoint = path
        adapter._server = await appserver.AppServer.connect(path)  # bind's kept connection, without the listing
        frame = json.dumps({"id": 1, "method": "turn/start", "params": {"threadId": THREAD, "input": [
            {"type": "text", "text": adapter.render(request()), "text_elements": []}]}})  # fmt: skip
        async with unix_connect(path, uri="ws://localhost/") as ws:

            async def bare() -> float:
                t0 = time.perf_counter()
                await ws.send(frame)
                took = time.perf_counter() - t0
                await ws.recv()
                return took

            try:
                return await paired(rounds, lambda: adapter.inject(request()), bare, written)
            finally:
                await adapter._server.close()


# ------------------------------------------------------------------ pi
async def pi_pair() -> tuple[PiLink, asyncio.StreamWriter, asyncio.Task[None], asyncio.Task[None]]:
    """A link whose far end (in this loop) answers every `deliver` with `delivered: immediate`."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    link = PiLink(reader, writer.write)
    ext_reader, ext_writer = await asyncio.open_unix_connection(sock=theirs)

    async def extension() -> None:
        while line := await ext_reader.readline():
            msg = json.loads(line)
            if msg.get("t") == "deliver":
                ext_writer.write(json.dumps({"t": "delivered", "ref": msg["ref"], "delivered": "immediate"}).encode())
                ext_writer.write(b"\n")

    return link, writer, asyncio.create_task(link.run()), asyncio.create_task(extension())


async def pi(rounds: int) -> tuple[list[float], list[float]]:
    written = marks(pi_link)
    link, writer, running, ext = await pi_pair()
    bare_link, bare_writer, bare_running, bare_ext = await pi_pair()
    adapter = PiAdapter(link)
    line = (json.dumps({"t": "deliver", "ref": "1", "text": adapter.render(request()), "as": "prompt"},
                       ensure_ascii=False) + "\n").encode()  # fmt: skip

    async def bare() -> float:
        t0 = time.perf_counter()
        bare_writer.write(line)
        took = time.perf_counter() - t0
        await asyncio.sleep(0)  # its answer is read and dropped by the link (no ref waits for it)
        return took

    try:
        return await paired(rounds, lambda: adapter.inject(request()), bare, written)
    finally:
        for task in (running, ext, bare_running, bare_ext):
            task.cancel()
        writer.close()
        bare_writer.close()
        del bare_link


def main() -> None:
    exit_on_sigterm()
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    rounds = 300 if ap.parse_args().quick else 2000
    root = Path(tempfile.mkdtemp(prefix="xai", dir="/tmp"))
    try:
        codex_ours, codex_bare = asyncio.run(codex(root, rounds))
        pi_ours, pi_bare = asyncio.run(pi(rounds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = []
    for name, ours, bare, what in (("codex", codex_ours, codex_bare, "bare ws.send"),
                                   ("pi", pi_ours, pi_bare, "bare link write")):  # fmt: skip
        o, b = stats(ours), stats(bare)
        print(f"{name}: inject -> write p50 {o['p50'] * 1e6:.0f} us (p99 {o['p99'] * 1e6:.0f}); "
              f"{what} p50 {b['p50'] * 1e6:.0f} us (p99 {b['p99'] * 1e6:.0f})")  # fmt: skip
        figures.append(versus(f"{name}_inject_p50", o["p50"], b["p50"], "us", f"{what} p50",
                              summary="inject -> the adapter's write, in one process"))  # fmt: skip
        figures.append(versus(f"{name}_inject_p99", o["p99"], b["p99"], "us", f"{what} p99"))
    report("adapters_inject", figures, {"rounds": rounds, "load": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
