"""Messages into a Claude Code session that runs without crosstalk, written by the sender's side exactly as Claude's
own SendMessage writes them (docs/dev/claude-adapter.md, "Sessions without crosstalk"):

    {"type":"auth","token":<the session's peer token, from its key file>}
    {"msgV":1,"msg_id":…,"type":"user","message":{"role":"user","content":"<cross-session-message
     from-name=\"alice\" from-mode=\"bypass\">\nbody\n</cross-session-message>"},"priority":"next",
     "from":"uds:<this process's receipt inbox>"}

`from-mode` is the sending Claude session's permission class (`bypass` or `prompting`), read from its command line;
a sender that is not a Claude session (the CLI, a Codex thread) asserts none. The session decides on arrival: it
delivers, holds the message for its user (a class unlike its own, no class, or its user's `crossSessionInbound:
hold`) or refuses it (`refuse`), and says which through a receipt to the frame's `from` (harness/claude/receipts.py):
a `held` or refused receipt as it closes our connection, none for a message delivered at once, and the user's later
decision on a held one. So the answer is the receipt's word, or accepted when none came within a short grace after
the EOF; where no receipt can be had, unknown.

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
from collections.abc import Callable, Mapping
from pathlib import Path

from crosstalk.core import envelope, untrusted
from crosstalk.core.states import State
from crosstalk.fs.reading import read_capped
from crosstalk.harness.base import InjectResult
from crosstalk.harness.claude import receipts
from crosstalk.harness.claude.sessions import sessions_dir

CONNECT_TIMEOUT_S = 2.0
EOF_TIMEOUT_S = 5.0
MAX_KEY_BYTES = 4096
MAX_CMDLINE_BYTES = 64 * 1024
MODES = {"bypassPermissions": "bypass", "default": "default", "acceptEdits": "acceptEdits", "plan": "plan",
         "auto": "auto", "dontAsk": "dontAsk"}  # fmt: skip
GRACE_S = 0.05  # after the EOF, how long a held or refused receipt may take (measured: within ~1 ms)
NO_RECEIPTS = (
    "no receipt can be had: this process could not bind a reply socket Claude accepts beside the session's socket, "
    "so whether the session delivered or held it is not known"
)
Settled = Callable[[str, InjectResult], None]


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


def mode_class(pid: int) -> str | None:
    """The permission class Claude's own SendMessage asserts for Claude process `pid`: `bypass` or `prompting`, or
    None when its command line cannot be read."""
    raw = read_capped(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES) if pid > 0 else None
    if not raw:
        return None
    return "bypass" if permission_mode(pid) in ("bypass", "bypassPermissions") else "prompting"


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
        data = untrusted.loads(raw, what="a Claude peer key", max_bytes=MAX_KEY_BYTES) if raw else None
    except untrusted.UntrustedInput:
        return None
    token = data.get("peerToken") if isinstance(data, dict) else None
    return token if isinstance(token, str) and token else None


def frame(
    text: str, from_name: str, from_mode: str | None, token: str | None, *, msg_id: str, reply_to: str | None
) -> bytes:
    """No `from` in the envelope: a session without crosstalk has no way to answer through it, so its model is given
    no address. The frame's own `from` is where Claude sends its receipts (never shown to the model)."""
    attrs = {"from-name": from_name, "from-mode": from_mode}
    line: dict[str, object] = {
        "msgV": 1,
        "msg_id": msg_id,
        "type": "user",
        "message": {"role": "user", "content": envelope.render(text, attrs)},
        "priority": "next",
        **({"from": reply_to} if reply_to else {}),
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
    message_id: str | None = None,
    on_settled: Settled | None = None,
    grace_s: float = GRACE_S,
) -> InjectResult:
    """Write one message into the Claude session `pid` listening on `socket_path`. A `held` answer settles later:
    `on_settled(message_id, result)` gets each later word (on a reader thread) while this process lives."""
    try:
        st = os.lstat(socket_path)
    except OSError:
        return InjectResult(State.UNREACHABLE, "the session's messaging socket is gone")
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        return InjectResult(State.UNREACHABLE, "the session's messaging socket is not a socket of this user")
    mid = message_id or str(uuid.uuid4())
    inbox = receipts.inbox_for(socket_path)
    address = inbox.address if inbox else None
    if inbox is not None and address is not None:
        callback = (lambda r: on_settled(mid, receipts.result_of(r))) if on_settled else None
        inbox.expect(mid, pid, callback)
    payload = frame(text, from_name, from_mode, peer_token(environ, pid, socket_path), msg_id=mid, reply_to=address)
    evidence = {"native": True, "socket": socket_path, "msg_id": mid}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(socket_path)
        except OSError as exc:
            if inbox is not None:
                inbox.forget(mid)
            return InjectResult(State.UNREACHABLE, f"the session's socket refused: {exc}")
        sock.settimeout(EOF_TIMEOUT_S)
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            answer = sock.recv(4096)
        except (OSError, TimeoutError) as exc:
            return InjectResult(State.UNKNOWN, f"the session's socket broke after the write: {exc}", evidence)
    finally:
        sock.close()
    if answer:
        return InjectResult(State.UNKNOWN, f"the session answered bytes: {answer[:80]!r}", evidence)
    if inbox is None or address is None:
        return InjectResult(State.UNKNOWN, NO_RECEIPTS, evidence)
    receipt = inbox.wait(mid, grace_s)
    if receipt is None:
        if on_settled is None:
            inbox.forget(mid)
        return InjectResult(
            State.ACCEPTED, evidence={**evidence, "claude": "eof_no_receipt", "grace_ms": round(grace_s * 1000)}
        )
    result = receipts.result_of(receipt)
    if on_settled is None or receipt.final:
        inbox.forget(mid)
    return InjectResult(result.state, result.reason, {**evidence, **result.evidence})


def socket_live(path: str | None) -> bool:
    if not path:
        return False
    try:
        return stat.S_ISSOCK(os.lstat(Path(path)).st_mode)
    except OSError:
        return False
