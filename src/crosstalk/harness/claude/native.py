"""Messages into a Claude Code session that runs without crosstalk, written by the sender's side exactly as Claude's
own SendMessage writes them (docs/dev/claude-adapter.md, "Sessions without crosstalk"):

    {"type":"auth","token":<the session's peer token, from its key file>}
    {"msgV":1,"msg_id":…,"type":"user","message":{"role":"user","content":"<cross-session-message from=\"uds:…\"
     from-name=\"alice\" from-mode=\"bypass\">\nbody\n</cross-session-message>"},"priority":"next","from":"uds:…"}

`from-mode` is the sending Claude session's real permission mode, read from its command line; a sender that is not
a Claude session (the CLI, a Codex thread) asserts none. What 2.1.332 does with it (seen): a session running with
bypass permissions delivers only messages asserting `from-mode="bypass"` and holds every other one for its user
(`peer_message_hold`, cause `no-mode-asserted`); a session in any other mode delivers them. A hold is predicted from
the receiver's own command line and answered `unknown` with that reason, never `accepted`.

Blocking sockets with timeouts, no asyncio: `crosstalk send` calls this on its start-up path; the shim calls it in a
thread. Every file read is capped and refuses symlinks; the socket must be a socket owned by this user.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import uuid
from collections.abc import Mapping
from pathlib import Path

from crosstalk.core import envelope
from crosstalk.core.states import State
from crosstalk.fs.reading import read_capped
from crosstalk.harness.base import InjectResult
from crosstalk.harness.claude.sessions import sessions_dir

CONNECT_TIMEOUT_S = 2.0
EOF_TIMEOUT_S = 5.0
MAX_KEY_BYTES = 4096
MAX_CMDLINE_BYTES = 64 * 1024
MODES = {"bypassPermissions": "bypass", "default": "default", "acceptEdits": "acceptEdits", "plan": "plan",
         "auto": "auto", "dontAsk": "dontAsk"}  # fmt: skip
HELD = "held: the receiving Claude session runs with bypass permissions and holds messages from senders that do not"


def permission_mode(pid: int) -> str | None:
    """The permission mode of Claude process `pid` as its command line sets it, or None when it sets none (or `pid`
    is not readable)."""
    raw = read_capped(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES) if pid > 0 else None
    if not raw:
        return None
    args = raw.decode(errors="replace").split("\0")
    if "--dangerously-skip-permissions" in args:
        return "bypass"
    for i, arg in enumerate(args):
        value = args[i + 1] if arg == "--permission-mode" and i + 1 < len(args) else None
        if arg.startswith("--permission-mode="):
            value = arg.split("=", 1)[1]
        if value is not None:
            return MODES.get(value, value)
    return None


def peer_token(environ: Mapping[str, str], pid: int, socket_path: str) -> str | None:
    """The session's peer token from `sessions/<pid>.<sha256(socket path)>.key` (0600), or None."""
    digest = hashlib.sha256(socket_path.encode()).hexdigest()
    path = sessions_dir(environ) / f"{pid}.{digest}.key"
    try:
        if stat.S_IMODE(os.lstat(path).st_mode) & 0o077:
            return None  # a key others can read is not the session's
    except OSError:
        return None
    raw = read_capped(path, MAX_KEY_BYTES)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    token = data.get("peerToken") if isinstance(data, dict) else None
    return token if isinstance(token, str) and token else None


def frame(text: str, from_name: str, from_mode: str | None, token: str | None) -> bytes:
    """No `from`: a session without crosstalk has no way to answer through it, so it is given no address."""
    attrs = {"from-name": from_name, "from-mode": from_mode}
    line: dict[str, object] = {
        "msgV": 1,
        "msg_id": str(uuid.uuid4()),
        "type": "user",
        "message": {"role": "user", "content": envelope.render(text, attrs)},
        "priority": "next",
    }
    lines = ([{"type": "auth", "token": token}] if token else []) + [line]
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()


def deliver(
    environ: Mapping[str, str],
    pid: int,
    socket_path: str,
    text: str,
    *,
    from_name: str,
    from_mode: str | None = None,
) -> InjectResult:
    """Write one message into the Claude session `pid` listening on `socket_path`."""
    try:
        st = os.lstat(socket_path)
    except OSError:
        return InjectResult(State.UNREACHABLE, "the session's messaging socket is gone")
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        return InjectResult(State.UNREACHABLE, "the session's messaging socket is not a socket of this user")
    payload = frame(text, from_name, from_mode, peer_token(environ, pid, socket_path))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(socket_path)
        except OSError as exc:
            return InjectResult(State.UNREACHABLE, f"the session's socket refused: {exc}")
        sock.settimeout(EOF_TIMEOUT_S)
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            answer = sock.recv(4096)
        except (OSError, TimeoutError) as exc:
            return InjectResult(State.UNKNOWN, f"the session's socket broke after the write: {exc}")
    finally:
        sock.close()
    if answer:
        return InjectResult(State.UNKNOWN, f"the session answered bytes: {answer[:80]!r}")
    if permission_mode(pid) == "bypass" and from_mode != "bypass":
        return InjectResult(State.UNKNOWN, HELD, {"claude": "held_for_approval"})
    return InjectResult(State.ACCEPTED, evidence={"claude": "eof_after_frame", "native": True, "socket": socket_path})


def socket_live(path: str | None) -> bool:
    if not path:
        return False
    try:
        return stat.S_ISSOCK(os.lstat(Path(path)).st_mode)
    except OSError:
        return False
