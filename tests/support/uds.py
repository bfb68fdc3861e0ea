"""Helpers for the uds ingress integration tests.

An AgentHost runs in this process on an asyncio loop in a background thread (HostThread), so a test talks to it
with plain blocking sockets. The host publishes this process's pid in its descriptor, so a connection from the
test process itself is a *verified* peer (the host itself); connections that must come from an unregistered, or
from another registered, process go through tests/support/uds_peer.py in a child process (run_peer).
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from crosstalk.core.ids import agent_id_for
from crosstalk.harness.fake import FakeHarness
from crosstalk.journal.codec import read_journal
from crosstalk.journal.records import message_id_of
from crosstalk.policy import Limits, Role
from crosstalk.registry.credentials import read_key
from crosstalk.registry.paths import StatePaths

T = TypeVar("T")

WAIT_S = 15.0  # every wait in these tests is bounded by this
PEER = Path(__file__).with_name("uds_peer.py")
HOST_NAME = "bob"
HOST_SESSION = "sess-bob"


def make_tmp() -> Path:
    """A short private temp dir: AF_UNIX socket paths must fit in 107 bytes."""
    return Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))


def rm_tmp(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def host_agent_id(session_ref: str = HOST_SESSION) -> str:
    return agent_id_for("fake", session_ref)


class HostThread:
    """An AgentHost with a FakeHarness, served by an event loop on a background thread."""

    def __init__(
        self,
        root: Path,
        *,
        name: str = HOST_NAME,
        session_ref: str = HOST_SESSION,
        script: list[str] | None = None,
        default: str = "accept",
        limits: Limits | None = None,
        inject_timeout_s: float = 5.0,
        role: Role = Role.PRIMARY,
        owner: str | None = None,
        inbox_dir: Path | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        from crosstalk.agent import AgentConfig, AgentHost

        self.root = root
        self.paths = StatePaths(root)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="xt-uds-host", daemon=True)
        self.thread.start()
        self.fake = FakeHarness(script, default=default, inbox_dir=inbox_dir)
        self.config = AgentConfig(
            harness=self.fake,
            session_ref=session_ref,
            preferred_name=name,
            cwd=str(root),
            role=role,
            owner=owner,
            limits=limits or Limits(),
            inject_timeout_s=inject_timeout_s,
            **(config or {}),
        )
        try:
            self.host = self.call(AgentHost.start(self.paths, self.config))
        except BaseException:
            self._stop_loop()
            raise
        self.agent_id = self.host.agent_id
        self.name = self.host.name
        self.sock = self.paths.uds_path(self.agent_id)
        self.key_path = self.paths.key_path(self.agent_id)
        self.journal_path = self.paths.journal_file(self.agent_id)
        self.token = read_key(self.key_path)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = WAIT_S) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def release(self) -> None:
        """Let every `block` step of the fake proceed (thread-safe)."""
        self.loop.call_soon_threadsafe(self.fake.release)

    def records(self) -> list[dict[str, Any]]:
        journal = self.host.journal
        if journal is not None:
            journal.submit([], durable=False).result(timeout=WAIT_S)  # a barrier: batches are written in order
        return read_journal(self.journal_path).records

    def records_for(self, message_id: str, rtype: str | None = None) -> list[dict[str, Any]]:
        return [
            rec
            for rec in self.records()
            if message_id_of(rec) == message_id and (rtype is None or rec["type"] == rtype)
        ]

    def close(self) -> None:
        if self.host is not None and self.loop.is_running():
            try:
                self.call(self.host.close())
                self.call(_drain())  # connection handlers the ingress cancelled finish unwinding
            finally:
                self.host = None  # type: ignore[assignment]
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        if not self.thread.is_alive() and not self.loop.is_closed():
            self.loop.close()


async def _drain(timeout: float = 5.0) -> None:
    me = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not me]
    if pending:
        await asyncio.wait(pending, timeout=timeout)


# ---------------------------------------------------------------------- talking to the socket


def exchange(sock_path: Path | str, data: bytes, *, shut_wr: bool = False, timeout: float = WAIT_S) -> bytes:
    """Connect from this process, send data, read until EOF. Returns every byte the agent sent."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(sock_path))
        try:
            s.sendall(data)
            if shut_wr:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent may answer and close before reading everything; its answer is still readable
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        s.close()


def answer_of(raw: bytes) -> dict[str, Any]:
    """The one JSON state line an agent answers a crosstalk frame with."""
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1, raw
    return json.loads(raw)


def run_peer(
    sock_path: Path | str,
    *,
    data: bytes | None = None,
    register: dict[str, str] | None = None,
    deliver: dict[str, Any] | None = None,
    token: str | None = None,
    shut_wr: bool = False,
    timeout: float = WAIT_S,
) -> dict[str, Any]:
    """Run uds_peer.py: one connection from a separate process (optionally registered as an agent)."""
    cfg: dict[str, Any] = {"sock": str(sock_path), "timeout": timeout, "register": register, "shut_wr": shut_wr}
    if deliver is not None:
        cfg.update(mode="deliver", message=deliver, token=token)
    else:
        cfg.update(mode="raw", data_b64=base64.b64encode(data or b"").decode())
    proc = subprocess.run(
        [sys.executable, str(PEER)],
        input=json.dumps(cfg),
        capture_output=True,
        text=True,
        timeout=timeout + 15,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    if "answer_b64" in out:
        out["answer"] = base64.b64decode(out["answer_b64"])
    return out


# ---------------------------------------------------------------------- frames


def auth_line(token: str) -> bytes:
    return json.dumps({"type": "auth", "token": token}).encode() + b"\n"


def crosstalk_line(
    text: str,
    *,
    message_id: str,
    to: str = HOST_NAME,
    from_: str | None = "@ci:test",
    kind: str = "inform",
    **extra: Any,
) -> bytes:
    meta: dict[str, Any] = {"v": 1, "message_id": message_id, "from": from_, "to": to, "kind": kind, **extra}
    line = {"type": "user", "message": {"role": "user", "content": text}, "crosstalk": meta}
    return json.dumps(line).encode() + b"\n"


def native_line(content: str, *, msg_id: str = "native-1", from_: str = "uds:/x") -> bytes:
    """Claude's own SendMessage frame: no auth line, no crosstalk field."""
    line = {
        "msgV": 1,
        "msg_id": msg_id,
        "type": "user",
        "message": {"role": "user", "content": content},
        "priority": "next",
        "from": from_,
    }
    return json.dumps(line).encode() + b"\n"


def envelope(body: str, **attrs: str) -> str:
    rendered = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f"<cross-session-message{rendered}>{body}</cross-session-message>"
