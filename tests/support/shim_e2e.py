"""Helpers for the end-to-end shim tests: real `crosstalk mcp --harness fake|codex` subprocesses driven by the
official MCP SDK client (`stdio_client` + `ClientSession`) over stdio, sharing one short private state root.

Each shim runs its SDK client in its own asyncio task, so shims can be closed in any order (anyio cancel scopes must
be exited by the task that entered them). Every shim is started through `sh -c 'echo $$ >pidfile; exec crosstalk
mcp …'`, so its pid is known from the start; it is killed by that pid in close() if it is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

CROSSTALK = str(Path(sys.executable).parent / "crosstalk")
CALL_S = 20.0
START_S = 20.0
WAIT_S = 10.0


class Root:
    """A private CROSSTALK_HOME, fake inbox dir and project cwd under one short /tmp dir (AF_UNIX paths)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))
        self.home = self.dir / "h"
        self.inbox_dir = self.dir / "in"
        self.cwd = self.dir / "proj"
        for d in (self.home, self.inbox_dir, self.cwd):
            d.mkdir()
        self.shims: list[Shim] = []

    def env(self, answer: str | None = None) -> dict[str, str]:
        drop = ("CROSSTALK_FAKE_ANSWER", "CLAUDE_CONFIG_DIR", "CODEX_HOME")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["CROSSTALK_HOME"] = str(self.home)
        env["CROSSTALK_FAKE_INBOX_DIR"] = str(self.inbox_dir)
        env["CLAUDE_CONFIG_DIR"] = str(self.dir / "claude")  # never the real ~/.claude
        env["CODEX_HOME"] = str(self.dir / "codex")  # nor the real ~/.codex (its app-server)
        if answer is not None:
            env["CROSSTALK_FAKE_ANSWER"] = answer
        return env

    def inbox(self, name: str) -> list[dict[str, Any]]:
        path = self.inbox_dir / f"{name}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def descriptors(self) -> dict[str, dict[str, Any]]:
        """agent_id → descriptor JSON, as files on disk (live or not)."""
        out = {}
        agents = self.home / "agents"
        for path in agents.glob("*.json") if agents.exists() else []:
            with contextlib.suppress(ValueError, OSError):
                data = json.loads(path.read_text())
                out[data["agent_id"]] = data
        return out

    async def shim(self, harness: str = "fake", *, answer: str | None = None) -> Shim:
        s = Shim(self, harness, answer=answer)
        self.shims.append(s)
        await s.start()
        return s

    async def close(self) -> None:
        for s in reversed(self.shims):
            await s.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def meta(session: str | None = None, name: str | None = None, *, thread: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if session is not None:
        out["crosstalk/session"] = session
    if name is not None:
        out["crosstalk/name"] = name
    if thread is not None:
        out["threadId"] = thread
    return out


class Shim:
    """One `crosstalk mcp` subprocess and its initialized ClientSession."""

    def __init__(self, root: Root, harness: str, *, answer: str | None = None) -> None:
        self.root = root
        self.harness = harness
        self.answer = answer
        self.pid: int | None = None
        self.session: Any = None
        self._pidfile = Path(tempfile.mkstemp(prefix="pid", dir=root.dir)[1])
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.init_result: Any = None

    async def start(self) -> None:
        self._stop = asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), START_S)
        finally:
            self._read_pid()

    def _read_pid(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            self.pid = int(self._pidfile.read_text().strip())

    async def _run(self, ready: asyncio.Future[None]) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client, types

        params = StdioServerParameters(
            command="/bin/sh",
            args=["-c", 'echo $$ > "$0"; exec "$@"', str(self._pidfile), CROSSTALK, "mcp", "--harness", self.harness],
            env=self.root.env(self.answer),
            cwd=str(self.root.cwd),
        )
        assert self._stop is not None
        try:
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write, client_info=types.Implementation(name="xt-e2e", version="1")) as s,
            ):
                self.init_result = await s.initialize()
                self.session = s
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:  # a killed shim: the client's teardown may complain; nothing to report
            if not ready.done():
                ready.set_exception(exc)

    async def call(self, tool: str, meta: dict[str, Any] | None = None, **args: Any) -> tuple[dict[str, Any], bool]:
        """(structuredContent, isError) of one tools/call; the text content is the same JSON."""
        res = await asyncio.wait_for(self.session.call_tool(tool, args, meta=meta or None), CALL_S)
        data = res.structured_content
        assert data is not None, res
        assert len(res.content) == 1 and json.loads(res.content[0].text) == data
        return dict(data), bool(res.is_error)

    def alive(self) -> bool:
        """Running (not a zombie) and still our crosstalk process."""
        if self.pid is None:
            return False
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z" and b"crosstalk" in cmdline

    def sigkill(self) -> None:
        if self.alive():
            assert self.pid is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    async def close(self) -> None:
        """EOF on stdin (the shim's orderly shutdown), then SIGKILL by pid if it is somehow still running."""
        if self._stop is not None:
            self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), 15)
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
            self._task = None
        self.sigkill()
        self.session = None


def rows(listed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in listed["agents"]}
