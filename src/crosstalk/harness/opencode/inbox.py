"""The plugin's inbox: one unix socket per OpenCode process, `<dir>/<pid>.sock`, one JSON line each way per
connection (integrations/opencode/crosstalk.js says what each op answers).

    dir: $CROSSTALK_OPENCODE_DIR, else $XDG_RUNTIME_DIR/crosstalk-opencode, else $TMPDIR/crosstalk-opencode-<uid>

The plugin and this module compute the same path from the same environment: OpenCode's MCP children inherit it.
A socket counts only when the process listening on it is the OpenCode process its name says (SO_PEERCRED): a
directory someone else made in a shared /tmp cannot put another listener in its place.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crosstalk.core import untrusted
from crosstalk.harness.errors import HarnessDisconnected, PreSendFailure

MAX_ANSWER = 1024 * 1024
CONNECT_S = 2.0


def socket_dir(environ: Mapping[str, str]) -> Path:
    if environ.get("CROSSTALK_OPENCODE_DIR"):
        return Path(environ["CROSSTALK_OPENCODE_DIR"])
    if environ.get("XDG_RUNTIME_DIR"):
        return Path(environ["XDG_RUNTIME_DIR"]) / "crosstalk-opencode"
    return Path(environ.get("TMPDIR") or "/tmp") / f"crosstalk-opencode-{os.getuid()}"


def socket_path(environ: Mapping[str, str], pid: int) -> Path:
    return socket_dir(environ) / f"{pid}.sock"


def live_pids(environ: Mapping[str, str]) -> list[int]:
    """The OpenCode processes whose plugin bound an inbox and that still run."""
    out = []
    try:
        names = os.listdir(socket_dir(environ))
    except OSError:
        return []
    for name in names:
        stem = name.removesuffix(".sock")
        if name.endswith(".sock") and stem.isdigit() and Path(f"/proc/{stem}").exists():
            out.append(int(stem))
    return sorted(out)


def _listener_pid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, _uid, _gid = struct.unpack("3i", creds)
    return int(pid)


def request(path: Path, message: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One request, its answer (blocking: call it in a thread from asyncio). PreSendFailure: nothing was written
    (no socket, nobody listening, or the listener is not the process the socket's name says, `<pid>.sock`);
    HarnessDisconnected: written, but no whole answer came back (it may have been acted on)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_S)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise PreSendFailure(f"the OpenCode plugin inbox {path} does not answer ({exc.strerror or exc})") from None
        stem = path.name.removesuffix(".sock")
        if not stem.isdigit() or _listener_pid(sock) != int(stem):
            raise PreSendFailure(f"the inbox {path} is not served by OpenCode process {stem}")
        sock.settimeout(timeout)
        try:
            sock.sendall((json.dumps(message, ensure_ascii=False) + "\n").encode())
        except OSError as exc:
            raise PreSendFailure(f"the OpenCode plugin's inbox closed before the request was written ({exc})") from None
        buf = b""
        try:
            while not buf.endswith(b"\n") and len(buf) <= MAX_ANSWER:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except OSError as exc:
            raise HarnessDisconnected(f"the OpenCode plugin did not answer ({exc})") from None
    finally:
        sock.close()
    if not buf.endswith(b"\n"):
        raise HarnessDisconnected("the OpenCode plugin closed the connection without an answer")
    try:
        answer = untrusted.loads(buf, what="the OpenCode plugin's answer", max_bytes=MAX_ANSWER)
    except untrusted.UntrustedInput as exc:
        raise HarnessDisconnected(str(exc)) from None
    if not isinstance(answer, dict):
        raise HarnessDisconnected(f"the OpenCode plugin answered {str(answer)[:120]}")
    return answer
